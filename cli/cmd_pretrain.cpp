// `tupe pretrain` (one variant, with a progress bar; Ctrl-C checkpoints and stops), its
// data-parallel faces (`--nproc-per-node N` launches N local workers of this executable; a
// worker started by torchrun/Slurm finds its group in RANK/WORLD_SIZE/MASTER_ADDR/...), and
// `tupe curves` (validation curves of several runs side by side, or their raw points as CSV
// or JSON).
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "curves_plot.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/run_folder.h"
#include "engine/trainer.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "launcher.h"

namespace cli {

namespace fs = std::filesystem;

using analysis::csv_field;
using analysis::exact_number;
using analysis::fixed_number;

int cmd_pretrain(const Argv& argv) {
    Args args(argv, command_spec("pretrain"));
    std::vector<std::string> overrides = args.all("set");
    if (args.has("out")) overrides.push_back("out_dir=" + args.get("out"));
    engine::PretrainConfig config =
        experiments::load_pretrain_config(args.required("config"), overrides);
    if (args.has("nproc-per-node")) {
        const long long n = args.get_int("nproc-per-node");
        if (n < 1 || n > 1024) throw UsageError("--nproc-per-node must be in [1, 1024]");
        if (engine::distributed_env_present())
            throw UsageError(
                "--nproc-per-node with RANK/WORLD_SIZE already set: use one "
                "launcher (torchrun/srun or --nproc-per-node), not both");
        if (n > 1) {
            LaunchSpec launch;
            launch.command = "pretrain";
            launch.nproc = static_cast<int>(n);
            launch.threads_each = threads_per_worker(config.train.threads, launch.nproc);
            launch.worker_args = without_option(argv, "nproc-per-node");
            launch.worker_args.insert(launch.worker_args.begin(), {"tupe", "pretrain"});
            launch.worker_args.insert(
                launch.worker_args.end(),
                {"--set", "train.threads=" + std::to_string(launch.threads_each)});
            launch.failure_hint = "; the last checkpoint in " + config.out_dir +
                                  " is kept (run the same command to resume)";
            return launch_local_workers(launch);
        }
    }

    // A worker of a group (our own launcher, torchrun, srun ...): the torchrun variables.
    std::unique_ptr<engine::DistributedContext> group;
    try {
        group = join_worker_group(config.train.device, config.train.threads);
    } catch (const engine::DistributedError& e) {
        std::cerr << "tupe pretrain: error: " << e.what() << "\n";
        return kPeerFailureStatus;
    }
    const bool main_rank = !group || group->is_main();
    // One writer per folder: a second `tupe pretrain` on it fails at once, naming the first;
    // a study's pretraining folder (its owner record) is not ours to write.
    std::unique_ptr<engine::RunFolderLock> folder_lock;
    if (main_rank) {
        if (const auto owner = engine::read_run_owner(config.out_dir))
            throw engine::InputError(config.out_dir,
                                     "belongs to job " + owner->job + " of experiment '" +
                                         owner->experiment +
                                         "' (tupe run resumes it); choose another --out");
        folder_lock = std::make_unique<engine::RunFolderLock>(config.out_dir);
    }

    const auto& m = config.model;
    if (main_rank)
        std::cerr << "pretrain " << m.preset << " (" << m.size << "): " << m.num_hidden_layers
                  << " layers, hidden " << m.hidden_size << ", " << m.num_attention_heads
                  << " heads, seq " << config.data.max_seq_len << ", batch "
                  << config.train.batch_size << ", " << config.train.steps << " steps, "
                  << config.train.dtype << " -> " << config.out_dir
                  << (group ? ", " + std::to_string(group->world_size()) + " ranks (" +
                                  group->backend_name() + ")"
                            : std::string())
                  << "\n";

    StopOnSignal stop_on_signal;
    ProgressBar bar(config.train.steps, std::max<int64_t>(1, config.train.log_interval));
    engine::TrainCallbacks cb;
    cb.stop = stop_on_signal.flag();
    // --keep-every N: checkpoint-STEP.pt at step 0 (the initialised model), N, 2N, ... and the
    // last step, for `tupe heads` and `tupe analyze` over training.
    if (const long long every = args.get_int("keep-every"); every > 0) {
        for (int64_t step = 0; step < config.train.steps; step += every)
            cb.snapshot_steps.push_back(step);
        cb.snapshot_steps.push_back(config.train.steps);
    }
    if (main_rank) {
        cb.on_message = [&](const std::string& msg) { std::cerr << msg << "\n"; };
        cb.on_step = [&](const engine::StepReport& r) {
            char lr[32];
            std::snprintf(lr, sizeof lr, "%.1e", r.lr);
            bar.update(r.step, "loss " + fixed_number(r.loss, 3) + "  lr " + lr + "  " +
                                   format_count(r.tokens_per_second) + " tok/s  " +
                                   fixed_number(r.seconds, 2) + " s/step");
        };
        cb.on_eval = [&](const engine::EvalReport& e) {
            bar.finish();
            std::cerr << "step " << e.step << ": validation loss " << fixed_number(e.loss, 4)
                      << ", accuracy " << fixed_number(e.accuracy, 4) << " (" << e.masked_tokens
                      << " masked tokens)\n";
        };
    }
    engine::TrainResult result;
    try {
        result = engine::pretrain(config, cb, group.get());
    } catch (const engine::DistributedError& e) {
        bar.finish();
        std::cerr << "tupe pretrain: error: " << e.what() << "\n";
        return kPeerFailureStatus;
    }
    bar.finish();
    if (!main_rank) return result.stopped ? 130 : 0;
    if (result.stopped) {
        std::cerr << "stopped at step " << result.final_step << "; checkpoint " << result.checkpoint
                  << " (run the same command to resume)\n";
        return 130;
    }
    std::cout << "done: " << m.preset << " step " << result.final_step;
    if (!result.evals.empty())
        std::cout << ", validation loss " << fixed_number(result.evals.front().loss, 4) << " -> "
                  << fixed_number(result.evals.back().loss, 4);
    std::cout << "; checkpoint " << result.checkpoint << "\n";
    if (result.floor.validation_tokens > 0)
        std::cout << "floor: unigram " << fixed_number(result.floor.unigram_nats, 4)
                  << " nats, context-free " << fixed_number(result.floor.context_free_nats, 4)
                  << ", bigram " << fixed_number(result.floor.bigram_nats, 4)
                  << " (validation MLM targets)\n";
    if (!result.evals.empty()) {
        const std::string warning = engine::floor_warning(result.evals.back().loss, result.floor);
        if (!warning.empty()) std::cout << warning << "\n";
    }
    return 0;
}

#if TUPE_WITH_QT
plotting::LinePlot curves_plot(const std::string& metric, const std::vector<std::string>& names,
                               const std::vector<std::string>& dirs, const CurveTable& table) {
    namespace plt = plotting;
    std::map<std::string, std::vector<size_t>> groups;
    std::vector<std::string> order;
    for (size_t i = 0; i < names.size(); ++i) {
        const std::string g = experiments::variant_group(names[i]);
        if (!groups.count(g)) order.push_back(g);
        groups[g].push_back(i);
    }
    plt::LinePlot plot;
    plot.title = "validation MLM " + metric + " (mean over pretraining seeds; band: min to max)";
    plot.x_label = "pretraining step";
    plot.y_label = metric == "loss" ? "validation MLM loss (nats)" : "validation MLM accuracy";
    double xmin = INFINITY, xmax = -INFINITY;
    for (const auto& g : order) {
        plt::Series s;
        const auto& members = groups[g];
        s.name = g + (members.size() > 1 ? " (" + std::to_string(members.size()) + " seeds)" : "");
        for (const auto& [step, values] : table) {
            std::vector<double> v;
            for (size_t i : members)
                if (auto it = values.find(i); it != values.end()) v.push_back(it->second);
            if (v.size() != members.size()) continue;  // a step some seeds lack
            double sum = 0;
            for (double x : v) sum += x;
            s.x.push_back(static_cast<double>(step));
            s.y.push_back(sum / static_cast<double>(v.size()));
            if (members.size() > 1) {
                s.band_lo.push_back(*std::min_element(v.begin(), v.end()));
                s.band_hi.push_back(*std::max_element(v.begin(), v.end()));
            }
            xmin = std::min(xmin, static_cast<double>(step));
            xmax = std::max(xmax, static_cast<double>(step));
        }
        plot.series.push_back(s);
    }
    if (metric == "loss" && xmin <= xmax) {
        std::set<std::string> seen;
        for (const auto& dir : dirs) {
            engine::CorpusFloor floor;
            if (!engine::read_floor(engine::floor_path(dir), floor)) continue;
            const std::string key =
                fixed_number(floor.unigram_nats, 3) + "/" + fixed_number(floor.bigram_nats, 3);
            if (!seen.insert(key).second) continue;
            plt::Series u, b, c;
            u.name = "unigram floor " + fixed_number(floor.unigram_nats, 3);
            b.name = "bigram ref. " + fixed_number(floor.bigram_nats, 3);
            c.name = "context-free floor " + fixed_number(floor.context_free_nats, 3);
            u.dashed = b.dashed = b.dotted = c.dashed = c.dash_dot = true;
            u.x = b.x = c.x = {xmin, xmax};
            u.y = {floor.unigram_nats, floor.unigram_nats};
            b.y = {floor.bigram_nats, floor.bigram_nats};
            c.y = {floor.context_free_nats, floor.context_free_nats};
            plot.series.push_back(u);
            if (floor.context_free_nats > 0) plot.series.push_back(c);
            plot.series.push_back(b);
        }
    }
    return plot;
}

namespace {

void plot_curves(const std::string& path, const std::string& metric,
                 const std::vector<std::string>& names, const std::vector<std::string>& dirs,
                 const CurveTable& table) {
    plotting::OffscreenSession session;
    plotting::save_line_plot_png(curves_plot(metric, names, dirs, table), path, 900, 560);
}

}  // namespace
#endif  // TUPE_WITH_QT

namespace {

/// One row of a run's metrics.tsv, as written (engine MetricsLog): the step, split, metric,
/// value and seconds since the run started (NaN in a file written before that column).
struct CurvePoint {
    long long step = 0;
    std::string split, metric;
    double value = 0, time = std::nan("");
};

std::vector<CurvePoint> read_curve_points(const std::string& dir) {
    const std::string path = engine::metrics_path(dir);
    std::ifstream in(path);
    if (!in)
        throw engine::InputError(path, "no metrics file (is this a pretraining run directory?)");
    std::vector<CurvePoint> points;
    std::string line;
    long line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line_no == 1 || line.empty()) continue;
        std::istringstream row(line);
        CurvePoint p;
        std::string value, time;
        if (!(row >> p.step >> p.split >> p.metric >> value))
            throw engine::InputError(path, "malformed metrics row", line_no);
        // strtod reads "nan" and "inf" as written by the trainer's stream.
        char* end = nullptr;
        p.value = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0')
            throw engine::InputError(path, "malformed metrics value '" + value + "'", line_no);
        if (row >> time) {
            p.time = std::strtod(time.c_str(), &end);
            if (end == time.c_str() || *end != '\0')
                throw engine::InputError(path, "malformed elapsed time '" + time + "'", line_no);
        }
        points.push_back(std::move(p));
    }
    return points;
}

