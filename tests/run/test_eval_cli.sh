#!/usr/bin/env bash
# mamba2_eval end to end on a fixture (eval_fixture: small dataset + checkpoint, no trainer needed):
# - stream and window mode print the table, write valid JSON and a predictions file that agrees with the dataset;
# - --help / --version;
# - bad inputs (missing dataset (given, or the checkpoint's default), dataset with another feature count, corrupted / missing checkpoint, unknown split,
#   unknown mode, unknown option, no checkpoint) give exactly one stderr line "mamba2_eval: error: ..." naming the
#   problem, and exit 1 (runtime) or 2 (usage).
# usage: test_eval_cli.sh PATH/TO/eval_fixture     (MAMBA2_BIN: build folder)
set -u
fixture=$1
eval_bin=$MAMBA2_BIN/mamba2_eval
py=/usr/bin/python3   # Debian's python with numpy + h5py (launch/setup.sh)
source "$(dirname "$0")/../lib/cli.sh"
cli_fixture "$fixture"

# ---- success paths -------------------------------------------------------------------------------
"$eval_bin" --checkpoint "$ck" --split val --json "$dir/stream.json" --predictions "$dir/stream.h5" \
    >"$dir/out.txt" 2>"$dir/err.txt"
rc=$?
[ $rc -eq 0 ] || fail "stream eval exit $rc: $(cat "$dir/err.txt")"
[ ! -s "$dir/err.txt" ] || fail "stream eval wrote to stderr: $(cat "$dir/err.txt")"
[ "$(grep -c '^ *[0-9]*  mamba2 ' "$dir/out.txt")" -eq 2 ] || fail "table lacks 2 model lines: $(cat "$dir/out.txt")"
[ "$(grep -c '^ *[0-9]*  ridge ' "$dir/out.txt")" -eq 2 ] || fail "table lacks 2 ridge lines"
grep -q 'split val, mode stream' "$dir/out.txt" || fail "table header lacks split/mode"
header=$(head -1 "$dir/out.txt")
grep -qE ', on (cpu|cuda \(.+\))$' <<<"$header" || fail "table header does not say where the model ran: $header"
grep -qE '"backend":"(cpu|cuda \(.+\))"' "$dir/stream.json" || fail "JSON lacks the backend"
cat "$dir/out.txt"

"$eval_bin" --checkpoint "$ck" --data "$dir/data.h5" --split=val --mode window --json "$dir/window.json" \
    --predictions "$dir/window.h5" >/dev/null 2>"$dir/err.txt" || fail "window eval: $(cat "$dir/err.txt")"

# JSON and predictions files against the dataset and each other (checked by an independent reader: h5py)
"$py" - "$dir" <<'EOF' || fail "JSON / predictions check"
import json, sys
import h5py, numpy as np
d = sys.argv[1]
ds = h5py.File(f"{d}/data.h5", "r")
y = ds["targets/y"][...]
for mode in ("stream", "window"):
    j = json.load(open(f"{d}/{mode}.json"))
    p = h5py.File(f"{d}/{mode}.h5", "r")
    assert p.attrs["schema"] in (b"mamba2.predictions", "mamba2.predictions"), p.attrs["schema"]
    assert j["split"] == "val" and j["mode"] == mode and j["step"] == 7, j
    assert [h["horizon"] for h in j["horizons"]] == [2, 5], j["horizons"]
    row, pred, target = p["row"][...], p["pred"][...], p["target"][...]
    assert pred.shape == target.shape == (len(row), 2) and j["rows"] == len(row)
    assert np.array_equal(target, y[row], equal_nan=True), "targets are not the dataset's"
    assert np.all(np.isfinite(pred))
    if mode == "stream":
        assert list(row) == list(range(400, 500)), row
    else:  # windows of 32 from each part's start (sessions [330,470), [470,600) cut val [400,500)), burn_in 8
        parts = [(400, 470), (470, 500)]
        want = [r for b, e in parts for r in range(b, e) if (r - b) % 32 >= 8]
        assert list(row) == want, (list(row), want)
        assert j["seq_len"] == 32 and j["burn_in"] == 8
    for o, h in enumerate(j["horizons"]):
        ok = np.isfinite(target[:, o])
        n = int(ok.sum())
        assert h["model"]["n"] == n and h["ridge"]["n"] == n, (h, n)
        mse = float(np.mean((pred[ok, o].astype(np.float64) - target[ok, o]) ** 2))
        assert abs(h["model"]["mse"] - mse) <= 1e-6 * mse, (h["model"]["mse"], mse)
        ic = float(np.corrcoef(pred[ok, o], target[ok, o])[0, 1])
        assert abs(h["model"]["ic"] - ic) <= 1e-5, (h["model"]["ic"], ic)
        assert h["ridge"]["train_rows"] > 0
    # horizon 2's target is 2 x0 - x1 + noise(0.5): the ridge finds it out of sample
    assert j["horizons"][0]["ridge"]["ic"] > 0.9, j["horizons"][0]["ridge"]
