// The process pool (see process_pool.h): posix_spawn with an optional environment, stdout
// redirect and signal defaults; waits for one child, any child, or a whole group fail-fast
// with the blame and SIGTERM-then-SIGKILL of the local data-parallel launcher.
#include "experiments/process_pool.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace experiments {

namespace {

std::atomic<int> g_caught_signal{0};
extern "C" void on_caught_signal(int sig) { g_caught_signal.store(sig); }

// This process's environment with `extra` set on top ("NAME=value" strings).
std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& extra) {
    std::vector<std::string> out;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('='));
        const bool replaced = std::any_of(extra.begin(), extra.end(),
                                          [&](const auto& kv) { return kv.first == name; });
        if (!replaced) out.push_back(entry);
    }
    for (const auto& [name, value] : extra) out.push_back(name + "=" + value);
    return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace

SignalCatcher::SignalCatcher() {
    g_caught_signal.store(0);
    struct sigaction action {};
    action.sa_handler = on_caught_signal;  // no SA_RESTART: waitpid returns EINTR
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
}

SignalCatcher::~SignalCatcher() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
}

int SignalCatcher::caught() const { return g_caught_signal.load(); }

pid_t ProcessPool::spawn(const ChildSpec& spec) {
    std::vector<std::string> args = spec.argv;
    std::vector<char*> argv = pointers(args);
    // Every child is told its parent (the tupe executable's main() asks the kernel to kill it
    // when the parent dies: PR_SET_PDEATHSIG), so a runner killed with SIGKILL leaves no child
    // writing into its run folders or recording into its store after it.
    auto with_parent = spec.env;
    with_parent.emplace_back(kParentPidEnv, std::to_string(getpid()));
    std::vector<std::string> env = environment_with(with_parent);
    std::vector<char*> envp = pointers(env);
    const std::string& path = spec.path.empty() ? spec.argv.at(0) : spec.path;

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (spec.discard_stdout)
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (spec.default_signals) {
        sigset_t defaults;
        sigemptyset(&defaults);
        sigaddset(&defaults, SIGINT);
        sigaddset(&defaults, SIGTERM);
        posix_spawnattr_setsigdefault(&attr, &defaults);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    }
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    children_.push_back({next_index_++, pid});
    return pid;
}

void ProcessPool::add_failed_start(int exit_code) {
    ChildExit e;
    e.index = next_index_++;
    e.status = (exit_code & 0xff) << 8;  // the wait status of exit(exit_code)
    failed_starts_.push_back(e);
}

void ProcessPool::signal_all(int sig) const {
    for (const auto& c : children_) ::kill(c.pid, sig);
}

std::optional<ChildExit> ProcessPool::take(pid_t pid, int status) {
    auto it = std::find_if(children_.begin(), children_.end(),
                           [&](const Child& c) { return c.pid == pid; });
    if (it == children_.end()) return std::nullopt;
    ChildExit e{it->index, pid, status};
    children_.erase(it);
    return e;
}

std::optional<ChildExit> ProcessPool::wait_any() {
    if (!failed_starts_.empty()) {
        const ChildExit e = failed_starts_.front();
        failed_starts_.erase(failed_starts_.begin());
        return e;
    }
    while (true) {
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, 0);
        if (pid > 0) {
            if (auto e = take(pid, status)) return e;
        } else if (errno != EINTR) {
            return std::nullopt;
        }
    }
}

int ProcessPool::wait(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    take(pid, status);
    return status;
}

GroupOutcome ProcessPool::wait_all_fail_fast(const SignalCatcher& signals,
                                             const FailFastOptions& options) {
    using Clock = std::chrono::steady_clock;
    GroupOutcome out;
    const auto is_victim = [&](int status) {
        return options.victim_exit_status >= 0 && WIFEXITED(status) &&
               WEXITSTATUS(status) == options.victim_exit_status;
    };
    auto note_exit = [&](const ChildExit& ended) {
        out.exits.push_back(ended);
        if (exited_ok(ended.status) || out.failed || signals.caught() != 0) return;
        // The first failure. A victim (a collective broke because of another child) gives
        // the culprit a moment to be reaped too.
        out.failed = true;
        ChildExit blamed = ended;
        const auto deadline = Clock::now() + options.blame_window;
        while (is_victim(blamed.status) && !children_.empty() && Clock::now() < deadline) {
            int st = 0;
            const pid_t p = ::waitpid(-1, &st, WNOHANG);
            if (p > 0) {
                const auto e = take(p, st);
                if (!e) continue;
                out.exits.push_back(*e);
                if (!exited_ok(st) && !is_victim(st)) blamed = *e;
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        out.blamed = blamed;
        if (!children_.empty()) signal_all(SIGTERM);
    };

    auto kill_deadline = Clock::time_point::max();
    while (!empty()) {
        const int sig = signals.caught();
        if (sig != 0 && out.signal == 0) {
            // Ctrl-C reaches the children by itself (same process group); forward the rest.
            out.signal = sig;
            if (sig != SIGINT) signal_all(SIGTERM);
        }
        if (out.failed && kill_deadline == Clock::time_point::max())
            kill_deadline = Clock::now() + options.kill_after;
        if (Clock::now() > kill_deadline) signal_all(SIGKILL);
        if (!failed_starts_.empty()) {
            const ChildExit e = failed_starts_.front();
            failed_starts_.erase(failed_starts_.begin());
            note_exit(e);
            continue;
        }
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, out.failed ? WNOHANG : 0);
        if (pid > 0) {
            if (auto e = take(pid, status)) note_exit(*e);
        } else if (pid == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        } else if (errno != EINTR) {
            break;
        }
    }
    return out;
}

std::string describe_wait_status(int status) {
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

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace experiments
