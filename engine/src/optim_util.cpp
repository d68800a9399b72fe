// Optimisation helpers shared by pretraining and fine-tuning (see optim_util.h). The autocast
// API was renamed in LibTorch 2.4; both spellings are supported here and only here.
#include "optim_util.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <memory>
#include <vector>

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

}  // namespace engine::detail
