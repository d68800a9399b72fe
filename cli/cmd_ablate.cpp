// `tupe ablate`: which heads' positional terms a pretrained model uses to predict
// (analysis/ablation.h), as a table, JSON or CSV, on held-out text.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "analysis/ablation.h"
#include "analysis/extrapolate.h"
#include "analysis/mlm_head_fit.h"
#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/corpus.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "engine/trainer.h"
#include "experiments/experiment.h"
#include "model_loader.h"
#include "number_cells.h"

namespace cli {

namespace fs = std::filesystem;

using analysis::csv_field;
using analysis::exact_number;

namespace {

struct Ablated {
    std::string path, variant, text;
    std::string patch_from;    ///< the --patch-from checkpoint, or empty
    std::string head = "own";  ///< "own", or how the head was fitted (--fit-head)
    std::optional<analysis::MlmHeadFit> fit;
    double unigram_floor = std::nan("");  ///< floor.txt beside the checkpoint, when present
    analysis::AblationReport report;
};

// "used" when the interval of the change lies above 0, "hurts" below 0 (the model does better
// without it), "~" when it reaches 0.
std::string verdict(const analysis::AblationRow& r) {
    if (r.ci_lo > 0) return "used";
    if (r.ci_hi < 0) return "hurts";
    return "~";
}

std::string render_json(const std::vector<Ablated>& results) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : results) {
        const auto& r = e.report;
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& row : r.rows)
            rows.push_back({{"layer", row.layer},
                            {"head", row.head},
                            {"loss", row.loss},
                            {"delta_loss", row.delta_loss},
                            {"ci_lo", row.ci_lo},
                            {"ci_hi", row.ci_hi},
                            {"positional_share", number_or_null(row.positional_share)}});
        const nlohmann::json patch =
            e.patch_from.empty() ? nlohmann::json() : nlohmann::json(e.patch_from);
        const nlohmann::json head =
            e.fit ? nlohmann::json{{"fitted", true},
                                   {"windows", e.fit->windows},
                                   {"masked_tokens", e.fit->masked},
                                   {"held_back_tokens", e.fit->held_back},
                                   {"best_step", e.fit->best_step},
                                   {"held_back_unigram_loss", e.fit->start_loss},
                                   {"held_back_loss", e.fit->end_loss},
                                   {"train_loss", e.fit->train_loss}}
                  : nlohmann::json{{"fitted", false}};
        list.push_back({{"checkpoint", e.path},
                        {"mlm_head", head},
                        {"variant", e.variant},
                        {"text", e.text},
                        {"positions", r.summary},
                        {"mode", r.mode},
                        {"patch_from", patch},
                        {"scope", r.scope},
                        {"length", r.length},
                        {"windows", r.windows},
                        {"masked_tokens", r.masked},
                        {"loss", r.loss},
                        {"share_use_spearman", number_or_null(r.share_use_spearman)},
                        {"rows", rows}});
    }
    return nlohmann::json{{"checkpoints", list}}.dump(2) + "\n";
}

std::string render_csv(const std::vector<Ablated>& results) {
    std::ostringstream os;
    os << "variant,checkpoint,mode,layer,head,loss,delta_loss,ci_lo,ci_hi,positional_share,"
          "base_loss,masked_tokens,windows,length\n";
    for (const auto& e : results)
        for (const auto& row : e.report.rows)
            os << csv_field(e.variant) << "," << csv_field(e.path) << "," << e.report.mode << ","
               << row.layer << "," << row.head << "," << exact_number(row.loss) << ","
               << exact_number(row.delta_loss) << "," << exact_number(row.ci_lo) << ","
               << exact_number(row.ci_hi) << "," << exact_number(row.positional_share) << ","
               << exact_number(e.report.loss) << "," << e.report.masked << "," << e.report.windows
               << "," << e.report.length << "\n";
    return os.str();
}

