// Data parallelism over c10d (see distributed.h). The only file that includes the c10d and
// Gloo headers; it compiles against Debian's LibTorch 1.13 (where ProcessGroupGloo derives
// from c10d::ProcessGroup) and upstream LibTorch 2.x (where it derives from c10d::Backend):
// the calls used here (constructors, Options::create, allreduce, broadcast, barrier,
// Work::wait) have the same signatures in both.
#include "engine/distributed.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <utility>

#include "engine/errors.h"

#if defined(TUPE_WITH_GLOO) || defined(TUPE_WITH_NCCL)
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#endif
// The c10d headers hide their classes behind USE_C10D_*; defined here rather than on the
// command line so the engine's precompiled header stays valid for this file.
#ifdef TUPE_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef TUPE_WITH_NCCL  // Untested here (no CUDA LibTorch on the development machine).
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace engine {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

const char* env_or_null(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}

int parse_env_int(const char* name, long min, long max) {
    const char* v = env_or_null(name);
    if (!v) throw DistributedError(std::string(name) + " is not set");
    errno = 0;
    char* end = nullptr;
    const long value = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || value < min || value > max)
        throw DistributedError(std::string(name) + "='" + v + "' is not an integer in [" +
                               std::to_string(min) + ", " + std::to_string(max) + "]");
    return static_cast<int>(value);
}

bool is_loopback(const std::string& host) {
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

bool distributed_env_present() {
    return env_or_null("WORLD_SIZE") != nullptr || env_or_null("RANK") != nullptr;
}

DistributedEnv read_distributed_env() {
    DistributedEnv env;
    env.world_size = parse_env_int("WORLD_SIZE", 1, 1 << 20);
    env.rank = parse_env_int("RANK", 0, env.world_size - 1);
    env.local_rank = env_or_null("LOCAL_RANK") ? parse_env_int("LOCAL_RANK", 0, 1 << 20) : env.rank;
    const char* addr = env_or_null("MASTER_ADDR");
    if (!addr)
        throw DistributedError(
            "MASTER_ADDR is not set (the host of rank 0, e.g. 127.0.0.1; "
            "RANK=" +
            std::to_string(env.rank) + " WORLD_SIZE=" + std::to_string(env.world_size) + ")");
    env.master_addr = addr;
    env.master_port = parse_env_int("MASTER_PORT", 1, 65535);
    return env;
}

std::chrono::milliseconds distributed_timeout() {
    if (!env_or_null("TUPE_DIST_TIMEOUT")) return std::chrono::seconds(1800);
    return std::chrono::seconds(parse_env_int("TUPE_DIST_TIMEOUT", 1, 7 * 24 * 3600));
}

int64_t gradient_bucket_bytes() {
    if (!env_or_null("TUPE_DIST_BUCKET_KB")) return 25LL << 20;
    return static_cast<int64_t>(parse_env_int("TUPE_DIST_BUCKET_KB", 1, 1 << 22)) << 10;
}

bool gradient_overlap() {
    return !env_or_null("TUPE_DIST_OVERLAP") || parse_env_int("TUPE_DIST_OVERLAP", 0, 1) == 1;
}

#if defined(TUPE_WITH_GLOO) || defined(TUPE_WITH_NCCL)

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;  // 2.x: Gloo and NCCL are Backends of a ProcessGroup
#else
using BackendBase = c10d::ProcessGroup;  // 1.13: they are ProcessGroups themselves
#endif

struct DistributedContext::Impl {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<BackendBase> group;
    std::string backend;
    std::vector<c10::intrusive_ptr<c10d::Work>> in_flight;
};

DistributedContext::DistributedContext(const DistributedEnv& env, torch::Device device,
                                       std::chrono::milliseconds timeout)
    : env_(env), device_(device), timeout_(timeout), impl_(std::make_unique<Impl>()) {
    const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
    // Under torchrun the elastic agent already hosts the store on MASTER_PORT and every
    // worker is a client under a per-restart prefix (torch.distributed.rendezvous does the same).
    const char* agent_store = env_or_null("TORCHELASTIC_USE_AGENT_STORE");
    const bool use_agent_store = agent_store && std::string(agent_store) == "True";
    try {
        c10d::TCPStoreOptions options;
        options.port = static_cast<std::uint16_t>(env.master_port);
        options.isServer = env.rank == 0 && !use_agent_store;
        options.numWorkers = static_cast<std::size_t>(env.world_size);
        options.waitWorkers = !use_agent_store;
        options.timeout = timeout;
        impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
        if (use_agent_store) {
            const char* attempt = env_or_null("TORCHELASTIC_RESTART_COUNT");
            impl_->store = c10::make_intrusive<c10d::PrefixStore>(
                "/worker/attempt_" + std::string(attempt ? attempt : "0"), impl_->store);
        }
    } catch (const std::exception& e) {
        throw DistributedError(
            "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
            ": rendezvous at " + where + " failed within " +
            std::to_string(timeout.count() / 1000) + " s (" + first_line(e.what()) +
            "); are all WORLD_SIZE workers started with the same MASTER_ADDR/MASTER_PORT?");
    }
    try {
        if (device.is_cuda()) {
#ifdef TUPE_WITH_NCCL
            c10::cuda::set_device(static_cast<c10::DeviceIndex>(device.index()));
            auto options = c10d::ProcessGroupNCCL::Options::create();
            options->timeout = timeout;
            impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env.rank,
                                                                       env.world_size, options);
            impl_->backend = "nccl";
#else
            throw DistributedError(
                "this build has no NCCL (configure with -DTUPE_WITH_NCCL=ON "
                "against a CUDA LibTorch) but train.device is " +
                device.str());
#endif
        } else {
#ifdef TUPE_WITH_GLOO
            auto options = c10d::ProcessGroupGloo::Options::create(timeout);
            if (const char* ifname = env_or_null("GLOO_SOCKET_IFNAME"))
                options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
            else if (is_loopback(env.master_addr))
                options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
            else
                options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
            options->threads = 2;
            impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank,
                                                                       env.world_size, options);
            impl_->backend = "gloo";
#else
            throw DistributedError(
                "this build has no Gloo (its headers were not found at "
                "configure time), so CPU training cannot be distributed");
#endif
        }
    } catch (const DistributedError&) {
        throw;
    } catch (const std::exception& e) {
        throw DistributedError("rank " + std::to_string(env.rank) + " of " +
                               std::to_string(env.world_size) +
                               ": cannot connect the process "
                               "group through " +
                               where + ": " + first_line(e.what()));
    }
}

