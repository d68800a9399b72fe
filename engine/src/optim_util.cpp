// Optimisation helpers shared by pretraining and fine-tuning (see optim_util.h). The autocast
// API was renamed in LibTorch 2.4; both spellings are supported here and only here.
#include "optim_util.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/fused_train_ops.h"
#include "engine/torch_compat.h"
#include "simd_lanes.h"

#ifdef TUPE_SIMD_LANES
#define TUPE_ADAMW_INLINE TUPE_INLINE
#else
#define TUPE_ADAMW_INLINE inline
#endif

namespace engine::detail {

AutocastGuard::AutocastGuard(const std::string& dtype, torch::Device device, const char* key) {
    if (dtype == "fp32") return;
    const auto type = dtype == "bf16" ? at::kBFloat16 : at::kHalf;
    TORCH_CHECK(dtype == "bf16" || dtype == "fp16", key, ": expected fp32, bf16 or fp16, got ",
                dtype);
    TORCH_CHECK(device.is_cuda() || type == at::kBFloat16, key,
                ": fp16 needs a CUDA device; use bf16 on CPU");
    cuda_ = device.is_cuda();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    const auto kind = cuda_ ? at::kCUDA : at::kCPU;
    at::autocast::set_autocast_dtype(kind, type);
    at::autocast::set_autocast_enabled(kind, true);
#else
    if (cuda_) {
        at::autocast::set_autocast_gpu_dtype(type);
        at::autocast::set_enabled(true);
    } else {
        at::autocast::set_autocast_cpu_dtype(type);
        at::autocast::set_cpu_enabled(true);
    }
#endif
    active_ = true;
}

AutocastGuard::~AutocastGuard() {
    if (!active_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(cuda_ ? at::kCUDA : at::kCPU, false);
#else
    if (cuda_)
        at::autocast::set_enabled(false);
    else
        at::autocast::set_cpu_enabled(false);
#endif
    at::autocast::clear_cache();
}

double linear_warmup_decay(double peak, int64_t step, int64_t warmup_steps, int64_t total_steps) {
    if (warmup_steps > 0 && step < warmup_steps)
        return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
    return peak * std::max(0.0, static_cast<double>(total_steps - step) / span);
}

double scheduled_lr(const std::string& schedule, double peak, int64_t step, int64_t warmup_steps,
                    int64_t total_steps, double decay_fraction) {
    if (schedule == "linear") return linear_warmup_decay(peak, step, warmup_steps, total_steps);
    if (schedule != "wsd" && schedule != "wsd-sqrt")
        throw std::invalid_argument("train.schedule must be linear, wsd or wsd-sqrt, got '" +
                                    schedule + "'");
    if (warmup_steps > 0 && step < warmup_steps)
        return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const int64_t decay_steps = std::max<int64_t>(
        1, std::min(total_steps - warmup_steps,
                    static_cast<int64_t>(std::llround(decay_fraction * total_steps))));
    const int64_t decay_start = total_steps - decay_steps;
    if (step < decay_start) return peak;
    const double p =
        std::min(1.0, static_cast<double>(step - decay_start) / static_cast<double>(decay_steps));
    return peak * std::max(0.0, schedule == "wsd" ? 1.0 - p : 1.0 - std::sqrt(p));
}

bool no_weight_decay(const std::string& name) {
    // No decay on LayerNorm weights and on biases (BERT's convention).
    auto ends_with = [&](const std::string& s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    return ends_with("bias") || name.find("LayerNorm") != std::string::npos ||
           name.find("layer_norm") != std::string::npos || name.find("pos_ln") != std::string::npos;
}

torch::optim::AdamW make_adamw(torch::nn::Module& module, const AdamWSettings& s) {
    std::vector<torch::Tensor> decay, no_decay;
    for (const auto& item : module.named_parameters())
        (no_weight_decay(item.key()) ? no_decay : decay).push_back(item.value());
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(s.weight_decay));
    groups.emplace_back(no_decay, options(0.0));
    return torch::optim::AdamW(groups, torch::optim::AdamWOptions(s.lr));
}

void set_lr(torch::optim::AdamW& optimizer, double lr) {
    for (auto& group : optimizer.param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

namespace {

bool fusable(const torch::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat &&
           t.is_contiguous() && !t.is_sparse();
}

// One parameter's update: elements [i0, i1) of p, grad, exp_avg and exp_avg_sq, in the order
// of torch's tensor ops (no FMA), so each element rounds as torch's AdamW rounds it.
struct AdamWUpdate {
    float* pw;
    const float* gw;
    float *mw, *vw;
    float decay, b1, c1, b2, c2, sqrt_bias2, eps, step_size, scale;
    bool decayed, scaled;

    TUPE_ADAMW_INLINE void element(int64_t i) const {
        const float g = scaled ? gw[i] * scale : gw[i];
        float w = decayed ? pw[i] * decay : pw[i];
        const float m = mw[i] * b1 + g * c1;
        const float v = vw[i] * b2 + g * g * c2;
        mw[i] = m;
        vw[i] = v;
        w += step_size * (m / (std::sqrt(v) / sqrt_bias2 + eps));
        pw[i] = w;
    }

    TUPE_ADAMW_INLINE void run(int64_t i0, int64_t i1) const {
        int64_t i = i0;
#ifdef TUPE_SIMD_LANES
        using namespace lanes;
        for (; i + kLanes <= i1; i += kLanes) {
            F8 g = load(gw + i);
            if (scaled) g = g * splat(scale);
            F8 w = load(pw + i);
            if (decayed) w = w * splat(decay);
            const F8 m = load(mw + i) * splat(b1) + g * splat(c1);
            const F8 v = load(vw + i) * splat(b2) + g * g * splat(c2);
            store(m, mw + i);
            store(v, vw + i);
            w += splat(step_size) * (m / (sqrt8(v) / splat(sqrt_bias2) + splat(eps)));
            store(w, pw + i);
        }
#endif
        for (; i < i1; ++i) element(i);
    }
};

void run_adamw(const AdamWUpdate& k, int64_t n) {
#ifdef TUPE_SIMD_LANES
    if (fused_training_enabled()) return lanes::parallel_items(k, n, 16384);
#endif
    at::parallel_for(0, n, 16384, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) k.element(i);
    });
}

}  // namespace

bool fused_adamw_step(torch::optim::AdamW& optimizer, double grad_scale) {
    auto& state = optimizer.state();
    // Check everything first, so that the step is either fused for all parameters or left to
    // torch for all of them.
    for (auto& group : optimizer.param_groups()) {
        const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
        if (o.amsgrad()) return false;
        for (auto& p : group.params()) {
            if (!p.grad().defined()) continue;
            if (!fusable(p) || !fusable(p.grad())) return false;
            auto it = state.find(compat::optimizer_state_key(p));
            if (it != state.end()) {
                auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
                if (!fusable(s.exp_avg()) || !fusable(s.exp_avg_sq())) return false;
            }
        }
    }
    torch::NoGradGuard no_grad;
    for (auto& group : optimizer.param_groups()) {
        const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
        const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
        for (auto& p : group.params()) {
            if (!p.grad().defined()) continue;
            const auto key = compat::optimizer_state_key(p);
            auto it = state.find(key);
            if (it == state.end()) {
                auto fresh = std::make_unique<torch::optim::AdamWParamState>();
                fresh->step(0);
                fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
                fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
                it = state.emplace(key, std::move(fresh)).first;
            }
            auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
            s.step(s.step() + 1);
            const double bias1 = 1 - std::pow(beta1, static_cast<double>(s.step()));
            const double bias2 = 1 - std::pow(beta2, static_cast<double>(s.step()));
            // The same constants, rounded to float, as torch's tensor ops use.
            const float decay = static_cast<float>(1 - o.lr() * o.weight_decay());
            const float b1 = static_cast<float>(beta1), c1 = static_cast<float>(1 - beta1);
            const float b2 = static_cast<float>(beta2), c2 = static_cast<float>(1 - beta2);
            const float sqrt_bias2 = static_cast<float>(std::sqrt(bias2));
            const float eps = static_cast<float>(o.eps());
            const float step_size = static_cast<float>(-(o.lr() / bias1));
            const float scale = static_cast<float>(grad_scale);
            const bool decayed = o.weight_decay() != 0, scaled = grad_scale != 1.0;
            const AdamWUpdate k{p.data_ptr<float>(),
                                p.grad().data_ptr<float>(),
                                s.exp_avg().data_ptr<float>(),
                                s.exp_avg_sq().data_ptr<float>(),
                                decay,
                                b1,
                                c1,
                                b2,
                                c2,
                                sqrt_bias2,
                                eps,
                                step_size,
                                scale,
                                decayed,
                                scaled};
            run_adamw(k, p.numel());
        }
    }
    return true;
}

}  // namespace engine::detail
