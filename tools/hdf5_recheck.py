#!/usr/bin/env python3
"""Reads the HDF5 cases a fuzz campaign kept (tests/fuzz, docs/TESTING.md "Fuzzing") with two HDF5 builds.

For each *.h5 under the given folders: h5dump with the system's HDF5 (Debian 12: 1.10.8), and a full walk (every
object, attribute and dataset read) in h5py with the HDF5 build its wheel bundles, each in its own process with a
time limit. A case is "ok" (read), "refused" (a clean error), "crash" (a signal) or "hang" (past the limit). A case
that one build refuses cleanly and the other crashes or hangs on is a fault the newer build fixed.

    tools/hdf5_recheck.py [--python VENV/bin/python] [--timeout S] DIR [DIR ...]

h5py is an optional dependency: `python3 -m venv /tmp/venv-h5 && /tmp/venv-h5/bin/pip install h5py`.
"""
import argparse
import collections
import pathlib
import subprocess
import sys

WALK = r"""
import sys, h5py
def read(obj):
    for k in obj.attrs:
        obj.attrs[k]
    if isinstance(obj, h5py.Dataset):
        obj[()]
with h5py.File(sys.argv[1], "r") as f:
    read(f)
    f.visititems(lambda name, obj: read(obj))
"""


def verdict(cmd, timeout):
    try:
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return "hang"
    if rc < 0 or rc >= 128:
        return "crash"
    return "ok" if rc == 0 else "refused"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=pathlib.Path)
    ap.add_argument("--python", default="/tmp/venv-h5/bin/python", help="a Python with h5py")
    ap.add_argument("--timeout", type=float, default=20.0)
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import h5py; print(h5py.version.hdf5_version)"],
                             capture_output=True, text=True)
    if version.returncode != 0:
        sys.exit(f"hdf5_recheck: error: h5py ({a.python}): not importable; install it in a venv (see --help)")
    newer = "HDF5 " + version.stdout.strip() + " (h5py)"
    files = sorted(p for d in a.dirs for p in d.rglob("*.h5"))
    pairs = collections.Counter()
    for p in files:
        old = verdict(["h5dump", str(p)], a.timeout)
        new = verdict([a.python, "-c", WALK, str(p)], a.timeout)
        pairs[(old, new)] += 1
        if old in ("crash", "hang") or new in ("crash", "hang"):
            print(f"{p}\th5dump: {old}\t{newer}: {new}")
    print(f"{len(files)} files; h5dump (system HDF5) / {newer}:")
    for (old, new), n in sorted(pairs.items()):
        print(f"  {old:8} / {new:8} {n}")


if __name__ == "__main__":
    main()
