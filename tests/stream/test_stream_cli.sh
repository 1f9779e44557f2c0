#!/usr/bin/env bash
# mamba2_stream end to end on the eval fixture (tests/run/eval_fixture.c: a small dataset and checkpoint):
# - the report (latency percentiles, ticks/s, floor) and a predictions file equal to mamba2_eval --mode stream's
#   on the same split (the chunked forward, reset at each session part), with --batch 3 and --bf16 too, and with
#   --evict-kb --warm bitwise the same as without;
# - the example program (examples/stream_example.c, opened from the checkpoint) gives the same predictions, also when
#   its input arrives slowly and it warms the model while idle, and when two processes split the input and hand the
#   instruments' states over through --state (m2_stream_snapshot / m2_stream_restore);
# - --help / --version; bad inputs give one "mamba2_stream: error: ..." line and exit 1 (runtime) or 2 (usage).
# usage: test_stream_cli.sh PATH/TO/eval_fixture PATH/TO/stream_example    (MAMBA2_BIN: build folder)
set -u
fixture=$1
example=$2
bin=$MAMBA2_BIN/mamba2_stream
eval_bin=$MAMBA2_BIN/mamba2_eval
py=/usr/bin/python3   # Debian's python with numpy + h5py (launch/setup.sh)
source "$(dirname "$0")/../lib/cli.sh"
cli_fixture "$fixture"

# ---- success paths -------------------------------------------------------------------------------
"$bin" --checkpoint "$ck" --split val --predictions "$dir/s1.h5" >"$dir/out.txt" 2>"$dir/err.txt"
rc=$?
[ $rc -eq 0 ] || fail "stream exit $rc: $(cat "$dir/err.txt")"
[ ! -s "$dir/err.txt" ] || fail "stream wrote to stderr: $(cat "$dir/err.txt")"
cat "$dir/out.txt"
for pat in 'split val: 100 rows in 2 session part' 'latency per tick (ns): p50 [0-9]* *p99 [0-9]* *p99.9 [0-9]* *max' \
    'ticks/s' 'floor: reading the' 'ratio to the hot floor: p50' \
    'hot floor + the stream.s state read and written once'; do
    grep -q -- "$pat" "$dir/out.txt" || fail "report lacks '$pat'"
done
"$bin" --checkpoint "$ck" --split val --batch 3 --predictions "$dir/s3.h5" >"$dir/out3.txt" 2>"$dir/err.txt" ||
    fail "--batch 3: $(cat "$dir/err.txt")"
grep -q 'latency per step' "$dir/out3.txt" || fail "--batch 3 report: $(cat "$dir/out3.txt")"
# the state line is for one stream per step only (a step of S streams reads S states)
! grep -q 'hot floor + the stream' "$dir/out3.txt" || fail "--batch 3 report has the one-stream state line"
"$bin" --checkpoint "$ck" --split val --bf16 --predictions "$dir/sb.h5" >"$dir/outb.txt" 2>"$dir/err.txt" ||
    fail "--bf16: $(cat "$dir/err.txt")"
grep -q 'bf16: max |pred - fp32 pred| over the split = ' "$dir/outb.txt" || fail "--bf16 report: $(cat "$dir/outb.txt")"
# sparse ticks: the eviction and m2_stream_warm change the time only, never a prediction (bitwise, against s1)
"$bin" --checkpoint "$ck" --split val --evict-kb 1024 --warm --predictions "$dir/sw.h5" >"$dir/outw.txt" \
    2>"$dir/err.txt" || fail "--evict-kb --warm: $(cat "$dir/err.txt")"
grep -q 'sparse ticks: 1024 KB of other memory read before each step, then m2_stream_warm' "$dir/outw.txt" ||
    fail "--warm report: $(cat "$dir/outw.txt")"
"$bin" --checkpoint "$ck" --split val --batch 3 --evict-kb 256 --warm >"$dir/outw3.txt" 2>"$dir/err.txt" ||
    fail "--batch 3 --evict-kb --warm: $(cat "$dir/err.txt")"
