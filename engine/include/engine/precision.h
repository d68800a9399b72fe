// The machine's matrix-multiply rate and the training precision chosen from it. `tupe bench`
// (the peak its utilisation is relative to), `tupe doctor` (a health check) and `dtype: auto`
// (pretraining and fine-tuning) all measure it the same way, here.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace engine {

/// Blocks until the device's queued work is done (a no-op on the CPU).
void synchronize(const torch::Device& device);

/// Best FLOP/s (2 per multiply-add) of (m, k) x (k, n) in `dtype` on `device`: one warm-up
/// (BLAS buffers, oneDNN primitives), then up to `reps` timed products, stopping after
/// `budget_s` seconds once one has run.
double matmul_flops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype,
                    const torch::Device& device = torch::Device(torch::kCPU), int reps = 3,
                    double budget_s = 1.5);

/// What `dtype: auto` resolved to, and why.
struct PrecisionChoice {
    std::string dtype;   ///< fp32, bf16 or fp16
    std::string reason;  ///< one line: "as configured", or the measured rates behind "auto"
    double fp32_gflops = 0, bf16_gflops = 0;  ///< measured for "auto" only
};

/// bf16 matmuls must run at least this many times the fp32 rate for "auto" to pick bf16.
inline constexpr double kBf16SpeedupForAuto = 1.5;

/// Where "auto"'s measurements are kept, one line per machine: $TUPE_PRECISION_CACHE when set
/// ("off": nowhere), else $XDG_CACHE_HOME/tupe/precision.tsv, else ~/.cache/tupe/precision.tsv;
/// "" when there is no such place (no HOME).
std::string precision_cache_path();

/// What a cache line is keyed by: the host name, the CPU model, the LibTorch version, the
/// device and the intra-op thread count, e.g. "node1|AMD EPYC ...|1.13.0|cpu|2 threads".
std::string precision_machine_key(const torch::Device& device);

/// Validates `requested` (fp32, bf16, fp16 or auto; `key` names the config key in errors,
/// std::invalid_argument) and resolves "auto": bf16 (autocast, fp32 master weights) where this
/// device multiplies bf16 matrices at least kBf16SpeedupForAuto times faster than fp32 (native
/// AVX512-BF16/AMX kernels on a CPU, tensor cores on a GPU), fp32 elsewhere: emulated or slow
/// bf16 costs speed and buys nothing. Measured on (512, 512, 512) products on a CPU and
/// (4096, 4096, 4096) on CUDA (about a second) once per machine key (precision_machine_key) and
/// kept in precision_cache_path(); later calls read that line, and the reason says so. `refresh`
/// (`tupe doctor`) measures again and replaces the line. An unreadable or unwritable cache is
/// ignored (measured every time).
PrecisionChoice choose_precision(const std::string& requested, const torch::Device& device,
                                 const std::string& key = "train.dtype", bool refresh = false);

}  // namespace engine
