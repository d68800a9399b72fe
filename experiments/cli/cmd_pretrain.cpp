// `tupe pretrain` (one variant, with a progress bar; Ctrl-C checkpoints and stops), its
// data-parallel faces (`--nproc-per-node N` launches N local workers of this executable; a
// worker started by torchrun/Slurm finds its group in RANK/WORLD_SIZE/MASTER_ADDR/...), and
// `tupe curves` (validation curves of several runs side by side).
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "engine/distributed.h"
#include "launcher.h"
#include "engine/errors.h"
#include "engine/trainer.h"
#include "experiments/config_loader.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

}  // namespace

int cmd_pretrain(const Argv& argv) {
    Args args(argv, {"config", "out", "nproc-per-node"}, {}, {"set"});
    std::vector<std::string> overrides = args.all("set");
    if (args.has("out")) overrides.push_back("out_dir=" + args.get("out"));
    engine::PretrainConfig config =
        experiments::load_pretrain_config(args.required("config"), overrides);
    if (args.has("nproc-per-node")) {
        const long long n = args.get_int("nproc-per-node", 1);
        if (n < 1 || n > 1024) throw UsageError("--nproc-per-node must be in [1, 1024]");
        if (engine::distributed_env_present())
            throw UsageError("--nproc-per-node with RANK/WORLD_SIZE already set: use one "
                             "launcher (torchrun/srun or --nproc-per-node), not both");
        if (n > 1) {
            LaunchSpec launch;
            launch.command = "pretrain";
            launch.nproc = static_cast<int>(n);
            launch.threads_each = threads_per_worker(config.train.threads, launch.nproc);
            launch.worker_args = without_option(argv, "nproc-per-node");
            launch.worker_args.insert(launch.worker_args.begin(), {"tupe", "pretrain"});
            launch.worker_args.insert(launch.worker_args.end(),
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
    if (main_rank) {
        cb.on_message = [&](const std::string& msg) { std::cerr << msg << "\n"; };
        cb.on_step = [&](const engine::StepReport& r) {
            char lr[32];
            std::snprintf(lr, sizeof lr, "%.1e", r.lr);
            bar.update(r.step, "loss " + fixed(r.loss, 3) + "  lr " + lr + "  " +
                                   format_count(r.tokens_per_second) + " tok/s  " +
                                   fixed(r.seconds, 2) + " s/step");
        };
        cb.on_eval = [&](const engine::EvalReport& e) {
            bar.finish();
            std::cerr << "step " << e.step << ": validation loss " << fixed(e.loss, 4)
                      << ", accuracy " << fixed(e.accuracy, 4) << " (" << e.masked_tokens
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
        std::cout << ", validation loss " << fixed(result.evals.front().loss, 4) << " -> "
                  << fixed(result.evals.back().loss, 4);
    std::cout << "; checkpoint " << result.checkpoint << "\n";
    return 0;
}

int cmd_curves(const Argv& argv) {
    Args args(argv, {"metric"});
    const std::string metric = args.get("metric", "loss");
    if (metric != "loss" && metric != "accuracy")
        throw UsageError("--metric must be loss or accuracy");
    if (args.positionals().empty()) throw UsageError("expected at least one RUN_DIR");
    std::map<long long, std::map<size_t, double>> table;  // step -> run -> value
    std::vector<std::string> names;
    for (const auto& dir : args.positionals()) {
        const std::string path = engine::metrics_path(dir);
        std::ifstream in(path);
        if (!in) throw engine::InputError(path, "no metrics file (is this a pretraining run directory?)");
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
            r.push_back(it == values.end() ? "-" : fixed(it->second, 4));
        }
        rows.push_back(r);
    }
    std::cout << format_table(rows);
    return 0;
}

}  // namespace cli
