// Fused CPU kernels of the training step outside attention: the MLM loss (log-softmax + NLL over
// the masked rows), the FFN's bias + erf GELU, and post-LN's residual add + LayerNorm, each one
// pass forward and one pass backward (8-lane fp32 vectors + at::parallel_for; fp32 and bf16
// inputs, computed in fp32). Each forward keeps what its backward needs in place of its input:
// the loss exp(logits - max), GELU its derivative, LayerNorm the normalised sum. Under
// create_graph the backward is recorded in LibTorch ops with those as constants: a first
// derivative, not a second. Shapes: M rows, V vocabulary, N = B * T tokens, C hidden, F FFN.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace engine {

/// cross_entropy(logits, targets) with mean reduction over the rows whose target is not
/// `ignore_index` (F::cross_entropy's defaults, no label smoothing): a 0-dim fp32 loss.
///
/// logits (M, V) fp32 or bf16 (the loss is computed in fp32, as the upcast composition
/// cross_entropy(logits.to(kFloat), targets) does), targets (M) int64 in [0, V) or ignore_index.
/// Forward: per row the max, then exp(x - max) (kept, fp32) and its sum; the loss is
/// max + log(sum) - x[target]. Backward: (softmax - onehot) * grad / n in one pass over the kept
/// exp, in the logits' dtype; rows with ignore_index get 0. All rows ignored gives NaN, as torch
/// does. Other dtypes, devices or shapes, or the toggle off: the composition above, op for op.
torch::Tensor fused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                  int64_t ignore_index = -100);

/// The composition fused_cross_entropy falls back to (the reference in tests).
torch::Tensor unfused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                    int64_t ignore_index = -100);

/// gelu(x + bias), erf form (HF "gelu"); x (..., F) fp32 or bf16, bias (F) fp32 or bf16 or
/// undefined. The result has x's dtype (the composition's under CPU autocast, where the linear
/// gives bf16); backward writes grad_x in one pass and reduces grad_bias over the rows in
/// fixed blocks (the same sum whatever the thread count).
torch::Tensor fused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias);

/// torch::gelu(bias.defined() ? x + bias.to(x's dtype) : x), the reference in tests.
torch::Tensor unfused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias);

/// layer_norm(x + residual) over the last dimension, with weight and bias (C) fp32; x and
/// residual (..., C) fp32 or bf16. The result is fp32 (what the engine's apply_norm gives: it
/// brings a bf16 sum to the weights' dtype). Backward: grad_x = grad_residual in one pass per
/// row, grad_weight and grad_bias reduced over the rows in fixed blocks.
torch::Tensor fused_residual_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                        const torch::Tensor& weight, const torch::Tensor& bias,
                                        double eps);

/// layer_norm((x + residual).to(weight's dtype), weight, bias, eps), the reference in tests.
torch::Tensor unfused_residual_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                          const torch::Tensor& weight, const torch::Tensor& bias,
                                          double eps);

/// Process-wide switch for these three kernels and for the 8-lane loops of dropout's Philox draw
/// and the fused AdamW step (both equal to their scalar loops bit for bit); default on, off when
/// the environment sets TUPE_FUSED_TRAINING=0, so that two runs of one binary compare them.
/// Off, each function here is its unfused composition and the model calls LibTorch's ops. Not
/// meant to be flipped while another thread is in a forward pass.
void set_fused_training_enabled(bool enabled);
bool fused_training_enabled();

}  // namespace engine
