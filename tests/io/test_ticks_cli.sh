#!/usr/bin/env bash
# mamba2_ticks end to end: --help/--version, usage errors (exit 2, one line), synth (fast, deterministic, readable
# by h5dump and h5py), info, import with bad rows and --strict, and damaged or foreign HDF5 files → exit 1 with
# exactly one error line on stderr and no HDF5 error-stack noise.
set -uo pipefail
bin="$MAMBA2_BIN/mamba2_ticks"
py=/usr/bin/python3
dir="$(mktemp -d /tmp/m2ticks_XXXXXX)"
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run EXPECTED_RC ARGS...: runs the program, keeps stdout/stderr in $dir/out, $dir/err
run() {
  local want=$1; shift
  "$bin" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "mamba2_ticks $* exited $rc, expected $want; stderr: $(cat "$dir/err")"
}
# one_error_line FRAGMENT: stderr is exactly one "mamba2_ticks: error: " line containing FRAGMENT
one_error_line() {
  local n; n=$(wc -l <"$dir/err")
  [ "$n" -eq 1 ] || fail "expected one stderr line, got $n: $(cat "$dir/err")"
  grep -q "^mamba2_ticks: error: .*$1" "$dir/err" || fail "stderr lacks '$1': $(cat "$dir/err")"
  ! grep -qi "hdf5-diag\|#00:\|H5F\.c\|H5E" "$dir/err" || fail "HDF5 noise on stderr: $(cat "$dir/err")"
}

# ---- help and version ----
run 0 --help
for opt in --out --ticks --sessions --seed --signal --horizons --split --csv --instrument --tick-size --strict \
           --session-gap "default 200000" "default memory" "default 10,50,100" "default 0.8,0.1,0.1"; do
  grep -q -- "$opt" "$dir/out" || fail "--help lacks $opt"
done
run 0 synth --help; grep -q -- "--signal" "$dir/out" || fail "synth --help lacks --signal"
run 0 --version
grep -q "^mamba2_ticks [0-9]" "$dir/out" || fail "--version lacks the version: $(cat "$dir/out")"
grep -q "backends: cpu mpi" "$dir/out" || fail "--version lacks the backends: $(cat "$dir/out")"

# ---- usage errors: exit 2, one line ----
run 2;                                        grep -q usage "$dir/err" || fail "no usage without arguments"
run 2 frobnicate;                             one_error_line "unknown"
run 2 synth;                                  one_error_line "one of --out FILE, --csv-dir DIR and --lobster-dir DIR is required"
run 2 synth --out "$dir/x.h5" --signal loud;  one_error_line "none, linear or memory"
run 2 synth --out "$dir/x.h5" --ticks many;   one_error_line "--ticks (many): not an integer"
run 2 synth --out "$dir/x.h5" --split 0.5,0.1,0.1; one_error_line "sum to 1"
run 2 synth --out "$dir/x.h5" --bogus;        one_error_line "--bogus"
run 2 import --out "$dir/x.h5";               one_error_line "an input (--csv FILE, a file, folder or glob) and --out FILE are required"
run 2 info;                                   one_error_line "exactly one FILE"
[ ! -e "$dir/x.h5" ] || fail "a failed command left $dir/x.h5"

# ---- synth: seconds for 200000 ticks, deterministic bytes, readable by h5dump and h5py ----
start=$(date +%s%N)
SOURCE_DATE_EPOCH=1700000000 run 0 synth --out "$dir/a.h5" --ticks 200000 --signal memory --seed 3
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "synth --ticks 200000: ${ms} ms"
[ "$ms" -lt 20000 ] || fail "synth took ${ms} ms"   # about 0.5 s here; 20 s allows a loaded CI machine
SOURCE_DATE_EPOCH=1700000000 run 0 synth --out "$dir/b.h5" --ticks 200000 --signal memory --seed 3
cmp -s "$dir/a.h5" "$dir/b.h5" || fail "same seed gave different files"
run 0 synth --out "$dir/c.h5" --ticks 20000 --seed 4
cmp -s "$dir/a.h5" "$dir/c.h5" && fail "different seeds gave the same file"
ls -a "$dir" | grep -q '\.tmp\.' && fail "temporary files left: $(ls -a "$dir")"
h5dump -H "$dir/a.h5" >"$dir/dump" 2>&1 || fail "h5dump cannot read the dataset"
h5dump -a /schema "$dir/a.h5" | grep -q '"mamba2.ticks"' || fail "h5dump does not show the schema"
for d in /features/X /targets/y /index/sessions /index/train /index/val /index/test /raw/ts_ns /raw/side; do
  grep -q "DATASET \"${d##*/}\"" "$dir/dump" || fail "h5dump lacks $d"