"$bin" --checkpoint "$ck" >"$dir/outt.txt" 2>"$dir/err.txt" || fail "default split: $(cat "$dir/err.txt")"
grep -q 'split test: 100 rows' "$dir/outt.txt" || fail "default split is not test: $(cat "$dir/outt.txt")"
"$eval_bin" --checkpoint "$ck" --split val --mode stream --predictions "$dir/e.h5" >/dev/null 2>"$dir/err.txt" ||
    fail "mamba2_eval: $(cat "$dir/err.txt")"

# The example reads "instrument x_1..x_F" lines and "reset i"; feed it the val split as two instruments (one per
# session part), interleaved, so streams and resets are exercised.
"$py" - "$dir" >"$dir/ticks.txt" <<'EOF2' || fail "making example input"
import sys, h5py
d = sys.argv[1]
X = h5py.File(f"{d}/data.h5", "r")["features/X"][...]
parts = [(400, 470), (470, 500)]          # sessions [330,470) and [470,600) cut by val [400,500)
for i, (b, e) in enumerate(parts):
    print(f"reset {i}")
rows = [(i, r) for i, (b, e) in enumerate(parts) for r in range(b, e)]
rows.sort(key=lambda t: (t[1] - parts[t[0]][0], t[0]))   # interleave the two instruments tick by tick
for i, r in rows:
    print(i, " ".join("%.9g" % v for v in X[r]))
EOF2
"$example" "$ck" --instruments 2 <"$dir/ticks.txt" >"$dir/example.txt" 2>"$dir/err.txt" ||
    fail "stream_example: $(cat "$dir/err.txt")"
# the same lines arriving slowly through a pipe: the example idles between them (m2_stream_warm), same output
head -22 "$dir/ticks.txt" | while read -r line; do echo "$line"; sleep 0.004; done |
    "$example" "$ck" --instruments 2 >"$dir/example_slow.txt" 2>"$dir/err.txt" ||
    fail "stream_example, slow input: $(cat "$dir/err.txt")"
[ "$(wc -l <"$dir/example_slow.txt")" -eq 20 ] || fail "stream_example, slow input: $(wc -l <"$dir/example_slow.txt") lines"
cmp -s "$dir/example_slow.txt" <(head -20 "$dir/example.txt") || fail "stream_example: slow input changed the output"
# --state: the same input in two processes, the first writing the instruments' states at its end and the second
# restoring them, gives the one process's output bitwise; a damaged or mismatched state file is refused with its
# reason, exit 1, and left as it was
head -60 "$dir/ticks.txt" | "$example" "$ck" --instruments 2 --state "$dir/state.bin" >"$dir/example_a.txt" \
    2>"$dir/err.txt" || fail "stream_example --state, first process: $(cat "$dir/err.txt")"
[ -s "$dir/state.bin" ] && [ ! -e "$dir/state.bin.tmp" ] || fail "stream_example --state: no state file (or a .tmp left)"
tail -n +61 "$dir/ticks.txt" | "$example" "$ck" --instruments 2 --state "$dir/state.bin" >"$dir/example_b.txt" \
    2>"$dir/err.txt" || fail "stream_example --state, second process: $(cat "$dir/err.txt")"
cat "$dir/example_a.txt" "$dir/example_b.txt" | cmp -s - "$dir/example.txt" ||
    fail "stream_example --state: two processes differ from one"
cp "$dir/state.bin" "$dir/damaged.bin"
printf '\x7f' | dd of="$dir/damaged.bin" bs=1 seek=200 conv=notrunc status=none
cp "$dir/damaged.bin" "$dir/damaged.orig"
for case in "damaged.bin 2 checksum" "state.bin 1 more states than --instruments" \
    "state.bin 3 shorter than a snapshot's header"; do
    read -r file n why <<<"$case"
    "$example" "$ck" --instruments "$n" --state "$dir/$file" </dev/null >/dev/null 2>"$dir/err.txt"
    rc=$?
    [ $rc -eq 1 ] || fail "stream_example --state $file --instruments $n: exit $rc, not 1"
    grep -q -- "--state $dir/$file: .*$why" "$dir/err.txt" || fail "stream_example --state $file: $(cat "$dir/err.txt")"
