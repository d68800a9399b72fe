// `tupe doctor`: what this build and this machine do for training speed: LibTorch version,
// CUDA, the BLAS library and the kernel core it picked (OpenBLAS 0.3.21 falls back to Prescott
// kernels on CPUs it does not know; the launcher in main.cpp corrects that), threads, CPU
// flags, a quick fp32/bf16 matmul rate, and advice.
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/precision.h"
#include "engine/threads.h"
#include "runtime_info.h"

namespace cli {

namespace {

using engine::matmul_flops;

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : fallback;
}

/// The first "key : value" of /proc/cpuinfo for `key`, or "".
std::string cpuinfo_field(const std::string& key) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
    }
    return "";
}

std::set<std::string> cpu_flags() {
    std::set<std::string> out;
    std::istringstream ss(cpuinfo_field("flags"));
    std::string f;
    while (ss >> f) out.insert(f);
    return out;
}

std::string fmt1(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

}  // namespace

int cmd_doctor(const Argv& argv) {
    Args args(argv, command_spec("doctor"));
    std::vector<std::string> advice;
    auto line = [](const std::string& key, const std::string& value) {
        std::cout << key << std::string(key.size() < 18 ? 18 - key.size() : 1, ' ') << value
                  << "\n";
    };

    line("libtorch", TORCH_VERSION);
    // hasCUDART(): libtorch_cuda's hooks are registered, i.e. this LibTorch is a CUDA build,
    // whether or not the machine has a device (versionCUDART() is then e.g. 13020).
    const bool cuda = torch::cuda::is_available();
    const bool cuda_build = at::globalContext().hasCUDART();
    std::string cuda_rt;
    if (cuda_build) {
        const long v = at::globalContext().versionCUDART();
        cuda_rt = "CUDA runtime " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    }
    line("cuda", cuda ? "available, " + std::to_string(torch::cuda::device_count()) +
                            " device(s), " + cuda_rt
                 : cuda_build ? "CUDA build (" + cuda_rt + "), no device"
                              : "not available (a CPU-only LibTorch)");

    // ATen's own build summary: the CPU kernel level and the BLAS it was built against.
    std::istringstream cfg(at::show_config());
    std::string cfg_line;
    while (std::getline(cfg, cfg_line)) {
        if (cfg_line.find("CPU capability usage") != std::string::npos) {
            cfg_line.erase(0, cfg_line.find_first_not_of(" -"));
            line("aten kernels", cfg_line.substr(cfg_line.find(':') + 2));
        }
    }

    // The BLAS actually loaded. Debian's LibTorch links libblas.so.3 dynamically, so the
    // alternatives system decides; OpenBLAS exports its own introspection functions.
    using StrFn = char* (*)();
    using IntFn = int (*)();
    auto config_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    auto core_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    auto threads_fn = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    std::string core;
    if (config_fn) {
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(config_fn), &info) && info.dli_fname)
            line("blas library", info.dli_fname);
        line("blas config", config_fn());
        core = core_fn ? core_fn() : "?";
        std::string how = env_or("OPENBLAS_CORETYPE", "").empty()
                              ? "detected by OpenBLAS"
                              : "OPENBLAS_CORETYPE=" + env_or("OPENBLAS_CORETYPE", "") +
                                    (std::getenv("TUPE_BLAS_REEXEC")
                                         ? " (set by the tupe launcher; OpenBLAS had picked " +
                                               env_or("TUPE_BLAS_REEXEC", "") + ")"
                                         : " (set by you)");
        line("blas core", core + ", " + how);
        if (threads_fn)
            line("blas threads", std::to_string(threads_fn()) + ", " + blas_threading() +
                                     (blas_threading() == "OpenMP" ? " (ATen's own pool)" : ""));
    } else {
        line("blas library", "not OpenBLAS (no openblas_get_config symbol); MKL or reference BLAS");
    }

    line("allocator", allocator_name());

    const int cpus = engine::available_cpus();
    line("cpus available", std::to_string(cpus));
    const int library_default = at::get_num_threads();
    const int used = engine::apply_thread_count(0);  // what tupe's commands use without --threads
    line("aten threads",
         std::to_string(used) +
             " intra-op (LibTorch's own default: " + std::to_string(library_default) + "), " +
             std::to_string(at::get_num_interop_threads()) +
             " inter-op (OMP_NUM_THREADS=" + env_or("OMP_NUM_THREADS", "unset") + ")");
    line("cpu", cpuinfo_field("model name"));
    const auto flags = cpu_flags();
    std::string shown;
    for (const char* f :
         {"avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "amx_bf16"})
        shown += std::string(shown.empty() ? "" : " ") + f + (flags.count(f) ? "+" : "-");
    line("cpu flags", shown);

    double fp32 = 0, bf16 = 0;
    if (!args.has("no-matmul")) {
        fp32 = matmul_flops(1024, 1024, 1024, torch::kFloat) / 1e9;
        bf16 = matmul_flops(512, 512, 512, torch::kBFloat16) / 1e9;
        line("matmul fp32", fmt1(fp32) + " GFLOP/s (1024^3, best of 3, " +
                                std::to_string(at::get_num_threads()) + " aten threads)");
        line("matmul bf16", fmt1(bf16) + " GFLOP/s (512^3, best of 3)");
        // What `train.dtype: auto` (and finetune.dtype) resolves to here, measured as it does;
        // measured afresh, and the machine's cached rates replaced (engine/precision.h).
        const auto choice =
            engine::choose_precision("auto", torch::Device(torch::kCPU), "train.dtype", true);
        line("dtype auto", choice.dtype + " on cpu: " + choice.reason);
        if (cuda) {
            const auto gpu =
                engine::choose_precision("auto", torch::Device(torch::kCUDA), "train.dtype", true);
            line("dtype auto (cuda)", gpu.dtype + ": " + gpu.reason);
        }
    }

    // Advice.
    std::string lower = core;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    const bool fallback_core = lower == "prescott" || lower == "generic" || lower == "core2" ||
                               lower == "nehalem" || lower == "katmai" || lower == "northwood";
    if (fallback_core && (flags.count("avx2") || flags.count("avx512f")))
        advice.push_back(
            "OpenBLAS runs " + core + " kernels on a CPU with " +
            (flags.count("avx512f") ? "AVX-512" : "AVX2") +
            ": export OPENBLAS_CORETYPE=" + (flags.count("avx512f") ? "SkylakeX" : "Haswell") +
            " (the tupe launcher does this itself unless OPENBLAS_CORETYPE is set or "
            "OpenBLAS lacks DYNAMIC_ARCH)");
    // A core chosen in the environment below what the CPU runs: OpenBLAS 0.3.21's AVX2-level
    // kernels on an AVX-512 CPU run the quickstart's step 1.3x and the small step 1.75x slower
    // than its AVX-512 ones on the 2-core AMD EPYC (docs/performance.md).
    const bool avx512 = flags.count("avx512f") && flags.count("avx512bw") &&
                        flags.count("avx512vl") && flags.count("avx512dq");
    const bool avx2_level = lower == "haswell" || lower == "zen" || lower == "sandybridge" ||
                            lower == "excavator" || lower == "steamroller";
    if (avx512 && avx2_level && !env_or("OPENBLAS_CORETYPE", "").empty() &&
        !std::getenv("TUPE_BLAS_REEXEC"))
        advice.push_back("OPENBLAS_CORETYPE=" + env_or("OPENBLAS_CORETYPE", "") +
                         " (from the environment) keeps OpenBLAS on its AVX2 kernels on a CPU "
                         "with AVX-512: unset it (OpenBLAS then picks its own) or set SkylakeX "
                         "for up to 1.75x faster fp32 steps; results round differently from one "
                         "core to another, so compare runs made with the same core");
    if (cpus > 1 && used < cpus)
        advice.push_back("ATen uses " + std::to_string(used) + " of " + std::to_string(cpus) +
                         " CPUs (OMP_NUM_THREADS): pass --threads N to bench/analyze/run");
    if (blas_threading() == "pthreads" && at::get_num_threads() > 1)
        advice.push_back(
            "OpenBLAS runs its own pthreads beside ATen's OpenMP threads, and the "
            "two pools spin against each other (small size: 2.56 instead of 1.72 "
            "s/step): install libopenblas0-openmp and rebuild (cmake/TupeRuntime.cmake), "
            "or export OMP_WAIT_POLICY=PASSIVE");
    if (allocator_name() != "tcmalloc")
        advice.push_back(
            "glibc malloc returns large tensors to the kernel and faults them in "
            "again every step: the tupe command links tcmalloc when "
            "libtcmalloc-minimal4 is installed at build time");
    const bool native_bf16 = flags.count("avx512_bf16") || flags.count("amx_bf16");
    if (!native_bf16)
        advice.push_back("no AVX512-BF16 or AMX on this CPU: bf16 matmuls are emulated" +
                         (bf16 > 0 ? " (" + fmt1(bf16) + " vs " + fmt1(fp32) + " GFLOP/s fp32)"
                                   : std::string()) +
                         "; train in fp32 here");
    else if (bf16 > 0 && bf16 < 1.5 * fp32)
        advice.push_back(
            "the CPU has native bf16 but bf16 matmuls are not faster than fp32: "
            "this LibTorch's oneDNN may not use it");
    if (!cuda)
        advice.push_back(
            "for GPU training build against an upstream CUDA LibTorch: cmake "
            "-DCMAKE_PREFIX_PATH=/path/to/libtorch ... (docs/distributed.md, \"Building against an "
            "upstream CUDA LibTorch\")");
    if (advice.empty()) advice.push_back("nothing to change");
    for (const auto& a : advice) std::cout << "advice            " << a << "\n";
    return 0;
}

}  // namespace cli
