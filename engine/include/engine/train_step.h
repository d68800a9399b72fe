// One MLM optimizer step (forward under autocast, loss weighted by masked tokens across
// gradient-accumulation micro-batches, backward, an optional gradient hook, clipping, AdamW),
// shared by pretrain(), `tupe bench` and data-parallel training so they all time and run the
// same code. Shapes: input_ids/attention_mask/labels (B, T), labels -100 where not masked.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/corpus.h"

namespace engine {

/// One micro-batch as tensors on the training device.
struct MlmTensors {
    torch::Tensor input_ids, attention_mask, labels;  ///< (B, T) int64 each.
    int64_t real_tokens = 0;                          ///< Non-padding tokens.
    int64_t masked_tokens = 0;                        ///< Labels != -100.
};

/// Converts a padded MlmBatch (plain vectors) into tensors on `device`.
MlmTensors to_tensors(const MlmBatch& batch, torch::Device device);

struct MlmStepOptions {
    std::string dtype = "fp32";  ///< Autocast: "fp32" (off), "bf16", "fp16" (CUDA).
    double clip_norm = 1.0;      ///< <= 0: no clipping (grad_norm is then reported as 0).
    /// The masked-token count each micro-batch loss is weighted against; 0 = the sum over
    /// `micro_batches`. A data-parallel rank passes the global count, so that the summed
    /// gradients equal the mean over the global batch.
    int64_t loss_denominator = 0;
    /// Called after every backward, before clipping: the data-parallel all-reduce hook.
    /// Every parameter has a defined gradient when it runs.
    std::function<void()> after_backward;
    /// For a torch::optim::AdamW on fp32 CPU parameters: clip and update in one fused pass per
    /// parameter (engine/src/optim_util.h, equal to torch's AdamW to fp32 rounding). False:
    /// clip_grad_norm_ and optimizer.step() as LibTorch ships them.
    bool fused_adamw = true;
};

struct MlmStepResult {
    bool finite = true;    ///< False: a micro-batch loss was NaN/inf; no update was made.
    double loss = 0;       ///< Mean MLM loss over the step's masked tokens (this process's share).
    double grad_norm = 0;  ///< Total gradient norm before clipping.
    int64_t real_tokens = 0;
    int64_t masked_tokens = 0;
};

/// Gradients reset (to undefined, so backward writes them instead of adding to zeros), then
/// for each micro-batch forward + (loss * masked / denominator).backward(), then after_backward,
/// clipping and the AdamW update. The caller sets the learning rate.
/// Stops before any update (finite = false) at the first non-finite loss.
MlmStepResult mlm_train_step(BertForMaskedLM& model, torch::optim::Optimizer& optimizer,
                             const std::vector<MlmTensors>& micro_batches,
                             const MlmStepOptions& options);

}  // namespace engine
