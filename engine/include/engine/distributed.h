// Data parallelism over torch's own c10d: a process group found through the torchrun
// convention (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and a c10d TCPStore
// rendezvous, ProcessGroupGloo on CPU (NCCL for CUDA devices when built with TUPE_WITH_NCCL),
// and a bucketed gradient all-reduce that overlaps with the backward pass through gradient
// hooks. The c10d headers stay inside distributed.cpp: this header needs only <torch/torch.h>.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace engine {

/// A distributed setting that is missing or malformed (names the variable), a rendezvous that
/// failed, or a collective that failed or timed out because a peer died (names this rank).
class DistributedError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// The torchrun convention. LOCAL_RANK defaults to RANK when unset (single machine).
struct DistributedEnv {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;
    std::string master_addr;
    int master_port = 0;
};

/// True when WORLD_SIZE or RANK is set: this process is meant to be one worker of a group.
bool distributed_env_present();

/// Reads and validates RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. Throws
/// DistributedError naming the first variable that is missing or invalid.
DistributedEnv read_distributed_env();

/// Seconds to wait for the rendezvous and for every collective before failing the job:
/// TUPE_DIST_TIMEOUT (seconds) when set, else 1800 (torch's default). A dead peer is noticed at
/// once (its sockets close); the timeout covers a peer that hangs.
std::chrono::milliseconds distributed_timeout();

/// Gradient bucket size: TUPE_DIST_BUCKET_KB (KiB) when set, else 25 MiB (DDP's default).
int64_t gradient_bucket_bytes();
/// Whether the all-reduce overlaps with backward: TUPE_DIST_OVERLAP=0 turns it off.
bool gradient_overlap();

/// One process of a data-parallel group. Every collective must be called by all ranks in the
/// same order (the c10d rule); a failure throws DistributedError naming this rank.
class DistributedContext {
  public:
    /// Rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 hosts the TCPStore) and the process
    /// group for `device`: Gloo for CPU tensors, NCCL for CUDA ones (when built with NCCL).
    DistributedContext(const DistributedEnv& env, torch::Device device,
                       std::chrono::milliseconds timeout = distributed_timeout());
    ~DistributedContext();
    DistributedContext(const DistributedContext&) = delete;
    DistributedContext& operator=(const DistributedContext&) = delete;

    int rank() const { return env_.rank; }
    int world_size() const { return env_.world_size; }
    int local_rank() const { return env_.local_rank; }
    bool is_main() const { return env_.rank == 0; }
    torch::Device device() const { return device_; }
    std::string backend_name() const;

    /// Rank 0's values copied into `tensors` on every rank, in place (one bucket at a time).
    void broadcast(const std::vector<torch::Tensor>& tensors);
    /// Element-wise sum over ranks of a small vector of numbers (counts, losses, flags).
    std::vector<double> all_reduce_sum(const std::vector<double>& values);
    /// In-place sum over ranks of one dense tensor on this context's device.
    void all_reduce_sum_(torch::Tensor tensor);
    void barrier();

    /// Starts an asynchronous in-place sum (used by GradientReducer); wait with wait_all().
    void start_all_reduce_sum_(torch::Tensor tensor);
    /// Waits for every asynchronous operation started since the last wait_all().
    void wait_all(const std::string& what);

  private:
    struct Impl;
    [[noreturn]] void fail(const std::string& what, const std::exception& e) const;
    DistributedEnv env_;
    torch::Device device_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<Impl> impl_;
};

/// Sums the gradients of `params` over all ranks, in flat buckets of about `bucket_bytes`.
/// With `overlap`, a hook on each parameter copies its gradient into its bucket during the
/// last backward pass of a step and launches the bucket's all-reduce as soon as the bucket
/// is full (buckets are launched in a fixed order, the same on every rank), so communication
/// runs while backward continues; finish_step() launches the rest, waits and writes the sums
/// back into .grad. Without `overlap` everything happens in finish_step().
///
/// Before the first bucket of a step is launched, the ranks agree that every rank's loss was
/// finite (one flag all-reduce); a rank whose loss was not finite calls report_non_finite()
/// instead of finishing, and every rank then throws, none updates.
class GradientReducer {
  public:
    GradientReducer(DistributedContext& context, std::vector<torch::Tensor> params,
                    int64_t bucket_bytes = gradient_bucket_bytes(),
                    bool overlap = gradient_overlap());
    ~GradientReducer();
    GradientReducer(const GradientReducer&) = delete;
    GradientReducer& operator=(const GradientReducer&) = delete;

    /// Arms the hooks for one optimizer step made of `backward_passes` backward calls
    /// (gradient-accumulation micro-batches); only the last pass's gradients are reduced.
    void begin_step(int64_t backward_passes);
    /// After the last backward: launches the remaining buckets, waits, writes the sums into
    /// each parameter's .grad. Throws std::runtime_error if some rank's loss was not finite.
    void finish_step();
    /// Called instead of finish_step() by a rank whose loss was not finite; always throws.
    [[noreturn]] void report_non_finite(const std::string& message);

    int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

  private:
    struct Bucket {
        std::vector<size_t> members;  ///< Indices into params_.
        std::vector<int64_t> offsets;
        torch::Tensor flat;
        size_t pending = 0;
    };
    void on_grad(size_t index, const torch::Tensor& grad);
    void agree_finite(bool finite);
    void launch_ready();

    DistributedContext& context_;
    std::vector<torch::Tensor> params_;
    std::vector<size_t> bucket_of_;
    std::vector<int64_t> passes_seen_;
    std::vector<bool> filled_;
    std::vector<Bucket> buckets_;
    std::vector<unsigned> hook_ids_;
    bool overlap_;
    bool armed_ = false;
    bool agreed_ = false;
    int64_t passes_ = 1;
    size_t next_launch_ = 0;
};

}  // namespace engine
