// Shared by the training step's fused kernels (fused_train_ops.cpp, fused_layer_norm.cpp): which
// tensors they take, and their row loops run over at::parallel_for, compiled twice (a baseline
// copy and an AVX2+FMA one picked at run time), with reductions over rows summed in fixed blocks
// so that results do not depend on the thread count. Internal to the engine.
#pragma once

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

#include "simd_lanes.h"

namespace engine::fused_rows {

inline bool fusable_type(const torch::Tensor& t) {
    return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16;
}

inline bool fusable_cpu(const torch::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.layout() == torch::kStrided && fusable_type(t);
}

#ifdef TUPE_SIMD_LANES

// Rows per block of a reduction over rows (bias, LayerNorm gain): fixed, so the partial sums
// and their order do not depend on the thread count.
constexpr int64_t kTrainRowBlock = 32;

// Tasks of about 32k elements, so small inputs stay on one thread.
inline int64_t train_grain(int64_t elements_per_item) {
    return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, elements_per_item));
}

// The row loops of these kernels, compiled twice (lanes::parallel_items): a baseline copy and one
// for AVX2 with FMA (GCC contracts a * b + c into one rounding there; both copies agree with the
// compositions to the tolerances of tests/engine/test_fused_train_ops.cpp, not bit for bit).
template <typename K>
void train_items(const K& k, int64_t items, int64_t grain) {
    lanes::parallel_items</*Fma=*/true>(k, items, grain);
}

// Sums `blocks` rows of `n` fp32 partials into out (n).
inline void sum_partials(const float* partial, int64_t blocks, int64_t n, float* out) {
    std::fill(out, out + n, 0.0f);
    for (int64_t b = 0; b < blocks; ++b)
        for (int64_t j = 0; j < n; ++j) out[j] += partial[b * n + j];
}
#endif  // TUPE_SIMD_LANES

}  // namespace engine::fused_rows