// With several checkpoints of one variant (pretraining seeds): per variant, the whole-model
// change (median, min and max), the heads whose change is above 0 and the share~use Spearman,
// each over its checkpoints. Empty when no variant has two.
std::string summary_by_variant(const std::vector<Ablated>& results) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Ablated*>> by;
    for (const auto& e : results) {
        if (!by.count(e.variant)) order.push_back(e.variant);
        by[e.variant].push_back(&e);
    }
    bool several = false;
    for (const auto& [v, list] : by) several = several || list.size() > 1;
    if (!several) return "";
    std::ostringstream os;
    os << "\nby variant (median [min, max] over its checkpoints):\n"
       << "  variant           n  whole-model change            heads used      share~use "
          "Spearman\n";
    for (const auto& v : order) {
        std::vector<double> whole, used, rho;
        int64_t heads = 0;
        for (const Ablated* e : by[v]) {
            int64_t u = 0, h = 0;
            for (const auto& row : e->report.rows) {
                if (row.layer < 0) whole.push_back(row.delta_loss);
                if (row.layer >= 0) ++h, u += row.ci_lo > 0;
            }
            heads = h;
            used.push_back(static_cast<double>(u));
            if (std::isfinite(e->report.share_use_spearman))
                rho.push_back(e->report.share_use_spearman);
        }
        auto span = [](std::vector<double> x, int digits) -> std::string {
            if (x.empty()) return "-";
            std::sort(x.begin(), x.end());
            const size_t n = x.size();
            const double med = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
            return analysis::fixed_number(med, digits) + " [" +
                   analysis::fixed_number(x.front(), digits) + ", " +
                   analysis::fixed_number(x.back(), digits) + "]";
        };
        os << "  " << std::left << std::setw(16) << v << std::right << std::setw(3) << by[v].size()
           << "  " << std::left << std::setw(28) << span(whole, 4) << "  " << std::setw(14)
           << (heads ? span(used, 0) + " of " + std::to_string(heads) : "-") << "  " << span(rho, 2)
           << std::right << "\n";
    }
    return os.str();
}

std::string render_table(const std::vector<Ablated>& results) {
    std::ostringstream os;
    for (size_t k = 0; k < results.size(); ++k) {
        const auto& e = results[k];
        const auto& r = e.report;
        if (k) os << "\n";
        os << e.variant << "  " << e.path << "\n"
           << "positions: " << r.summary << "; ablated: " << r.scope << "; mode " << r.mode
           << (e.patch_from.empty() ? std::string() : " (from " + e.patch_from + ")") << "\n"
           << "text: " << e.text << ", " << r.windows << " window(s) x " << r.length << " tokens, "
           << r.masked << " masked tokens; loss with nothing removed " << fixed_or_dash(r.loss)
           << " nats";
        if (std::isfinite(e.unigram_floor))
            os << " (the run's unigram floor: " << fixed_or_dash(e.unigram_floor) << ")";
        os << "\n";
        if (e.fit) os << "MLM head: " << e.head << "\n";
        os << "  layer  head    loss  change  95% CI              use    pos.share\n";
        for (const auto& row : r.rows) {
            const std::string layer = row.layer < 0 ? "all" : std::to_string(row.layer);
            const std::string head = row.head < 0 ? "all" : std::to_string(row.head);
            std::ostringstream ci;
            ci << "[" << analysis::fixed_number(row.ci_lo, 4) << ", "
               << analysis::fixed_number(row.ci_hi, 4) << "]";
            os << "  " << std::setw(5) << layer << "  " << std::setw(4) << head << "  "
               << std::setw(6) << fixed_or_dash(row.loss) << "  " << std::setw(6)
               << (row.delta_loss >= 0 ? "+" : "") + analysis::fixed_number(row.delta_loss, 4)
               << "  " << std::left << std::setw(18) << ci.str() << std::right << "  " << std::left
               << std::setw(5) << verdict(row) << std::right << "  " << std::setw(9)
               << fixed_or_dash(row.positional_share, 3) << "\n";
        }
        if (std::isfinite(r.share_use_spearman))
            os << "positional share against change, over the heads: Spearman "
               << analysis::fixed_number(r.share_use_spearman, 2) << "\n";
    }
    os << summary_by_variant(results);
    os << "change: loss with the positional contribution removed minus without removal (nats, "
          "the same masked tokens); 95% CI: bootstrap over windows; use: 'used' when the CI "
          "lies above 0, 'hurts' when below, '~' when it reaches 0\n";
    return os.str();
}

}  // namespace

