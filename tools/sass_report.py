#!/usr/bin/env python3
"""The compiled SASS of the CUDA kernels, per kernel: instructions per HMMA in the main loop and the occupancy
limits (docs/TESTING.md, "Counting"; bench/gpu_roof.c reads the table this prints).

    tools/sass_report.py [--arch sm_90] [--out FILE] BUILD_DIR

Reads BUILD_DIR/kernels/CMakeFiles/mamba2_cuda.dir/*.cu.o (the Release build's objects) with `cuobjdump -sass`
and `cuobjdump -res-usage` (cuobjdump needs nvdisasm; both from the CUDA toolkit, or from PyPI's
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm where the toolkit lacks them: set PATH). Per kernel:
  key        base name<first template argument> (the key of tests/gpu/emu/emu_counters.h), prec bf16/tf32/fp32/-
  instrs     static instructions (end-of-function NOP padding and the final self-branch excluded)
  gmem       static global-memory instructions (LDG, STG, RED, ATOMG)
  loop       instructions in the main loop: of the loops closed by a backward branch, the one with the most HMMA
             (else the longest); its global-memory instructions, its HMMA count and instructions per HMMA. A tile
             product is compiled twice, for scalar gathers (m2_tile_gemm_wmma_kernel) and for 16-byte operand loads
             (m2_tile_gemm_wmma_v4_kernel), each with one k loop per operand kind; the host launches one of them
             (kernels/tile_gemm.cuh), and the emulator's counts name the one that ran
  regs, smem registers per thread, static shared bytes; blocks/SM the tighter of 65536 registers, 228 KiB of
             shared memory and 2048 threads per SM (sm_90) for a block of 256 threads
Tab-separated, one header line."""
import glob
import os
import re
import subprocess
import sys

GMEM = ("LDG", "STG", "RED", "ATOMG")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def demangle(names):
    out = run(["c++filt"] + names) if names else ""
    return out.splitlines()


def key_of(dem):
    head = dem.split("(")[0].replace("void ", "", 1).strip()
    base, args = head, []
    if "<" in head:
        base = head[: head.index("<")]
        inner, depth, cur = head[head.index("<") + 1 : head.rindex(">")], 0, ""
        for ch in inner:
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "," and depth == 0:
                args.append(cur.strip())
                cur = ""
            else:
                cur += ch
        args.append(cur.strip())
    prec = "-"
    if any("bf16_operands" in a for a in args):
        prec = "bf16"
    elif any("tf32_operands" in a for a in args):
        prec = "tf32"
    elif base in ("m2_tile_gemm_kernel", "m2_tile_gemm_v4_kernel"):
        prec = "fp32"
    first = args[0] if args else ""
    if "<" in first:
        # The emulator keys a launch by the bare name of its first template argument (tests/gpu/emu/emu_count.cpp,
        # make_key): the SSD's Ops are templates on the element type of their token rows (kernels/ssd_cuda.cuh,
        # ssd_io) and some also on that of the chunk-start states (ssd_states_type), each bf16 exactly when the
        # products' precision is bf16 (the backend's act_type), so a row with any other element type at a
        # precision is never run and is left out.
        elems = first[first.index("<") + 1 : first.rindex(">")].split(",")
        operands = [k for k in ("bf16", "tf32", "fp32") if any(k + "_operands" in a for a in args)] or (
            [prec] if prec != "-" else []
        )
        if operands and any(("bfloat16" in e) != (operands[0] == "bf16") for e in elems):
            return None, prec
        first = first[: first.index("<")]
    return (base + ("<" + first + ">" if args else "")), prec


def parse_sass(text):
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = INSN.search(line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(3), m.group(4).strip()))
    return funcs


def analyse(insns):
    while insns and insns[-1][1] == "NOP":
        insns = insns[:-1]
    if insns and insns[-1][1] == "BRA":  # the self-branch that ends every kernel
        insns = insns[:-1]
    addr = [a for a, _, _ in insns]
    gmem = sum(1 for _, op, _ in insns if op.split(".")[0] in GMEM)
    best = (0, 0, 0)  # (hmma, instrs, global-memory instrs) of the main loop
    for a, op, rest in insns:
        if op != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", rest)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target > a:
            continue
        body = [o for x, o, _ in insns if target <= x <= a]
        hmma = sum(1 for o in body if o.startswith("HMMA"))
        if (hmma, len(body)) > best[:2]:
            best = (hmma, len(body), sum(1 for o in body if o.split(".")[0] in GMEM))
    return len(addr), gmem, best


def res_usage(text):
    out, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"REG:(\d+).*SHARED:(\d+)", line)
        if m and cur:
            out[cur] = (int(m.group(1)), int(m.group(2)))
    return out


def main(argv):
    arch, out, build = "sm_90", None, None
    i = 0
    while i < len(argv):
        if argv[i] == "--arch":
            arch, i = argv[i + 1], i + 2
        elif argv[i] == "--out":
            out, i = argv[i + 1], i + 2
        else:
            build, i = argv[i], i + 1
    if not build:
        sys.exit("usage: tools/sass_report.py [--arch sm_90] [--out FILE] BUILD_DIR")
    objs = sorted(glob.glob(os.path.join(build, "kernels/CMakeFiles/mamba2_cuda.dir/*.cu.o")))
    if not objs:
        sys.exit("sass_report: no kernels/*.cu.o under %s (a build with MAMBA2_CUDA)" % build)
    rows = []
    for o in objs:
        funcs = parse_sass(run(["cuobjdump", "-sass", "-arch", arch, o]))
        res = res_usage(run(["cuobjdump", "-res-usage", "-arch", arch, o]))
        names = list(funcs)
        for mangled, dem in zip(names, demangle(names)):
            key, prec = key_of(dem)
            if key is None:
                continue
            n, gmem, (hmma, loop, loop_gmem) = analyse(funcs[mangled])
            regs, smem = res.get(mangled, (0, 0))
            by_regs = 65536 // (max(regs, 1) * 256)
            by_smem = (228 * 1024) // (smem + 1024) if smem else 8  # 1 KiB reserved per block
            blocks = min(by_regs, by_smem, 2048 // 256, 32)
            per = "%.1f" % (loop / hmma) if hmma else "-"
            rows.append([key, prec, os.path.basename(o), str(n), str(gmem), str(loop), str(loop_gmem), str(hmma), per,
                         str(regs), str(smem), str(blocks)])
    text = "key\tprec\tobject\tinstrs\tgmem\tloop\tloop_gmem\tloop_hmma\tper_hmma\tregs\tsmem\tblocks_per_sm\n"
    text += "".join("\t".join(r) + "\n" for r in rows)
    if out:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, out)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
