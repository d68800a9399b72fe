// `tupe extrapolate`: length extrapolation and position shift of pretrained encoders
// (analysis/extrapolate.h). Every checkpoint reads the same corpus through its own vocabulary;
// the masked set depends on --seed and the stream index only, so checkpoints that share a
// vocabulary are scored on the very same tokens. --rope-scaling pi,ntk,yarn adds, for RoPE
// models, every length beyond L again with RoPE scaled (engine::RopeScaling). One block (or
// JSON object, or CSV rows) per checkpoint; --out DIR writes extrapolation.json and
// extrapolation.csv as well.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/extrapolate.h"
#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/trainer.h"
#include "number_cells.h"
#if TUPE_WITH_QT
#include "plotting/plotting.h"
#endif

namespace cli {

namespace fs = std::filesystem;

using analysis::csv_field;
using analysis::exact_number;

namespace {

/// One checkpoint's result, with what names it.
struct Evaluated {
    std::string path, variant;
    analysis::ExtrapolationReport report;
};

nlohmann::json row_json(const analysis::ExtrapolationRow& r) {
    nlohmann::json j = {{"factor", r.factor},
                        {"length", r.length},
                        {"offset", r.offset},
                        {"available", r.available}};
    if (!r.rope_scaling.empty()) j["rope_scaling"] = r.rope_scaling;
    if (!r.available) {
        j["note"] = r.note;
        return j;
    }
    j["windows"] = r.windows;
    j["loss"] = number_or_null(r.loss);
    j["loss_within"] = number_or_null(r.loss_within);
    j["loss_beyond"] = number_or_null(r.loss_beyond);
    j["masked"] = r.masked;
    j["masked_within"] = r.masked_within;
    j["masked_beyond"] = r.masked_beyond;
    j["mean_attention_distance"] = number_or_null(r.mean_distance());
    j["mean_attention_entropy"] = number_or_null(r.mean_entropy());
    j["heads"] = r.heads;
    j["attention_distance"] = r.distance;  // [layer * heads + head], tokens
    j["attention_entropy"] = r.entropy;    // nats
    return j;
}

std::string render_json(const std::vector<Evaluated>& results, const std::string& corpus) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : results) {
        const auto& r = e.report;
        nlohmann::json lengths = nlohmann::json::array(), shifts = nlohmann::json::array(),
                       scaled = nlohmann::json::array();
        for (const auto& row : r.lengths) lengths.push_back(row_json(row));
        for (const auto& row : r.shifts) shifts.push_back(row_json(row));
        for (const auto& row : r.scaled) scaled.push_back(row_json(row));
        nlohmann::json item = {{"checkpoint", e.path},
                               {"variant", e.variant},
                               {"positions", r.summary},
                               {"extrapolates", r.extrapolates},
                               {"train_length", r.train_length},
                               {"max_position_embeddings", r.max_positions},
                               {"base_offset", r.base_offset},
                               {"stream_tokens", r.stream_tokens},
                               {"masked_tokens", r.masked_tokens},
                               {"seed", r.seed},
                               {"mask_prob", r.mask_prob},
                               {"unigram_floor", number_or_null(r.unigram_floor)},
                               {"lengths", lengths},
                               {"shifts", shifts},
                               {"rope_scaled", scaled}};
        list.push_back(item);
    }
    nlohmann::json j = {{"corpus", corpus}, {"checkpoints", list}};
    return j.dump(2) + "\n";
}

std::string render_csv(const std::vector<Evaluated>& results) {
    std::ostringstream os;
    os << "variant,checkpoint,kind,factor,length,offset,available,loss,loss_within,loss_beyond,"
          "masked,masked_within,masked_beyond,windows,train_length,stream_tokens,unigram_floor,"
          "mean_attention_distance,mean_attention_entropy,note,rope_scaling\n";
    for (const auto& e : results) {
        auto emit = [&](const char* kind, const analysis::ExtrapolationRow& row) {
            os << csv_field(e.variant) << "," << csv_field(e.path) << "," << kind << ","
               << exact_number(row.factor) << "," << row.length << "," << row.offset << ","
               << (row.available ? "true" : "false") << "," << exact_number(row.loss) << ","
               << exact_number(row.loss_within) << "," << exact_number(row.loss_beyond) << ","
               << row.masked << "," << row.masked_within << "," << row.masked_beyond << ","
               << row.windows << "," << e.report.train_length << "," << e.report.stream_tokens
               << "," << exact_number(e.report.unigram_floor) << ","
               << exact_number(row.mean_distance()) << "," << exact_number(row.mean_entropy())
               << "," << csv_field(row.note) << "," << csv_field(row.rope_scaling) << "\n";
        };
        for (const auto& row : e.report.lengths) emit("length", row);
        for (const auto& row : e.report.shifts) emit("shift", row);
        for (const auto& row : e.report.scaled) emit("scaled", row);
    }
    return os.str();
}