/// `tupe curves --format csv|json`: every row of every run's metrics.tsv, no smoothing.
int print_curve_points(const std::vector<std::string>& dirs, const std::string& format) {
    std::vector<std::vector<CurvePoint>> runs;
    for (const auto& dir : dirs) runs.push_back(read_curve_points(dir));
    if (format == "csv") {
        std::cout << "run,split,metric,step,value,time\n";
        for (size_t r = 0; r < dirs.size(); ++r)
            for (const CurvePoint& p : runs[r])
                std::cout << csv_field(dirs[r]) << ',' << csv_field(p.split) << ','
                          << csv_field(p.metric) << ',' << p.step << ',' << exact_number(p.value)
                          << ',' << exact_number(p.time) << '\n';
        return 0;
    }
    nlohmann::json doc;
    doc["runs"] = nlohmann::json::array();
    for (size_t r = 0; r < dirs.size(); ++r) {
        nlohmann::json points = nlohmann::json::array();
        for (const CurvePoint& p : runs[r]) {
            // A NaN or infinite value (a diverged run) or an absent time is null.
            nlohmann::json point = {{"split", p.split}, {"metric", p.metric}, {"step", p.step}};
            point["value"] = std::isfinite(p.value) ? nlohmann::json(p.value) : nlohmann::json();
            point["time"] = std::isfinite(p.time) ? nlohmann::json(p.time) : nlohmann::json();
            points.push_back(std::move(point));
        }
        doc["runs"].push_back({{"run", dirs[r]}, {"points", std::move(points)}});
    }
    std::cout << doc.dump(1) << "\n";
    return 0;
}

}  // namespace

