#!/usr/bin/env bash
# Import throughput against a plain read_csv (issue 12's goal: end-to-end rows/s of `mamba2_ticks import` at least
# 0.5x those of pandas or polars read_csv on the same file, measured in the same run; numbers in BENCHMARKS.md).
# One ROWS-row quote CSV (synth --csv-dir, one session) is imported ROUNDS times, each round followed by pandas and
# polars read_csv of the same file, so the three see the same machine state; per round and the median of the
# ratios are printed. Threads: the import runs on one thread (its pieces and blocks are sequential); pandas'
# C parser on one; polars on all cores (POLARS_MAX_THREADS, default the core count, printed).
# Usage: bench/import_bench.sh BUILD_DIR [ROWS ROUNDS]   (defaults 5000000 3)
# Environment: WORK (scratch folder, default /tmp/m2_import_bench), PYTHON (default /work/venv-bench/bin/python:
# a venv with `pip install pandas polars`).
set -euo pipefail
build=$(cd "$1" && pwd)
rows=${2:-5000000} rounds=${3:-3}
work=${WORK:-/tmp/m2_import_bench}
python=${PYTHON:-/work/venv-bench/bin/python}
mkdir -p "$work"
[ -x "$python" ] || { echo "no $python (pandas, polars): nothing to compare against"; exit 1; }
if [ ! -s "$work/quotes_$rows.csv" ]; then
  rm -rf "$work/csv"
  "$build/mamba2_ticks" synth --csv-dir "$work/csv" --instruments 1 --ticks "$rows" --sessions 1 >/dev/null
  gzip -dc "$work"/csv/SYN000_*.csv.gz >"$work/quotes_$rows.csv"
fi
csv="$work/quotes_$rows.csv"
echo "file $csv: $(du -m "$csv" | cut -f1) MB, $rows rows; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$build/mamba2_ticks" "$csv" "$work/out.h5" "$rows" "$rounds" <<'PY'
import os, statistics, subprocess, sys, time
import pandas, polars
ticks, csv, out, n, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
print(f"pandas {pandas.__version__} (1 thread), polars {polars.__version__} ({polars.thread_pool_size()} threads), "
      "mamba2_ticks import (1 thread, end to end: parse, features, the fsync'd write of the dataset)")
def timed(f):
    t = time.perf_counter(); f(); return time.perf_counter() - t
ratios = {"pandas": [], "polars": []}
for r in range(rounds):
    ours = timed(lambda: subprocess.run([ticks, "import", csv, "--out", out], check=True, stdout=subprocess.DEVNULL))
    pd = timed(lambda: pandas.read_csv(csv))
    pl = timed(lambda: polars.read_csv(csv))
    ratios["pandas"].append(pd / ours)
    ratios["polars"].append(pl / ours)
    print(f"round {r + 1}: import {ours:.2f} s ({n / ours / 1e6:.2f} M rows/s), pandas {pd:.2f} s, polars {pl:.2f} s: "
          f"import/read_csv rows/s = {pd / ours:.2f}x pandas, {pl / ours:.2f}x polars")
print(f"median of {rounds}: {statistics.median(ratios['pandas']):.2f}x pandas, "
      f"{statistics.median(ratios['polars']):.2f}x polars (goal >= 0.5x); load {open('/proc/loadavg').read().split()[:3]}")
PY
