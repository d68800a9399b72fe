// Fused CPU attention softmax: positional bias + padding mask + softmax in one pass over the
// scores, with a hand-written backward (8-lane fp32 vectors + at::parallel_for; fp32 and bf16,
// bf16 computed in fp32). Equivalent to torch::softmax(scores + bias.unsqueeze(0) + mask, -1).
// Shapes: B batch, H heads, T tokens; scores (B, H, T, T), bias (H, T, T), mask (B, 1, 1, T).
#pragma once

#include <torch/torch.h>

namespace engine {

/// softmax(scores + position_bias.unsqueeze(0) + mask_bias, -1) -> (B, H, T, T).
///
/// scores (B, H, T, T): q.k^T already scaled; position_bias (H, T, T) or undefined, broadcast
/// over the batch (never expanded to B * H * T * T, nor is its gradient); mask_bias (B, 1, 1, T)
/// or undefined: additive (0 for tokens, a large finite negative for padding), gets no gradient.
/// The result has the type the unfused composition promotes to (bf16 scores with an fp32 bias
/// or mask give fp32; all bf16 gives bf16). CPU autocast (LibTorch 1.13 and 2.x) has no policy
/// for add or softmax, so under autocast both give that same type.
///
/// The fused kernel runs on CPU for non-empty fp32/bf16 inputs of exactly these shapes when
/// fused_attention_enabled() (GCC/Clang builds; an AVX2 copy of its loops is picked at run time
/// unless ATEN_CPU_CAPABILITY=default). Otherwise (CUDA or any other device, double or half,
/// other or broadcast shapes, a mask that requires grad, the toggle off) this is the unfused
/// LibTorch composition above, op for op, so double-precision gradient checks stay exact.
/// Backward: grad_scores = p * (g - sum_j g_j p_j); grad_position_bias = grad_scores summed over
/// B (computed only when the bias requires grad). Twice differentiable: under create_graph the
/// backward is recorded in LibTorch ops.
torch::Tensor fused_attention_softmax(const torch::Tensor& scores,
                                      const torch::Tensor& position_bias,
                                      const torch::Tensor& mask_bias);

/// The unfused composition fused_attention_softmax falls back to (the reference in tests).
torch::Tensor unfused_attention_softmax(const torch::Tensor& scores,
                                        const torch::Tensor& position_bias,
                                        const torch::Tensor& mask_bias);

/// Process-wide switch for the fused CPU kernel (default on). Off, fused_attention_softmax is
/// the unfused composition: for equivalence tests and benchmarks. Read once per call on the
/// calling thread; not meant to be flipped while another thread is in a forward pass.
void set_fused_attention_enabled(bool enabled);
bool fused_attention_enabled();

}  // namespace engine
