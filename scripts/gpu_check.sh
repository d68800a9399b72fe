#!/usr/bin/env bash
# One prepared GPU run (issue 13): builds the engine and the `tupe` CLI headless against the
# machine's own (pip) LibTorch, then times `tupe bench` at base size in bf16 and fp32 on CUDA,
# pretrains bert-a briefly on the device, loads its `tupe export` into transformers'
# BertForMaskedLM (and a plain-torch BERT) against `tupe inspect`'s attention, and runs a
# 2-process data-parallel check (NCCL) against one process. Every step's command, wall time and
# output go to one file; a failed step is recorded and the script goes on.
# docs/distributed.md, "GPU check".
#
#   scripts/gpu_check.sh [OPTIONS] [REPORT]     REPORT default $OUT/gpu_check.txt (or ./)
#   scripts/gpu_check.sh --fetch-debs DIR       on Debian 12: apt-get download the .deb files
#                                               the GPU machine lacks, to carry along
# Options (environment in brackets):
#   --cpu | --device cpu|cuda   [TUPE_GPU_CHECK_DEVICE, default cuda] cpu: the same steps on a
#                               CPU machine against the system LibTorch, at small size
#   --debs DIR                  [TUPE_DEBS, default shared/debs] the carried .deb files,
#                               unpacked with dpkg -x for each dependency the system lacks
#   --debs-all                  unpack every dependency from DIR even where the system has it
#   --build-dir DIR             [TUPE_GPU_CHECK_BUILD, default /tmp/tupe-gpu-check/build-DEVICE]
#   --work-dir DIR              [TUPE_GPU_CHECK_WORK, default /tmp/tupe-gpu-check/work-DEVICE]
#   --jobs N                    [TUPE_JOBS, default nproc on cuda, 2 on cpu]
#   --budget SECONDS            [TUPE_GPU_CHECK_BUDGET, default 470 on cuda, 5400 on cpu]: steps
#                               that would start past it are recorded as skipped
#   --python PY                 [TUPE_PYTHON, default the first of python3, /usr/bin/python3
#                               that imports torch]
# Exit status: 0 when every step passed (or was skipped for a stated limit of the machine), 1
# otherwise; the report's SUMMARY says which.
set -uo pipefail
# The whole script is one { ... } block: bash reads it completely before running any of it, so
# editing or updating this file during a run cannot change the running one.
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HELPER="$ROOT/scripts/gpu_check_compare.py"
START=$(date +%s)

# The headless build's dependencies beyond LibTorch, as Debian 12 names them (apt-cache show,
# bookworm): component -> packages (-dev and its run-time library).
declare -A COMPONENT_DEBS=(
    [yaml-cpp]="libyaml-cpp-dev libyaml-cpp0.7"
    [icu]="libicu-dev libicu72"
    [sqlite]="libsqlite3-dev libsqlite3-0"
    [nlohmann-json]="nlohmann-json3-dev"
    [zlib]="zlib1g-dev"
)
COMPONENTS=(yaml-cpp icu sqlite nlohmann-json zlib)
FETCH_DEBS=(libyaml-cpp-dev libyaml-cpp0.7 libicu-dev libicu72 libsqlite3-dev libsqlite3-0
            nlohmann-json3-dev zlib1g-dev zlib1g)

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

DEVICE="${TUPE_GPU_CHECK_DEVICE:-cuda}"
DEBS="${TUPE_DEBS:-}"
DEBS_ALL=0
BUILD="${TUPE_GPU_CHECK_BUILD:-}"
WORK="${TUPE_GPU_CHECK_WORK:-}"
JOBS="${TUPE_JOBS:-}"
BUDGET="${TUPE_GPU_CHECK_BUDGET:-}"
PY="${TUPE_PYTHON:-}"
REPORT=""
FETCH_DIR=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu) DEVICE=cpu ;;
        --device) DEVICE="${2:?--device needs cpu or cuda}"; shift ;;
        --debs) DEBS="${2:?--debs needs a folder}"; shift ;;
        --debs-all) DEBS_ALL=1 ;;
        --build-dir) BUILD="${2:?}"; shift ;;
        --work-dir) WORK="${2:?}"; shift ;;
        --jobs) JOBS="${2:?}"; shift ;;
        --budget) BUDGET="${2:?}"; shift ;;
        --python) PY="${2:?}"; shift ;;
        --fetch-debs) FETCH_DIR="${2:?--fetch-debs needs a folder}"; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) REPORT="$1" ;;
    esac
    shift
