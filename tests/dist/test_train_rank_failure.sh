#!/usr/bin/env bash
# A rank that fails during training (the [dist] fail_rank/fail_step test hook) ends the whole job within 30 s with a
# non-zero status and that rank's message, and no rank is left waiting in a collective. Exits 77 (skipped) when the
# programs are not built.
# Usage: test_train_rank_failure.sh MPIRUN   (env: MAMBA2_BIN, MAMBA2_SRC)
set -uo pipefail
mpirun="$1"
src="${MAMBA2_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}"
bin="${MAMBA2_BIN:-$src/build}"
if [ ! -x "$bin/mamba2_train" ] || [ ! -x "$bin/mamba2_ticks" ]; then
    echo "SKIP: mamba2_train/mamba2_ticks not built in $bin"; exit 77
fi
work="$(mktemp -d /tmp/mamba2_fail.XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$bin/mamba2_ticks" synth --out "$work/ticks.h5" --ticks 30000 --seed 3 >/dev/null || { echo "FAIL: synth"; exit 1; }
status=0

# run RANKS FAIL_RANK FAIL_STEP MICRO_BATCH (global batch 16 = micro_batch x ranks x accumulation)
run() {
    local ranks="$1" rank="$2" step="$3" micro="$4" log="$work/r$1_$2.log" start took rc
    start=$(date +%s.%N)
    timeout 60 "$mpirun" -np "$ranks" --oversubscribe "$bin/mamba2_train" --config "$src/configs/tiny.ini" \
        --set data.path="$work/ticks.h5" --set train.run_dir="$work/run$ranks$rank" --set train.steps=50 \
        --set train.threads=1 --set train.micro_batch="$micro" --set dist.fail_rank="$rank" --set dist.fail_step="$step" >"$log" 2>&1
    rc=$?
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    local want="^mamba2_train: error: .*rank $rank.*step $step.*fail_rank"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        echo "FAIL: $ranks ranks, rank $rank fails at step $step: exit status $rc"; tail -20 "$log"; status=1
    elif awk -v t="$took" 'BEGIN { exit !(t > 30) }'; then
        echo "FAIL: $ranks ranks, rank $rank fails at step $step: took ${took}s"; status=1
    elif ! grep -qE "$want" "$log"; then
        echo "FAIL: $ranks ranks: no line matching '$want'"; tail -20 "$log"; status=1
    else
        echo "ok   $ranks ranks, rank $rank fails at step $step: exit status $rc after ${took}s"
    fi
}

run 2 1 3 8
run 4 0 2 4
exit $status
