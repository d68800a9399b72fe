// Optimisation helpers shared by MLM pretraining (trainer.cpp) and fine-tuning (finetune.cpp):
// AdamW with BERT's two parameter groups, the linear warm-up/decay schedule and an autocast
// guard that compiles against LibTorch 1.13 and 2.x. Internal to the engine (not installed).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace engine::detail {

/// Enables autocast for `dtype` ("fp32" = off, "bf16", "fp16" on CUDA only) on the device for
/// the guard's lifetime. `key` names the config field in error messages (e.g. "train.dtype").
class AutocastGuard {
  public:
    AutocastGuard(const std::string& dtype, torch::Device device, const char* key = "train.dtype");
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

  private:
    bool active_ = false, cuda_ = false;
};

/// Learning rate at 0-based `step`: linear warm-up to `peak` over `warmup_steps` (step 0 already
/// gets peak / warmup_steps), then linear decay to 0 at `total_steps`.
double linear_warmup_decay(double peak, int64_t step, int64_t warmup_steps, int64_t total_steps);
/// Learning rate at 0-based `step` under train.schedule (config.h): "linear" is
/// linear_warmup_decay; "wsd" and "wsd-sqrt" warm up as it does, hold `peak` until the last
/// round(decay_fraction * total_steps) steps (at least 1, never before the warm-up ends), then
/// decay to 0 at total_steps as 1 - p or 1 - sqrt(p), p the share of the decay done. Throws
/// std::invalid_argument for another schedule name.
double scheduled_lr(const std::string& schedule, double peak, int64_t step, int64_t warmup_steps,
                    int64_t total_steps, double decay_fraction);

/// True for parameters BERT excludes from weight decay: biases and LayerNorm weights
/// (including TUPE's `pos_ln` and the pre-LN `final_layer_norm`).
bool no_weight_decay(const std::string& name);

/// AdamW hyper-parameters; the peak lr is set again every step by set_lr.
struct AdamWSettings {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
};

/// AdamW over every parameter of `module` in two groups: [decayed, no_weight_decay], both in
/// named_parameters() order.
torch::optim::AdamW make_adamw(torch::nn::Module& module, const AdamWSettings& settings);

/// Sets the learning rate of every parameter group.
void set_lr(torch::optim::AdamW& optimizer, double lr);

/// One AdamW step equal to torch::optim::AdamW::step() of LibTorch 1.13/2.x (decoupled weight
/// decay, bias-corrected moments, eps added after the bias correction) up to fp32 rounding,
/// with every gradient multiplied by `grad_scale` on the fly (gradient clipping without a pass
/// over the gradients). One pass over p, grad, exp_avg and exp_avg_sq per parameter instead of
/// about ten kernels, on 8-lane vectors (engine/src/simd_lanes.h, no FMA: each element rounds
/// as the scalar formula does); the moments live in the optimizer's own state, so checkpoints
/// (optimizer.save/load) are unchanged. Returns false and does nothing when it cannot apply
/// (amsgrad, or a parameter, gradient or moment that is not a contiguous fp32 CPU tensor): the
/// caller then scales the gradients and calls optimizer.step().
bool fused_adamw_step(torch::optim::AdamW& optimizer, double grad_scale);

}  // namespace engine::detail
