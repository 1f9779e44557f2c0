#!/usr/bin/env bash
# Universe at scale (issue 12; numbers in BENCHMARKS.md):
#   1. a synthetic universe of INSTR instruments x ROWS rows written by `mamba2_ticks synth --instruments`
#      (wall time and peak RSS);
#   2. 2-rank training on it (tiny model, STEPS steps): each rank's private resident memory (RssAnon, sampled every
#      0.2 s, the maximum) and the mean data_wait_share of the metrics log;
#   3. import throughput of one CSV_ROWS-row quote CSV by `mamba2_ticks import` against pandas and polars
#      read_csv of the same file in the same run (PYTHON: a venv with pandas and polars, optional);
#   4. import of a folder of GZ_INSTR instruments x 10 days of .csv.gz files, GZ_ROWS rows per instrument (wall time,
#      peak RSS: the streaming import holds one instrument at a time).
# Usage: bench/universe_bench.sh BUILD_DIR [INSTR ROWS STEPS CSV_ROWS GZ_INSTR GZ_ROWS]
#   (defaults 30 1000000 40 5000000 10 1000000)
# Environment: WORK (scratch folder, default /tmp/m2_universe_bench), PYTHON (default /work/venv-bench/bin/python).
set -euo pipefail
build=$(cd "$1" && pwd)
instr=${2:-30} rows=${3:-1000000} steps=${4:-40} csv_rows=${5:-5000000} gz_instr=${6:-10} gz_rows=${7:-1000000}
src=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/m2_universe_bench}
python=${PYTHON:-/work/venv-bench/bin/python}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
peak() { grep -o 'Maximum resident set size (kbytes): [0-9]*' "$1" | awk '{printf "%.0f MB", $6 / 1024}'; }

echo "== 1. synth universe: $instr instruments x $rows rows"
/usr/bin/time -v "$build/mamba2_ticks" synth --out "$work/u.h5" --instruments "$instr" --ticks "$rows" \
  --sessions $((rows / 20000)) 2>"$work/synth.time" | tail -1
echo "peak RSS $(peak "$work/synth.time"); file $(du -m "$work/u.h5" | cut -f1) MB;" \
  "$(grep -E 'User time|System time' "$work/synth.time" | awk -F': ' '{printf "%s %s s; ", $1, $2}')"

echo "== 2. 2-rank training, $steps steps"
rm -rf "$work/run"
mpirun -np 2 "$build/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$work/u.h5" \
  --set train.run_dir="$work/run" --set train.steps="$steps" --set train.threads=1 --set train.eval_every=0 \
  --set train.log_every=10 --set checkpoint.every=100000 >"$work/train.log" 2>&1 &
launcher=$!
declare -A anon
while kill -0 "$launcher" 2>/dev/null; do
  for pid in $(pgrep -f "^$build/mamba2_train" 2>/dev/null); do
    a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$a" ] && [ "$a" -gt "${anon[$pid]:-0}" ] && anon[$pid]=$a
  done
  sleep 0.2
done
wait "$launcher"
for pid in "${!anon[@]}"; do
  awk -v p="$pid" -v kb="${anon[$pid]}" 'BEGIN {printf "rank pid %s: max RssAnon %.1f MB\n", p, kb / 1024}'
done | sort
grep -E "^data:|^step $steps/" "$work/train.log" || true
awk -F'"data_wait_share": ' 'NF > 1 {split($2, a, ","); s += a[1]; n++} END {printf "data_wait_share: mean %.4f over %d steps\n", s / n, n}' \
  "$work/run/metrics.jsonl"

echo "== 3. import of one $csv_rows-row quote CSV vs read_csv"
rm -rf "$work/csv"
"$build/mamba2_ticks" synth --csv-dir "$work/csv" --instruments 1 --ticks "$csv_rows" --sessions 1 >/dev/null
gzip -dc "$work"/csv/SYN000_*.csv.gz >"$work/quotes.csv"
echo "file $(du -m "$work/quotes.csv" | cut -f1) MB, $csv_rows rows"
# timed IMPORT-ARGS...: wall seconds of one import, its peak RSS in $work/last.time
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -v "$build/mamba2_ticks" import "$@" 2>"$work/last.time" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}
rate() { awk -v n="$csv_rows" -v s="$1" 'BEGIN {printf "%.3f", n / s / 1e6}'; }
s=$(timed --csv "$work/quotes.csv" --out "$work/quotes.h5")
ours=$(rate "$s")
echo "mamba2_ticks import (plain csv): $s s end to end (fsync included), $ours M rows/s, peak RSS $(peak "$work/last.time")"
s=$(timed "$work/csv" --out "$work/quotes_gz.h5")
echo "mamba2_ticks import (.csv.gz folder): $s s, $(rate "$s") M rows/s, peak RSS $(peak "$work/last.time")"
if [ -x "$python" ]; then
  "$python" - "$work/quotes.csv" "$csv_rows" "$ours" <<'PY'
import sys, time
path, n, ours = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for name in ("pandas", "polars"):
    try:
        mod = __import__(name)
    except ImportError:
        print(f"{name}: not installed"); continue
    t = time.perf_counter(); mod.read_csv(path); dt = time.perf_counter() - t
    print(f"{name} {mod.__version__} read_csv: {dt:.2f} s, {n / dt / 1e6:.2f} M rows/s; import/read_csv = {ours / (n / dt / 1e6):.2f}x")
PY
else
  echo "no $python: pandas/polars comparison skipped"
fi

echo "== 4. import of a folder: $gz_instr instruments x 10 days, $gz_rows rows each, .csv.gz"
rm -rf "$work/gz"
"$build/mamba2_ticks" synth --csv-dir "$work/gz" --instruments "$gz_instr" --ticks "$gz_rows" --sessions 10 | tail -1
echo "folder $(du -sm "$work/gz" | cut -f1) MB, $(ls "$work/gz" | wc -l) files"
s=$(timed "$work/gz" --out "$work/gz.h5")
echo "mamba2_ticks import (folder): $s s, $(awk -v n="$gz_instr" -v r="$gz_rows" -v s="$s" 'BEGIN {printf "%.3f", n * r / s / 1e6}') M rows/s, peak RSS $(peak "$work/last.time")"