# stream and window agree on the rows of each part's first window
s, w = h5py.File(f"{d}/stream.h5", "r"), h5py.File(f"{d}/window.h5", "r")
srow, wrow = list(s["row"][...]), list(w["row"][...])
for i, r in enumerate(wrow):
    if (400 <= r < 432) or (470 <= r < 502):
        diff = np.abs(w["pred"][i] - s["pred"][srow.index(r)]).max()
        assert diff < 1e-4, (r, diff)  # fp32 rounding only; see tests/run/test_eval.c
print("JSON and predictions OK")
EOF

check_help_version "$eval_bin" --checkpoint --data --split --mode --json --predictions --device --version

# ---- bad inputs ----------------------------------------------------------------------------------
head -c 3000 "$ck" >"$dir/truncated.h5"
head -c 4096 /dev/urandom >"$dir/garbage.h5"
expect_error 1 "nope.h5" "$eval_bin" --checkpoint "$ck" --data "$dir/nope.h5"
expect_error 1 "5 features" "$eval_bin" --checkpoint "$ck" --data "$dir/data_f5.h5"
expect_error 1 "truncated.h5" "$eval_bin" --checkpoint "$dir/truncated.h5"
expect_error 1 "garbage.h5" "$eval_bin" --checkpoint "$dir/garbage.h5"
expect_error 1 "missing.h5" "$eval_bin" --checkpoint "$dir/missing.h5"
expect_error 1 "checkpoint" "$eval_bin" --checkpoint "$dir/data.h5" # a dataset is not a checkpoint
expect_error 2 "split foo" "$eval_bin" --checkpoint "$ck" --split foo
expect_error 2 "mode batch" "$eval_bin" --checkpoint "$ck" --mode batch
expect_error 2 "--bogus" "$eval_bin" --checkpoint "$ck" --bogus
expect_error 2 "--checkpoint" "$eval_bin" --split val
expect_error 2 "--json" "$eval_bin" --checkpoint "$ck" --json
expect_error 2 "--device tpu: unknown device \(auto, cpu or cuda\)" "$eval_bin" --checkpoint "$ck" --device tpu
if grep -q ', on cpu$' <<<"$header"; then # auto found no GPU here: asking for one is an error naming why
  expect_error 1 "^mamba2_eval: error: --device cuda: model.device \(cuda\): (no CUDA GPU: .+|this build has no CUDA backend.*)$" \
    "$eval_bin" --checkpoint "$ck" --device cuda
fi
"$eval_bin" --checkpoint "$ck" --split val --device cpu --json "$dir/cpu.json" >/dev/null 2>"$dir/err.txt" ||
  fail "--device cpu: $(cat "$dir/err.txt")"
grep -q '"backend":"cpu"' "$dir/cpu.json" || fail "--device cpu did not run on the CPU"
mv "$dir/data.h5" "$dir/moved.h5" # the default --data is the checkpoint's [data] path: the message says so
expect_error 1 "data.h5.*the checkpoint's \[data\] path" "$eval_bin" --checkpoint "$ck"

cli_end
echo "all mamba2_eval CLI checks passed"
