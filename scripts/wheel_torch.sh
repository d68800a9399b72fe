# Sourced by scripts/torch2_check.sh, scripts/cuda_build_check.sh and scripts/gpu_check.sh: the
# CMake arguments that build this project against the LibTorch inside PyPI's torch wheel
# (site-packages/torch/{include,lib,share/cmake}) of the project's Python environment.
#
#   . scripts/wheel_torch.sh
#   wheel_torch_setup BUILD_DIR [PYTHON]
#                                   PYTHON: an interpreter whose torch wheel to use (default:
#                                   the project's environment, TUPE_VENV); sets WHEEL_PY, WHEEL_TORCH_DIR, WHEEL_TORCH_VERSION,
#                                   WHEEL_NVIDIA_DIR, WHEEL_CUDA_ROOT, WHEEL_CMAKE_ARGS (array)
#                                   and WHEEL_LIB_PATH; returns 2 with a one-line message on error
# Environment: TUPE_VENV (the environment's folder; default: the one `./run.sh venv` makes or
# finds, ~/.cache/tupe/venv-<hash of python/requirements.txt>).
#
# Why a CUDA toolkit even for a CPU build: PyPI's Linux torch is the CUDA 13 build, and its CMake
# config (share/cmake/Caffe2/public/cuda.cmake) runs find_package(CUDA) and enable_language(CUDA)
# for every consumer, failing without nvcc. nvcc, the CUDA headers and libraries come from the
# nvidia-* wheels (python/requirements.in: cuda-toolkit[nvcc,crt]). They sit in
# site-packages/nvidia/cu13/{bin,include,lib,nvvm} with versioned library names only
# (libcudart.so.13), where CMake's find_library looks for libcudart.so; so BUILD_DIR/cuda-root
# gets links: bin, include and nvvm to cu13's, and lib/ with every library of cu13, cudnn, nccl,
# nvshmem and cusparselt under its own name and its unversioned one. Nothing in the environment
# is changed.

wheel_torch_setup() {
    local build="$1" root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    WHEEL_PY="${2:-}"
    if [ -z "$WHEEL_PY" ]; then
        if [ -z "${TUPE_VENV:-}" ]; then
            TUPE_VENV="$("$root/run.sh" venv)" || { echo "wheel_torch.sh: ./run.sh venv failed" >&2; return 2; }
        fi
        WHEEL_PY="$TUPE_VENV/bin/python"
    fi
    [ -x "$WHEEL_PY" ] || { echo "wheel_torch.sh: no Python at $WHEEL_PY (./run.sh venv makes the project's)" >&2; return 2; }
    local info
    info="$("$WHEEL_PY" -c 'import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__.split("+")[0])' 2>&1)" ||
        { echo "wheel_torch.sh: $WHEEL_PY cannot import torch: ${info##*$'\n'}" >&2; return 2; }
    WHEEL_TORCH_DIR="$(sed -n 1p <<< "$info")"
    WHEEL_TORCH_VERSION="$(sed -n 2p <<< "$info")"
    WHEEL_NVIDIA_DIR="$(dirname "$WHEEL_TORCH_DIR")/nvidia"
    local cu="$WHEEL_NVIDIA_DIR/cu13"
    for f in "$WHEEL_TORCH_DIR/share/cmake/Torch/TorchConfig.cmake" "$cu/bin/nvcc" "$cu/include/cuda_runtime_api.h"; do
        [ -e "$f" ] || { echo "wheel_torch.sh: $f missing (python/requirements.in: torch, cuda-toolkit[nvcc,crt])" >&2; return 2; }
    done

    WHEEL_CUDA_ROOT="$build/cuda-root"
    mkdir -p "$WHEEL_CUDA_ROOT/lib" || return 2
    local d f name
    for d in bin include nvvm; do ln -sfn "$cu/$d" "$WHEEL_CUDA_ROOT/$d"; done
    for f in "$cu"/lib/* "$WHEEL_NVIDIA_DIR"/*/lib/lib*.so*; do
        [ -f "$f" ] || continue
        name="$(basename "$f")"
        ln -sfn "$f" "$WHEEL_CUDA_ROOT/lib/$name"
        case "$name" in
            *.so.*) [ -e "$WHEEL_CUDA_ROOT/lib/${name%%.so.*}.so" ] ||
                        ln -sfn "$f" "$WHEEL_CUDA_ROOT/lib/${name%%.so.*}.so" ;;
        esac
    done

    WHEEL_CMAKE_ARGS=(
        "-DCMAKE_PREFIX_PATH=$WHEEL_TORCH_DIR/share/cmake"
        "-DCUDA_TOOLKIT_ROOT_DIR=$WHEEL_CUDA_ROOT" "-DCUDAToolkit_ROOT=$WHEEL_CUDA_ROOT"
        "-DCMAKE_CUDA_COMPILER=$WHEEL_CUDA_ROOT/bin/nvcc"
    )
    # The run-time folders of the wheel's libraries: libtorch_cpu.so itself needs libcudart and
    # libcupti, which its RUNPATH finds beside it ($ORIGIN/../../nvidia/cu13/lib); executables
    # get CMake's RPATH to torch/lib.
    WHEEL_LIB_PATH="$WHEEL_TORCH_DIR/lib:$WHEEL_CUDA_ROOT/lib"
}
