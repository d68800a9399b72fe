#!/usr/bin/env bash
# The CUDA build, compiled and linked on a machine without a GPU: `tupe` built headless
# (-DTUPE_WITH_QT=OFF, no tests) against the CUDA LibTorch inside PyPI's torch wheel, with
# nvcc, the CUDA runtime, cuBLAS, cuDNN and NCCL from PyPI's nvidia-* packages, and the
# data-parallel NCCL path on (-DTUPE_WITH_NCCL=ON: engine/src/distributed.cpp's
# ProcessGroupNCCL branch). Then checks that the binary links libtorch_cuda and NCCL and that
# `tupe doctor` runs here and reports a CUDA build with no device.
#
#   scripts/cuda_build_check.sh --build-dir DIR [--jobs N]
#
#   --build-dir DIR   the build folder (./run.sh test: build-cuda); the
#                     same folder is what scripts/gpu_check.sh builds on a GPU machine
#   --jobs N          [TUPE_JOBS, default nproc] compilers at once
# Environment:
#   TUPE_VENV         the Python environment (default: `./run.sh venv` makes or finds it)
#   TUPE_NO_CCACHE=1  build without ccache. With ccache, after scripts/torch2_check.sh every
#                     object but distributed.cpp's is a cache hit (the same sources and flags)
#
# How: scripts/wheel_torch.sh's CMake arguments (the wheel's TorchConfig.cmake, nvcc and the
# CUDA libraries of the nvidia-* wheels, linked under unversioned names in DIR/cuda-root), plus
# NCCL's header folder from the nvidia-nccl wheel (ProcessGroupNCCL.hpp includes <nccl.h>).
# The project has no .cu file; its CUDA code is C++ against LibTorch's CUDA API, behind
# TUPE_WITH_NCCL. Every TU is compiled: `grep` of compile_commands.json must show
# distributed.cpp with -DTUPE_WITH_NCCL.
#
# Output: the build's output and one line per check; the last line "CUDA build check: tupe
# links libtorch_cuda and NCCL, doctor: <its cuda line>". Exit status: 0 when every check
# passed, 1 when the build or a check failed, 2 when the check could not run.
set -uo pipefail
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${TUPE_JOBS:-$(nproc)}"
BUILD=""

usage() { sed -n '2,/^# Output:/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "cuda_build_check.sh: $*" >&2; exit 2; }
fail() { echo "cuda_build_check.sh: FAILED: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) BUILD="${2:?--build-dir needs a folder}"; shift ;;
        --jobs) JOBS="${2:?--jobs needs a number}"; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
[ -n "$BUILD" ] || die "--build-dir DIR is required (see --help)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number, got '$JOBS'"
for tool in cmake ninja readelf ldd; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (./run.sh installs it)"
done
mkdir -p "$BUILD" || die "cannot create $BUILD"
BUILD="$(cd "$BUILD" && pwd)"

# shellcheck source=scripts/wheel_torch.sh
. "$ROOT/scripts/wheel_torch.sh"
wheel_torch_setup "$BUILD" || exit 2
NCCL_INC="$WHEEL_NVIDIA_DIR/nccl/include"
[ -f "$NCCL_INC/nccl.h" ] || die "no nccl.h in $NCCL_INC (the nvidia-nccl wheel torch depends on)"
echo "cuda: LibTorch $WHEEL_TORCH_VERSION, $("$WHEEL_CUDA_ROOT/bin/nvcc" --version | tail -n 2 | head -n 1), NCCL header $NCCL_INC"

LAUNCHER=()
if command -v ccache >/dev/null 2>&1 && [ "${TUPE_NO_CCACHE:-0}" != 1 ]; then
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
    export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
    LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

START=$(date +%s)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUPE_WITH_QT=OFF \
    -DTUPE_BUILD_TESTS=OFF -DTUPE_WITH_NCCL=ON "-DTUPE_NCCL_INCLUDE_DIR=$NCCL_INC" \
    "${WHEEL_CMAKE_ARGS[@]}" "${LAUNCHER[@]}" > "$BUILD/cuda-configure.log" 2>&1 ||
    { tail -n 30 "$BUILD/cuda-configure.log" >&2; die "cmake configure failed (log $BUILD/cuda-configure.log)"; }
cmake --build "$BUILD" -j "$JOBS" --target tupe || fail "the build"
echo "cuda: configured and built in $(( $(date +%s) - START )) s"

# ---- checks ----------------------------------------------------------------------------------
TUPE="$BUILD/cli/tupe"
grep -q -- '-DTUPE_WITH_NCCL' <(grep -A3 '"file": ".*engine/src/distributed.cpp"' "$BUILD/compile_commands.json"; grep 'distributed.cpp' "$BUILD/compile_commands.json") ||
    fail "engine/src/distributed.cpp was not compiled with -DTUPE_WITH_NCCL"
echo "cuda: engine/src/distributed.cpp compiled with TUPE_WITH_NCCL (ProcessGroupNCCL, c10::cuda)"
needed="$(readelf -d "$TUPE" | awk '/NEEDED/ { gsub(/[][]/, "", $NF); print $NF }' | paste -sd' ')"
[[ " $needed " == *" libtorch_cuda.so "* ]] || fail "tupe does not link libtorch_cuda.so (NEEDED: $needed)"
resolved="$(ldd "$TUPE")"
for lib in libtorch_cuda.so libnccl.so.2 libcudart.so.13 libcublas.so.13 libcudnn.so.9; do
    path="$(awk -v l="$lib" '$1 == l { print $3 }' <<< "$resolved")"
    [ -n "$path" ] && [ "$path" != "not" ] || fail "ldd tupe: $lib not found"
    echo "cuda: $lib -> $path"
done
# (nm's output in a variable: with pipefail, grep -q closing the pipe early would fail nm.)
symbols="$(nm -DC "$TUPE")"
grep -q 'U c10d::ProcessGroupNCCL::ProcessGroupNCCL(' <<< "$symbols" ||
    fail "tupe does not call c10d::ProcessGroupNCCL's constructor (nm -DC)"
echo "cuda: tupe calls c10d::ProcessGroupNCCL's constructor from libtorch_cuda (the data-parallel NCCL path is linked)"
doctor="$("$TUPE" doctor --no-matmul 2>&1)" || { echo "$doctor" >&2; fail "tupe doctor"; }
cuda_line="$(awk '$1 == "cuda" { $1 = ""; sub(/^ +/, ""); print; exit }' <<< "$doctor")"
grep -q '^CUDA build' <<< "$cuda_line" || fail "tupe doctor's cuda line is '$cuda_line', not a CUDA build"
echo "CUDA build check: tupe links libtorch_cuda and NCCL, doctor: $cuda_line"
}
