// `tupe pretrain` (one variant, with a progress bar; Ctrl-C checkpoints and stops), its
// data-parallel faces (`--nproc-per-node N` launches N local workers of this executable; a
// worker started by torchrun/Slurm finds its group in RANK/WORLD_SIZE/MASTER_ADDR/...), and
// `tupe curves` (validation curves of several runs side by side).
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/trainer.h"
#include "experiments/config_loader.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

// A worker's exit status when a collective failed because of another worker: the launcher
// blames a rank that failed with any other status first.
constexpr int kPeerFailureStatus = 3;

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

// A TCP port on 127.0.0.1 that is free now (the kernel picks it; rank 0 binds it again a
// moment later, as torchrun's own --standalone does).
int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const std::string err = std::strerror(errno);
        ::close(fd);
        throw std::runtime_error("cannot find a free port on 127.0.0.1: " + err);
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

std::atomic<int> g_launcher_signal{0};
extern "C" void launcher_on_signal(int sig) { g_launcher_signal.store(sig); }

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    }
    return "status " + std::to_string(status);
}

int exit_code_of(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// `--nproc-per-node N`: N workers of this executable on this machine, fail-fast. Returns the
// job's exit status: 0, the first failing rank's status, or 130 when stopped by a signal.
int launch_local_workers(const Argv& argv, int nproc, const engine::PretrainConfig& config) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const long long threads = std::max<long long>(
        1, (config.train.threads > 0 ? config.train.threads : static_cast<long long>(hw)) / nproc);
    const int port = free_loopback_port();
    // The workers' arguments: ours without --nproc-per-node, plus their share of the threads.
    std::vector<std::string> child_args = {"tupe", "pretrain"};
    for (size_t i = 0; i < argv.size(); ++i) {
        if (argv[i] == "--nproc-per-node") {
            ++i;
            continue;
        }
        if (argv[i].rfind("--nproc-per-node=", 0) == 0) continue;
        child_args.push_back(argv[i]);
    }
    child_args.push_back("--set");
    child_args.push_back("train.threads=" + std::to_string(threads));
    std::cerr << "launching " << nproc << " workers (Gloo over 127.0.0.1:" << port << ", "
              << threads << " thread" << (threads == 1 ? "" : "s")
              << " each); rank 0 reports progress\n";

    struct sigaction action {};
    action.sa_handler = launcher_on_signal;  // no SA_RESTART: waitpid returns EINTR
    sigemptyset(&action.sa_mask);
    struct sigaction old_int {}, old_term {};
    sigaction(SIGINT, &action, &old_int);
    sigaction(SIGTERM, &action, &old_term);

    std::map<pid_t, int> rank_of;
    for (int rank = 0; rank < nproc; ++rank) {
        const pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
        if (pid == 0) {
            ::setenv("RANK", std::to_string(rank).c_str(), 1);
            ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
            ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
            ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
            ::setenv("MASTER_ADDR", "127.0.0.1", 1);
            ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
            std::signal(SIGINT, SIG_DFL);
            std::signal(SIGTERM, SIG_DFL);
            std::vector<char*> cargv;
            for (auto& a : child_args) cargv.push_back(const_cast<char*>(a.c_str()));
            cargv.push_back(nullptr);
            ::execv("/proc/self/exe", cargv.data());
            std::fprintf(stderr, "tupe pretrain: cannot start worker %d: %s\n", rank,
                         std::strerror(errno));
            ::_exit(127);
        }
        rank_of[pid] = rank;
        std::cerr << "rank " << rank << ": pid " << pid << "\n";
    }

    auto signal_all = [&](int sig) {
        for (const auto& [pid, rank] : rank_of) ::kill(pid, sig);
    };
    int forwarded = 0;
    int result = 0;
    bool failed = false;
    std::string failure;
    std::map<int, int> statuses;  // rank -> wait status, in the order they ended
    auto note_exit = [&](pid_t pid, int status) {
        const int rank = rank_of[pid];
        rank_of.erase(pid);
        statuses[rank] = status;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (ok || failed || g_launcher_signal.load() != 0) return;
        // The first failure. A worker that failed only because a collective broke
        // (kPeerFailureStatus) is a victim: give the culprit a moment to be reaped too.
        failed = true;
        int blamed = rank, blamed_status = status;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (WIFEXITED(blamed_status) && WEXITSTATUS(blamed_status) == kPeerFailureStatus &&
               !rank_of.empty() && std::chrono::steady_clock::now() < deadline) {
            int st = 0;
            const pid_t p = ::waitpid(-1, &st, WNOHANG);
            if (p > 0) {
                const int r = rank_of[p];
                rank_of.erase(p);
                statuses[r] = st;
                if (!(WIFEXITED(st) && (WEXITSTATUS(st) == 0 ||
                                        WEXITSTATUS(st) == kPeerFailureStatus))) {
                    blamed = r;
                    blamed_status = st;
                }
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        failure = "rank " + std::to_string(blamed) + " of " + std::to_string(nproc) +
                  " failed (" + describe_status(blamed_status) + ")";
        result = exit_code_of(blamed_status);
        if (!rank_of.empty()) signal_all(SIGTERM);
    };

    auto kill_deadline = std::chrono::steady_clock::time_point::max();
    while (!rank_of.empty()) {
        const int sig = g_launcher_signal.load();
        if (sig != 0 && forwarded == 0) {
            // Ctrl-C reaches the workers by itself (same process group); forward the rest.
            forwarded = sig;
            if (sig != SIGINT) signal_all(SIGTERM);
        }
        if (failed && kill_deadline == std::chrono::steady_clock::time_point::max())
            kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        if (std::chrono::steady_clock::now() > kill_deadline) signal_all(SIGKILL);
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, failed ? WNOHANG : 0);
        if (pid > 0) {
            note_exit(pid, status);
        } else if (pid == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        } else if (errno != EINTR) {
            break;
        }
    }
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (failed) {
        std::cerr << "tupe pretrain: error: " << failure << "; stopped the other workers; the "
                  << "last checkpoint in " << config.out_dir
                  << " is kept (run the same command to resume)\n";
        return result == 0 ? 1 : result;
    }
    if (forwarded != 0) return 130;
    return 0;
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
        if (n > 1) return launch_local_workers(argv, static_cast<int>(n), config);
    }

    // A worker of a group (our own launcher, torchrun, srun ...): the torchrun variables.
    std::unique_ptr<engine::DistributedContext> group;
    if (engine::distributed_env_present()) {
        const engine::DistributedEnv env = engine::read_distributed_env();
        if (env.world_size > 1) {
            // torchrun's LOCAL_WORLD_SIZE: share this machine's cores when threads is auto.
            if (config.train.threads <= 0) {
                const char* lws = std::getenv("LOCAL_WORLD_SIZE");
                const long long local = lws ? std::max(1LL, std::atoll(lws)) : 1LL;
                config.train.threads = std::max<long long>(
                    1, std::max(1u, std::thread::hardware_concurrency()) / local);
            }
            torch::Device device = engine::resolve_device(config.train.device);
            if (device.is_cuda()) {  // one GPU per local rank
                device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
                config.train.device = device.str();
            }
            try {
                group = std::make_unique<engine::DistributedContext>(env, device);
            } catch (const engine::DistributedError& e) {
                std::cerr << "tupe pretrain: error: " << e.what() << "\n";
                return kPeerFailureStatus;
            }
        }
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
