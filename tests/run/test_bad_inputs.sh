#!/usr/bin/env bash
# Bad inputs to mamba2_train: one clear line on stderr naming the file/key, and the docs/CLI.md exit code.
source "$(dirname "$0")/../lib/cli.sh"
test_begin
make_dataset "$work/ticks.h5"
train=("$bin/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}"
       --set train.run_dir="$work/run")

expect_error 2 "config.*cannot open" "$bin/mamba2_train" --config "$work/missing.ini"
expect_error 2 "required" "$bin/mamba2_train"
expect_error 2 "unknown key 'stepz'" "${train[@]}" --set train.stepz=3
expect_error 2 "train.lr \\(abc\\): not a number" "${train[@]}" --set train.lr=abc
printf '[train]\nsteps = 10\n[modle]\nd_model = 3\n' >"$work/bad.ini"
expect_error 2 "bad.ini:3: unknown section \[modle\]" "$bin/mamba2_train" --config "$work/bad.ini"
expect_error 1 "nothere.h5" "${train[@]}" --set data.path="$work/nothere.h5"
head -c 5000 "$work/ticks.h5" >"$work/truncated.h5"
expect_error 1 "truncated.h5" "${train[@]}" --set data.path="$work/truncated.h5"
# Damaged values: a NaN feature or an infinite target is refused when the dataset is read, naming row and feature.
cp "$work/ticks.h5" "$work/nan.h5"
/usr/bin/python3 -c "import h5py; f = h5py.File('$work/nan.h5', 'r+'); f['features/X'][123, 2] = float('nan')"
expect_error 1 "nan.h5.*row 123, feature queue_imb is nan" "${train[@]}" --set data.path="$work/nan.h5"
cp "$work/ticks.h5" "$work/inf.h5"
/usr/bin/python3 -c "import h5py; f = h5py.File('$work/inf.h5', 'r+'); f['targets/y'][77, 1] = float('inf')"
expect_error 1 "inf.h5.*row 77, horizon 50 is inf" "${train[@]}" --set data.path="$work/inf.h5"
expect_error 2 "global_batch" "${train[@]}" --set train.global_batch=10

# A checkpoint of another model shape cannot seed this run.
"${train[@]}" --set train.steps=2 --set train.eval_every=0 >/dev/null
expect_error 2 "ckpt_2.h5.*model.d_model = 16 but this run has 32" "${train[@]}" --set model.d_model=32 \
  --resume "$work/run/ckpt_2.h5"
expect_error 1 "resume.*nothing.h5" "${train[@]}" --resume "$work/nothing.h5"
# tokens_seen near INT64_MAX passes the checkpoint's bound (step x tokens per step) when a step holds 16,384 tokens
# at step 6e14; the next step's sum is refused with one line (it wrapped to a negative count and trained on).
long=("${train[@]}" --set train.seq_len=1024 --set train.global_batch=16 --set train.run_dir="$work/long" --set train.eval_every=0)
"${long[@]}" --set train.steps=1 >/dev/null
/usr/bin/python3 -c "import h5py, numpy as np; f = h5py.File('$work/long/ckpt_1.h5', 'r+')
f.attrs['step'] = np.int64(600000000000000); f.attrs['tokens_seen'] = np.int64(2**63 - 1000)"
expect_error 1 "training \(step 600000000000001\): tokens_seen 9223372036854774808 \+ 16384 overflows int64" \
  "${long[@]}" --set train.steps=600000000000002 --resume "$work/long/ckpt_1.h5"
# Non-finite steps: each is skipped on every rank (parameters untouched) and counted; train.max_bad_steps in a row
# stop the run with one clear line. The hook makes rank 0's loss NaN from step 3 on (2 ranks: rank 1 must agree).
rc=0
mpirun -np 2 --oversubscribe --bind-to none "${train[@]}" --set train.run_dir="$work/nan_run" --set train.steps=50 \
  --set train.nan_from_step=3 --set train.max_bad_steps=4 --set train.log_every=1 --set checkpoint.every=0 \
  >"$work/nan.log" 2>"$work/nan.err" || rc=$?
[ "$rc" -ne 0 ] || fail "a run whose loss stays NaN did not stop"
grep -q "training (step 7): loss or gradients not finite for 4 steps in a row (train.max_bad_steps)" "$work/nan.err" ||
  { cat "$work/nan.err"; fail "no max_bad_steps error at step 7"; }
[ "$(grep -c "SKIPPED (non-finite)" "$work/nan.log")" -eq 3 ] || fail "expected 3 skipped steps logged before the stop"
# (mpirun adds its own banner about the non-zero exit; the program itself must say it once)
[ "$(grep -c "mamba2_train: error:" "$work/nan.err")" -eq 1 ] || { cat "$work/nan.err"; fail "the stop was not reported once"; }
grep -q '^step 3/50 .* | norm [0-9.]* |' "$work/nan.log" || fail "step 3 should still be a normal step"
echo "bad inputs: every case gave one line and the right exit code"