std::vector<std::string> table_row(const std::string& label, const analysis::ExtrapolationRow& r) {
    const std::string span =
        std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1);
    if (!r.available)
        return {label, std::to_string(r.length), span, "-", "-", "-", "-", "-", "-", "-", r.note};
    return {label,
            std::to_string(r.length),
            span,
            fixed_or_dash(r.loss),
            fixed_or_dash(r.loss_within),
            fixed_or_dash(r.loss_beyond),
            format_count(static_cast<double>(r.masked)),
            format_count(static_cast<double>(r.masked_beyond)),
            fixed_or_dash(r.mean_distance()),
            fixed_or_dash(r.mean_entropy())};
}

std::string render_table(const std::vector<Evaluated>& results) {
    std::ostringstream os;
    for (size_t k = 0; k < results.size(); ++k) {
        const auto& e = results[k];
        const auto& r = e.report;
        if (k) os << "\n";
        os << e.variant << "  " << e.path << "\n"
           << "positions: " << r.summary << " ("
           << (r.extrapolates
                   ? "no learned table"
                   : "learned table of " + std::to_string(r.max_positions) + " positions")
           << ")\n"
           << "trained at L = " << r.train_length << " tokens; "
           << format_count(static_cast<double>(r.stream_tokens)) << " stream tokens, "
           << format_count(static_cast<double>(r.masked_tokens)) << " masked (seed " << r.seed
           << ", p = " << analysis::significant_number(r.mask_prob, 6) << ")\n\n";
        const std::string L = std::to_string(r.train_length);
        std::vector<std::vector<std::string>> rows = {
            {"length", "tokens", "positions", "loss all", "loss < " + L, "loss >= " + L, "masked",
             "masked >= " + L, "attn dist", "attn entropy"}};
        for (const auto& row : r.lengths)
            rows.push_back(table_row(analysis::significant_number(row.factor, 6) + "x", row));
        for (const auto& row : r.shifts)
            rows.push_back(table_row("shift +" + std::to_string(row.offset), row));
        for (const auto& row : r.scaled)
            rows.push_back(table_row(
                analysis::significant_number(row.factor, 6) + "x " + row.rope_scaling, row));
        os << format_table(rows);
        os << "floor: unigram " << fixed_or_dash(r.unigram_floor) << " nats on the same "
           << format_count(static_cast<double>(r.masked_tokens))
           << " masked targets (their own add-1/2 frequencies in the stream); attn dist / "
              "entropy: mean over layers, heads and queries of sum_j p_ij |i - j| (tokens) and "
              "-sum_j p_ij ln p_ij (nats)\n";
        if (!r.scaled.empty())
            os << "Fx pi / ntk / yarn: RoPE scaled by s = F (position interpolation, NTK-aware, "
                  "YaRN with its logit temperature) on the same windows\n";
    }
    return os.str();
}

#if TUPE_WITH_QT
/// extrapolation.png: loss against L_eval / L, one line per checkpoint (n/a rows left out),
/// with the unigram floor of the first checkpoint dashed, and loss beyond L beside it.
void save_figure(const std::vector<Evaluated>& results, const fs::path& path) {
    plotting::OffscreenSession session;
    plotting::LinePlot all, beyond;
    all.title = "masked-token loss at L_eval = f x L (all tokens)";
    beyond.title = "masked-token loss at positions >= L (never seen in training)";
    for (auto* p : {&all, &beyond}) {
        p->x_label = "f = L_eval / L";
        p->y_label = "cross-entropy (nats)";
    }
    double fmin = 1e300, fmax = -1e300;
    for (const auto& e : results) {
        plotting::Series a, b;
        a.name = b.name = e.variant;
        a.markers = b.markers = true;
        for (const auto& row : e.report.lengths) {
            fmin = std::min(fmin, row.factor), fmax = std::max(fmax, row.factor);
            if (!row.available || !std::isfinite(row.loss)) continue;
            a.x.push_back(row.factor), a.y.push_back(row.loss);
            if (std::isfinite(row.loss_beyond))
                b.x.push_back(row.factor), b.y.push_back(row.loss_beyond);
        }
        all.series.push_back(a);
        beyond.series.push_back(b);
        // RoPE scaled at each extension: a line per scaling, from the plain row at L.
        std::vector<std::string> methods;
        for (const auto& row : e.report.scaled)
            if (std::find(methods.begin(), methods.end(), row.rope_scaling) == methods.end())
                methods.push_back(row.rope_scaling);
        for (const auto& method : methods) {
            plotting::Series sa, sb;
            sa.name = sb.name = e.variant + " " + method;
            sa.markers = sb.markers = true;
            for (const auto& row : e.report.lengths)
                if (row.available && row.length == e.report.train_length && std::isfinite(row.loss))
                    sa.x.push_back(row.factor), sa.y.push_back(row.loss);
            for (const auto& row : e.report.scaled) {
                if (row.rope_scaling != method || !std::isfinite(row.loss)) continue;
                sa.x.push_back(row.factor), sa.y.push_back(row.loss);
                if (std::isfinite(row.loss_beyond))
                    sb.x.push_back(row.factor), sb.y.push_back(row.loss_beyond);
            }
            all.series.push_back(sa);
            beyond.series.push_back(sb);
        }
    }
    if (!results.empty() && std::isfinite(results[0].report.unigram_floor) && fmax >= fmin) {
        plotting::Series floor;
        floor.name = "unigram floor";
        floor.dashed = true;
        floor.x = {fmin, fmax};
        floor.y = {results[0].report.unigram_floor, results[0].report.unigram_floor};
        all.series.push_back(floor);
        beyond.series.push_back(floor);
    }
    plotting::save_line_plot_grid_png({all, beyond}, 2, path.string());
}
#endif

}  // namespace