done
cmp -s "$dir/damaged.bin" "$dir/damaged.orig" || fail "stream_example: a refused state file was overwritten"
# event lines need a tick size: this fixture's checkpoint (written without the trainer) keeps none
expect_error 1 "event lines need --tick-size .the checkpoint keeps no tick size" "$example" "$ck" \
    < <(echo "event 0 34200000000000 100 100.01 5 3 0 0")

# Everything against mamba2_eval's chunked forward (an independent path: m2_model_forward).
# Tolerance: fp32 with different summation orders, ~1e-6 relative to the output scale (test_stream_chunked);
# 2e-5 of the scale. bf16 weights: within 3% of the scale (test_stream's test_bf16_close explains).
"$py" - "$dir" <<'EOF2' || fail "predictions check"
import sys, h5py, numpy as np
d = sys.argv[1]
e = h5py.File(f"{d}/e.h5", "r")
ref, rows = e["pred"][...].astype(np.float64), e["row"][...]
scale = np.abs(ref).max()
assert scale > 1e-3, scale
def check(name, pred, tol):
    err = np.abs(pred - ref).max() / scale
    print(f"{name}: max |pred - mamba2_eval| / scale = {err:.2e}")
    assert err < tol, (name, err)
for name, tol in (("s1", 2e-5), ("s3", 2e-5), ("sb", 3e-2)):
    f = h5py.File(f"{d}/{name}.h5", "r")
    assert f.attrs["schema"] in (b"mamba2.predictions", "mamba2.predictions")
    assert np.array_equal(f["row"][...], rows), name
    y = h5py.File(f"{d}/data.h5", "r")["targets/y"][...]
    assert np.array_equal(f["target"][...], y[rows], equal_nan=True), name
    check(name, f["pred"][...].astype(np.float64), tol)
assert not np.array_equal(h5py.File(f"{d}/sb.h5", "r")["pred"][...], h5py.File(f"{d}/s1.h5", "r")["pred"][...])
assert np.array_equal(h5py.File(f"{d}/sw.h5", "r")["pred"][...], h5py.File(f"{d}/s1.h5", "r")["pred"][...])
# example output: lines "i p1 p2" in input order; map back to rows
lines = [l.split() for l in open(f"{d}/example.txt")]
parts = [(400, 470), (470, 500)]
order = sorted([(i, r) for i, (b, _) in enumerate(parts) for r in range(b, parts[i][1])],
               key=lambda t: (t[1] - parts[t[0]][0], t[0]))
assert len(lines) == len(order) == 100, len(lines)
pred = np.zeros_like(ref)
for (i, r), l in zip(order, lines):
    assert int(l[0]) == i
    pred[r - 400] = [float(v) for v in l[1:]]
check("stream_example", pred, 2e-5)
EOF2

check_help_version "$bin" --checkpoint --data --split --predictions --bf16 --batch --evict-kb --warm --version

# ---- bad inputs ----------------------------------------------------------------------------------
expect_error 2 "--checkpoint" "$bin" --split val
expect_error 2 "--bogus" "$bin" --checkpoint "$ck" --bogus
expect_error 2 "split foo" "$bin" --checkpoint "$ck" --split foo
expect_error 2 "--batch \\(0\\): out of range" "$bin" --checkpoint "$ck" --batch 0
expect_error 2 "--batch" "$bin" --checkpoint "$ck" --batch
expect_error 2 "--warm needs --evict-kb" "$bin" --checkpoint "$ck" --warm
expect_error 2 "--evict-kb \\(0\\): out of range" "$bin" --checkpoint "$ck" --evict-kb 0
expect_error 1 "missing.h5" "$bin" --checkpoint "$dir/missing.h5"
expect_error 1 "5 features" "$bin" --checkpoint "$ck" --data "$dir/data_f5.h5"
expect_error 1 "nope.h5" "$bin" --checkpoint "$ck" --data "$dir/nope.h5"
expect_error 1 "no/such/dir" "$bin" --checkpoint "$ck" --split val --predictions "$dir/no/such/dir/p.h5"

cli_end
echo "all mamba2_stream CLI checks passed"
