# Run-time choices that decide CPU training speed more than any kernel we write
# (measured with `tupe bench`, small size, 2 threads; docs/performance.md).
#
# 1. One thread pool. Debian's LibTorch runs its own kernels on OpenMP (libgomp) and links
#    libblas.so.3, which the alternatives system usually points at the pthreads OpenBLAS.
#    Then two pools of N threads share N cores: OpenBLAS's workers spin in sched_yield while
#    ATen's run, and libgomp's spin while OpenBLAS runs (perf: ~25% of cycles in __schedule,
#    libgomp spin and sched_yield). The OpenMP build of the same OpenBLAS (libopenblas0-openmp)
#    runs its GEMMs on libgomp's pool. With TUPE_OPENBLAS_OPENMP, torch-linked executables carry
#    a DT_RPATH to that build's folder; DT_RPATH (unlike DT_RUNPATH) also applies to the
#    libraries LibTorch itself needs, so libblas.so.3, liblapack.so.3 and libopenblas.so.0 all
#    come from there, whatever the system alternative says. Only for a system LibTorch: an
#    upstream LibTorch bundles its own BLAS and OpenMP.
# 2. An allocator that keeps freed pages. glibc returns large blocks to the kernel at free and
#    faults them in again next step (~150k page faults per small-size step). tcmalloc keeps
#    them. Linked into the `tupe` command only: tests keep glibc's malloc, and the fuzz targets
#    need ASan's.
option(TUPE_OPENBLAS_OPENMP
    "Load the OpenMP build of OpenBLAS (libopenblas0-openmp) into torch-linked executables" ON)
option(TUPE_TCMALLOC "Link the tupe command with tcmalloc (libtcmalloc-minimal4)" ON)

set(TUPE_OPENBLAS_OPENMP_DIR "")
if(TUPE_OPENBLAS_OPENMP AND CMAKE_LIBRARY_ARCHITECTURE)
    set(_tupe_omp_dir "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp")
    find_library(_tupe_torch_cpu torch_cpu PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
    if(NOT _tupe_torch_cpu)
        find_library(_tupe_torch_cpu torch_cpu)
    endif()
    get_filename_component(_tupe_torch_dir "${_tupe_torch_cpu}" REALPATH)
    get_filename_component(_tupe_torch_dir "${_tupe_torch_dir}" DIRECTORY)
    if(EXISTS "${_tupe_omp_dir}/libblas.so.3" AND
       _tupe_torch_dir MATCHES "^/usr/lib(/${CMAKE_LIBRARY_ARCHITECTURE})?$")
        set(TUPE_OPENBLAS_OPENMP_DIR "${_tupe_omp_dir}")
        message(STATUS "BLAS: OpenMP OpenBLAS from ${_tupe_omp_dir} (shares ATen's thread pool)")
    elseif(NOT EXISTS "${_tupe_omp_dir}/libblas.so.3")
        message(STATUS "BLAS: the system's libblas.so.3 (install libopenblas0-openmp for one "
                       "thread pool; `tupe doctor` reports what is loaded)")
    endif()
endif()

set(TUPE_TCMALLOC_LIB "")
if(TUPE_TCMALLOC)
    find_library(TUPE_TCMALLOC_LIB_PATH NAMES tcmalloc_minimal libtcmalloc_minimal.so.4)
    if(TUPE_TCMALLOC_LIB_PATH)
        set(TUPE_TCMALLOC_LIB "${TUPE_TCMALLOC_LIB_PATH}")
        message(STATUS "allocator: tcmalloc for the tupe command (${TUPE_TCMALLOC_LIB})")
    else()
        message(STATUS "allocator: glibc malloc (libtcmalloc-minimal4 not found)")
    endif()
endif()

# tupe_torch_runtime(target [ALLOCATOR]): the BLAS choice for every executable that links
# LibTorch; ALLOCATOR also links tcmalloc (first, so its malloc interposes everyone's).
function(tupe_torch_runtime target)
    cmake_parse_arguments(R "ALLOCATOR" "" "" ${ARGN})
    if(TUPE_OPENBLAS_OPENMP_DIR)
        target_link_options(${target} PRIVATE
            "LINKER:--disable-new-dtags" "LINKER:-rpath,${TUPE_OPENBLAS_OPENMP_DIR}")
    endif()
    if(R_ALLOCATOR AND TUPE_TCMALLOC_LIB)
        target_link_libraries(${target} PRIVATE
            "-Wl,--push-state,--no-as-needed" "${TUPE_TCMALLOC_LIB}" "-Wl,--pop-state")
    endif()
endfunction()
