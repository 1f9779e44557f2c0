#!/usr/bin/env bash
# Model selection (CLI.md train.select_by, train.patience): every validation is logged, the best step is kept as
# ckpt_best.h5 (never pruned), patience stops the run with exit 0 and a checkpoint, an interrupted and resumed run
# selects exactly what an uninterrupted one does, and mamba2_eval RUN_DIR evaluates ckpt_best.h5 with the research
# view: significance, trading, deciles, the shuffle control and the PNG.
source "$(dirname "$0")/../lib/cli.sh"
test_begin
make_dataset "$work/ticks.h5" --signal memory
run=("$bin/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}"
     --set train.warmup=3 --set checkpoint.every=5 --set checkpoint.keep=1)

# 1. Early stopping: validation at every step, patience 1 -> the first step that does not improve stops the run.
"${run[@]}" --set train.steps=60 --set train.eval_every=1 --set train.patience=1 --set train.run_dir="$work/es" \
  >"$work/es.log" || fail "early-stopping run failed"
line=$(grep "early stopping (train.patience)" "$work/es.log") || { tail "$work/es.log"; fail "no early stop"; }
echo "$line"
stop=$(sed -E 's/.*checkpointed at step ([0-9]+).*/\1/' <<<"$line")
best=$(sed -E 's/.*best at step ([0-9]+).*/\1/' <<<"$line")
[ "$stop" -lt 60 ] && [ -e "$work/es/ckpt_$stop.h5" ] || fail "no checkpoint at the early stop (step $stop)"
[ "$best" -lt "$stop" ] || fail "best step $best is not before the stop $stop"
[ "$(h5dump -a step "$work/es/ckpt_best.h5" | grep -oE '\(0\): [0-9]+' | grep -oE '[0-9]+$')" -eq "$best" ] ||
  fail "ckpt_best.h5 is not from step $best"
python3 - "$work/es/metrics.jsonl" "$best" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
vals = [r for r in rows if "val_loss" in r]
assert len(vals) == len(rows), "a validation at every step"
for key in ("val_ic@10", "val_r2@100", "val_rank_ic@50", "val_mse@10", "val_dir_acc@100", "val_rows"):
    assert all(key in r for r in vals), key
best = min(vals, key=lambda r: r["val_loss"])
assert best["step"] == int(sys.argv[2]), f"lowest val_loss at {best['step']}, selected {sys.argv[2]}"
PY

# 2. Resume keeps the selection state: stopped at step 10 and resumed == straight, with ckpt_best.h5 bitwise equal.
# Non-vacuous: the straight run's best is before step 10 and it stops early after step 10, so a resumed run that
# forgot the best score or the patience count would select and stop differently.
sel=(--set train.steps=40 --set train.eval_every=2 --set train.patience=3 --set train.select_by=val_loss)
"${run[@]}" "${sel[@]}" --set train.run_dir="$work/straight" >"$work/straight.log"
"${run[@]}" "${sel[@]}" --set train.run_dir="$work/resumed" --set train.stop_at=10 >/dev/null
"${run[@]}" "${sel[@]}" --set train.run_dir="$work/resumed" --resume auto >"$work/resumed.log"
line=$(grep "early stopping" "$work/straight.log") || fail "the straight run did not stop early"
s_best=$(sed -E 's/.*best at step ([0-9]+).*/\1/' <<<"$line")
s_stop=$(sed -E 's/.*checkpointed at step ([0-9]+).*/\1/' <<<"$line")
[ "$s_best" -lt 10 ] && [ "$s_stop" -gt 10 ] || fail "the straight run must select before step 10 and stop after: $line"
h5diff "$work/straight/ckpt_best.h5" "$work/resumed/ckpt_best.h5" /model /model >/dev/null ||
  fail "ckpt_best.h5 differs between the straight and the resumed run"
last() { grep -E "^step|early stopping" "$1" | tail -1 | sed -E 's/ \| [0-9.]+ ms.*//'; }
[ "$(last "$work/straight.log")" = "$(last "$work/resumed.log")" ] ||
  fail "runs end differently: '$(last "$work/straight.log")' vs '$(last "$work/resumed.log")'"
ls "$work/straight"/ckpt_*.h5 | grep -q ckpt_best.h5 && [ "$(ls "$work/straight"/ckpt_[0-9]*.h5 | wc -l)" -eq 1 ] ||
  fail "checkpoint.keep = 1 must leave one numbered checkpoint and ckpt_best.h5"

# 3. mamba2_eval on the run folder: ckpt_best.h5, the research tables, the control, JSON and the PNG.
"$bin/mamba2_eval" --checkpoint "$work/es" --control shuffle --plot "$work/eval.png" --json "$work/eval.json" \
  >"$work/eval.txt" || { cat "$work/eval.txt"; fail "mamba2_eval RUN_DIR failed"; }
grep -q "checkpoint $work/es/ckpt_best.h5 (step $best)" "$work/eval.txt" || fail "did not evaluate ckpt_best.h5"
for section in "^significance:" "^trading:.*net of half the quoted spread" "^deciles:"; do
  grep -q "$section" "$work/eval.txt" || fail "no '$section' section"
done
[ "$(head -c 8 "$work/eval.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "--plot wrote no PNG"
[ "$(stat -c %s "$work/eval.png")" -gt 20000 ] || fail "the PNG is suspiciously small (three panels with data)"
python3 - "$work/eval.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for part in ("research", "control"):
    hs = j[part]["horizons"]
    assert len(hs) == 3 and all(k in hs[0]["model"] for k in ("ic", "trading", "deciles")), part
    assert hs[0]["model"]["trading"]["sessions"] >= 1 and len(hs[0]["model"]["deciles"]) == 10
print("eval json: research and control present")
PY
echo "selection: early stop at $stop (best $best), resume selects identically, eval RUN_DIR with plot and control"
