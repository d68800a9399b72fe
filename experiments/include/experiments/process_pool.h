// The child processes of tupe, in one place: the runner's `tupe analyze` and `tupe run --job`
// children and the launcher's local data-parallel workers (cli/launcher.cpp). Children start
// with posix_spawn (no PATH search) in this process's own process group, so a Ctrl-C at the
// terminal reaches them all; optionally with extra environment variables (RANK, WORLD_SIZE,
// MASTER_PORT, ...) and stdout discarded. A group can be waited for fail-fast, as torchrun does.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace experiments {

/// Set by ProcessPool::spawn in every child's environment: the pid of the process that started
/// it. The tupe executable (die_with_parent in cli/main.cpp) removes it from its environment
/// at once and asks the kernel to kill it when that process dies (PR_SET_PDEATHSIG).
inline constexpr const char* kParentPidEnv = "TUPE_PARENT_PID";

/// How to start one child.
struct ChildSpec {
    std::vector<std::string> argv;  ///< argv[0] included.
    std::string path;               ///< The executable; empty = argv[0].
    /// Set on top of this process's environment, replacing variables of the same name.
    std::vector<std::pair<std::string, std::string>> env;
    bool discard_stdout = false;  ///< stdout to /dev/null; stderr is kept (a child says why).
    /// SIGINT and SIGTERM at their default action in the child even where this process
    /// ignores them (a `tupe ... &` of a script starts with SIGINT ignored).
    bool default_signals = false;
};

/// A child that ended.
struct ChildExit {
    size_t index = 0;  ///< Its place in start order (ProcessPool::spawn, add_failed_start).
    pid_t pid = -1;    ///< -1 for a child that never started.
    int status = 0;    ///< Its waitpid status.
};

/// How ProcessPool::wait_all_fail_fast treats a failure.
struct FailFastOptions {
    /// An exit status meaning "failed because another child did" (a data-parallel worker
    /// whose collective broke); -1 = none. When the first failure has it, the pool reaps for
    /// up to `blame_window` to find a child that failed otherwise, and blames that one.
    int victim_exit_status = -1;
    std::chrono::milliseconds blame_window{2000};
    /// After a failure the others get SIGTERM; those still running this much later, SIGKILL.
    std::chrono::milliseconds kill_after{10000};
};

/// What became of a group waited for with ProcessPool::wait_all_fail_fast.
struct GroupOutcome {
    /// A child failed while no signal had been caught (the first failure stops the others).
    bool failed = false;
    ChildExit blamed;              ///< The failure to report (when `failed`).
    int signal = 0;                ///< SIGINT or SIGTERM caught while waiting, 0 = none.
    std::vector<ChildExit> exits;  ///< Every child, in the order it was reaped.
};

/// Catches SIGINT and SIGTERM while it lives, without SA_RESTART (a blocking wait returns
/// EINTR), and puts the previous handlers back when destroyed. One at a time per process.
class SignalCatcher {
  public:
    SignalCatcher();
    ~SignalCatcher();
    SignalCatcher(const SignalCatcher&) = delete;
    SignalCatcher& operator=(const SignalCatcher&) = delete;

    /// The last signal caught since construction, 0 when none.
    int caught() const;

  private:
    struct sigaction old_int_ {};
    struct sigaction old_term_ {};
};

/// Children started by this process and not yet reaped. Waits use waitpid(-1): a child of
/// this process outside the pool is reaped and ignored.
class ProcessPool {
  public:
    /// Starts a child; returns its pid, or -1 with errno set when it cannot start (no such
    /// executable, no memory, ...).
    pid_t spawn(const ChildSpec& spec);
    /// Counts a child that could not start as one that exited with `exit_code` at once: the
    /// next wait returns it (the launcher's workers, whose exec used to fail with 127).
    void add_failed_start(int exit_code);

    /// Children started and not reaped (failed starts included until waited for).
    size_t running() const { return children_.size() + failed_starts_.size(); }
    bool empty() const { return running() == 0; }
    /// Sends `sig` to every running child.
    void signal_all(int sig) const;

    /// Blocks until a child of the pool ends (EINTR retried); nullopt when this process has
    /// no child to wait for (ECHILD).
    std::optional<ChildExit> wait_any();
    /// Blocks until the child `pid` ends (EINTR retried) and returns its status; 0 when it can
    /// no longer be waited for.
    int wait(pid_t pid);
    /// Waits for every child, fail-fast: on the first failure (see GroupOutcome::failed) the
    /// others get SIGTERM, then SIGKILL after options.kill_after. A SIGTERM caught by
    /// `signals` is forwarded to the children as SIGTERM; a SIGINT is not, as a Ctrl-C
    /// reaches the whole process group by itself. Returns once no child is left.
    GroupOutcome wait_all_fail_fast(const SignalCatcher& signals,
                                    const FailFastOptions& options = {});

  private:
    struct Child {
        size_t index;
        pid_t pid;
    };
    /// The pool's child `pid` as a ChildExit, removed from the pool; nullopt for a stranger.
    std::optional<ChildExit> take(pid_t pid, int status);

    std::vector<Child> children_;
    std::vector<ChildExit> failed_starts_;
    size_t next_index_ = 0;
};

/// "exit status N", "signal N (Terminated)", or "status N" for anything else.
std::string describe_wait_status(int status);
/// A shell's exit code for a wait status: the exit status, 128 + the signal, else 1.
int exit_code_of(int status);
/// True for a normal exit with status 0.
bool exited_ok(int status);

}  // namespace experiments
