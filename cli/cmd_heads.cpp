// `tupe heads`: head types (analysis/head_types.h) of every stored checkpoint of one or more
// runs, on held-out text, as a table, JSON or CSV per (step, layer, head), and a figure of the
// types over the training steps: when each type appears during pretraining, scheme by scheme.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "analysis/extrapolate.h"
#include "analysis/head_type_scan.h"
#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "engine/trainer.h"
#include "model_loader.h"
#include "number_cells.h"
#if TUPE_WITH_QT
#include "plotting/plotting.h"
#endif

namespace cli {

namespace fs = std::filesystem;

using analysis::csv_field;
using analysis::exact_number;
using analysis::HeadType;

namespace {

/// One scanned checkpoint of a run.
struct ScannedCheckpoint {
    std::string path;
    int64_t step = 0;
    analysis::HeadTypeScan scan;
};

/// A run (its folder, or a checkpoint given alone) and its checkpoints in step order.
struct ScannedRun {
    std::string name, text;
    std::vector<ScannedCheckpoint> checkpoints;
};

/// The checkpoints of a RUN_DIR argument: its checkpoint-STEP.pt snapshots by step, then
/// checkpoint.pt (kept only when its step is not among the snapshots'); a file or an HF model
/// folder is itself.
std::vector<std::string> heads_run_checkpoints(const std::string& arg) {
    if (is_hf_folder(arg)) return {arg};
    if (!fs::is_directory(arg)) {
        if (!fs::exists(arg)) throw engine::InputError(arg, "no such checkpoint or run folder");
        return {arg};
    }
    static const std::regex snapshot(R"(checkpoint-(\d+)\.pt)");
    std::vector<std::pair<int64_t, std::string>> steps;
    for (const auto& entry : fs::directory_iterator(arg)) {
        std::smatch m;
        const std::string name = entry.path().filename().string();
        if (std::regex_match(name, m, snapshot))
            steps.emplace_back(std::stoll(m[1].str()), entry.path().string());
    }
    std::sort(steps.begin(), steps.end());
    std::vector<std::string> out;
    for (const auto& [step, path] : steps) out.push_back(path);
    const fs::path last = fs::path(arg) / "checkpoint.pt";
    if (fs::exists(last)) out.push_back(last.string());
    if (out.empty()) throw engine::InputError(arg, "holds no checkpoint.pt or checkpoint-STEP.pt");
    return out;
}

const char* const kHeadScoreNames[] = {
    "cls_sink",  "sep_sink",          "previous",         "next",  "self",
    "duplicate", "duplicate_earlier", "duplicate_chance", "local", "entropy"};

std::vector<double> head_score_values(const analysis::HeadTypeScores& s) {
    return {s.cls_sink,  s.sep_sink,          s.previous,         s.next,  s.self,
            s.duplicate, s.duplicate_earlier, s.duplicate_chance, s.local, s.entropy};
}

std::string heads_json(const std::vector<ScannedRun>& runs, const std::string& rule) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& run : runs) {
        nlohmann::json cks = nlohmann::json::array();
        for (const auto& c : run.checkpoints) {
            nlohmann::json heads = nlohmann::json::array();
            for (const auto& row : c.scan.rows) {
                nlohmann::json scores;
                const auto values = head_score_values(row.scores);
                for (size_t k = 0; k < values.size(); ++k)
                    scores[kHeadScoreNames[k]] = number_or_null(values[k]);
                heads.push_back({{"layer", row.layer},
                                 {"head", row.head},
                                 {"type", analysis::head_type_name(row.type)},
                                 {"scores", scores},
                                 {"rows", row.scores.rows},
                                 {"duplicate_rows", row.scores.duplicate_rows}});
            }
            cks.push_back({{"checkpoint", c.path},
                           {"step", c.step},
                           {"positions", c.scan.summary},
                           {"length", c.scan.length},
                           {"windows", c.scan.windows},
                           {"heads", heads}});
        }
        list.push_back({{"run", run.name}, {"text", run.text}, {"checkpoints", cks}});
    }
    return nlohmann::json{{"rule", rule}, {"runs", list}}.dump(2) + "\n";
}

