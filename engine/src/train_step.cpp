// The MLM optimizer step shared by pretraining, the benchmark and data-parallel training
// (see train_step.h).
#include "engine/train_step.h"

#include <algorithm>
#include <cmath>

#include "optim_util.h"

namespace engine {

MlmTensors to_tensors(const MlmBatch& b, torch::Device device) {
    MlmTensors out;
    const std::vector<int64_t> shape = {b.batch_size, b.seq_len};
    out.input_ids = torch::tensor(b.input_ids, torch::kLong).view(shape).to(device);
    out.labels = torch::tensor(b.labels, torch::kLong).view(shape).to(device);
    std::vector<int64_t> mask(b.attention_mask.begin(), b.attention_mask.end());
    for (auto m : mask) out.real_tokens += m;
    for (auto l : b.labels) out.masked_tokens += l != -100;
    out.attention_mask = torch::tensor(mask, torch::kLong).view(shape).to(device);
    return out;
}

MlmStepResult mlm_train_step(BertForMaskedLM& model, torch::optim::Optimizer& optimizer,
                             const std::vector<MlmTensors>& micro_batches,
                             const MlmStepOptions& options) {
    MlmStepResult r;
    int64_t denominator = options.loss_denominator;
    if (denominator <= 0)
        for (const auto& b : micro_batches) denominator += b.masked_tokens;
    denominator = std::max<int64_t>(1, denominator);
    const torch::Device device = micro_batches.empty() ? torch::Device(torch::kCPU)
                                                       : micro_batches.front().input_ids.device();
    std::vector<torch::Tensor> params;
    for (const auto& group : optimizer.param_groups())
        for (const auto& p : group.params()) params.push_back(p);
    // Undefined gradients: the first backward then stores its gradient instead of adding it
    // to a zero-filled buffer (LibTorch 1.13's zero_grad() fills with zeros).
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    for (const auto& b : micro_batches) {
        torch::Tensor loss;
        int64_t masked = 0;
        {
            detail::AutocastGuard autocast(options.dtype, device);
            auto out = model->forward(b.input_ids, b.attention_mask, b.labels);
            loss = out.loss;
            masked = out.num_masked;
        }
        const double value = loss.item<double>();
        if (!std::isfinite(value)) {
            optimizer.zero_grad();
            r.finite = false;
            r.loss = value;
            return r;
        }
        // Weighted by masked tokens, so accumulation equals the mean over the whole batch.
        const double weight = static_cast<double>(masked) / static_cast<double>(denominator);
        (loss * weight).backward();
        r.loss += value * weight;
        r.real_tokens += b.real_tokens;
        r.masked_tokens += masked;
    }
    // A parameter outside this step's graph gets a zero gradient, as zero_grad() would have
    // left it: the data-parallel hook all-reduces every gradient.
    for (auto& p : params)
        if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    if (options.after_backward) options.after_backward();

    auto* adamw = options.fused_adamw ? dynamic_cast<torch::optim::AdamW*>(&optimizer) : nullptr;
    if (adamw && options.clip_norm > 0) {
        // clip_grad_norm_'s arithmetic (L2 norm of the per-parameter norms, coefficient
        // max_norm / (norm + 1e-6) capped at 1), but the scale is applied inside the update.
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> norms;
        norms.reserve(params.size());
        for (const auto& p : params)
            if (p.grad().defined()) norms.push_back(p.grad().norm(2));
        r.grad_norm = norms.empty() ? 0.0 : torch::stack(norms).norm(2).item<double>();
        const double scale = std::min(1.0, options.clip_norm / (r.grad_norm + 1e-6));
        if (detail::fused_adamw_step(*adamw, scale)) return r;
        if (scale < 1.0)
            for (auto& p : params)
                if (p.grad().defined()) p.grad().mul_(scale);
        optimizer.step();
        return r;
    }
    if (adamw && detail::fused_adamw_step(*adamw, 1.0)) return r;
    if (options.clip_norm > 0)
        r.grad_norm = torch::nn::utils::clip_grad_norm_(params, options.clip_norm);
    optimizer.step();
    return r;
}

}  // namespace engine