int cmd_extrapolate(const Argv& argv) {
    Args args(argv, command_spec("extrapolate"));
    const auto& checkpoints = args.positionals();
    if (checkpoints.empty()) throw UsageError("expected at least one CHECKPOINT");
    const std::string corpus = args.required("corpus");
    const std::string format = args.get("format");
    if (format != "table" && format != "json" && format != "csv")
        throw UsageError("--format must be table, json or csv, got '" + format + "'");
    analysis::ExtrapolationOptions options;
    try {
        options.factors = analysis::parse_length_factors(args.get("lengths"));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--lengths: ") + e.what());
    }
    options.max_tokens = args.get_int("max-tokens");
    if (options.max_tokens < 1) throw UsageError("--max-tokens must be >= 1");
    const long long seed = args.get_int("seed");
    if (seed < 0) throw UsageError("--seed must be >= 0");
    options.seed = static_cast<uint64_t>(seed);
    options.source = corpus;
    if (args.has("rope-scaling")) {
        std::istringstream list(args.get("rope-scaling"));
        std::string item;
        while (std::getline(list, item, ',')) {
            try {
                options.rope_scalings.push_back(engine::parse_rope_scaling(item));
            } catch (const std::invalid_argument& e) {
                throw UsageError(std::string("--rope-scaling: ") + e.what());
            }
        }
    }
    require_corpus_file(corpus);

    std::vector<Evaluated> results;
    for (size_t k = 0; k < checkpoints.size(); ++k) {
        const std::string& path = checkpoints[k];
        auto ckpt = engine::load_checkpoint(path);
        const engine::WordPieceTokenizer tokenizer =
            checkpoint_tokenizer(args.get("vocab"), path, ckpt.config);
        options.train_length = ckpt.config.data.max_seq_len;
        for (double f : options.factors)
            if (analysis::window_length(f, options.train_length) < 3)
                throw UsageError(
                    "--lengths: factor " + analysis::significant_number(f, 6) + " gives " +
                    std::to_string(analysis::window_length(f, options.train_length)) +
                    " tokens at " + path + "'s L = " + std::to_string(options.train_length) +
                    " (a window needs at least 3)");
        const auto stream = analysis::read_token_stream(corpus, tokenizer, options.max_tokens);
        std::cerr << "extrapolate [" << (k + 1) << "/" << checkpoints.size() << "] "
                  << ckpt.config.model.preset << " " << path << ": L = " << options.train_length
                  << ", " << format_count(static_cast<double>(stream.size()))
                  << " stream tokens, lengths " << args.get("lengths") << std::endl;
        results.push_back(
            {path, ckpt.config.model.preset,
             analysis::evaluate_extrapolation(ckpt.model, stream, tokenizer.vocab(), options)});
    }

    if (format == "json")
        std::cout << render_json(results, corpus);
    else if (format == "csv")
        std::cout << render_csv(results);
    else
        std::cout << render_table(results);
    if (args.has("out")) {
        const fs::path out = args.get("out");
        write_report_files(out.string(), "extrapolation", render_json(results, corpus),
                           render_csv(results));
#if TUPE_WITH_QT
        save_figure(results, out / "extrapolation.png");
        std::cerr << "wrote " << (out / "extrapolation.png").string() << "\n";
#endif
    }
    return 0;
}

}  // namespace cli