DistributedContext::~DistributedContext() = default;

std::string DistributedContext::backend_name() const { return impl_->backend; }

void DistributedContext::fail(const std::string& what, const std::exception& e) const {
    throw DistributedError(
        "rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world_size) + ": " +
        what + " failed (" + first_line(e.what()) + "); another worker probably died or hung " +
        "(timeout " + std::to_string(timeout_.count() / 1000) + " s); see its own error");
}

void DistributedContext::start_all_reduce_sum_(torch::Tensor tensor) {
    std::vector<torch::Tensor> tensors = {std::move(tensor)};
    c10d::AllreduceOptions options;  // reduceOp defaults to SUM
    try {
        impl_->in_flight.push_back(impl_->group->allreduce(tensors, options));
    } catch (const std::exception& e) {
        fail("all-reduce", e);
    }
}

void DistributedContext::wait_all(const std::string& what) {
    auto works = std::move(impl_->in_flight);
    impl_->in_flight.clear();
    try {
        for (auto& w : works) w->wait(timeout_);
    } catch (const std::exception& e) {
        fail(what, e);
    }
}

void DistributedContext::all_reduce_sum_(torch::Tensor tensor) {
    start_all_reduce_sum_(std::move(tensor));
    wait_all("all-reduce");
}

std::vector<double> DistributedContext::all_reduce_sum(const std::vector<double>& values) {
    if (values.empty()) return {};
    // float64 on the CPU for Gloo (exact for counts below 2^53); NCCL needs a device tensor.
    auto t = torch::tensor(values, torch::kDouble).to(device_);
    all_reduce_sum_(t);
    t = t.cpu();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

void DistributedContext::broadcast(const std::vector<torch::Tensor>& tensors) {
    torch::NoGradGuard no_grad;
    constexpr int64_t kBucketBytes = 25LL << 20;
    size_t i = 0;
    while (i < tensors.size()) {
        // A bucket: consecutive tensors of one dtype, about kBucketBytes.
        std::vector<torch::Tensor> group;
        int64_t bytes = 0;
        const auto dtype = tensors[i].scalar_type();
        while (i < tensors.size() && tensors[i].scalar_type() == dtype &&
               (group.empty() || bytes + tensors[i].nbytes() <= kBucketBytes)) {
            bytes += static_cast<int64_t>(tensors[i].nbytes());
            group.push_back(tensors[i++]);
        }
        std::vector<torch::Tensor> flat_parts;
        for (const auto& t : group) flat_parts.push_back(t.reshape(-1));
        std::vector<torch::Tensor> buffer = {torch::cat(flat_parts)};
        c10d::BroadcastOptions options;
        options.rootRank = 0;
        try {
            impl_->group->broadcast(buffer, options)->wait(timeout_);
        } catch (const std::exception& e) {
            fail("broadcast of rank 0's parameters", e);
        }
        int64_t offset = 0;
        for (auto& t : group) {
            t.copy_(buffer[0].narrow(0, offset, t.numel()).view_as(t));
            offset += t.numel();
        }
    }
}

void DistributedContext::barrier() {
    try {
        impl_->group->barrier()->wait(timeout_);
    } catch (const std::exception& e) {
        fail("barrier", e);
    }
}

#else  // No c10d backend in this build: every constructor fails with the reason.

struct DistributedContext::Impl {};

DistributedContext::DistributedContext(const DistributedEnv& env, torch::Device device,
                                       std::chrono::milliseconds timeout)
    : env_(env), device_(device), timeout_(timeout) {
    throw DistributedError(
        "this build of TUPE Workbench has no c10d backend (Gloo headers "
        "were not found at configure time); distributed training is off");
}
DistributedContext::~DistributedContext() = default;
std::string DistributedContext::backend_name() const { return "none"; }
void DistributedContext::fail(const std::string& what, const std::exception& e) const {
    throw DistributedError(what + ": " + e.what());
}
void DistributedContext::start_all_reduce_sum_(torch::Tensor) {}
void DistributedContext::wait_all(const std::string&) {}
void DistributedContext::all_reduce_sum_(torch::Tensor) {}
std::vector<double> DistributedContext::all_reduce_sum(const std::vector<double>& v) { return v; }
void DistributedContext::broadcast(const std::vector<torch::Tensor>&) {}
void DistributedContext::barrier() {}

#endif

// ---- GradientReducer ------------------------------------------------------------------

GradientReducer::GradientReducer(DistributedContext& context, std::vector<torch::Tensor> params,
                                 int64_t bucket_bytes, bool overlap)
    : context_(context), overlap_(overlap) {
    for (auto& p : params)
        if (p.requires_grad()) params_.push_back(p);
    // Buckets in reverse registration order: backward produces the last layers' gradients
    // first, so the first bucket fills first (the order torch's DDP uses too).
    bucket_of_.assign(params_.size(), 0);
    for (size_t k = params_.size(); k-- > 0;) {
        const auto& p = params_[k];
        const int64_t bytes = static_cast<int64_t>(p.numel() * p.element_size());
        if (buckets_.empty() ||
            buckets_.back().flat.numel() * buckets_.back().flat.element_size() + bytes >
                bucket_bytes ||
            buckets_.back().flat.scalar_type() != p.scalar_type()) {
            buckets_.emplace_back();
            buckets_.back().flat = torch::empty({0}, p.options().requires_grad(false));
        }
        Bucket& b = buckets_.back();
        b.offsets.push_back(b.flat.numel());
        b.members.push_back(k);
        b.flat = torch::empty({b.flat.numel() + p.numel()}, b.flat.options());
        bucket_of_[k] = buckets_.size() - 1;
    }
    passes_seen_.assign(params_.size(), 0);
    filled_.assign(params_.size(), false);
    if (overlap_) {
        for (size_t k = 0; k < params_.size(); ++k)
            hook_ids_.push_back(
                params_[k].register_hook([this, k](torch::Tensor grad) { on_grad(k, grad); }));
    }
}

GradientReducer::~GradientReducer() {
    for (size_t k = 0; k < hook_ids_.size(); ++k) params_[k].remove_hook(hook_ids_[k]);
}

void GradientReducer::begin_step(int64_t backward_passes) {
    armed_ = true;
    agreed_ = false;
    passes_ = std::max<int64_t>(1, backward_passes);
    next_launch_ = 0;
    std::fill(passes_seen_.begin(), passes_seen_.end(), 0);
    std::fill(filled_.begin(), filled_.end(), false);
    for (auto& b : buckets_) b.pending = b.members.size();
}

void GradientReducer::agree_finite(bool finite) {
    agreed_ = true;
    const double all = context_.all_reduce_sum({finite ? 1.0 : 0.0})[0];
    if (all < context_.world_size() - 0.5) {
        armed_ = false;
        throw TrainingDiverged("rank " + std::to_string(context_.rank()) +
                               ": the MLM loss was not finite on another rank; no update made "
                               "(see that rank's error)");
    }
}

void GradientReducer::report_non_finite(const std::string& message) {
    armed_ = false;
    if (!agreed_) {
        agreed_ = true;
        context_.all_reduce_sum({0.0});
    }
    throw TrainingDiverged(message);
}

// Runs inside backward (the autograd thread) with this pass's gradient of params_[index],
// before autograd adds it to .grad: the step's full gradient is grad + .grad.
void GradientReducer::on_grad(size_t index, const torch::Tensor& grad) {
    if (!armed_ || ++passes_seen_[index] < passes_) return;
    if (!agreed_) agree_finite(true);
    torch::NoGradGuard no_grad;
    Bucket& b = buckets_[bucket_of_[index]];
    const size_t slot = static_cast<size_t>(std::find(b.members.begin(), b.members.end(), index) -
                                            b.members.begin());
    auto view = b.flat.narrow(0, b.offsets[slot], params_[index].numel());
    view.copy_(grad.reshape(-1));
    const auto& accumulated = params_[index].grad();
    if (accumulated.defined()) view.add_(accumulated.reshape(-1));
    filled_[index] = true;
    if (--b.pending == 0) launch_ready();
}

void GradientReducer::launch_ready() {
    // Launch order must be the same on every rank (c10d matches collectives by order), so a
    // full bucket waits until every bucket before it has been launched.
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0)
        context_.start_all_reduce_sum_(buckets_[next_launch_++].flat);
}

