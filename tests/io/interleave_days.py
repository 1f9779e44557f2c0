"""Writes the per-instrument daily files matching GLOB (NAME_YYYYMMDD.csv.gz) as one file per day, OUT/ALL_<day>.csv,
the instruments' rows interleaved in time order under a `symbol` column (the input of `import --instrument-column`).
With BAD_DAY_INDEX, a row with an unparsable bid is inserted before data row 301 of that day's file (0-based index
in date order): it is then line 302 of the file (line 1 is the header).
Usage: interleave_days.py GLOB OUT [BAD_DAY_INDEX]"""
import collections, glob, gzip, os, sys

days = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1])):
    inst, day = os.path.basename(f)[:-7].split("_")
    lines = gzip.open(f, "rt").read().splitlines()
    header = lines[0]
    days[day] += [(int(l.split(",")[0]), inst, l) for l in lines[1:]]
os.makedirs(sys.argv[2])
bad = int(sys.argv[3]) if len(sys.argv) > 3 else -1
for k, (day, rows) in enumerate(sorted(days.items())):
    body = [f"{i},{l}" for _, i, l in sorted(rows)]
    if k == bad:
        sym, ts = body[300].split(",")[:2]
        body.insert(300, f"{sym},{ts},abc,1,1,1,,,")
    with open(f"{sys.argv[2]}/ALL_{day}.csv", "w") as o:
        o.write("symbol," + header + "\n" + "".join(b + "\n" for b in body))
