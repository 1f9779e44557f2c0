#!/usr/bin/env bash
# LOBSTER import (issue 12): message/orderbook pairs of 3 tickers x 2 days (5 levels, written here by python) become
# a universe; executions are trades with the aggressor's side; --depth 3 adds depth_imb_1..3 and depth_imb_cum,
# recomputed here from the orderbook file; a pair whose files disagree in length and a name without a date give one
# error line each and leave no output.
source "$(dirname "$0")/../lib/cli.sh"
cli_begin
bin="${MAMBA2_BIN:?run through ctest}"
py=/usr/bin/python3
mkdir -p "$dir/lob"
"$py" - "$dir/lob" <<'PY' || fail "writing LOBSTER files"
import sys, random
out = sys.argv[1]
for t, ticker in enumerate(("AAA", "BBB", "CCC")):
    for day in ("2012-06-21", "2012-06-22"):
        rnd = random.Random(hash((ticker, day)) & 0xffff)
        bid, clock = 1000000 + 10000 * t, 34200.0
        m = open(f"{out}/{ticker}_{day}_34200000_57600000_message_5.csv", "w")
        b = open(f"{out}/{ticker}_{day}_34200000_57600000_orderbook_5.csv", "w")
        for i in range(1500):
            clock += rnd.expovariate(2.0)
            bid += rnd.choice((-100, 0, 0, 100))
            kind = rnd.choice((1, 1, 2, 3, 4, 5))
            d = rnd.choice((1, -1))
            m.write(f"{clock:.9f},{kind},{i},{rnd.randint(1, 5) * 100},{bid + (100 if d < 0 else 0)},{d}\n")
            row = []
            for l in range(5):
                row += [bid + 100 * (l + 1), rnd.randint(1, 9) * 100, bid - 100 * l, rnd.randint(1, 9) * 100]
            b.write(",".join(map(str, row)) + "\n")
PY
"$bin/mamba2_ticks" import "$dir/lob" --depth 3 --out "$dir/l.h5" >"$dir/imp.log" 2>&1 || fail "LOBSTER import: $(cat "$dir/imp.log")"
grep -q "read 6 files: 9000 data lines, 9000 rows kept, 0 bad; 3 instruments" "$dir/imp.log" || fail "$(cat "$dir/imp.log")"
"$py" - "$dir/l.h5" "$dir/lob" <<'PY' || fail "LOBSTER contents"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
names = [n.decode() for n in f["features/X"].attrs["names"]]
assert names[8:] == ["depth_imb_1", "depth_imb_2", "depth_imb_3", "depth_imb_cum"], names
assert [n.decode() for n in f["universe/names"][()]] == ["AAA", "BBB", "CCC"]
# rows of AAA's first day, in the stored (split-major) order: train holds its earliest rows
ses, inst = f["index/sessions"][()], f["universe/session_instrument"][()]
first = ses[np.argmax(inst == 0)]
msg = np.loadtxt(sys.argv[2] + "/AAA_2012-06-21_34200000_57600000_message_5.csv", delimiter=",")
ob = np.loadtxt(sys.argv[2] + "/AAA_2012-06-21_34200000_57600000_orderbook_5.csv", delimiter=",")
ts = f["raw/ts_ns"][first:first + 100]
midnight = np.datetime64("2012-06-21T00:00:00", "ns").astype(np.int64)
assert np.all(np.abs(ts - (midnight + np.round(msg[:100, 0] * 1e9))) <= 1), "times"
assert np.allclose(f["raw/bid_px"][first:first + 100], ob[:100, 2] / 1e4)
trade = np.isin(msg[:100, 1], (4, 5))
side = f["raw/side"][first:first + 100]
assert np.all(side[trade] == -msg[:100, 5][trade]) and np.all(np.isnan(f["raw/trade_px"][first:first + 100][~trade]))
# depth imbalance, z-scored with AAA's stored statistics
a, b = ob[:100, 1:12:4], ob[:100, 3:12:4]
raw = np.column_stack([(b - a) / (b + a), (b.sum(1) - a.sum(1)) / (b.sum(1) + a.sum(1))])
mean, std = f["universe/mean"][0, 8:], f["universe/std"][0, 8:]
z = np.clip((raw - mean) / std, -5, 5)
assert np.allclose(f["features/X"][first:first + 100, 8:], z, atol=1e-5), "depth features"
print("LOBSTER: 3 tickers, 9000 rows, depth features match")
PY

mkdir -p "$dir/short" "$dir/nodate"
cp "$dir"/lob/AAA_2012-06-21_* "$dir/short/"
sed -i '$d' "$dir"/short/AAA_2012-06-21_34200000_57600000_orderbook_5.csv
expect_error 1 "LOBSTER pair .*: the orderbook file ends at row 1499, the other goes on" \
  "$bin/mamba2_ticks" import "$dir/short" --out "$dir/short.h5"
[ ! -e "$dir/short.h5" ] || fail "a mismatched pair left output"
cp "$dir"/lob/AAA_2012-06-21_34200000_57600000_message_5.csv "$dir/nodate/AAA_day_34200000_57600000_message_5.csv"
cp "$dir"/lob/AAA_2012-06-21_34200000_57600000_orderbook_5.csv "$dir/nodate/AAA_day_34200000_57600000_orderbook_5.csv"
expect_error 2 "file name has no date" "$bin/mamba2_ticks" import "$dir/nodate" --out "$dir/nodate.h5"
[ ! -e "$dir/nodate.h5" ] || fail "a dateless pair left output"
cli_end