int cmd_ablate(const Argv& argv) {
    Args args(argv, command_spec("ablate"));
    const auto& checkpoints = args.positionals();
    if (checkpoints.empty()) throw UsageError("expected at least one CHECKPOINT");
    const std::string format = args.get("format");
    analysis::AblationOptions options;
    try {
        options.mode = engine::parse_ablation_mode(args.get("mode"));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--mode: ") + e.what());
    }
    if (options.mode == engine::PositionAblation::Mode::kOff)
        throw UsageError("--mode must be zero, mean or shuffle");
    // --patch-from: each head's positional term from another run of the same scheme and shape.
    const std::string patch_from = args.get("patch-from");
    engine::LoadedCheckpoint donor;
    if (!patch_from.empty()) {
        if (args.has("mode")) throw UsageError("--patch-from replaces --mode: give one");
        options.mode = engine::PositionAblation::Mode::kPatch;
        donor = engine::load_checkpoint(patch_from);
        options.patch_source = donor.model->bert->position.ptr();
    }
    options.windows = args.get_int("windows");
    options.length = args.get_int("length", 0);
    options.batch_size = args.get_int("batch");
    const long long seed = args.get_int("seed");
    if (seed < 0) throw UsageError("--seed must be >= 0");
    options.seed = static_cast<uint64_t>(seed);
    options.with_share = !args.has("no-share");
    const std::string corpus = args.get("corpus");
    if (!corpus.empty()) require_corpus_file(corpus);
    const int64_t fit_tokens = args.get_int("fit-head");
    if (fit_tokens > 0 && corpus.empty())
        throw UsageError(
            "--fit-head fits on the --corpus text after the scored tokens: give --corpus");
    engine::apply_thread_count(args.get_int("threads"));

    std::vector<Ablated> results;
    for (size_t k = 0; k < checkpoints.size(); ++k) {
        const std::string& path = checkpoints[k];
        LoadedModel m = load_model(path, args.get("vocab"), /*cased=*/false);
        // Without its MLM head a folder's masked-token loss is a random head's: refused unless
        // one is fitted (--fit-head).
        if (fit_tokens == 0)
            require_mlm_head(m,
                             "tupe ablate (it scores masked-token loss; --fit-head N fits one "
                             "on the frozen encoder)");
        Ablated e;
        e.path = path;
        // Named by its run folder without the seed (paper_cpu/tupe-a@seed2 -> tupe-a), so that
        // the seeds of one variant pool in the summary; the preset when the folder has no name.
        // An HF folder is named by itself.
        const fs::path where = m.kind == "hf" ? fs::path(path) : fs::path(path).parent_path();
        const std::string folder = where.filename().string();
        e.variant = folder.empty() || folder == "." ? m.model->config().preset
                    : m.kind == "hf"                ? folder
                                                    : experiments::variant_group(folder);
        engine::CorpusFloor floor;
        if (m.kind == "checkpoint" &&
            engine::read_floor(engine::floor_path(fs::path(path).parent_path().string()), floor))
            e.unigram_floor = floor.unigram_nats;
        const int64_t max_tokens = args.get_int("max-tokens");
        std::vector<int64_t> stream = scored_stream(m, corpus, max_tokens + fit_tokens, e.text);
        options.source = corpus.empty() ? m.config->data.corpus : corpus;
        if (fit_tokens > 0) {
            // The head is fitted on the text after the scored tokens, never on them.
            const auto scored = static_cast<size_t>(std::min<int64_t>(max_tokens, stream.size()));
            const std::vector<int64_t> fit_text(stream.begin() + scored, stream.end());
            stream.resize(scored);
            analysis::MlmHeadFitOptions fit;
            fit.length = options.length > 0 ? options.length : default_window_length(m);
            // Every window of the fitting text.
            fit.windows = std::max<int64_t>(
                10, static_cast<int64_t>(fit_text.size()) / std::max<int64_t>(1, fit.length - 2));
            fit.seed = options.seed;
            fit.source = corpus + " (tokens " + std::to_string(scored) + "-" +
                         std::to_string(scored + fit_text.size()) + ", the fitting text)";
            std::cerr << "ablate: fitting an MLM head on " << fit_text.size()
                      << " tokens after the scored " << scored << std::endl;
            e.fit = analysis::fit_mlm_head(m.model, fit_text, m.tokenizer->vocab(), fit);
            std::ostringstream head;
            head << "fitted on the frozen encoder (--fit-head) from " << e.fit->windows
                 << " windows after the scored text, " << e.fit->masked
                 << " masked tokens; on their held-back tenth (" << e.fit->held_back
                 << "): unigram " << fixed_or_dash(e.fit->start_loss) << " -> "
                 << fixed_or_dash(e.fit->end_loss) << " nats (step " << e.fit->best_step << " of "
                 << fit.steps << " kept; training rows " << fixed_or_dash(e.fit->train_loss) << ")";
            e.head = head.str();
        }
        if (options.patch_source) {  // one line naming what differs, before any work
            try {
                m.model->bert->position->set_patch_source(options.patch_source);
            } catch (const std::invalid_argument& err) {
                throw engine::InputError(patch_from, std::string(err.what()) + " of " + path);
            }
            m.model->bert->position->set_patch_source(nullptr);
            e.patch_from = patch_from;
        }
        analysis::AblationOptions own = options;
        if (own.length == 0) own.length = default_window_length(m);
        std::cerr << "ablate [" << (k + 1) << "/" << checkpoints.size() << "] " << e.variant << " "
                  << path << ": T = " << own.length << ", mode "
                  << engine::ablation_mode_name(options.mode) << std::endl;
        try {
            e.report = analysis::positional_ablation(m.model, stream, m.tokenizer->vocab(), own);
        } catch (const std::invalid_argument& err) {
            throw UsageError(err.what());
        }
        results.push_back(std::move(e));
    }

    const std::string text = format == "json"  ? render_json(results)
                             : format == "csv" ? render_csv(results)
                                               : render_table(results);
    std::cout << text;
    if (args.has("out"))
        write_report_files(args.get("out"), "ablation", render_json(results), render_csv(results));
    return 0;
}

}  // namespace cli
