#!/usr/bin/env python3
"""One line per kernel launch from Nsight Compute's text report (ncu --set detailed, the default page): time,
registers per thread, achieved occupancy, issued IPC, SM and L1 throughput (% of peak), DRAM throughput, and the
share of shared-memory wavefronts that bank conflicts added (ncu's "uncoalesced shared accesses" rule), so that two
profiles of the SSD's tile kernels (tests/gpu/profile_ssd.sh) compare line by line.
Usage: ncu_summary.py ncu_report.txt"""
import re
import sys

METRICS = [("time us", r"Duration"), ("regs", r"Registers Per Thread"), ("occ %", r"Achieved Occupancy"),
           ("ipc", r"Executed Ipc Active"), ("SM %", r"Compute \(SM\) Throughput"),
           ("L1 %", r"L1/TEX Cache Throughput"), ("DRAM %", r"DRAM Throughput")]
UNIT_US = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def short_name(head):
    name = re.sub(r"^\s*void\s+", "", head.split("(")[0])
    m = re.match(r"m2_tile_gemm_wmma(?:_v4)?_kernel<(\w+)", name)
    return m.group(1) if m else re.sub(r"<.*", "", name)


def summarise(text):
    rows = []
    for block in re.split(r"\n(?=  \S.*Context \d+, Stream \d+, Device \d+)", text)[1:]:
        head = block.split("\n", 1)[0]
        row = {"kernel": short_name(head.strip())}
        for label, key in METRICS:
            m = re.search(r"\n\s+" + key + r"\s+(\S+)\s+([\d.,]+)\n", block)
            if not m:
                row[label] = "-"
                continue
            value = float(m.group(2).replace(",", ""))
            if label == "time us":
                value *= UNIT_US.get(m.group(1), float("nan"))
            row[label] = "%.0f" % value if value >= 1000 or label == "regs" else "%.1f" % value
        m = re.search(r"excessive wavefronts \((\d+)% of the", re.sub(r"\s+", " ", block))
        row["smem excess %"] = m.group(1) if m else "0"
        rows.append(row)
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = summarise(open(sys.argv[1], errors="replace").read())
    if not rows:
        sys.exit("ncu_summary: no kernel sections in %s" % sys.argv[1])
    cols = ["kernel"] + [label for label, _ in METRICS] + ["smem excess %"]
    print("  ".join("%-16s" % c if c == "kernel" else "%8s" % c for c in cols))
    for r in rows:
        print("  ".join("%-16s" % r[c][:16] if c == "kernel" else "%8s" % r[c] for c in cols))
    print("ncu_summary: %d launches, %.1f us" % (len(rows), sum(float(r["time us"]) for r in rows if r["time us"] != "-")))


if __name__ == "__main__":
    main()
