// What the process runs on underneath LibTorch: the BLAS's threading model and the memory
// allocator (cmake/TupeRuntime.cmake chooses both; `tupe doctor` reports them, `tupe bench`
// returns freed memory before each variant's RSS baseline).
#pragma once

#include <string>

namespace cli {

/// "OpenMP", "pthreads", "sequential" for OpenBLAS (openblas_get_parallel), "" otherwise.
std::string blas_threading();

/// "tcmalloc" when gperftools' allocator serves malloc in this process, else "glibc malloc".
std::string allocator_name();

/// Returns free memory the allocator holds to the OS (tcmalloc: ReleaseFreeMemory; glibc:
/// malloc_trim), so that RSS measures what is in use.
void release_free_memory();

}  // namespace cli
