#!/usr/bin/env bash
# LibTorch 2.x, linked and tested: builds the headless set (-DTUPE_WITH_QT=OFF, what the GPU
# machines build: tupe and every non-GUI test executable) against the LibTorch inside PyPI's
# torch wheel of the project's Python environment (site-packages/torch/{include,lib,share/cmake};
# python/requirements.in pins the version), checks that the binaries really load that LibTorch,
# and runs the whole headless test suite there on the CPU.
#
#   scripts/torch2_check.sh --build-dir DIR [--jobs N] [--build-only] [-- CTEST_ARGS...]
#
#   --build-dir DIR   the build folder (./run.sh test: build-torch2); reused, so a second run
#                     builds only what changed (ccache makes a fresh folder cheap too)
#   --jobs N          [TUPE_JOBS, default nproc] compilers and test processes at once
#   --build-only      configure, build and check the binaries, run no test
#   -- CTEST_ARGS     passed to ctest, e.g. -- -R test_engine
# Environment:
#   TUPE_VENV         the Python environment (default: `./run.sh venv`, which makes it the first
#                     time: about 2 minutes and 5.8 GB in ~/.cache/tupe)
#   TUPE_NO_CCACHE=1  build without ccache (by default ccache is used when installed)
#   TUPE_BERT_VOCAB   the real vocabulary some tests read (./run.sh sets it)
#
# How: scripts/wheel_torch.sh gives CMake the wheel's TorchConfig.cmake and, because that config
# needs a CUDA compiler even for CPU work, nvcc and the CUDA libraries from the nvidia-* wheels.
# The build uses the wheel's headers as they are, at the C++ standard its config asks for
# (C++20 for 2.15). Executables link libtorch (so libtorch_cuda too, as any consumer of this
# wheel does) and run on the CPU: no GPU is needed or used. Before the tests run, `tupe doctor`
# must report the wheel's version and `ldd` must show libtorch_cpu.so from the wheel, not
# Debian's 1.13. ctest runs every test executable but the Qt ones (not built here);
# test_experiments/headless is left out (its cases run in test_experiments' shards).
#
# Output: the build's and ctest's output, then the GoogleTest cases counted over every shard,
# and as the last line "LibTorch X.Y.Z (PyPI torch wheel): N tests passed, M failed". Exit
# status: 0 when everything built and every test passed, 1 when a build or test failed, 2 when
# the check could not run (no Python environment, no CMake configure, the wrong LibTorch).
set -uo pipefail
# One { ... } block: bash reads it all before running any of it (edits during a run are safe).
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${TUPE_JOBS:-$(nproc)}"
BUILD=""
BUILD_ONLY=0
CTEST_ARGS=()

usage() { sed -n '2,/^# Output:/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "torch2_check.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) BUILD="${2:?--build-dir needs a folder}"; shift ;;
        --jobs) JOBS="${2:?--jobs needs a number}"; shift ;;
        --build-only) BUILD_ONLY=1 ;;
        --) shift; CTEST_ARGS=("$@"); break ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
[ -n "$BUILD" ] || die "--build-dir DIR is required (see --help)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number, got '$JOBS'"
for tool in cmake ninja ctest ldd; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (./run.sh installs it)"
done
mkdir -p "$BUILD" || die "cannot create $BUILD"
BUILD="$(cd "$BUILD" && pwd)"

# shellcheck source=scripts/wheel_torch.sh
. "$ROOT/scripts/wheel_torch.sh"
wheel_torch_setup "$BUILD" || exit 2
echo "torch2: LibTorch $WHEEL_TORCH_VERSION from $WHEEL_TORCH_DIR"

LAUNCHER=()
if command -v ccache >/dev/null 2>&1 && [ "${TUPE_NO_CCACHE:-0}" != 1 ]; then
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
    export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
    LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# ---- configure and build --------------------------------------------------------------------
START=$(date +%s)
# The kill-and-resume soak (ChaosTest, ~1 minute) and the output identities (OutputIdentityTest,
# ~2.5 minutes of one process) test the runner's processes and the store, the same code on
# either LibTorch: they run in the main build's suite only (CONTRIBUTING.md, CI budget).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUPE_WITH_QT=OFF \
    -DTUPE_TEST_EXCLUDE=":ChaosTest.*:OutputIdentityTest.*" "${WHEEL_CMAKE_ARGS[@]}" "${LAUNCHER[@]}" > "$BUILD/torch2-configure.log" 2>&1 ||
    { tail -n 30 "$BUILD/torch2-configure.log" >&2; die "cmake configure failed (log $BUILD/torch2-configure.log)"; }
grep -q "^Torch_DIR:PATH=$WHEEL_TORCH_DIR/" "$BUILD/CMakeCache.txt" ||
    die "$BUILD was configured against another LibTorch ($(grep '^Torch_DIR' "$BUILD/CMakeCache.txt")); remove it"
