// Matrix-multiply rate and the precision `dtype: auto` picks (see precision.h).
#include "engine/precision.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace engine {

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

PrecisionChoice choose_precision(const std::string& requested, const torch::Device& device,
                                 const std::string& key) {
    if (requested != "fp32" && requested != "bf16" && requested != "fp16" && requested != "auto")
        throw std::invalid_argument(key + ": expected fp32, bf16, fp16 or auto, got '" + requested +
                                    "'");
    if (requested == "fp16" && !device.is_cuda())
        throw std::invalid_argument(key + ": fp16 needs a CUDA device; use bf16 or auto on CPU");
    PrecisionChoice choice;
    if (requested != "auto") {
        choice.dtype = requested;
        choice.reason = "as configured";
        return choice;
    }
    const int64_t n = device.is_cuda() ? 4096 : 512;
    choice.fp32_gflops = matmul_flops(n, n, n, torch::kFloat, device, 3, 0.5) / 1e9;
    try {
        choice.bf16_gflops = matmul_flops(n, n, n, torch::kBFloat16, device, 3, 0.5) / 1e9;
    } catch (const c10::Error&) {
        choice.bf16_gflops = 0;  // no bf16 matmul on this device at all
    }
    const bool fast = choice.bf16_gflops >= kBf16SpeedupForAuto * choice.fp32_gflops;
    choice.dtype = fast ? "bf16" : "fp32";
    char line[256];
    std::snprintf(line, sizeof line,
                  "bf16 matmul %.0f GFLOP/s %s %.1f x fp32's %.0f GFLOP/s on %s (%lld^3)",
                  choice.bf16_gflops, fast ? ">=" : "<", kBf16SpeedupForAuto, choice.fp32_gflops,
                  device.str().c_str(), static_cast<long long>(n));
    choice.reason = line;
    return choice;
}

}  // namespace engine
