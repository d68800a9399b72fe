// The local launcher of data-parallel workers (see launcher.h).
#include "launcher.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <stdexcept>
#include <thread>

#include "engine/threads.h"
#include "engine/trainer.h"

namespace cli {


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

namespace {

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

}  // namespace

std::vector<std::string> without_option(const Argv& argv, const std::string& name) {
    std::vector<std::string> out;
    const std::string flag = "--" + name;
    for (size_t i = 0; i < argv.size(); ++i) {
        if (argv[i] == flag) {
            ++i;
            continue;
        }
        if (argv[i].rfind(flag + "=", 0) == 0) continue;
        out.push_back(argv[i]);
    }
    return out;
}

std::unique_ptr<engine::DistributedContext> join_worker_group(std::string& device, int64_t& threads) {
    if (!engine::distributed_env_present()) return nullptr;
    const engine::DistributedEnv env = engine::read_distributed_env();
    if (env.world_size <= 1) return nullptr;
    if (threads <= 0) {  // torchrun's LOCAL_WORLD_SIZE: share this machine's cores
        const char* lws = std::getenv("LOCAL_WORLD_SIZE");
        threads = threads_per_worker(0, lws ? std::max(1, std::atoi(lws)) : 1);
    }
    torch::Device d = engine::resolve_device(device);
    if (d.is_cuda()) {  // one GPU per local rank
        d = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
        device = d.str();
    }
    return std::make_unique<engine::DistributedContext>(env, d);
}

long long threads_per_worker(long long requested, int nproc) {
    const long long total = requested > 0 ? requested : engine::available_cpus();
    return std::max(1LL, total / nproc);
}

int launch_local_workers(const LaunchSpec& spec) {
    const int nproc = spec.nproc;
    const int port = free_loopback_port();
    const std::vector<std::string>& child_args = spec.worker_args;
    const long long threads = spec.threads_each;
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
            std::fprintf(stderr, "tupe %s: cannot start worker %d: %s\n", spec.command.c_str(),
                         rank, std::strerror(errno));
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
        std::cerr << "tupe " << spec.command << ": error: " << failure
                  << "; stopped the other workers" << spec.failure_hint << "\n";
        return result == 0 ? 1 : result;
    }
    if (forwarded != 0) return 130;
    return 0;
}


}  // namespace cli