std::string heads_csv(const std::vector<ScannedRun>& runs) {
    std::ostringstream os;
    os << "run,checkpoint,step,layer,head,type";
    for (const char* name : kHeadScoreNames) os << "," << name;
    os << ",rows,duplicate_rows\n";
    for (const auto& run : runs)
        for (const auto& c : run.checkpoints)
            for (const auto& row : c.scan.rows) {
                os << csv_field(run.name) << "," << csv_field(c.path) << "," << c.step << ","
                   << row.layer << "," << row.head << "," << analysis::head_type_name(row.type);
                for (double v : head_score_values(row.scores)) os << "," << exact_number(v);
                os << "," << row.scores.rows << "," << row.scores.duplicate_rows << "\n";
            }
    return os.str();
}

// Per run: the type of every head (columns L.H) at every step (rows), then how many heads of
// each type, and the final checkpoint's scores.
std::string heads_table(const std::vector<ScannedRun>& runs, const std::string& rule) {
    std::ostringstream os;
    for (size_t r = 0; r < runs.size(); ++r) {
        const auto& run = runs[r];
        if (r) os << "\n";
        const auto& first = run.checkpoints.front().scan;
        os << run.name << "  (positions: " << first.summary << ")\n"
           << "text: " << run.text << ", " << first.windows << " window(s) x " << first.length
           << " tokens\n";
        std::vector<std::vector<std::string>> types = {{"step"}};
        for (const auto& row : first.rows)
            types[0].push_back("L" + std::to_string(row.layer) + ".H" + std::to_string(row.head));
        for (const auto& c : run.checkpoints) {
            std::vector<std::string> line = {std::to_string(c.step)};
            for (const auto& row : c.scan.rows) line.push_back(analysis::head_type_name(row.type));
            types.push_back(line);
        }
        os << format_table(types);
        std::vector<std::vector<std::string>> counts = {{"step"}};
        for (HeadType t : analysis::head_types()) counts[0].push_back(analysis::head_type_name(t));
        for (const auto& c : run.checkpoints) {
            std::vector<std::string> line = {std::to_string(c.step)};
            for (HeadType t : analysis::head_types())
                line.push_back(std::to_string(std::count_if(
                    c.scan.rows.begin(), c.scan.rows.end(),
                    [&](const analysis::HeadTypeRow& row) { return row.type == t; })));
            counts.push_back(line);
        }
        os << "heads per type:\n" << format_table(counts);
        const auto& last = run.checkpoints.back();
        std::vector<std::vector<std::string>> scores = {{"head", "type", "cls", "sep", "prev",
                                                         "next", "self", "dup", "dup chance",
                                                         "local", "entropy"}};
        for (const auto& row : last.scan.rows) {
            const auto& s = row.scores;
            scores.push_back({"L" + std::to_string(row.layer) + ".H" + std::to_string(row.head),
                              analysis::head_type_name(row.type), fixed_or_dash(s.cls_sink, 2),
                              fixed_or_dash(s.sep_sink, 2), fixed_or_dash(s.previous, 2),
                              fixed_or_dash(s.next, 2), fixed_or_dash(s.self, 2),
                              fixed_or_dash(s.duplicate, 2), fixed_or_dash(s.duplicate_chance, 2),
                              fixed_or_dash(s.local, 2), fixed_or_dash(s.entropy, 2)});
        }
        os << "scores at step " << last.step << ":\n" << format_table(scores);
    }
    os << "rule: " << rule << "\n";
    return os.str();
}