done

# ---- --fetch-debs DIR: on a Debian 12 machine with the archive reachable, no root needed --------
if [ -n "$FETCH_DIR" ]; then
    command -v apt-get >/dev/null || { echo "gpu_check.sh: apt-get not found (Debian 12 only)" >&2; exit 2; }
    mkdir -p "$FETCH_DIR" && cd "$FETCH_DIR" || exit 2
    echo "downloading ${FETCH_DEBS[*]} into $(pwd)"
    apt-get download "${FETCH_DEBS[@]}" || {
        echo "gpu_check.sh: apt-get download failed (run 'apt-get update' once first?)" >&2; exit 1; }
    sha256sum ./*.deb > SHA256SUMS
    ls -l ./*.deb
    echo "carry $(pwd) to the GPU machine and run: TUPE_DEBS=$FETCH_DIR scripts/gpu_check.sh"
    exit 0
fi

case "$DEVICE" in cpu | cuda) ;; *) echo "gpu_check.sh: --device cpu or cuda, got '$DEVICE'" >&2; exit 2 ;; esac
if [ "$DEVICE" = cuda ]; then
    : "${JOBS:=$(nproc)}" "${BUDGET:=470}"
    BUILD_LIMIT=400
else  # a CPU machine: the build alone takes 10-20 min on 2 cores
    : "${JOBS:=2}" "${BUDGET:=5400}"
    BUILD_LIMIT=4800
fi
: "${BUILD:=/tmp/tupe-gpu-check/build-$DEVICE}" "${WORK:=/tmp/tupe-gpu-check/work-$DEVICE}"
if [ -z "$DEBS" ]; then
    for d in "$ROOT/shared/debs" "$ROOT/../shared/debs"; do [ -d "$d" ] && DEBS="$d" && break; done
fi
if [ -z "$REPORT" ]; then
    if [ -n "${OUT:-}" ]; then REPORT="$OUT/gpu_check.txt"; else REPORT="$(pwd)/gpu_check.txt"; fi
fi
mkdir -p "$(dirname "$REPORT")" "$WORK/logs" "$BUILD" || exit 2
REPORT="$(cd "$(dirname "$REPORT")" && pwd)/$(basename "$REPORT")"
: > "$REPORT"
FIGURES="$WORK/figures.txt"
: > "$FIGURES"
DEADLINE=$((START + BUDGET))
NICE=()
[ "$DEVICE" = cpu ] && NICE=(nice -n 10)

# ---- step runner -----------------------------------------------------------------------------
STEP_N=0
S_NAME=() S_STATUS=() S_WALL=()  # the summary table, one entry per step
FAILED=0                         # steps that failed (or could not run for want of an input)
LAST_LOG=""
MAX_LINES=120

say() { printf '%s\n' "$@" >> "$REPORT"; }  # one line per argument
figure() { printf 'figure: %s\n' "$*" >> "$FIGURES"; say "figure: $*"; }
now() { date +%s.%N; }
summary_row() { S_NAME+=("$1") S_STATUS+=("$2") S_WALL+=("$3"); }

skip_step() {  # skip_step NAME REASON [failure]: a step that did not run (a failure if asked)
    STEP_N=$((STEP_N + 1))
    say "" "=== [$STEP_N] $1" "SKIPPED: $2"
    summary_row "$1" "${3:+FAILED, }skipped: $2" "-"
    [ -n "${3:-}" ] && FAILED=$((FAILED + 1))
    return 0
}

# run_step NAME LIMIT_S COMMAND: runs COMMAND with bash -o pipefail under `timeout` (capped by
# the budget), logs it to $WORK/logs and the report; returns its status.
run_step() {
    local name="$1" limit="$2" cmd="$3"
    local left=$((DEADLINE - $(date +%s)))
    if [ "$left" -lt 10 ]; then
        skip_step "$name" "out of time (budget ${BUDGET} s)" failure
        return 97
    fi
    [ "$limit" -gt "$left" ] && limit="$left"
    STEP_N=$((STEP_N + 1))
    LAST_LOG="$WORK/logs/$(printf '%02d' "$STEP_N")-$(tr -c 'A-Za-z0-9.=\n-' '_' <<< "$name").log"
    say "" "=== [$STEP_N] $name" "command: $cmd" \
        "started: $(date -u +%FT%TZ), limit ${limit} s, log $LAST_LOG"
    local t0 rc t1 wall
    t0=$(now)
    timeout --kill-after=10 "$limit" bash -o pipefail -c "$cmd" > "$LAST_LOG" 2>&1 < /dev/null
    rc=$?
    t1=$(now)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    # Progress bars redraw with \r: one line per redraw in the report.
    local lines keep=$MAX_LINES
    [ "$rc" -ne 0 ] && keep=$((MAX_LINES * 3))  # a compiler error needs its context
    lines=$(tr '\r' '\n' < "$LAST_LOG" | wc -l)
    if [ "$lines" -gt "$keep" ]; then
        say "output ($lines lines; the first 20 and the last $((keep - 20)), all in the log):"
        tr '\r' '\n' < "$LAST_LOG" | head -n 20 >> "$REPORT"
        say "[...]"
        tr '\r' '\n' < "$LAST_LOG" | tail -n $((keep - 20)) >> "$REPORT"
    else
        say "output:"
        tr '\r' '\n' < "$LAST_LOG" >> "$REPORT"
    fi
    local status="ok"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status="TIMEOUT after ${limit} s"
    elif [ "$rc" -ne 0 ]; then
        status="FAILED (exit $rc)"
    fi
    [ "$rc" -ne 0 ] && FAILED=$((FAILED + 1))
    say "--- $name: $status, wall $wall s"
    summary_row "$name" "$status" "${wall} s"
    grep -h '^figure: ' "$LAST_LOG" >> "$FIGURES" 2>/dev/null
    return "$rc"
}

# A failed step that is a known limit of the machine, not a bug: restated, not counted.
not_a_failure() {  # not_a_failure STATUS
    S_STATUS[${#S_STATUS[@]} - 1]="$1"
    FAILED=$((FAILED - 1))
    say "--- not counted as a failure: $1"
}

q() {  # a command line, quoted for bash -c and the report
    local s
    s=$(printf '%q ' "$@")
    printf '%s' "${s% }"
}

# ---- 0. the machine --------------------------------------------------------------------------
say "TUPE Workbench GPU check ($DEVICE), $(date -u +%FT%TZ)"
if COMMIT=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null); then
    git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT (work tree differs from it)"
else
    COMMIT="unknown (no git here)"
fi
say "repository $ROOT, commit $COMMIT"
say "report $REPORT; build $BUILD; work $WORK; jobs $JOBS; budget $BUDGET s; debs ${DEBS:-none}"

if [ -z "$PY" ]; then
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then PY="$(command -v "$p")"; break; fi
    done
fi
[ -n "$PY" ] || PY=python3

run_step environment 60 "$(cat <<EOF
uname -srm; (. /etc/os-release 2>/dev/null && echo "os: \$PRETTY_NAME"); ldd --version 2>&1 | head -n1
echo "cpus: \$(nproc)"; free -g | head -n2
cmake --version | head -n1; echo "ninja \$(ninja --version)"; c++ --version | head -n1
command -v nvcc >/dev/null && nvcc --version | tail -n2 || echo 'nvcc: not found'
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv || echo 'nvidia-smi: not found'
command -v dpkg >/dev/null && echo 'dpkg: yes' || echo 'dpkg: not found (python unpacks .deb files)'
$(q "$PY") - <<'PYEOF'
import sys, torch
print(f"python {sys.executable} {sys.version.split()[0]}; torch {torch.__version__} (cuda {torch.version.cuda}, git {getattr(torch.version, 'git_version', '?')[:12]})")
print(f"torch cmake prefix: {torch.utils.cmake_prefix_path}")
print(f"cuda available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"  cuda:{i} {p.name}, {p.total_memory / 2**30:.0f} GiB, capability {p.major}.{p.minor}")
try:
    import torch.distributed as dist
    print(f"nccl available: {dist.is_nccl_available()}, gloo: {dist.is_gloo_available()}")
except Exception as e:
    print(f"torch.distributed: {e}")
for m in ("transformers", "numpy", "safetensors"):
    try:
        print(f"{m} {__import__(m).__version__}")
    except ImportError:
        print(f"{m}: not installed")
PYEOF
EOF
)"

GPU_COUNT=0
if [ "$DEVICE" = cuda ]; then
    GPU_COUNT=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
    CAP=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))' 2>/dev/null || true)
    export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-${CAP:-9.0}}"
fi

# ---- 1. dependencies: the system's, or the carried .deb files unpacked into $WORK/debroot ----
has_component() {
    local inc
    case "$1" in
        yaml-cpp) compgen -G "/usr/lib/*/cmake/yaml-cpp/yaml-cpp-config.cmake" > /dev/null ||
                  compgen -G "/usr/local/lib*/cmake/yaml-cpp/yaml-cpp-config.cmake" > /dev/null ||
                  compgen -G "/usr/share/cmake/yaml-cpp/yaml-cpp-config.cmake" > /dev/null
                  return ;;
        icu) inc=unicode/uchar.h ;;
        sqlite) inc=sqlite3.h ;;
        nlohmann-json) inc=nlohmann/json.hpp ;;
        zlib) inc=zlib.h ;;
    esac
    [ -e "/usr/include/$inc" ] || [ -e "/usr/local/include/$inc" ]
}

