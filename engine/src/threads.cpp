#include "engine/threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace engine {

int available_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

int apply_thread_count(int64_t requested) {
    int n = static_cast<int>(requested);
    if (n <= 0) {
        const char* omp = std::getenv("OMP_NUM_THREADS");
        n = omp ? std::atoi(omp) : 0;  // ATen honours it already; 0 means not a number
        if (n > 0) return at::get_num_threads();
        n = available_cpus();
    }
    if (at::get_num_threads() != n) at::set_num_threads(n);
    return n;
}

bool flush_denormals() { return at::globalContext().setFlushDenormal(true); }

std::string blas_description() {
    // Looked up at run time: LibTorch links libblas.so.3 dynamically, and the alternatives
    // system decides which library that is.
    using StrFn = char* (*)();
    auto config_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    auto core_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!config_fn || !core_fn) return "not OpenBLAS (MKL or another BLAS)";
    std::string config = config_fn();
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... Haswell MAX_THREADS=64": the version only.
    const auto space = config.find(' ', config.find(' ') + 1);
    std::string out = config.substr(0, space) + ", kernels " + core_fn();
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    out += forced && *forced ? std::string(" (OPENBLAS_CORETYPE=") + forced + ")"
                             : std::string(" (chosen by OpenBLAS)");
    return out;
}

}  // namespace engine
