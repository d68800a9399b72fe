#!/usr/bin/env bash
# A longer soak of the chaos test (tests/experiments/test_chaos.cpp): two runners on one plan of
# 12 jobs killed with SIGKILL at seeded moments (at random times, inside store transactions,
# while analysis children run), then a last run whose store must equal an undisturbed run's on
# every table. CI runs it once with seed 2026 and 10 kills; this runs ROUNDS seeds from SEED
# with KILLS kills each and stops at the first failure, printing the seed that failed.
#
#   scripts/chaos.sh [--seed N] [--kills K] [--rounds R]
#
#   --seed N     [2026] the first seed; round i uses N + i
#   --kills K    [40] kills per round
#   --rounds R   [3] seeds to try
# Environment: TUPE_BUILD_DIR [build] (the build holding tests/test_experiments and cli/tupe).
# Exit status 0 when every round passed, 1 at the first that failed, 2 for bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TUPE_BUILD_DIR:-$ROOT/build}"
seed=2026 kills=40 rounds=3
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) seed="$2"; shift 2 ;;
        --kills) kills="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        *) echo "scripts/chaos.sh: unknown argument '$1' (see its header)" >&2; exit 2 ;;
    esac
done
for n in "$seed" "$kills" "$rounds"; do
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "scripts/chaos.sh: '$n' is not a number" >&2; exit 2; }
done
test_bin="$BUILD/tests/test_experiments"
[ -x "$test_bin" ] || { echo "scripts/chaos.sh: no $test_bin (./run.sh build first)" >&2; exit 2; }
for ((i = 0; i < rounds; i++)); do
    s=$((seed + i))
    echo "chaos: seed $s, $kills kills" >&2
    start=$(date +%s)
    if ! TUPE_CHAOS_SEED="$s" TUPE_CHAOS_KILLS="$kills" \
        TUPE_BERT_VOCAB="$ROOT/data/bert-base-uncased/vocab.txt" \
        "$test_bin" --gtest_filter='ChaosTest.*' --gtest_brief=1; then
        echo "chaos: seed $s FAILED (rerun: TUPE_CHAOS_SEED=$s TUPE_CHAOS_KILLS=$kills $test_bin --gtest_filter='ChaosTest.*')" >&2
        exit 1
    fi
    echo "chaos: seed $s passed in $(( $(date +%s) - start )) s" >&2
done
echo "chaos: $rounds seeds x $kills kills passed" >&2
