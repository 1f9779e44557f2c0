#!/usr/bin/env bash
# The main job end to end on the embedded default: set up, build, generate a synthetic tick dataset with a planted
# long-memory signal, train configs/tiny.ini on 2 CPU ranks, evaluate the final checkpoint on the test split.
# Everything it writes goes under demo/ (override with DEMO_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/launch/build.sh"
out="${DEMO_DIR:-$root/demo}"
mkdir -p "$out"
bin="$root/build"

echo "== 1/3 synthetic tick dataset (limit-order-book simulator, --signal memory)"
"$bin/mamba2_ticks" synth --out "$out/ticks.h5" --ticks 200000 --sessions 8 --seed 7 --signal memory
"$bin/mamba2_ticks" info "$out/ticks.h5"

echo "== 2/3 training configs/tiny.ini on 2 ranks"
rm -rf "$out/run"
# Running as root (containers, CI) needs Open MPI's explicit consent; a normal user needs nothing.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpirun -np 2 --oversubscribe --bind-to none "$bin/mamba2_train" --config "$root/configs/tiny.ini" \
  --set data.path="$out/ticks.h5" --set train.run_dir="$out/run"

echo "== 3/3 evaluation of the final checkpoint on the test split"
ckpt=$(ls "$out"/run/ckpt_*.h5 | sort -V | tail -n 1)
"$bin/mamba2_eval" --checkpoint "$ckpt" --split test --mode stream --json "$out/eval.json"
bash "$root/launch/plot_metrics.sh" "$out/run" "$out/metrics.png"
echo "demo: done; dataset, run, metrics (metrics.png) and evaluation under $out"
