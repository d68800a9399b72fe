// Data-parallel workers on this machine: `tupe pretrain --nproc-per-node N` and
// `tupe run ... --nproc-per-node N` start N copies of this executable with the torchrun
// variables of a loopback group (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), fail fast, and name the rank that failed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "engine/distributed.h"

namespace cli {

/// A worker's exit status when a collective failed because of another worker: the launcher
/// blames a rank that failed with any other status first.
constexpr int kPeerFailureStatus = 3;

struct LaunchSpec {
    std::string command;                   ///< "pretrain" or "run", for messages.
    std::vector<std::string> worker_args;  ///< argv of each worker, argv[0] included.
    int nproc = 2;
    long long threads_each = 1;  ///< For the launch message.
    std::string failure_hint;    ///< Appended to the failure line, e.g. "; ...resume".
};

/// Starts the workers (/proc/self/exe), forwards SIGTERM, and on the first failure stops the
/// others (SIGTERM, then SIGKILL after 10 s). Returns 0, the failing rank's exit status, or
/// 130 when stopped by a signal.
int launch_local_workers(const LaunchSpec& spec);

/// argv without `--name VALUE` / `--name=VALUE`.
std::vector<std::string> without_option(const Argv& argv, const std::string& name);

/// This process's group when it is one worker of several (torchrun variables set, WORLD_SIZE
/// > 1; else null). `device` ("cpu", "cuda", "auto", ...) picks Gloo or NCCL; a CUDA worker
/// takes GPU LOCAL_RANK and `device` is rewritten to it. `threads` 0 becomes this machine's
/// CPUs shared by LOCAL_WORLD_SIZE workers. Throws engine::DistributedError.
std::unique_ptr<engine::DistributedContext> join_worker_group(std::string& device,
                                                              int64_t& threads);

/// Each worker's intra-op threads: `requested` (or the machine's CPUs when 0) shared by nproc.
long long threads_per_worker(long long requested, int nproc);

}  // namespace cli
