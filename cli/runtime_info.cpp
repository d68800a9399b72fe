#include "runtime_info.h"

#include <dlfcn.h>
#include <malloc.h>

namespace cli {

// Both libraries are looked up at run time: LibTorch loads whichever libblas.so.3 the rpath
// or the alternatives system names, and tcmalloc is linked into `tupe` only.
std::string blas_threading() {
    using IntFn = int (*)();
    auto parallel = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    if (!parallel) return "";
    switch (parallel()) {
        case 0: return "sequential";
        case 1: return "pthreads";
        case 2: return "OpenMP";
        default: return "unknown";
    }
}

std::string allocator_name() {
    return dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory") ? "tcmalloc" : "glibc malloc";
}

void release_free_memory() {
    using VoidFn = void (*)();
    if (auto release =
            reinterpret_cast<VoidFn>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory")))
        release();
    else
        malloc_trim(0);
}

}  // namespace cli
