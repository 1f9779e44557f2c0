#!/usr/bin/env bash
# Crash safety: SIGKILL the trainer while it writes a checkpoint every step; every file under a checkpoint name must
# be readable, and --resume auto continues from the newest one to the end.
source "$(dirname "$0")/../lib/cli.sh"
test_begin
make_dataset "$work/ticks.h5"
run=("$bin/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}"
     --set train.run_dir="$work/run" --set train.steps=400 --set train.eval_every=0 --set checkpoint.every=1
     --set checkpoint.keep=1000)

"${run[@]}" >"$work/first.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do  # wait (at most 60 s) until a few checkpoints exist, then kill mid-stream
  n=$(ls "$work/run" 2>/dev/null | grep -c '^ckpt_.*\.h5$' || true)
  [ "$n" -ge 5 ] && break
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null || fail "the trainer ended before it could be killed"
wait "$pid" 2>/dev/null || true
n=$(ls "$work/run" | grep -c '^ckpt_.*\.h5$')
[ "$n" -ge 5 ] || fail "only $n checkpoints were written"
for f in "$work"/run/ckpt_*.h5; do
  h5dump -H "$f" >/dev/null 2>&1 || fail "$f is unreadable after SIGKILL"
done
newest=$(ls "$work/run" | grep '^ckpt_.*\.h5$' | sed 's/ckpt_\([0-9]*\).h5/\1/' | sort -n | tail -n 1)

"${run[@]}" --set checkpoint.every=100 --resume auto >"$work/second.log" 2>&1 || { cat "$work/second.log"; fail "resume failed"; }
grep -q "resume: .*ckpt_${newest}.h5 (step ${newest}" "$work/second.log" || { cat "$work/second.log"; fail "did not resume from step $newest"; }
[ -e "$work/run/ckpt_400.h5" ] || fail "the resumed run did not finish"
echo "crash: killed after $n checkpoints, all readable, resumed from step $newest to 400"
