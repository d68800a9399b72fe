#!/usr/bin/env bash
# Bounded libFuzzer run of the file readers (tests/fuzz): builds the fuzz targets with
# clang (AddressSanitizer + libFuzzer) in their own build directory, then runs each for a
# bounded time over its seed corpus in tests/fuzz/corpus/<target>/. Fails when a target
# crashes, trips a sanitizer, hangs past the per-input timeout or runs out of memory; the
# input that did it is kept as <build>/artifacts/<target>/crash-* (add it to the seed corpus
# as a regression once the bug is fixed).
#
#   scripts/fuzz.sh                  build + run the text readers' targets (CI: ./run.sh test)
#   scripts/fuzz.sh fuzz_vocab ...   only these targets
#   scripts/fuzz.sh --long [T ...]   the long pass: every target (fuzz_checkpoint too), minutes
#                                    per target, no input cap (by hand: `nice scripts/fuzz.sh --long`)
# Environment: TUPE_FUZZ_SECONDS (per target, default 30; 180 in the long pass), TUPE_FUZZ_RUNS
# (input cap per target, default 20000; none in the long pass), TUPE_FUZZ_LONG=1 (the same as
# --long), TUPE_FUZZ_BUILD_DIR (default build-fuzz), TUPE_JOBS (build jobs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TUPE_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
LONG="${TUPE_FUZZ_LONG:-0}"
if [ "${1:-}" = "--long" ]; then
    LONG=1
    shift
fi
if [ "$LONG" = 1 ]; then
    SECONDS_PER_TARGET="${TUPE_FUZZ_SECONDS:-180}"
    RUNS="${TUPE_FUZZ_RUNS:--1}"  # -1: libFuzzer's "no limit"
else
    SECONDS_PER_TARGET="${TUPE_FUZZ_SECONDS:-30}"
    RUNS="${TUPE_FUZZ_RUNS:-20000}"
fi
JOBS="${TUPE_JOBS:-$(nproc)}"
# fuzz_checkpoint builds the engine with ASan (the slowest part of this script). Its first run
# found a SEGV inside LibTorch's TorchScript importer on a checkpoint with a mutated code/*.py
# entry (LibTorch does not check zip CRCs); engine/src/zip_integrity.cpp now refuses such files,
# and the input is in the seed corpus as regression-mutated-code-entry.pt.
# The first long pass of fuzz_analysis_index (180 s) found std::terminate on a number too large
# for a double ("1, 7777e01444..."): nlohmann's out_of_range was not turned into InputError;
# analysis_index.cpp now does, and the input is regression-number-overflow.json. The four
# text readers added with it cost ~40 s together in the default pass (20,000 runs each).
# The default pass (CI) fuzzes the torch-free readers. fuzz_checkpoint needs the whole engine
# and LibTorch built with ASan (about ten minutes on 2 cores, longer than all the fuzzing), so
# it runs in the long pass and by name; CI replays its seed corpus, regressions included,
# through the real loader (CheckpointCorpus.EverySeedAndRegressionInputLoadsOrIsAClearError).
TEXT_TARGETS=(fuzz_glue_reader fuzz_experiment_yaml fuzz_vocab fuzz_submission fuzz_tensorboard
    fuzz_analysis_index fuzz_hf_index)
ALL_TARGETS=("${TEXT_TARGETS[@]}" fuzz_checkpoint)
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    if [ "$LONG" = 1 ]; then TARGETS=("${ALL_TARGETS[@]}"); else TARGETS=("${TEXT_TARGETS[@]}"); fi
fi

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

command -v clang++ >/dev/null 2>&1 || { echo "scripts/fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

log "building ${TARGETS[*]} with clang in $BUILD"
CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTUPE_BUILD_FUZZ=ON -DTUPE_BUILD_TESTS=OFF -DTUPE_WITH_QT=OFF -DTUPE_ENGINE_OPENMP=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"

# Per-target options: the checkpoint loader builds a model per input, so its inputs stay
# near the size of its seeds (tiny checkpoints of ~100 KB) and it gets fewer runs.
extra_args() {
    local checkpoint_runs=$((RUNS / 10))
    [ "$RUNS" -ge 0 ] || checkpoint_runs=-1
    case "$1" in
        fuzz_checkpoint) echo "-max_len=131072 -runs=$checkpoint_runs" ;;
        fuzz_experiment_yaml) echo "-max_len=4096 -runs=$RUNS" ;;
        *) echo "-max_len=4096 -runs=$RUNS" ;;
    esac
}

failed=()
for target in "${TARGETS[@]}"; do
    seeds="$ROOT/tests/fuzz/corpus/${target#fuzz_}"
    [ -d "$seeds" ] || { echo "no seed corpus $seeds" >&2; exit 2; }
    work="$BUILD/corpus/$target"        # new inputs found here; the seeds stay untouched
    artifacts="$BUILD/artifacts/$target"
    rm -rf "$work" "$artifacts"
    mkdir -p "$work" "$artifacts"
    log "fuzzing $target for up to ${SECONDS_PER_TARGET}s"
    # detect_leaks=0: LibTorch and ICU keep process-lifetime caches that LeakSanitizer
    # reports; leaks are not what this run is for.
    # shellcheck disable=SC2046
    if ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" \
        "$BUILD/tests/fuzz/$target" "$work" "$seeds" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" $(extra_args "$target") \
        > "$BUILD/$target.log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units)' "$BUILD/$target.log" >&2 || true
    else
        tail -n 40 "$BUILD/$target.log" >&2
        echo "FAILED: $target (log $BUILD/$target.log, input in $artifacts/)" >&2
        failed+=("$target")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found problems in: ${failed[*]}" >&2
    exit 1
fi
log "fuzzing: no crashes in ${TARGETS[*]}"