echo "torch2: configured in $(( $(date +%s) - START )) s; building with $JOBS jobs"
cmake --build "$BUILD" -j "$JOBS" || { echo "torch2: the build FAILED" >&2; exit 1; }
echo "torch2: built in $(( $(date +%s) - START )) s"

# ---- the binaries load the wheel's LibTorch --------------------------------------------------
TUPE="$BUILD/cli/tupe"
doctor="$("$TUPE" doctor --no-matmul 2>&1)" || { echo "$doctor" >&2; die "tupe doctor failed"; }
reported="$(awk '$1 == "libtorch" { print $2; exit }' <<< "$doctor")"
[ "$reported" = "$WHEEL_TORCH_VERSION" ] ||
    die "tupe doctor reports LibTorch '$reported', the wheel is $WHEEL_TORCH_VERSION"
linked=0
for exe in "$TUPE" "$BUILD"/tests/test_*; do
    [ -x "$exe" ] || continue
    deps="$(ldd "$exe")"
    # test_core is torch-free by design (core/ has no LibTorch include path).
    grep -qE '^\s*lib(torch|c10)' <<< "$deps" || continue
    lib="$(awk '$1 == "libtorch_cpu.so" { print $3 }' <<< "$deps")"
    [ "$lib" -ef "$WHEEL_TORCH_DIR/lib/libtorch_cpu.so" ] ||
        die "$(basename "$exe") loads libtorch_cpu.so from '${lib:-nowhere}', not the wheel's"
    linked=$((linked + 1))
done
echo "torch2: tupe doctor: $(grep -E '^(libtorch|cuda) ' <<< "$doctor" | tr -s ' ' | paste -sd ';' | sed 's/;/; /')"
echo "torch2: all $linked executables that link LibTorch load $WHEEL_TORCH_DIR/lib/libtorch_cpu.so"
[ "$BUILD_ONLY" = 1 ] && exit 0

# ---- the whole headless suite ----------------------------------------------------------------
LOG="$BUILD/torch2-ctest.log"
echo "torch2: ctest -j $JOBS (log $LOG)"
# -V keeps each shard's GoogleTest summary in the log, which the count below reads. The Slurm
# entry (SlurmTest.*, ~5.5 minutes mostly waiting on Slurm's time limits and requeues) runs in
# the main build's suite only: it tests the executor and Slurm, the same code on either
# LibTorch, and the data-parallel tests that do depend on LibTorch's c10d run here in their
# one-machine form (test_engine, test_experiments).
ctest --test-dir "$BUILD" -V -j "$JOBS" -E '^test_experiments/(headless|slurm)$' "${CTEST_ARGS[@]}" \
    > "$LOG" 2>&1
ctest_rc=$?
# ctest's own summary and any failure's output, as --output-on-failure would show.
grep -E '^[0-9]+/[0-9]+ Test|tests passed|tests failed|^The following|^\s+[0-9]+ - ' "$LOG" |
    grep -v ' Passed ' || true
"$WHEEL_PY" - "$LOG" "$WHEEL_TORCH_VERSION" "$ctest_rc" <<'PY'
import re
import sys

log, version, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(log, errors="replace").read()
# With -V, ctest prefixes each line of a test's output with "N: ".
body = re.sub(r"(?m)^\d+: ", "", text)
passed = sum(int(n) for n in re.findall(r"(?m)^\[  PASSED  \] (\d+) tests?\.", body))
failed_cases = set(re.findall(r"(?m)^\[  FAILED  \] (\S+\.\S+) \(\d+ ms\)", body))
skipped = sum(int(n) for n in re.findall(r"(?m)^\[  SKIPPED \] (\d+) tests?, listed", body))
results = re.findall(r"(?m)^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+(.*?)\s+[\d.]+ sec$", text)
crashed = []
for name, status in results:
    ok = status.strip() == "Passed"
    if "/" not in name:  # not a GoogleTest shard (the docs check): one case
        passed += ok
        if not ok:
            failed_cases.add(name)
    elif "Exception" in status or "Timeout" in status or "aborted" in status:
        crashed.append(f"{name} ({status.strip(' *')})")
failed = len(failed_cases) + len(crashed)  # a crashed shard: its cases after the crash never ran
if rc != 0 and failed == 0:
    failed = 1  # ctest failed in a way the log does not show case by case
for name in sorted(failed_cases):
    print(f"torch2: FAILED {name}")
for name in crashed:
    print(f"torch2: FAILED {name}: the shard crashed, so its remaining cases did not run")
if skipped:
    print(f"torch2: {skipped} test(s) skipped (their reasons are in the log)")
print(f"LibTorch {version} (PyPI torch wheel): {passed} tests passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
exit $?
}