#if TUPE_WITH_QT
// One panel per run: the number of heads of each type (that occurs) against the step; and per
// run a map of every head's type (rows L.H, columns steps, colour = the type's index).
std::vector<std::string> heads_figures(const std::vector<ScannedRun>& runs, const fs::path& dir) {
    namespace plt = plotting;
    fs::create_directories(dir);
    std::vector<plt::LinePlot> counts, scores;
    std::vector<plt::Heatmap> maps;
    std::string legend;
    for (size_t k = 0; k < analysis::head_types().size(); ++k)
        legend += (k ? ", " : "") + std::to_string(k) + " " +
                  analysis::head_type_name(analysis::head_types()[k]);
    for (const auto& run : runs) {
        plt::LinePlot plot;
        plot.title = run.name;
        plot.x_label = "pretraining step";
        plot.y_label = "heads";
        plot.y_min = 0;
        plot.y_max = static_cast<double>(run.checkpoints.front().scan.rows.size());
        for (HeadType t : analysis::head_types()) {
            plt::Series s;
            s.name = analysis::head_type_name(t);
            s.markers = true;
            bool any = false;
            for (const auto& c : run.checkpoints) {
                const auto n =
                    std::count_if(c.scan.rows.begin(), c.scan.rows.end(),
                                  [&](const analysis::HeadTypeRow& row) { return row.type == t; });
                any = any || n > 0;
                s.x.push_back(static_cast<double>(c.step));
                s.y.push_back(static_cast<double>(n));
            }
            if (any) plot.series.push_back(std::move(s));
        }
        counts.push_back(std::move(plot));

        // The strongest head's score for each type (the lowest entropy for broad): how close
        // the run comes to each rule, also where no head crosses its threshold.
        plt::LinePlot best;
        best.title = run.name;
        best.x_label = "pretraining step";
        best.y_label = "strongest head's score";
        best.y_min = 0;
        best.y_max = 1;
        struct Pick {
            const char* name;
            double analysis::HeadTypeScores::*field;
            bool lowest;
        };
        const Pick picks[] = {{"cls_sink", &analysis::HeadTypeScores::cls_sink, false},
                              {"sep_sink", &analysis::HeadTypeScores::sep_sink, false},
                              {"previous", &analysis::HeadTypeScores::previous, false},
                              {"next", &analysis::HeadTypeScores::next, false},
                              {"duplicate", &analysis::HeadTypeScores::duplicate, false},
                              {"local", &analysis::HeadTypeScores::local, false},
                              {"entropy (lowest)", &analysis::HeadTypeScores::entropy, true}};
        for (const Pick& pick : picks) {
            plt::Series s;
            s.name = pick.name;
            s.markers = true;
            for (const auto& c : run.checkpoints) {
                double v = std::nan("");
                for (const auto& row : c.scan.rows) {
                    const double x = row.scores.*pick.field;
                    if (std::isfinite(x) && (!std::isfinite(v) || (pick.lowest ? x < v : x > v)))
                        v = x;
                }
                s.x.push_back(static_cast<double>(c.step));
                s.y.push_back(v);
            }
            best.series.push_back(std::move(s));
        }
        scores.push_back(std::move(best));

        plt::Heatmap map;
        map.title = run.name;
        const auto& rows = run.checkpoints.front().scan.rows;
        map.rows = static_cast<int>(rows.size());
        map.cols = static_cast<int>(run.checkpoints.size());
        map.values.assign(static_cast<size_t>(map.rows * map.cols), std::nan(""));
        for (const auto& row : rows)
            map.row_labels.push_back("L" + std::to_string(row.layer) + ".H" +
                                     std::to_string(row.head));
        for (int c = 0; c < map.cols; ++c) {
            const auto& ck = run.checkpoints[static_cast<size_t>(c)];
            map.col_labels.push_back(std::to_string(ck.step));
            for (int r = 0; r < map.rows && r < static_cast<int>(ck.scan.rows.size()); ++r) {
                const HeadType t = ck.scan.rows[static_cast<size_t>(r)].type;
                const auto& all = analysis::head_types();
                map.values[static_cast<size_t>(r * map.cols + c)] =
                    static_cast<double>(std::find(all.begin(), all.end(), t) - all.begin());
            }
        }
        map.x_label = "pretraining step";
        map.y_label = "layer.head";
        map.value_label = "type";
        map.range_min = 0;
        map.range_max = static_cast<double>(analysis::head_types().size() - 1);
        maps.push_back(std::move(map));
    }
    const int columns = static_cast<int>(std::min<size_t>(runs.size(), 3));
    plt::save_line_plot_grid_png(counts, columns, (dir / "head_types.png").string(), 520, 360,
                                 "heads of each type over pretraining");
    plt::save_heatmap_grid_png(maps, columns, (dir / "head_types_by_head.png").string(), 480, 420,
                               "primary type of every head\n" + legend);
    plt::save_line_plot_grid_png(scores, columns, (dir / "head_type_scores.png").string(), 520, 360,
                                 "the strongest head's score for each type over pretraining");
    return {(dir / "head_types.png").string(), (dir / "head_types_by_head.png").string(),
            (dir / "head_type_scores.png").string()};
}
#endif

}  // namespace

