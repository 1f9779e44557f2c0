#!/usr/bin/env bash
# Data-parallel training end to end:
#   equivalence: 20 steps of the tiny config with the same global batch (16) at R = 1, 2 and 4 ranks give per-step
#       losses that agree to 1e-6 relative and final parameters to 1e-5 (only the order of floating-point sums
#       differs between rank counts);
#   elastic resume: a run saved at step 10 on R = 4 and resumed on R = 2 and on R = 1 continues to step 20 and
#       matches the uninterrupted R = 4 run (losses 1e-6 relative, parameters and moments 1e-5).
# Exits 77 (skipped) when the programs or python3 with numpy and h5py are missing.
# Usage: test_dist_equivalence.sh MPIRUN   (env: MAMBA2_BIN, MAMBA2_SRC)
set -uo pipefail
mpirun="$1"
src="${MAMBA2_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}"
bin="${MAMBA2_BIN:-$src/build}"
py=/usr/bin/python3
if [ ! -x "$bin/mamba2_train" ] || [ ! -x "$bin/mamba2_ticks" ]; then
    echo "SKIP: mamba2_train/mamba2_ticks not built in $bin"; exit 77
fi
$py -c 'import numpy, h5py' 2>/dev/null || { echo "SKIP: $py has no numpy/h5py"; exit 77; }
work="$(mktemp -d /tmp/mamba2_equiv.XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$bin/mamba2_ticks" synth --out "$work/ticks.h5" --ticks 30000 --seed 7 >/dev/null || { echo "FAIL: synth"; exit 1; }

# train RANKS RUN_DIR STEPS [ARGS...]: micro_batch 4 so that 16 = 4 x R x accumulation for R = 1, 2, 4
train() {
    local ranks="$1" dir="$2" steps="$3"
    shift 3
    if ! timeout 300 "$mpirun" -np "$ranks" --oversubscribe "$bin/mamba2_train" --config "$src/configs/tiny.ini" \
        --set data.path="$work/ticks.h5" --set train.run_dir="$dir" --set train.steps="$steps" \
        --set train.micro_batch=4 --set train.threads=1 --set train.log_every=1 --set train.eval_every=0 \
        --set checkpoint.every=10 "$@" >"$dir.log" 2>&1; then
        echo "FAIL: training on $ranks ranks ($dir)"; tail -20 "$dir.log"; exit 1
    fi
}

for r in 1 2 4; do train "$r" "$work/r$r" 20; done
train 4 "$work/e" 10
for r in 2 1; do
    cp -r "$work/e" "$work/e$r"
    train "$r" "$work/e$r" 20 --resume auto
    grep -q "^resume: .*step 10, saved on 4 ranks, now $r" "$work/e$r.log" || { echo "FAIL: e$r did not resume"; exit 1; }
done

$py - "$work" <<'PY'
import json, sys
import h5py, numpy as np
work = sys.argv[1]

def losses(run):
    return {x["step"]: x["loss"] for x in map(json.loads, open(f"{work}/{run}/metrics.jsonl")) if "loss" in x}

def tensors(run, prefix):
    out = {}
    with h5py.File(f"{work}/{run}/ckpt_20.h5", "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) and n.startswith(prefix) else None)
    return out

def compare(ref, run, steps, what):
    a, b = losses(ref), losses(run)
    assert all(s in a and s in b for s in steps), f"{run}: missing steps in metrics.jsonl"
    rel = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
    worst = {}
    for prefix in ("model", "optim"):
        p, q = tensors(ref, prefix), tensors(run, prefix)
        assert p and p.keys() == q.keys(), f"{run}: tensors under /{prefix} differ from {ref}"
        worst[prefix] = max(float(np.max(np.abs(p[k].astype(np.float64) - q[k]))) for k in p)
    ok = rel <= 1e-6 and worst["model"] <= 1e-5 and (what == "equivalence" or worst["optim"] <= 1e-5)
    print(f"{'ok  ' if ok else 'FAIL'} {what} {run} vs {ref}: loss rel {rel:.2e} (<= 1e-6), "
          f"params {worst['model']:.2e} (<= 1e-5), moments {worst['optim']:.2e}")
    return ok

good = all([compare("r1", "r2", range(1, 21), "equivalence"), compare("r1", "r4", range(1, 21), "equivalence"),
            compare("r4", "e2", range(11, 21), "elastic resume"), compare("r4", "e1", range(11, 21), "elastic resume")])
sys.exit(0 if good else 1)
PY
