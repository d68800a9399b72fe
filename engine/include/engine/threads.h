// How many intra-op threads training uses when the user does not say.
//
// LibTorch's own default counts physical cores through cpuinfo, which on some VMs reports one
// core for two vCPUs (this project's CI machine: `at::get_num_threads()` is 1 with 2 CPUs, in
// Python too), so "library default" silently halves elementwise throughput. The workbench's
// default is the CPUs this process may run on, unless OMP_NUM_THREADS says otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace engine {

/// CPUs in this process's affinity mask (sched_getaffinity), at least 1.
int available_cpus();

/// Sets ATen's intra-op threads: `requested` when > 0, else OMP_NUM_THREADS when set, else
/// available_cpus(). Returns the count now in force.
int apply_thread_count(int64_t requested);

/// The BLAS this process multiplies with, in one line, recorded with every run: for OpenBLAS
/// its version, the kernels it runs and who chose them ("OpenBLAS 0.3.21 ... kernels Haswell
/// (OPENBLAS_CORETYPE=Haswell)"; another core rounds differently, so runs compare bit for bit
/// only under the same one), else "not OpenBLAS (MKL or another BLAS)".
std::string blas_description();

/// Flushes subnormal floats to zero on this thread and the ones it starts (x86 FTZ/DAZ, as
/// torch.set_flush_denormal(True)). Attention probabilities far below 1e-38 (ALiBi's linear
/// bias at T = 512 makes many) are subnormal, and every product with one takes a microcode
/// assist: ALiBi's step was 35% slower than T5's before. Returns whether the CPU supports it.
bool flush_denormals();

}  // namespace engine