int cmd_heads(const Argv& argv) {
    Args args(argv, command_spec("heads"));
    const auto& inputs = args.positionals();
    if (inputs.empty()) throw UsageError("expected at least one RUN_DIR or CHECKPOINT");
    const std::string format = args.get("format");
    analysis::HeadTypeScanOptions options;
    options.windows = args.get_int("windows");
    options.length = args.get_int("length", 0);
    options.batch_size = args.get_int("batch");
    const std::string corpus = args.get("corpus");
    if (!corpus.empty()) require_corpus_file(corpus);
    const bool figures = args.has("out") && !args.has("no-figures");
#if !TUPE_WITH_QT
    if (figures)
        std::cerr << "tupe heads: figures need the Qt build (configure with -DTUPE_WITH_QT=ON); "
                     "writing the data files only\n";
#endif
    engine::apply_thread_count(args.get_int("threads"));

    std::vector<ScannedRun> runs;
    for (const std::string& input : inputs) {
        ScannedRun run;
        const fs::path p(input);
        const fs::path folder = fs::is_directory(p) ? p : p.parent_path();
        run.name = folder.filename().empty() ? input : folder.filename().string();
        if (fs::is_directory(p) && run.name.empty()) run.name = input;
        std::vector<int64_t> stream;
        for (const std::string& path : heads_run_checkpoints(input)) {
            LoadedModel m = load_model(path, args.get("vocab"), /*cased=*/false);
            const bool seen =
                std::any_of(run.checkpoints.begin(), run.checkpoints.end(),
                            [&](const ScannedCheckpoint& c) { return c.step == m.step; });
            if (seen) continue;  // checkpoint.pt at a snapshot's step
            // One text per run: the same windows at every step.
            if (stream.empty())
                stream = scored_stream(m, corpus, args.get_int("max-tokens"), run.text);
            analysis::HeadTypeScanOptions own = options;
            own.source = corpus.empty() ? m.config->data.corpus : corpus;
            if (own.length == 0) own.length = default_window_length(m);
            std::cerr << "heads " << run.name << " step " << m.step << ": " << path << std::endl;
            ScannedCheckpoint c;
            c.path = path;
            c.step = m.step;
            try {
                c.scan =
                    analysis::scan_head_types(m.model->bert, stream, m.tokenizer->vocab(), own);
            } catch (const std::invalid_argument& err) {
                throw UsageError(err.what());
            }
            run.checkpoints.push_back(std::move(c));
        }
        std::sort(
            run.checkpoints.begin(), run.checkpoints.end(),
            [](const ScannedCheckpoint& a, const ScannedCheckpoint& b) { return a.step < b.step; });
        runs.push_back(std::move(run));
    }

    const std::string rule = analysis::describe(options.thresholds);
    const std::string text = format == "json"  ? heads_json(runs, rule)
                             : format == "csv" ? heads_csv(runs)
                                               : heads_table(runs, rule);
    std::cout << text;
    if (args.has("out")) {
        write_report_files(args.get("out"), "heads", heads_json(runs, rule), heads_csv(runs));
#if TUPE_WITH_QT
        if (figures) {
            plotting::OffscreenSession session;
            for (const auto& f : heads_figures(runs, fs::path(args.get("out")) / "figures"))
                std::cerr << "wrote " << f << "\n";
        }
#endif
    }
    return 0;
}

}  // namespace cli