done
"$py" - "$dir/a.h5" <<'EOF' || fail "h5py cannot read the dataset"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["schema"] in (b"mamba2.ticks", "mamba2.ticks")
X = f["/features/X"]
assert X.shape == (200000, 8) and X.dtype == "float32" and X.chunks is None
names = [n.decode() if isinstance(n, bytes) else n for n in X.attrs["names"]]
assert names[0] == "mid_ret_bp" and len(names) == 8, names
assert list(f["/targets/y"].attrs["horizons"]) == [10, 50, 100]
assert f["/index/sessions"][-1] == 200000
assert f["/synth/latent"].shape == (200000,)
EOF

# ---- info ----
run 0 info "$dir/a.h5"
for s in "instrument  SYNTH" "200000 in 10 sessions" "train        160000" "mid_ret_bp" "tod_cos" "NaN" "horizon"; do
  grep -q "$s" "$dir/out" || fail "info lacks '$s'"
done

# ---- import: bad rows reported with line numbers; --strict stops at the first ----
cat >"$dir/q.csv" <<'EOF'
ts,bid,ask,bid_size,ask_size
2024-01-02T09:30:00Z,100.00,100.02,300,200
2024-01-02T09:30:01Z,100.01,100.02,100,200
2024-01-02T09:30:02Z,100.03,100.02,100,200
2024-01-02T09:30:03Z,100.01,100.03,100,200
2024-01-02T09:30:04Z,x,100.03,100,200
2024-01-02T09:30:05Z,100.02,100.03,100,200
2024-01-02T09:30:06Z,100.02,100.04,100,200
2024-01-02T09:30:07Z,100.03,100.04,100,200
2024-01-02T09:30:08Z,100.03,100.05,100,200
2024-01-02T09:30:09Z,100.04,100.05,100,200
EOF
run 0 import --csv "$dir/q.csv" --out "$dir/q.h5" --horizons 1,2 --split 0.6,0.2,0.2
grep -q "warning: 2 bad rows skipped: line 4 (bid 100.03 > ask 100.02), line 6 (unparsable bid" "$dir/err" \
  || fail "import warning: $(cat "$dir/err")"
grep -q "8 rows kept, 2 bad" "$dir/out" || fail "import summary: $(cat "$dir/out")"
run 0 info "$dir/q.h5"
run 1 import --csv "$dir/q.csv" --out "$dir/strict.h5" --strict; one_error_line "q.csv:4): bid 100.03 > ask 100.02"
[ ! -e "$dir/strict.h5" ] || fail "--strict failure left a file"
# bad rows and then a failure: the error is the first stderr line, the bad-row summary follows it
printf 'ts,bid,ask\n1,x,1\n2,5,4\n' >"$dir/allbad.csv"
run 1 import --csv "$dir/allbad.csv" --out "$dir/allbad.h5"
head -1 "$dir/err" | grep -q "^mamba2_ticks: error: .*0 valid rows" || fail "error not first: $(cat "$dir/err")"
sed -n 2p "$dir/err" | grep -q "^mamba2_ticks: warning: 2 bad rows skipped" || fail "no summary after the error: $(cat "$dir/err")"
[ ! -e "$dir/allbad.h5" ] || fail "a failed import left a file"
run 1 import --csv "$dir/none.csv" --out "$dir/n.h5";            one_error_line "none.csv): no such file, folder or matching file"
run 1 synth --out /nonexistent_m2_dir/x.h5 --ticks 1000;         one_error_line "nonexistent_m2_dir"

