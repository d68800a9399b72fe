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
    optimizer.zero_grad();
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
    if (options.after_backward) options.after_backward();
    if (options.clip_norm > 0) {
        std::vector<torch::Tensor> params;
        for (const auto& group : optimizer.param_groups())
            for (const auto& p : group.params()) params.push_back(p);
        r.grad_norm = torch::nn::utils::clip_grad_norm_(params, options.clip_norm);
    }
    optimizer.step();
    return r;
}

}  // namespace engine
