#!/usr/bin/env bash
# Slurm for real: starts munge, slurmctld and slurmd on this machine (slurm_local.sh), then
#   1. submits launch/slurm/mamba2.sbatch with 2 tasks via `sbatch --wait` (under a timeout) on the tiny config and
#      checks that the job succeeded, both ranks took part (the rank table), it trained (metrics) and checkpointed;
#   2. submits a long run, sends the batch script the pre-time-limit SIGTERM (as `--signal=B:TERM@120` would), and
#      checks that the ranks checkpointed and exited 0, the script requeued the job, and the requeued job resumed
#      from that checkpoint (--resume auto);
# and stops the daemons it started. Exits 77 (ctest: skipped) with the reason when Slurm cannot be started here or
# the programs are not built.
# Usage: test_slurm.sh   (env: MAMBA2_BIN build folder, MAMBA2_SRC source folder)
set -uo pipefail
src="${MAMBA2_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}"
bin="${MAMBA2_BIN:-$src/build}"
skip() { echo "SKIP: $*"; exit 77; }
fail() {
    echo "FAIL: $*"
    [ -n "${log:-}" ] && [ -f "$log" ] && sed 's/^/  | /' "$log" | tail -40
    [ -n "${SLURM_CONF:-}" ] && squeue -o "  queue: %i %T %r" 2>/dev/null
    exit 1
}

if [ ! -x "$bin/mamba2_train" ] || [ ! -x "$bin/mamba2_ticks" ]; then
    skip "mamba2_train/mamba2_ticks not built in $bin"
fi
# shellcheck source=slurm_local.sh
source "$src/tests/launch/slurm_local.sh"
work="$(mktemp -d /tmp/mamba2_slurm.XXXXXX)"
cleanup() { [ -n "${jid:-}" ] && scancel "$jid" 2>/dev/null; slurm_local_stop; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM # so that cleanup runs when a timeout stops the test
slurm_local_start || skip "cannot start a local Slurm cluster: $SLURM_LOCAL_WHY"
echo "slurm: local cluster up ($SLURM_CONF)"

"$bin/mamba2_ticks" synth --out "$work/ticks.h5" --ticks 30000 --seed 5 >/dev/null || fail "mamba2_ticks synth"

export MAMBA2_ROOT="$src" TRAIN="$bin/mamba2_train" CONFIG="$src/configs/tiny.ini"
common="--set data.path=$work/ticks.h5 --set train.threads=1 --set train.log_every=1 --set train.eval_every=10"
# --overcommit: 2 tasks even on a 1-CPU machine (Slurm would otherwise queue the job forever)
submit=(sbatch --parsable --gpus-per-node=0 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --overcommit --time=10)

# ---- 1. a short run to the end -----------------------------------------------------------------------------------
log="$work/short.out"
export TRAIN_ARGS="$common --set train.run_dir=$work/short --set train.steps=20 --set checkpoint.every=10"
timeout 300 "${submit[@]}" --wait --output="$log" "$src/launch/slurm/mamba2.sbatch" >/dev/null
rc=$?
[ "$rc" -eq 124 ] && fail "sbatch --wait did not return within 300 s"
[ "$rc" -eq 0 ] || fail "the job exited with status $rc"
grep -qE '^1 +[^ ]+ +1 ' "$log" || fail "no rank table with 2 ranks in the job's output"
[ "$(wc -l < "$work/short/metrics.jsonl")" -ge 20 ] || fail "fewer than 20 metric lines in the run folder"
ls "$work/short"/ckpt_*20.h5 >/dev/null 2>&1 || fail "no checkpoint for step 20 in $work/short"
echo "ok   sbatch --wait: 2 ranks trained 20 steps and checkpointed"

# ---- 2. SIGTERM ahead of the time limit -> checkpoint, requeue, resume ---------------------------------------------
log="$work/long.out"
export TRAIN_ARGS="$common --set train.run_dir=$work/long --set train.steps=1000000 --set checkpoint.every=1000000"
jid=$("${submit[@]}" --output="$log" "$src/launch/slurm/mamba2.sbatch") || fail "sbatch"
wait_for() { # wait_for SECONDS COMMAND...: polls COMMAND every 0.5 s
    local limit=$(( $1 * 2 )); shift
    for _ in $(seq "$limit"); do "$@" && return 0; sleep 0.5; done
    return 1
}
gone() { [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ]; }
has_steps() { gone || { [ -f "$work/long/metrics.jsonl" ] && [ "$(wc -l < "$work/long/metrics.jsonl")" -ge 3 ]; }; }
if ! wait_for 120 has_steps || gone; then fail "the long run never logged 3 steps"; fi
scancel --batch --signal=TERM "$jid"
held() { scontrol show job "$jid" 2>/dev/null | grep -q 'Reason=BeginTime'; }
wait_for 60 held || fail "the job was not requeued after SIGTERM"
scontrol update JobId="$jid" StartTime=now # skip Slurm's two-minute hold of requeued jobs
resumed() { grep -q '^resume: .*(step [1-9]' "$log"; }
wait_for 120 resumed || fail "the requeued job did not resume from the checkpoint"
grep -q 'requeueing job' "$log" || fail "the batch script did not report the requeue"
ls "$work/long"/ckpt_*.h5 >/dev/null 2>&1 || fail "no checkpoint written at SIGTERM"
scancel "$jid"
jid=
echo "ok   SIGTERM before the time limit: checkpoint, requeue, resume"