void GradientReducer::finish_step() {
    if (!armed_) throw std::logic_error("GradientReducer::finish_step without begin_step");
    if (!agreed_) agree_finite(true);
    torch::NoGradGuard no_grad;
    // Parameters whose hook did not fire (no gradient in the last pass, or overlap off).
    for (auto& b : buckets_) {
        if (b.pending == 0) continue;
        for (size_t s = 0; s < b.members.size(); ++s) {
            const size_t k = b.members[s];
            if (filled_[k]) continue;
            auto view = b.flat.narrow(0, b.offsets[s], params_[k].numel());
            const auto& g = params_[k].grad();
            if (g.defined()) {
                view.copy_(g.reshape(-1));
            } else {
                view.zero_();
            }
            filled_[k] = g.defined();
        }
        b.pending = 0;
    }
    launch_ready();
    context_.wait_all("gradient all-reduce");
    for (auto& b : buckets_) {
        for (size_t s = 0; s < b.members.size(); ++s) {
            auto& p = params_[b.members[s]];
            auto sum = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
            if (p.grad().defined()) {
                p.mutable_grad().copy_(sum);
            } else if (sum.ne(0).any().item<bool>()) {
                // Another rank produced a gradient this rank did not: take the sum.
                p.mutable_grad() = sum.clone();
            }
        }
    }
    armed_ = false;
}

}  // namespace engine