# ---- damaged and foreign files: exit 1, one line, no HDF5 noise, no crash ----
head -c 20000 "$dir/a.h5" >"$dir/truncated.h5"
head -c 100000 /dev/urandom >"$dir/garbage.h5"
: >"$dir/empty.h5"
"$py" - "$dir" <<'EOF' || fail "could not make the foreign files"
import sys, h5py
d = sys.argv[1]
with h5py.File(d + "/foreign.h5", "w") as f:
    f["x"] = [1, 2, 3]
with h5py.File(d + "/checkpoint.h5", "w") as f:
    f.attrs["schema"] = "mamba2.checkpoint"; f.attrs["schema_version"] = 1
import shutil
shutil.copy(d + "/c.h5", d + "/newer.h5")
with h5py.File(d + "/newer.h5", "a") as f:
    f.attrs.modify("schema_version", 3)
shutil.copy(d + "/c.h5", d + "/nosplit.h5")
with h5py.File(d + "/nosplit.h5", "a") as f:
    del f["/index/val"]
# declared shapes no file can hold (chunked, so nothing is written): 2^61 rows (rows x columns x 4 wraps size_t),
# and 2^40 session offsets
def replace(f, name, shape):
    attrs = dict(f[name].attrs)
    del f[name]
    ds = f.create_dataset(name, shape=shape, dtype=attrs and "f4" or "i8", chunks=(1,) + shape[1:])
    for k, v in attrs.items():
        ds.attrs[k] = v
shutil.copy(d + "/c.h5", d + "/huge_rows.h5")
with h5py.File(d + "/huge_rows.h5", "a") as f:
    F, O = f["/features/X"].shape[1], f["/targets/y"].shape[1]
    replace(f, "/features/X", (2**61, F))
    replace(f, "/targets/y", (2**61, O))
for name, tick in (("nan_tick", float("nan")), ("zero_tick", 0.0)):
    shutil.copy(d + "/c.h5", d + "/" + name + ".h5")
    with h5py.File(d + "/" + name + ".h5", "a") as f:
        f.attrs.modify("tick_size", tick)
shutil.copy(d + "/c.h5", d + "/huge_index.h5")
with h5py.File(d + "/huge_index.h5", "a") as f:
    del f["/index/sessions"]
    f.create_dataset("/index/sessions", shape=(2**40,), dtype="i8", chunks=(1024,))
EOF
run 1 info "$dir/truncated.h5";  one_error_line "truncated.h5): not an HDF5 file or truncated"
run 1 info "$dir/garbage.h5";    one_error_line "garbage.h5): not an HDF5 file or truncated"
run 1 info "$dir/empty.h5";      one_error_line "empty.h5): not an HDF5 file or truncated"
run 1 info "$dir/foreign.h5";    one_error_line "not a mamba2.ticks file"
run 1 info "$dir/checkpoint.h5"; one_error_line "not a mamba2.ticks file (schema is \"mamba2.checkpoint\")"
run 1 info "$dir/newer.h5";      one_error_line "schema_version 3 is newer than supported 2"
run 1 info "$dir/nosplit.h5";    one_error_line "dataset /index/val (.*nosplit.h5): missing"
run 1 info "$dir/huge_rows.h5";  one_error_line "2305843009213693952 rows x .* declared, far more than the file"
run 1 info "$dir/huge_index.h5"; one_error_line "/index/sessions .*: 1099511627775 sessions for"
run 1 info "$dir/nan_tick.h5";   one_error_line "tick_size nan must be finite and > 0"
run 1 info "$dir/zero_tick.h5";  one_error_line "tick_size 0 must be finite and > 0"
run 1 info "$dir/missing.h5";    one_error_line "No such file or directory"
run 1 info "$dir";               one_error_line "is a directory"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all mamba2_ticks CLI checks passed"
