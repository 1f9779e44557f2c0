#!/usr/bin/env bash
# The trainer's device path, run on a stand-in device made of the CPU ops (mamba2_train_cpudev: the same program
# built with tests/run/cpu_device_api.c), against the CPU path of mamba2_train:
#   - model.device = cuda there takes the device path: "backend: cpu-as-device" and collectives "mpi" (host-staged);
#   - the same run on both paths gives bitwise-identical per-step losses, validation losses, final parameters and
#     Adam moments, at 1, 2 and 3 ranks (dist.backend none at 1 rank too: its local collectives); both paths start
#     each gradient bucket's reduction during the backward with the same MPI calls, so this holds at any rank count;
#   - resume: a device-path run stopped at step 6 and resumed on the CPU path (and the reverse) ends where the
#     straight runs end, bit for bit: the checkpoints are one format;
#   - SIGTERM on the device path checkpoints and exits 0;
#   - mamba2_eval --device cuda (the same stand-in) gives the CPU evaluation's metrics and predictions bit for bit;
#   - MFU appears in metrics.jsonl and the status lines when the device's bf16 peak is known, never on the CPU;
#   - the choice's errors: model.device = cuda without a GPU (mamba2_train here: no GPU), dist.backend nccl on the
#     CPU, dist.backend none on 2 ranks: one line each and the docs/CLI.md exit code.
# Usage: test_device_path.sh MPIRUN (env: MAMBA2_BIN, MAMBA2_SRC)
mpirun="$1"
source "$(dirname "$0")/../lib/cli.sh"
test_begin
dev="$bin/tests/mamba2_train_cpudev"
[ -x "$dev" ] || { echo "SKIP: $dev not built"; exit 77; }
command -v h5diff >/dev/null || { echo "SKIP: h5diff (hdf5-tools) not found"; exit 77; }
make_dataset "$work/ticks.h5" --signal memory
args=(--config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}" --set train.steps=12
      --set train.warmup=3 --set train.eval_every=4 --set checkpoint.every=6)

# run NAME RANKS PROGRAM [ARGS...]: a run into $work/NAME, its output in $work/NAME.log
run() {
  local name=$1 ranks=$2 prog=$3; shift 3
  local launch=()
  [ "$ranks" -gt 1 ] && launch=("$mpirun" -np "$ranks" --oversubscribe)
  timeout 120 "${launch[@]}" "$prog" "${args[@]}" --set train.run_dir="$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    { tail -5 "$work/$name.log" >&2; fail "run $name ($ranks ranks) failed"; }
}
# Steps, losses, validation losses and grad norms of metrics.jsonl (timings left out).
numbers() { sed -E 's/, "ticks_per_s".*//' "$work/$1/metrics.jsonl"; }
same_run() { # same_run A B: bitwise the same training
  [ "$(numbers "$1" | wc -l)" -eq 12 ] || fail "$1 logged $(numbers "$1" | wc -l) steps, not 12"
  diff <(numbers "$1") <(numbers "$2") >&2 || fail "$1 and $2: per-step numbers differ"
  for group in /model /optim/m /optim/v; do
    h5diff "$work/$1/ckpt_12.h5" "$work/$2/ckpt_12.h5" "$group" "$group" >/dev/null ||
      fail "$1 and $2: $group differs at step 12"
  done
}

# 1 rank: the CPU path, the device path with MPI (auto) and with no collectives
run cpu1 1 "$bin/mamba2_train"
run dev1 1 "$dev" --set model.device=cuda
run dev1none 1 "$dev" --set model.device=cuda --set dist.backend=none
grep -q "^backend: cpu.*collectives: mpi (ZeRO-1 on host buffers)" "$work/cpu1.log" || fail "cpu1: backend line"
grep -q "^backend: cpu-as-device (.*collectives: mpi (ZeRO-1 on device buffers, staged" "$work/dev1.log" ||
  fail "dev1: not on the device path"
grep -q "^backend: cpu-as-device (.*collectives: none" "$work/dev1none.log" || fail "dev1none: backend line"
grep -q "val_loss" "$work/dev1/metrics.jsonl" || fail "dev1: no validation loss"
same_run cpu1 dev1
same_run cpu1 dev1none

# 2 ranks (the reduce-scatter and all-gather really move data; the replica check runs at the last step)
run cpu2 2 "$bin/mamba2_train"
run dev2 2 "$dev" --set model.device=cuda
grep -q "^1 .* cuda:1" "$work/dev2.log" || fail "dev2: rank 1 does not own device 1 (its local rank)"
same_run cpu2 dev2
run cpu3 3 "$bin/mamba2_train" --set train.global_batch=12 # a multiple of 3 ranks x micro_batch 4
run dev3 3 "$dev" --set model.device=cuda --set train.global_batch=12
same_run cpu3 dev3

