// The machine's matrix-multiply rate, measured the same way by `tupe bench` (the peak its
// utilisation is relative to) and `tupe doctor` (a quick health check).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cli {

/// Blocks until the device's queued work is done (a no-op on the CPU).
void synchronize(const torch::Device& device);

/// Best FLOP/s (2 per multiply-add) of (m, k) x (k, n) in `dtype` on `device`: one warm-up
/// (BLAS buffers, oneDNN primitives), then up to `reps` timed products, stopping after
/// `budget_s` seconds once one has run.
double matmul_flops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype,
                    const torch::Device& device = torch::Device(torch::kCPU), int reps = 3,
                    double budget_s = 1.5);

}  // namespace cli
