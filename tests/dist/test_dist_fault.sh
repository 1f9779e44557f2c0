#!/usr/bin/env bash
# A rank that fails ends the whole job promptly with a non-zero status and its message, whatever the way it fails
# (an abort with a message, exit without MPI_Finalize, SIGKILL, or a hang caught by the other ranks' watchdog).
# Usage: test_dist_fault.sh MPIRUN PROGRAM
set -uo pipefail
mpirun="$1"
prog="$2"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0

# run MODE RANKS LIMIT_S PATTERN: the job must exit non-zero within LIMIT_S seconds and print PATTERN on stderr/out.
run() {
    local mode="$1" ranks="$2" limit="$3" pattern="$4" start end rc
    start=$(date +%s.%N)
    timeout 60 "$mpirun" -np "$ranks" --oversubscribe "$prog" "$mode" >"$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    local took
    took=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        echo "FAIL $mode: exit status $rc (want a failure, not success or a hang)"; cat "$log"; status=1; return
    fi
    if awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t > l) }'; then
        echo "FAIL $mode: took ${took}s (limit ${limit}s)"; cat "$log"; status=1; return
    fi
    if ! grep -qE -- "$pattern" "$log"; then
        echo "FAIL $mode: no line matching '$pattern'"; cat "$log"; status=1; return
    fi
    echo "ok   $mode: exit status $rc after ${took}s"
}

run abort 3 30 '^dist_fault: error: injected failure at step 3 \(rank 1\)$'
run exit 2 30 'exit|exited'
run kill 2 30 'signal|killed|Killed'
run hang 3 30 '^dist_fault: error: barrier \(rank [02]\): no answer from the other ranks after [0-9]+ s \(\[dist\] timeout_s\)$'
exit $status