int cmd_curves(const Argv& argv) {
    Args args(argv, command_spec("curves"));
    const std::string format = args.get("format");
    if (format != "table" && format != "csv" && format != "json")
        throw UsageError("--format must be table, csv or json");
    if (format != "table" && (args.has("png") || args.has("metric")))
        throw UsageError("--format " + format +
                         " prints every metric's raw points; --metric and --png go with the table");
    if (format != "table") {
        if (args.positionals().empty()) throw UsageError("expected at least one RUN_DIR");
        return print_curve_points(args.positionals(), format);
    }
    const std::string metric = args.get("metric");
    if (metric != "loss" && metric != "accuracy")
        throw UsageError("--metric must be loss or accuracy");
    if (args.positionals().empty()) throw UsageError("expected at least one RUN_DIR");
#if !TUPE_WITH_QT
    if (args.has("png"))
        throw UsageError("--png needs the Qt build (configure with -DTUPE_WITH_QT=ON)");
#endif
    CurveTable table;
    std::vector<std::string> names;
    for (const auto& dir : args.positionals()) {
        const std::string path = engine::metrics_path(dir);
        std::ifstream in(path);
        if (!in)
            throw engine::InputError(path,
                                     "no metrics file (is this a pretraining run directory?)");
        names.push_back(fs::path(dir).filename().string());
        if (names.back().empty()) names.back() = dir;
        std::string line;
        long line_no = 0;
        while (std::getline(in, line)) {
            ++line_no;
            if (line_no == 1) continue;
            std::istringstream row(line);
            long long step;
            std::string split, key;
            double value;
            if (!(row >> step >> split >> key >> value))
                throw engine::InputError(path, "malformed metrics row", line_no);
            if (split == "validation" && key == metric) table[step][names.size() - 1] = value;
        }
    }
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"step"};
    for (const auto& n : names) header.push_back(n + " val " + metric);
    rows.push_back(header);
    for (const auto& [step, values] : table) {
        std::vector<std::string> r = {std::to_string(step)};
        for (size_t i = 0; i < names.size(); ++i) {
            auto it = values.find(i);
            r.push_back(it == values.end() ? "-" : fixed_number(it->second, 4));
        }
        rows.push_back(r);
    }
    // The floor under the curves (floor.txt beside each run's checkpoint): a loss near the
    // unigram floor means the model learned word frequencies only.
    std::vector<std::string> warnings;
    std::vector<std::string> floor_row = {"unigram floor"}, bigram_row = {"bigram ref."};
    std::vector<std::string> free_row = {"context-free floor"};
    bool any_free = false;
    bool any_floor = false;
    for (size_t i = 0; i < names.size(); ++i) {
        engine::CorpusFloor floor;
        const bool have = engine::read_floor(engine::floor_path(args.positionals()[i]), floor);
        any_floor = any_floor || have;
        floor_row.push_back(have && metric == "loss" ? fixed_number(floor.unigram_nats, 4) : "-");
        bigram_row.push_back(have && metric == "loss" ? fixed_number(floor.bigram_nats, 4) : "-");
        const bool free = have && metric == "loss" && floor.context_free_nats > 0;
        any_free = any_free || free;
        free_row.push_back(free ? fixed_number(floor.context_free_nats, 4) : "-");
        if (have && metric == "loss" && !table.empty()) {
            // The run's last validation point.
            for (auto it = table.rbegin(); it != table.rend(); ++it) {
                auto v = it->second.find(i);
                if (v == it->second.end()) continue;
                const std::string w = engine::floor_warning(v->second, floor);
                if (!w.empty()) warnings.push_back(names[i] + ": " + w);
                break;
            }
        }
    }
    if (any_floor && metric == "loss") {
        rows.push_back(floor_row);
        if (any_free) rows.push_back(free_row);
        rows.push_back(bigram_row);
    }
    std::cout << format_table(rows);
    if (any_floor && metric == "loss")
        std::cout
            << "unigram floor: cross-entropy of the validation MLM targets under the training "
               "token frequencies (a model that learned frequencies only); context-free floor: "
               "the best a model reaches that sees only the scored token (the validation loss "
               "scores the 10% kept and 10% replaced tokens too, so copying what it sees pays "
               "without any context); bigram ref.: under a left-context bigram model\n";
    else if (metric == "loss")
        std::cout << "(no floor.txt in these run directories: pretrained before the floor was "
                     "recorded; resume or rerun `tupe pretrain` to write it)\n";
    for (const auto& w : warnings) std::cout << w << "\n";
#if TUPE_WITH_QT
    if (args.has("png")) {
        plot_curves(args.get("png"), metric, names, args.positionals(), table);
        std::cout << "wrote " << args.get("png") << "\n";
    }
#endif
    return 0;
}

}  // namespace cli
