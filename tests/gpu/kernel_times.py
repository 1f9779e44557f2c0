#!/usr/bin/env python3
"""Measured time per kernel, beside the predicted H200 time of bench_gpu_emu's three-roof model.

Reads the CSV that Nsight Compute prints for one metric (tests/gpu/check.sh runs
`ncu --csv --print-units base --metrics gpu__time_duration.sum bench_gpu ...`, whatever else that program printed
mixed in) and bench/predicted_h200.tsv, and prints per row of the prediction: launches measured, mean measured time
per launch, predicted time per launch (predicted_ms / launches), and their ratio. Kernels are matched on the
prediction's key (the kernel's function name, and the functor it is instantiated for); a key that several rows
share (one kernel for several purposes) gets all its launches in each of them; what no key names (cuBLAS's own kernels, mostly) is summed in one
"other kernels" row. Per launch, because ncu profiles a shorter run than the prediction's full step (fewer layers,
one step), while each launch of a kernel has the same shape in every layer.

    python3 tests/gpu/kernel_times.py NCU_CSV [bench/predicted_h200.tsv]
"""
import csv
import os
import re
import sys

UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def measured(path):
    """{kernel name: [launches, total ns]} from ncu's CSV rows (one row per launch and metric)."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"kernel_times: {path}: no ncu CSV header (a line starting with \"ID\")")
    rows = csv.reader(line for line in lines[start:] if line.startswith('"'))
    header = next(rows)
    col = {name: i for i, name in enumerate(header)}
    kernels = {}
    for r in rows:
        if len(r) != len(header) or r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        value = float(r[col["Metric Value"]].replace(",", ""))
        ns = value * UNIT_NS.get(r[col["Metric Unit"]], 1.0)
        k = kernels.setdefault(r[col["Kernel Name"]], [0, 0.0])
        k[0] += 1
        k[1] += ns
    return kernels


def matches(key, name):
    """Whether a demangled kernel name is the prediction's key: "fn" or "fn<arg>" (the functor a template takes)."""
    base, _, arg = key.partition("<")
    arg = arg.rstrip(">")
    return bool(re.search(rf"\b{re.escape(base)}\b", name)) and (not arg or bool(re.search(rf"\b{re.escape(arg)}\b", name)))


def predicted(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    tsv = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "bench", "predicted_h200.tsv")
    kernels = measured(sys.argv[1])
    unmatched = dict(kernels)
    print(f"{'predicted row':34} {'launches':>8} {'measured us':>12} {'predicted us':>12} {'ratio':>6}  (per launch)")
    for row in predicted(tsv):
        key = row["key"]
        hits = [name for name in kernels if matches(key, name)]
        launches = sum(kernels[n][0] for n in hits)
        total = sum(kernels[n][1] for n in hits)
        for n in hits:
            unmatched.pop(n, None)
        pred_us = 1e3 * float(row["predicted_ms"]) / max(1, int(row["launches"]))
        if launches:
            mean_us = total / launches / 1e3
            print(f"{row['name'][:34]:34} {launches:8d} {mean_us:12.1f} {pred_us:12.1f} {mean_us / pred_us:6.2f}")
        else:
            print(f"{row['name'][:34]:34} {0:8d} {'-':>12} {pred_us:12.1f} {'-':>6}")
    if unmatched:
        launches = sum(v[0] for v in unmatched.values())
        total = sum(v[1] for v in unmatched.values())
        print(f"{'other kernels':34} {launches:8d} {total / launches / 1e3:12.1f}")
        for name, (n, ns) in sorted(unmatched.items(), key=lambda kv: -kv[1][1])[:8]:
            print(f"    {n:5d} x {ns / n / 1e3:9.1f} us  {name[:100]}")
    total_ns = sum(v[1] for v in kernels.values())
    print(f"kernel_times: {sum(v[0] for v in kernels.values())} launches, {total_ns / 1e6:.2f} ms of kernel time")


if __name__ == "__main__":
    main()
