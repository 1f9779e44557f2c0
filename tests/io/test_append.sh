#!/usr/bin/env bash
# mamba2_ticks import --append (issue 12; FORMATS.md "Appending days"): a universe imported from days 1..4 of 3
# instruments, then day 5 appended. Frozen as documented: the calendar cuts, every statistic, and the train and val
# rows (bit for bit) are unchanged; the new rows join the test split after their instrument's test rows, one new
# session each, and their features are the unnormalised features of a full 5-day import normalised with the frozen
# statistics. Appending the same day again, or a corrupt day, is refused with one line and leaves the file as it
# was; so is an instrument the universe does not have.
# Usage: test_append.sh   (env: MAMBA2_BIN, MAMBA2_SRC)
source "$(dirname "$0")/../lib/cli.sh"
cli_begin
bin="${MAMBA2_BIN:?run through ctest}"
ticks="$bin/mamba2_ticks"

"$ticks" synth --csv-dir "$dir/days" --instruments 3 --ticks 5000 --sessions 5 --seed 3 >/dev/null || fail "synth"
mkdir -p "$dir/new" "$dir/all"
cp "$dir"/days/*.csv.gz "$dir/all/"
mv "$dir"/days/*_20240108.csv.gz "$dir/new/" || fail "day 5 is 2024-01-08"
"$ticks" import "$dir/days" --out "$dir/u.h5" >/dev/null || fail "import of days 1..4"
"$ticks" import "$dir/all" --out "$dir/full.h5" >/dev/null || fail "import of days 1..5"
cp "$dir/u.h5" "$dir/before.h5"
"$ticks" import --append "$dir/u.h5" "$dir/new" >"$dir/append.log" || fail "append: $(cat "$dir/append.log")"
grep -q "appended 3 files: 3000 data lines, 3000 rows kept" "$dir/append.log" || fail "append log: $(cat "$dir/append.log")"

/usr/bin/python3 - "$dir/before.h5" "$dir/u.h5" "$dir/full.h5" <<'PY' || fail "appended universe"
import sys, h5py, numpy as np
a, b, full = (h5py.File(p, "r") for p in sys.argv[1:])
for k in ("universe/mean", "universe/std", "universe/cut_ns", "universe/tick_size", "index/train", "index/val"):
    assert np.array_equal(a[k][()], b[k][()]), k
na, nb = len(a["features/X"]), len(b["features/X"])
assert nb == na + 3000, (na, nb)
tb = a["index/test"][0]
assert list(b["index/test"][()]) == [tb, nb], b["index/test"][()]
for k in ("features/X", "targets/y", "raw/ts_ns", "raw/bid_px"):
    assert np.array_equal(a[k][:tb], b[k][:tb], equal_nan=True), k
sa, sb = a["index/sessions"][()], b["index/sessions"][()]
assert len(sb) == len(sa) + 3, (len(sa), len(sb))
inst = b["universe/session_instrument"][()]
assert list(inst) == sorted(inst) or all(np.diff(inst[np.searchsorted(sb, tb):]) >= 0), "test rows by instrument"
# the new rows' features, unnormalised, are those of the full import (clipped entries and the full import's session
# starts aside; float32 rounding of
# z-scores of order 5 leaves ~1e-6 relative, 1e-4 of a standard deviation is ample)
def rows(f):
    ses, si = f["index/sessions"][()], f["universe/session_instrument"][()]
    return np.repeat(si, np.diff(ses)), f["raw/ts_ns"][()]
ib, tsb = rows(b)
iff, tsf = rows(full)
where = {(i, t): r for r, (i, t) in enumerate(zip(iff, tsf))}
mean, std, clip = b["universe/mean"][()], b["universe/std"][()], b["features/X"].attrs["clip"]
fmean, fstd = full["universe/mean"][()], full["universe/std"][()]
Xb, Xf = b["features/X"][()], full["features/X"][()]
new = [r for r in range(nb) if tsb[r] > a["raw/ts_ns"][()][rows(a)[0] == ib[r]].max()]
assert len(new) == 3000, len(new)
starts = set(full["index/sessions"][()])  # the full import's cuts may start a session inside day 5
for r in new:
    i, q = ib[r], where[(ib[r], tsb[r])]
    if q in starts:
        continue
    ok = (np.abs(Xb[r]) < clip) & (np.abs(Xf[q]) < clip)
    u, v = Xb[r] * std[i] + mean[i], Xf[q] * fstd[i] + fmean[i]
    assert np.allclose(u[ok], v[ok], rtol=1e-5, atol=1e-4 * std[i][ok].max()), (r, u, v)
PY

cp "$dir/u.h5" "$dir/after.h5"
expect_error 2 "instrument SYN000 already has rows up to .*is this day already in the file" \
  "$ticks" import --append "$dir/u.h5" "$dir/new"
cmp -s "$dir/u.h5" "$dir/after.h5" || fail "a refused append changed the file"
"$ticks" synth --csv-dir "$dir/more" --instruments 3 --ticks 6000 --sessions 6 --seed 3 >/dev/null || fail "synth 6 days"
victim=$(ls "$dir"/more/SYN001_*.csv.gz | tail -1)
size=$(stat -c %s "$victim")
printf '\x00\x01\x02\x03\x04\x05\x06\x07' | dd of="$victim" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
expect_error 1 "gzip data corrupt or truncated" "$ticks" import --append "$dir/u.h5" "$victim"
cmp -s "$dir/u.h5" "$dir/after.h5" || fail "a failed append changed the file"
mkdir -p "$dir/other"
"$ticks" synth --csv-dir "$dir/other" --instruments 4 --ticks 6000 --sessions 6 --seed 3 >/dev/null || fail "synth 4"
expect_error 2 "instrument SYN003 is not in the universe" "$ticks" import --append "$dir/u.h5" "$dir/other/SYN003_*.csv.gz"
cmp -s "$dir/u.h5" "$dir/after.h5" && [ -z "$(ls -A "$dir" | grep -E '\.tmp\.|spool')" ] || fail "a failed append left output"
cli_end
