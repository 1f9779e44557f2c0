#!/usr/bin/env bash
# The import's memory does not grow with the rows (issue 12; FORMATS.md "Universe import"): one plain CSV of one
# instrument in one session, 8x the rows, and `import --append` of a day 8x longer keep the peak RSS nearly flat
# (pass 1 hands rows to the spool in pieces of 64K rows, pass 2 works in blocks), and so does synth of one
# instrument with 8x the sessions. A bad row of a file split by
# --instrument-column is reported at its own file and line, not at the line of the split-out part. The replay of
# `mamba2_stream --per-instrument` keeps no per-row results either (latencies in a bounded histogram).
# Usage: test_import_bounded.sh MPIRUN   (env: MAMBA2_BIN, MAMBA2_SRC)
source "$(dirname "$0")/../lib/cli.sh"
mpirun="$1"
cli_begin
bin="${MAMBA2_BIN:?run through ctest}"
py=/usr/bin/python3
ticks="$bin/mamba2_ticks"

# Under AddressSanitizer (launch/test_sanitize.sh) freed memory stays resident in its quarantine, so peak RSS follows
# the bytes ever allocated, not those held: the comparisons run in the normal suite only (as in test_universe).
rss_checked() { [ -z "${ASAN_OPTIONS:-}" ] || { echo "SKIP peak-RSS comparison under AddressSanitizer: $*"; return 1; }; }
peak_kb() { "$py" -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"; }
# One instrument's days as one plain CSV (the header once).
one_csv() { local first=1; for f in "$1"/*.csv.gz; do
  if [ $first = 1 ]; then gzip -dc "$f"; first=0; else gzip -dc "$f" | tail -n +2; fi; done >"$2"; }

# ---- one plain CSV, one session (--session-gap of a year): 150k vs 1.2M rows. Held in memory (the import before
# pieces) 1.2M rows took ~100 B each, ~120 MB over a ~20 MB base; from ~100k rows on the pieces and blocks are full
# size, so 1.25x of the smaller run leaves room for allocator noise only ----
for n in 150000 1200000; do
  "$ticks" synth --csv-dir "$dir/d$n" --ticks $n --sessions 5 --seed 2 >/dev/null || fail "synth $n"
  one_csv "$dir/d$n" "$dir/one$n.csv"
  one_kb[$n]=$(peak_kb "$ticks" import "$dir/one$n.csv" --session-gap 31536000 --out "$dir/one$n.h5") || fail "import $n"
done
echo "peak RSS import of one CSV, 150k/1.2M rows: ${one_kb[150000]}/${one_kb[1200000]} KB"
rss_checked "one CSV" && { [ "${one_kb[1200000]}" -lt $((one_kb[150000] * 5 / 4)) ] ||
  fail "import: peak RSS ${one_kb[1200000]} KB for 1.2M rows vs ${one_kb[150000]} KB for 150k: memory grows with the rows"; }
"$py" - "$dir/one1200000.h5" <<'PY' || fail "one CSV: layout"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["schema_version"] == 1 and "universe" not in f, "a one-file import stays a version-1 file"
assert len(f["index/sessions"]) - 1 == 3 and len(f["features/X"]) == 1200000  # one session, cut twice by the split
PY

# ---- synth of one instrument (the same simulation a session at a time, /synth/latent spooled): 5 vs 40 sessions
# of 30k rows; the in-memory synth took ~150 B per row ----
for n in 5 40; do
  syn_kb[$n]=$(peak_kb "$ticks" synth --out "$dir/syn$n.h5" --ticks $((n * 30000)) --sessions $n) || fail "synth $n"
done
echo "peak RSS synth of one instrument, 150k/1.2M rows: ${syn_kb[5]}/${syn_kb[40]} KB"
rss_checked "synth" && { [ "${syn_kb[40]}" -lt $((syn_kb[5] * 5 / 4)) ] ||
  fail "synth: peak RSS ${syn_kb[40]} KB for 1.2M rows vs ${syn_kb[5]} KB for 150k: memory grows with the rows"; }
h5dump -H -d /synth/latent "$dir/syn40.h5" | grep -q "( 1200000 )" || fail "synth: no /synth/latent of 1.2M rows"

# ---- append: a day of 20k vs 160k rows per instrument to the same 4-day universe of 2 instruments (the old rows are
# copied through the file's mapping, page cache that counts in the peak RSS, so the universe stays the same) ----
"$ticks" synth --csv-dir "$dir/a" --instruments 2 --ticks 100000 --sessions 5 --seed 4 >/dev/null || fail "synth a"
rm "$dir"/a/*_20240108.csv.gz || fail "day 5 is 2024-01-08"
"$ticks" import "$dir/a" --out "$dir/a.h5" >/dev/null || fail "import of days 1..4"
for n in 20000 160000; do
  "$ticks" synth --csv-dir "$dir/a$n" --instruments 2 --ticks $((5 * n)) --sessions 5 --seed 4 >/dev/null || fail "synth a$n"
  cp "$dir/a.h5" "$dir/a$n.h5"
  app_kb[$n]=$(peak_kb "$ticks" import --append "$dir/a$n.h5" "$dir/a$n"/*_20240108.csv.gz) || fail "append $n"
done
echo "peak RSS append of a day of 20k/160k rows per instrument: ${app_kb[20000]}/${app_kb[160000]} KB"
rss_checked "append" && { [ "${app_kb[160000]}" -lt $((app_kb[20000] * 5 / 4)) ] ||
  fail "append: peak RSS ${app_kb[160000]} KB for days of 160k rows vs ${app_kb[20000]} KB for 20k: memory grows with the rows"; }

# ---- --instrument-column: a bad row in the middle of the second of two multi-instrument files ----
"$ticks" synth --csv-dir "$dir/m" --instruments 3 --ticks 600 --sessions 2 --seed 6 >/dev/null || fail "synth m"
"$py" "$src/tests/io/interleave_days.py" "$dir/m/*.csv.gz" "$dir/mixed" 1 || fail "writing the interleaved files"
second=$(ls "$dir/mixed" | sort | sed -n 2p)
"$ticks" import "$dir/mixed" --instrument-column symbol --out "$dir/col.h5" >/dev/null 2>"$dir/col.err" || fail "import --instrument-column: $(cat "$dir/col.err")"
grep -q "warning: 1 bad row skipped: line 302 (unparsable bid \"abc\" in $second)" "$dir/col.err" ||
  fail "bad row not reported at its file and line: $(cat "$dir/col.err")"
expect_error 1 "row \\($dir/mixed/$second:302\\): unparsable bid" "$ticks" import "$dir/mixed" --instrument-column symbol \
  --strict --out "$dir/col2.h5"
[ ! -e "$dir/col2.h5" ] && [ -z "$(ls -A "$dir" | grep parts)" ] || fail "a failed column import left output"

# ---- mamba2_stream --per-instrument on the train split (640k rows) vs the test split (80k rows) of one universe:
# per-row predictions and latencies (the replay before the histogram) cost 20 B per row, 11 MB more for train;
# the rest (the mapped dataset, the floor's 256 MiB arena) is the same in both runs, so half of that is the limit ----
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$ticks" synth --out "$dir/st.h5" --instruments 4 --ticks 200000 --sessions 5 >/dev/null || fail "synth st"
timeout 300 "$mpirun" -np 1 "$bin/mamba2_train" --config "$src/configs/tiny.ini" --set data.path="$dir/st.h5" \
  --set model.d_model=16 --set model.n_layers=2 --set model.headdim=8 --set model.d_state=8 --set model.chunk_size=16 \
  --set train.seq_len=48 --set train.burn_in=8 --set train.micro_batch=4 --set train.global_batch=4 \
  --set train.eval_batches=1 --set train.threads=1 --set train.steps=2 --set train.warmup=1 --set train.eval_every=2 \
  --set checkpoint.every=2 --set train.run_dir="$dir/strun" >"$dir/st.log" 2>&1 || fail "train: $(tail -3 "$dir/st.log")"
for sp in test train; do
  st_kb[$sp]=$(peak_kb "$bin/mamba2_stream" --checkpoint "$dir/strun/ckpt_2.h5" --per-instrument --split $sp) ||
    fail "stream --split $sp"
done
echo "peak RSS stream --per-instrument, test/train split: ${st_kb[test]}/${st_kb[train]} KB"
rss_checked "stream" && { [ $((st_kb[train] - st_kb[test])) -lt 5600 ] ||
  fail "stream: peak RSS ${st_kb[train]} KB on 640k rows vs ${st_kb[test]} KB on 80k: memory grows with the rows"; }

cli_end
