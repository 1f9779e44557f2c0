#!/usr/bin/env bash
# Resume is exact: 2N steps in one run and N steps + resume + N steps give bitwise-identical final parameters, Adam
# moments and per-step losses (same thread count).
source "$(dirname "$0")/../lib/cli.sh"
test_begin
make_dataset "$work/ticks.h5" --signal memory
run=("$bin/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}"
     --set train.steps=12 --set train.warmup=3 --set train.eval_every=4 --set checkpoint.every=5)

"${run[@]}" --set train.run_dir="$work/straight" >"$work/straight.log"
"${run[@]}" --set train.run_dir="$work/resumed" --set train.stop_at=6 >"$work/part1.log"
grep -q "stopping early (train.stop_at): checkpointed at step 6" "$work/part1.log" || fail "no early stop at step 6"
[ ! -e "$work/resumed/ckpt_12.h5" ] || fail "the first part ran past stop_at"
"${run[@]}" --set train.run_dir="$work/resumed" --resume auto >"$work/part2.log"
grep -q "resume: .*ckpt_6.h5 (step 6" "$work/part2.log" || fail "did not resume from ckpt_6.h5"

for group in /model /optim/m /optim/v; do # h5diff without a tolerance compares values exactly
  h5diff "$work/straight/ckpt_12.h5" "$work/resumed/ckpt_12.h5" "$group" "$group" >/dev/null ||
    fail "$group differs between the straight and the resumed run"
done
losses() { sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/' "$1/metrics.jsonl"; }
[ "$(losses "$work/straight" | wc -l)" -eq 12 ] || fail "straight run logged $(losses "$work/straight" | wc -l) steps"
diff <(losses "$work/straight") <(losses "$work/resumed") || fail "per-step losses differ"

# The check above could only pass vacuously if training did nothing: the parameters must have moved.
if h5diff "$work/resumed/ckpt_6.h5" "$work/resumed/ckpt_12.h5" /model /model >/dev/null; then
  fail "parameters did not change between step 6 and step 12"
fi


# The resumed run's metrics log (appended across the two processes) plots: a PNG with both loss curves' data.
bash "$src/launch/plot_metrics.sh" "$work/resumed" "$work/metrics.png" >/dev/null
[ "$(head -c 8 "$work/metrics.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "no PNG from plot_metrics.sh"
[ "$(stat -c %s "$work/metrics.png")" -gt 10000 ] || fail "the PNG is suspiciously small"
echo "resume: 12 straight steps == 6 + resume + 6, bitwise (params, moments, losses); metrics plotted"
