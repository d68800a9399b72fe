// The local launcher of data-parallel workers (see launcher.h): the torchrun variables of a
// loopback group for each worker, started and waited for fail-fast through the process pool
// (experiments/process_pool.h), which the runner's child processes share.
#include "launcher.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "engine/threads.h"
#include "engine/trainer.h"
#include "experiments/process_pool.h"

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

std::unique_ptr<engine::DistributedContext> join_worker_group(std::string& device,
                                                              int64_t& threads) {
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
    const long long threads = spec.threads_each;
    std::cerr << "launching " << nproc << " workers (Gloo over 127.0.0.1:" << port << ", "
              << threads << " thread" << (threads == 1 ? "" : "s")
              << " each); rank 0 reports progress\n";

    experiments::GroupOutcome outcome;
    {
        // Caught from before the first worker starts until the last one is reaped; the
        // previous handlers are back when this block ends.
        const experiments::SignalCatcher signals;
        experiments::ProcessPool pool;
        for (int rank = 0; rank < nproc; ++rank) {
            experiments::ChildSpec worker;
            worker.path = "/proc/self/exe";
            worker.argv = spec.worker_args;
            worker.env = {
                {"RANK", std::to_string(rank)},        {"LOCAL_RANK", std::to_string(rank)},
                {"WORLD_SIZE", std::to_string(nproc)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
                {"MASTER_ADDR", "127.0.0.1"},          {"MASTER_PORT", std::to_string(port)}};
            worker.default_signals = true;
            const pid_t pid = pool.spawn(worker);
            if (pid < 0) {
                const int err = errno;
                std::fprintf(stderr, "tupe %s: cannot start worker %d: %s\n", spec.command.c_str(),
                             rank, std::strerror(err));
                pool.add_failed_start(127);  // reported like a worker that exits 127
                continue;
            }
            std::cerr << "rank " << rank << ": pid " << pid << "\n";
        }
        // A worker that failed only because a collective broke (kPeerFailureStatus) is a
        // victim: the rank that failed otherwise is blamed.
        experiments::FailFastOptions options;
        options.victim_exit_status = kPeerFailureStatus;
        outcome = pool.wait_all_fail_fast(signals, options);
    }
    if (outcome.failed) {
        const int rank = static_cast<int>(outcome.blamed.index);
        const std::string failure = "rank " + std::to_string(rank) + " of " +
                                    std::to_string(nproc) + " failed (" +
                                    experiments::describe_wait_status(outcome.blamed.status) + ")";
        const int result = experiments::exit_code_of(outcome.blamed.status);
        std::cerr << "tupe " << spec.command << ": error: " << failure
                  << "; stopped the other workers" << spec.failure_hint << "\n";
        return result == 0 ? 1 : result;
    }
    if (outcome.signal != 0) return 130;
    return 0;
}

}  // namespace cli
