// Matrix-multiply rate (see matmul_rate.h).
#include "matmul_rate.h"

#include <algorithm>
#include <chrono>

namespace cli {

void synchronize(const torch::Device& device) {
    // A CUDA step is only finished when the stream is; a zero-sized host copy forces that on
    // LibTorch 1.13 and 2.x alike.
    if (device.is_cuda()) torch::zeros({1}, torch::TensorOptions().device(device)).cpu();
}

double matmul_flops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype,
                    const torch::Device& device, int reps, double budget_s) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) {
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    torch::NoGradGuard no_grad;
    const auto opts = torch::TensorOptions().dtype(dtype).device(device);
    auto a = torch::randn({m, k}, opts), b = torch::randn({k, n}, opts);
    auto out = torch::empty({m, n}, opts);
    torch::mm_out(out, a, b);  // warm-up
    synchronize(device);
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
    double best = 0;
    const auto start = Clock::now();
    for (int rep = 0; rep < reps && (rep == 0 || since(start) < budget_s); ++rep) {
        const auto t0 = Clock::now();
        torch::mm_out(out, a, b);
        synchronize(device);
        best = std::max(best, flops / since(t0));
    }
    return best;
}

}  // namespace cli