DEPS_ROOT="$WORK/debroot"
DEPS_PREFIX=""
UNPACK=()
for c in "${COMPONENTS[@]}"; do
    if [ "$DEBS_ALL" = 1 ] || ! has_component "$c"; then UNPACK+=("$c"); fi
done
if [ ${#UNPACK[@]} -eq 0 ]; then
    skip_step dependencies "the system has the headers of ${COMPONENTS[*]}"
elif [ -z "$DEBS" ] || [ ! -d "$DEBS" ]; then
    skip_step dependencies "missing ${UNPACK[*]} and no .deb folder (--debs DIR / TUPE_DEBS; make one with --fetch-debs)" failure
else
    pkgs=()
    for c in "${UNPACK[@]}"; do read -ra more <<< "${COMPONENT_DEBS[$c]}"; pkgs+=("${more[@]}"); done
    if command -v dpkg > /dev/null; then unpack='dpkg -x "$f" '"$(q "$DEPS_ROOT")"
    else unpack="$(q "$PY" "$HELPER") unpack-deb \"\$f\" $(q "$DEPS_ROOT")"; fi
    run_step dependencies 120 "$(cat <<EOF
rm -rf $(q "$DEPS_ROOT") && mkdir -p $(q "$DEPS_ROOT")
missing=0
for p in $(q "${pkgs[@]}"); do
    f=\$(ls $(q "$DEBS")/\${p}_*.deb 2>/dev/null | sort -V | tail -n1)
    if [ -z "\$f" ]; then echo "\$p: no \${p}_*.deb in $(q "$DEBS")"; missing=1; continue; fi
    echo "\$p: \$(basename "\$f")"; $unpack || missing=1
done
find $(q "$DEPS_ROOT") -name '*.cmake' -path '*cmake*' | sed 's|^|  |'
exit \$missing
EOF
)"
    DEPS_PREFIX="$DEPS_ROOT/usr"
fi
ARCH_DIR="$(uname -m)-linux-gnu"
CMAKE_PREFIX=()
DEP_FLAGS=()
RUN_LIB_PATH=""
if [ -n "$DEPS_PREFIX" ]; then
    CMAKE_PREFIX+=("$DEPS_PREFIX")
    RUN_LIB_PATH="$DEPS_PREFIX/lib/$ARCH_DIR"
    [[ " ${UNPACK[*]} " == *" icu "* ]] && DEP_FLAGS+=("-DICU_ROOT=$DEPS_PREFIX")
    if [[ " ${UNPACK[*]} " == *" zlib "* ]]; then
        # zlib1g-dev's libz.so points at the Debian run-time's file, which this machine may not
        # have: link against whatever libz.so.1 it has.
        zlib_so="$DEPS_PREFIX/lib/$ARCH_DIR/libz.so"
        [ -e "$zlib_so" ] || zlib_so="$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64/ { print $NF; exit }')"
        DEP_FLAGS+=("-DZLIB_INCLUDE_DIR=$DEPS_PREFIX/include" "-DZLIB_LIBRARY=$zlib_so")
    fi
fi

# ---- 2. configure and build (tupe only), NCCL on for cuda ------------------------------------
TORCH_FLAGS=()
CXX_FLAGS=""
LINK_FLAGS=""
NCCL_NOTE=""
WHEEL_BUILD=0
if [ "$DEVICE" = cuda ]; then
    # The same build as scripts/cuda_build_check.sh where this Python's torch wheel has pip's
    # CUDA toolkit beside it (python/requirements.in: cuda-toolkit[nvcc,crt]): its CMake
    # arguments come from scripts/wheel_torch.sh. Otherwise the machine's own nvcc, below.
    # shellcheck source=scripts/wheel_torch.sh
    . "$ROOT/scripts/wheel_torch.sh"
    if "$PY" -c 'import os, sys, torch; d = os.path.dirname(os.path.dirname(torch.__file__)); sys.exit(not os.path.exists(os.path.join(d, "nvidia", "cu13", "bin", "nvcc")))' 2>/dev/null &&
        wheel_torch_setup "$BUILD" "$PY"; then
        WHEEL_BUILD=1
        TORCH_FLAGS+=("${WHEEL_CMAKE_ARGS[@]}")
        CMAKE_PREFIX=("$WHEEL_TORCH_DIR/share/cmake" "${CMAKE_PREFIX[@]}")
        say "" "build: the wheel's LibTorch $WHEEL_TORCH_VERSION with pip's CUDA toolkit (scripts/wheel_torch.sh, as scripts/cuda_build_check.sh)"
    fi
fi
if [ "$DEVICE" = cuda ]; then
    TORCH_CMAKE=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
    TORCH_DIR=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
    [ -n "$TORCH_CMAKE" ] && CMAKE_PREFIX=("$TORCH_CMAKE" "${CMAKE_PREFIX[@]}")
    # pip's CUDA libraries (cuDNN, NCCL, cuBLAS ...) live in site-packages/nvidia/*/lib: the
    # linker needs them to check libtorch_cuda.so's own dependencies, and the run needs them.
    NV_ROOT="$(dirname "${TORCH_DIR:-/nonexistent}")/nvidia"
    NV_LIBS=$(find "$NV_ROOT" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
    LINK_FLAGS="-Wl,-rpath-link,${TORCH_DIR}/lib${NV_LIBS:+:$NV_LIBS}"
    RUN_LIB_PATH="${RUN_LIB_PATH:+$RUN_LIB_PATH:}${TORCH_DIR}/lib${NV_LIBS:+:$NV_LIBS}"
    # NCCL's own header (pip: nvidia/nccl/include), not torch/csrc/cuda/nccl.h, torch's wrapper.
    NCCL_H=$( { find "$NV_ROOT" -path '*/include/nccl.h' 2>/dev/null
                ls /usr/include/nccl.h /usr/local/cuda/include/nccl.h /usr/local/cuda-*/include/nccl.h 2>/dev/null
              } | grep -v '/torch/' | head -n1)
    NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
    if [ "$WHEEL_BUILD" = 1 ]; then
        :  # nvcc and the toolkit root are in WHEEL_CMAKE_ARGS
    elif [ -n "$NVCC" ]; then
        CUDA_HOME="${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}"
        PATH="$(dirname "$NVCC"):$PATH"
        export PATH
        TORCH_FLAGS+=("-DCUDAToolkit_ROOT=$CUDA_HOME" "-DCUDA_TOOLKIT_ROOT_DIR=$CUDA_HOME"
                      "-DCMAKE_CUDA_COMPILER=$NVCC")
    fi
    if [ -n "$NCCL_H" ]; then
        CXX_FLAGS="-isystem $(dirname "$NCCL_H")"
        VARIANTS=("nccl=ON gloo=auto" "nccl=ON gloo=OFF" "nccl=OFF gloo=auto")
    else
        NCCL_NOTE="no nccl.h found (site-packages/nvidia, /usr/include, /usr/local/cuda): NCCL off"
        VARIANTS=("nccl=OFF gloo=auto")
    fi
else
    VARIANTS=("nccl=OFF gloo=auto" "nccl=OFF gloo=OFF")
fi
[ -n "$NCCL_NOTE" ] && say "" "note: $NCCL_NOTE"
export LD_LIBRARY_PATH="${RUN_LIB_PATH}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LAUNCHER=()
command -v ccache > /dev/null && LAUNCHER=("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
prefix_list=$(IFS=';'; echo "${CMAKE_PREFIX[*]:-}")

BUILD_OK=0
BUILD_VARIANT=""
# pip's LibTorch bundles its own libgomp: the engine's kernels stay off OpenMP there (one
# runtime); Debian's LibTorch (--cpu) uses GCC's libgomp, which -fopenmp links.
ENGINE_OPENMP=OFF
[ "$DEVICE" = cpu ] && ENGINE_OPENMP=ON
for v in "${VARIANTS[@]}"; do
    nccl=${v#nccl=}; nccl=${nccl%% *}
    gloo=${v##*gloo=}
    gloo_flag=("-UTUPE_GLOO_INCLUDE_DIR")
    # OFF is a cached value find_path keeps (not *-NOTFOUND) and if() reads as false.
    [ "$gloo" = OFF ] && gloo_flag=("-DTUPE_GLOO_INCLUDE_DIR=OFF")
    flags=(-S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUPE_WITH_QT=OFF
           -DTUPE_BUILD_TESTS=OFF "-DTUPE_WITH_NCCL=$nccl" "${gloo_flag[@]}"
           "-DTUPE_ENGINE_OPENMP=$ENGINE_OPENMP"
           "${TORCH_FLAGS[@]}" "${DEP_FLAGS[@]}" "${LAUNCHER[@]}")
    [ -n "$prefix_list" ] && flags+=("-DCMAKE_PREFIX_PATH=$prefix_list")
    [ -n "$CXX_FLAGS" ] && flags+=("-DCMAKE_CXX_FLAGS=$CXX_FLAGS")
    [ -n "$LINK_FLAGS" ] && flags+=("-DCMAKE_EXE_LINKER_FLAGS=$LINK_FLAGS")
    run_step "configure ($v)" 180 "$(q cmake "${flags[@]}") && grep -E '^(Torch_DIR|yaml-cpp_DIR|nlohmann_json_DIR|ICU_INCLUDE_DIR|SQLite3_INCLUDE_DIR|ZLIB_INCLUDE_DIR|TUPE_GLOO_INCLUDE_DIR|TUPE_C10D_INCLUDE_DIR|TUPE_WITH_NCCL)[:=]' $(q "$BUILD/CMakeCache.txt")" || break
    if run_step "build ($v)" "$BUILD_LIMIT" "$(q "${NICE[@]}" cmake --build "$BUILD" --target tupe -j "$JOBS")"; then
        BUILD_OK=1
        BUILD_VARIANT="$v"
        break
    fi
    # Only distributed.cpp depends on the NCCL/Gloo choice; any other failure is final.
    grep -q 'distributed\.cpp' "$LAST_LOG" || break
    say "(the failure is in distributed.cpp: trying the next NCCL/Gloo choice)"
done
TUPE="$BUILD/cli/tupe"
[ "$BUILD_OK" = 1 ] && figure "build: tupe built against $( [ "$DEVICE" = cuda ] && echo "pip LibTorch (${TORCH_CMAKE:-?})" || echo "the system LibTorch" ) with $BUILD_VARIANT"

need_tupe() {  # need_tupe NAME: false (and the step recorded as skipped) without a binary
    [ "$BUILD_OK" = 1 ] && [ -x "$TUPE" ] && return 0
    skip_step "$1" "no tupe binary (the build did not succeed)"
    return 1
}

# ---- 3. doctor, bench (bf16 and fp32) ----------------------------------------------------------
if need_tupe doctor; then run_step doctor 60 "$(q "$TUPE") doctor"; fi

if [ "$DEVICE" = cuda ]; then
    BENCH=(--device cuda --size base --seq 512 --batch 32 --steps 5 --warmup 2)
else
    BENCH=(--device cpu --size small --seq 64 --batch 4 --steps 2 --warmup 1 --threads 2
           --preset "bert-a,tupe-a")
fi
BENCH_FILES=()
for dtype in bf16 fp32; do
    if need_tupe "bench $dtype"; then
        json="$WORK/bench_$dtype.json"
        run_step "bench $dtype" 180 "$(q "$TUPE" bench "${BENCH[@]}" --dtype "$dtype" --format json) | tee $(q "$json")" &&
            BENCH_FILES+=("$json")
    fi
done
if [ ${#BENCH_FILES[@]} -gt 0 ]; then
    run_step "bench summary" 30 "$(q "$PY" "$HELPER" bench-summary "${BENCH_FILES[@]}")"
fi

# ---- 4. data, a short bert-a pretraining on the device ----------------------------------------
DATA="$WORK/data"
INSPECT_TEXT="the quick dog follows a small cat across the old road near the river ."
DATA_OK=0
if need_tupe data; then
    run_step data 60 "rm -rf $(q "$WORK/cache") && $(q "$PY" "$HELPER" corpus "$DATA/corpus.txt" --sentences 20000) && $(q "$TUPE" build-vocab --corpus "$DATA/corpus.txt" --size 2000 --out "$DATA/vocab.txt")" && DATA_OK=1
fi
if [ "$DEVICE" = cuda ]; then
    PRE=(seq=128 batch=32 steps=30 dtype=bf16 threads=0)
else
    PRE=(seq=64 batch=8 steps=6 dtype=fp32 threads=2)
fi
declare -A P
for kv in "${PRE[@]}"; do P[${kv%%=*}]=${kv#*=}; done
write_config() {  # write_config FILE SEQ BATCH STEPS DTYPE THREADS DROPOUT
    cat > "$1" <<EOF
# written by scripts/gpu_check.sh
model:
  preset: bert-a
  size: small
  hidden_dropout_prob: $7
  attention_probs_dropout_prob: $7
data:
  corpus: $DATA/corpus.txt
  vocab: $DATA/vocab.txt
  cache_dir: $WORK/cache
  max_seq_len: $2
train:
  steps: $4
  batch_size: $3
  lr: 1.0e-3
  warmup_steps: 2
  eval_interval: 0
  eval_batches: 2
  checkpoint_interval: 0
  log_interval: 1
  seed: 1
  device: $DEVICE
  dtype: $5
  threads: $6
EOF
}
RUN="$WORK/runs/bert-a"
PRETRAIN_OK=0
if [ "$DATA_OK" = 1 ]; then
    write_config "$WORK/pretrain.yaml" "${P[seq]}" "${P[batch]}" "${P[steps]}" "${P[dtype]}" "${P[threads]}" 0.1
    run_step "pretrain bert-a" 180 "rm -rf $(q "$RUN") && cat $(q "$WORK/pretrain.yaml") && $(q "$TUPE" pretrain --config "$WORK/pretrain.yaml" --out "$RUN") && $(q "$PY" "$HELPER" run-summary "$RUN" --label "bert-a ($DEVICE)")" &&
        PRETRAIN_OK=1
else
    skip_step "pretrain bert-a" "no data"
fi

# ---- 5. export -> transformers BertForMaskedLM vs tupe inspect --------------------------------
if [ "$PRETRAIN_OK" = 1 ]; then
    run_step "export + inspect" 120 "rm -rf $(q "$WORK/export") $(q "$WORK/inspect") && $(q "$TUPE" export "$RUN/checkpoint.pt" --out "$WORK/export/hf") && $(q "$TUPE" export "$RUN/checkpoint.pt" --out "$WORK/export/weights.pt") && $(q "$TUPE" inspect "$RUN/checkpoint.pt" --text "$INSPECT_TEXT" --out "$WORK/inspect") && ls -l $(q "$WORK/export/hf") $(q "$WORK/inspect")" &&
        run_step "compare with HF BERT" 180 "$(q "$PY" "$HELPER" hf-compare --export "$WORK/export/hf" --inspect "$WORK/inspect" --pt "$WORK/export/weights.pt")"
else
    skip_step "export + inspect" "no bert-a checkpoint"
fi

# ---- 6. data parallel: 2 processes against 1 (dropout 0: the same update up to summation) ----
# The launcher gives rank r cuda:r (LOCAL_RANK); with one GPU both ranks are started by hand as
# torchrun would, both on cuda:0, and NCCL may refuse two ranks on one device.
DP_TOL=1e-4  # measured here (cpu, Gloo): 9e-6
if [ "$DATA_OK" = 1 ]; then
    DP_THREADS=2
    [ "$DEVICE" = cuda ] && DP_THREADS=4
    write_config "$WORK/dp.yaml" 64 8 4 fp32 "$DP_THREADS" 0
    DP1="$WORK/runs/dp1"
    DP2="$WORK/runs/dp2"
    dp_ok=0
    run_step "dp 1 process" 120 "rm -rf $(q "$DP1") && $(q "$TUPE" pretrain --config "$WORK/dp.yaml" --out "$DP1") && $(q "$PY" "$HELPER" run-summary "$DP1" --label "dp 1 process ($DEVICE)")" && dp_ok=1
    if [ "$dp_ok" = 1 ] && [ "$DEVICE" = cuda ] && [[ "$BUILD_VARIANT" == nccl=OFF* ]]; then
        skip_step "dp 2 processes" "the build has no NCCL ($BUILD_VARIANT)" failure
        dp_ok=0
    elif [ "$dp_ok" = 1 ] && [ "$DEVICE" = cuda ] && [ "$GPU_COUNT" -lt 2 ]; then
        port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        worker() {  # the torchrun variables for rank $1 of 2, both on cuda:0
            q env RANK="$1" LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
                MASTER_PORT="$port" TUPE_DIST_TIMEOUT=60 "$TUPE" pretrain --config "$WORK/dp.yaml" --out "$DP2"
        }
        if run_step "dp 2 processes, 1 GPU" 150 "rm -rf $(q "$DP2"); $(worker 0) & p0=\$!; $(worker 1) & p1=\$!; wait \$p0; a=\$?; wait \$p1; b=\$?; echo \"rank 0 exit \$a, rank 1 exit \$b\"; [ \$a -eq 0 ] && [ \$b -eq 0 ] && $(q "$PY" "$HELPER" run-summary "$DP2" --label "dp 2 processes on cuda:0 (nccl)")"; then
            :
        else
            dp_ok=0
            if grep -qiE 'duplicate gpu|ncclInvalidUsage|invalid usage' "$LAST_LOG"; then
                not_a_failure "skipped: NCCL refuses 2 ranks on 1 GPU (log)"
            fi
        fi
    elif [ "$dp_ok" = 1 ]; then
        run_step "dp 2 processes" 150 "rm -rf $(q "$DP2") && $(q "$TUPE" pretrain --config "$WORK/dp.yaml" --out "$DP2" --nproc-per-node 2) && $(q "$PY" "$HELPER" run-summary "$DP2" --label "dp 2 processes ($DEVICE, $([ "$DEVICE" = cuda ] && echo nccl || echo gloo))")" || dp_ok=0
    fi
    if [ "$dp_ok" = 1 ]; then
        run_step "dp compare" 60 "$(q "$TUPE" export "$DP1/checkpoint.pt" --out "$WORK/export/dp1.pt") && $(q "$TUPE" export "$DP2/checkpoint.pt" --out "$WORK/export/dp2.pt") && $(q "$PY" "$HELPER" weights-compare "$WORK/export/dp1.pt" "$WORK/export/dp2.pt" --runs "$DP1" "$DP2" --tol "$DP_TOL" --what "dp after 4 steps, 2 processes vs 1")"
    fi
else
    skip_step "data parallel" "no data"
fi

# ---- summary -----------------------------------------------------------------------------------
TOTAL=$(( $(date +%s) - START ))
{
    echo
    echo "=== SUMMARY ($DEVICE, $(date -u +%FT%TZ), total ${TOTAL} s of a ${BUDGET} s budget)"
    printf '%-3s %-32s %-50s %8s\n' "#" "step" "status" "wall"
    for i in "${!S_NAME[@]}"; do
        printf '%-3s %-32s %-50s %8s\n' "$((i + 1))" "${S_NAME[$i]}" "${S_STATUS[$i]}" "${S_WALL[$i]}"
    done
    echo
    echo "figures:"
    sed 's/^figure: /  /' "$FIGURES"
    echo
    if [ "$FAILED" -eq 0 ]; then echo "result: every step that ran passed"
    else echo "result: $FAILED step(s) FAILED or could not run for want of an input"; fi
} >> "$REPORT"
# The full logs beside the report (the report keeps the head and tail of long outputs).
LOGS_COPY="${REPORT%.txt}_logs"
rm -rf "$LOGS_COPY" && cp -r "$WORK/logs" "$LOGS_COPY" 2>/dev/null
sed -n '/^=== SUMMARY/,$p' "$REPORT"
echo "report: $REPORT (full step logs in $LOGS_COPY)"
[ "$FAILED" -eq 0 ] && exit 0
exit 1
}