# resume across the paths: stop at 6 on one, continue on the other
run d2c 1 "$dev" --set model.device=cuda --set train.stop_at=6
run d2c 1 "$bin/mamba2_train" --resume auto
grep -q "resume: .*ckpt_6.h5 (step 6" "$work/d2c.log" || fail "d2c: did not resume at step 6"
same_run cpu1 d2c
run c2d 2 "$bin/mamba2_train" --set train.stop_at=6
run c2d 2 "$dev" --set model.device=cuda --resume auto
same_run cpu2 c2d

# SIGTERM: finish the step, checkpoint, exit 0
timeout 120 "$dev" "${args[@]}" --set model.device=cuda --set train.steps=100000 --set train.eval_every=0 \
  --set train.run_dir="$work/term" >"$work/term.log" 2>&1 &
pid=$!
logged() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
for _ in $(seq 300); do [ "$(logged "$work/term/metrics.jsonl")" -ge 3 ] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM: exit $? (expected 0)"
grep -q "stopping early (signal): checkpointed at step" "$work/term.log" || fail "SIGTERM: no checkpoint"

# evaluation on the device path: the same numbers as on the CPU (the table names the backend)
evaldev="$bin/tests/mamba2_eval_cpudev"
for mode in stream window; do
  "$bin/mamba2_eval" --checkpoint "$work/cpu1/ckpt_12.h5" --split val --mode $mode --device cpu \
    --json "$work/eval_cpu.json" --predictions "$work/pred_cpu.h5" >"$work/eval_cpu.txt" 2>&1 || fail "eval on the CPU"
  "$evaldev" --checkpoint "$work/cpu1/ckpt_12.h5" --split val --mode $mode --device cuda \
    --json "$work/eval_dev.json" --predictions "$work/pred_dev.h5" >"$work/eval_dev.txt" 2>&1 ||
    fail "eval on the device path: $(tail -1 "$work/eval_dev.txt")"
  grep -q ", on cpu-as-device (" "$work/eval_dev.txt" || fail "eval --device cuda: not on the device path"
  diff <(sed 's/"backend":"[^"]*",//' "$work/eval_cpu.json") <(sed 's/"backend":"[^"]*",//' "$work/eval_dev.json") \
    >&2 || fail "eval $mode: the device path's metrics differ from the CPU's"
  h5diff "$work/pred_cpu.h5" "$work/pred_dev.h5" /pred /pred >/dev/null || fail "eval $mode: predictions differ"
done

# MFU: only with a known peak
(export M2_TEST_DEVICE_NAME="NVIDIA H200"; run mfu 1 "$dev" --set model.device=cuda --set train.log_every=1)
grep -q '"mfu": [0-9.e-]*, "elapsed_s"' "$work/mfu/metrics.jsonl" || fail "mfu: no mfu in metrics.jsonl"
grep -q "bf16 peak 989 TFLOP/s" "$work/mfu.log" || fail "mfu: the peak is not in the backend line"
grep -qE "\| MFU [0-9.]+(e[-+][0-9]+)?% \|" "$work/mfu.log" || fail "mfu: no MFU in the status lines"
! grep -q "mfu" "$work/dev1/metrics.jsonl" "$work/cpu1/metrics.jsonl" || fail "mfu reported without a known peak"

# errors of the choice (model.device = cuda only where auto finds no GPU: on a GPU machine that run would train)
run probe 1 "$bin/mamba2_train" --set model.device=auto --set train.steps=0
if grep -q "^backend: cpu (auto: " "$work/probe.log"; then
  expect_error 1 "^mamba2_train: error: model.device \(cuda\): (no CUDA GPU: .+|this build has no CUDA backend .+)$" \
    "$bin/mamba2_train" "${args[@]}" --set model.device=cuda --set train.run_dir="$work/err"
fi
expect_error 2 "dist.backend \(nccl\): NCCL works on GPU buffers but the model runs on the CPU" \
  "$bin/mamba2_train" "${args[@]}" --set dist.backend=nccl --set train.run_dir="$work/err"
expect_error 2 "dist.backend \(nccl\): the cpu-as-device backend of this build has no NCCL" \
  "$dev" "${args[@]}" --set model.device=cuda --set dist.backend=nccl --set train.run_dir="$work/err"
rc=0
timeout 60 "$mpirun" -np 2 --oversubscribe "$dev" "${args[@]}" --set dist.backend=none \
  --set train.run_dir="$work/err" >"$work/none2.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "dist.backend (none): 2 ranks need collectives" "$work/none2.log" ||
  fail "dist.backend none on 2 ranks: exit $rc"
echo "device path: bitwise equal to the CPU path at 1, 2 and 3 ranks, resume across paths, SIGTERM, MFU, errors"
