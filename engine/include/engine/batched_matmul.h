// Batched matrix products for attention on CPU: (..., M, K) x (..., K, N) -> (..., M, N), one
// BLAS sgemm per matrix called on the tensors' own strides. LibTorch 1.13's CPU bmm splits an
// fp32 batch into per-matrix `select` + `addmm` calls through the dispatcher (~70 ATen ops per
// head and product); at the quickstart's size (B*H = 128 heads of 64 x 16) that overhead, not
// the arithmetic, was the step time (docs/performance.md, the profile). Shapes: leading dims are
// batch dims, flattened; the last two are the matrix.
#pragma once

#include <torch/torch.h>

namespace engine {

/// a @ b over the last two dims, with autograd (the backward is two batched products of the
/// same kind, on transposed views: no copies). Inputs of equal rank >= 3 with equal leading
/// dims. Uses direct sgemm calls for fp32 CPU tensors where the project was built with a CBLAS
/// (TUPE_WITH_CBLAS) and batched_matmul_enabled(); otherwise, and for every other dtype and
/// device, it is torch::matmul.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

/// Turns the direct-sgemm path on or off for this process (on by default where built), e.g. to
/// compare with LibTorch's bmm in a benchmark or a test. The result is the same up to
/// floating-point summation order.
void set_batched_matmul_enabled(bool enabled);
bool batched_matmul_enabled();

/// True when this build has the direct-sgemm path (TUPE_WITH_CBLAS).
bool batched_matmul_available();

}  // namespace engine
