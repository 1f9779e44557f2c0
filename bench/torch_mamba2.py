#!/usr/bin/env python3
"""The network of docs/MODEL.md in plain PyTorch, checked against ours and timed against bench_model.

    torch_mamba2.py EXPORT [--check-only] [--bench-model PATH] [--rounds R] [--iters K] [--threads N]
                    [--no-compile]

EXPORT is written by build/torch_export (bench/torch_export.c documents the format): our parameters in the flat
layout of docs/MODEL.md section 9, a micro-batch (X, Y) and what our CPU backend computed for it (predictions,
d(SSE)/dparams). This script
  1. builds the network (embedding; L Mamba-2 layers: RMSNorm, in_proj, causal depthwise conv + SiLU, dt softplus,
     A = -exp(A_log), the chunked SSD with the D skip, gated RMSNorm, out_proj, residual; RMSNorm_f and the head)
     with torch.nn modules and tensor operations only, and loads our parameters into it;
  2. checks its parameter count against ours, its predictions and its gradients of the SSE loss (docs/MODEL.md
     section 4) against ours, within the tolerances stated at TOL_*; exit status 1 if any check fails;
  3. unless --check-only: times forward+backward of the micro-batch, eager and under torch.compile, alternated
     with `bench_model THREADS` (the same micro-batch shape: 8 x 512 ticks, fp32) in each round, and prints each
     round and the medians with the ratios torch / ours.
The PyTorch dependency is optional (bench/torch_bench.sh explains how to install it in a venv)."""
import argparse
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as Fn

EPS = 1e-5  # M2_NORM_EPS (docs/MODEL.md section 2)

# Forward: the predictions differ only by fp32 summation order (the SSD's chunked sums are formed differently:
# cumulative-sum differences here, running segment sums in ours; GEMM blocking differs). fp32 carries ~6e-8
# relative per operation; through 4 residual layers with sums of up to 512 terms the expected difference is
# ~1e-6 of the output scale (measured: 6.9e-7 for bench_model's micro-batch). 1e-5 leaves an order of margin and
# fails for any wrong term (leaving out the D skip changes the predictions by 1.07 of their scale).
TOL_PRED = 1e-5
# Gradients: sums over the 4096 tokens of the micro-batch on top of the forward's differences; per tensor, the
# largest difference relative to the tensor's largest gradient (measured: 4e-6, dt_bias). 1e-4: the same argument,
# one more reduction.
TOL_GRAD = 1e-4

HEADER = [
    "magic", "version", "F", "O", "D", "L", "E", "P", "N", "G", "K", "Q", "Di", "H", "Cc", "Win", "B", "T"
]


def read_export(path):
    """The arrays of bench/torch_export.c's file, as a dict."""
    raw = open(path, "rb").read()
    head = np.frombuffer(raw, dtype="<i4", count=len(HEADER))
    d = dict(zip(HEADER, (int(v) for v in head)))
    if d["magic"] != 0x4D324558 or d["version"] != 1:
        sys.exit(f"torch_mamba2: error: {path}: not a torch_export file of version 1")
    off = 4 * len(HEADER)
    d["n_params"] = int(np.frombuffer(raw, dtype="<i8", count=1, offset=off)[0])
    off += 8
    B, T, F, O, n = d["B"], d["T"], d["F"], d["O"], d["n_params"]
    for name, count in (("params", n), ("X", B * T * F), ("Y", B * T * O), ("pred", B * T * O), ("grads", n)):
        d[name] = np.frombuffer(raw, dtype="<f4", count=count, offset=off).copy()
        off += 4 * count
    d["sse"] = float(np.frombuffer(raw, dtype="<f8", count=1, offset=off)[0])
    return d


def rmsnorm(v, w):
    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS) * w


def ssd(x, dt, A, Bm, Cm, Q):
    """Chunked SSD (docs/MODEL.md section 3): x [b,T,H,P], dt [b,T,H], A [H], Bm/Cm [b,T,H,N] -> y [b,T,H,P]."""
    b, T, H, P = x.shape
    pad = (-T) % Q  # positions past T with dt = 0 change nothing (MODEL.md section 1)
    if pad:
        x, Bm, Cm = (Fn.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, Bm, Cm))
        dt = Fn.pad(dt, (0, 0, 0, pad))
    nc = (T + pad) // Q
    x = x.reshape(b, nc, Q, H, P)
    Bm = Bm.reshape(b, nc, Q, H, -1)
    Cm = Cm.reshape(b, nc, Q, H, -1)
    dt = dt.reshape(b, nc, Q, H)
    a = (dt * A).permute(0, 3, 1, 2)  # [b,H,nc,Q]
    acs = torch.cumsum(a, dim=-1)
    seg = acs.unsqueeze(-1) - acs.unsqueeze(-2)  # [.., l, s] = sum of a over (s, l]
    causal = torch.tril(torch.ones(Q, Q, dtype=torch.bool, device=x.device))
    w = torch.exp(seg.masked_fill(~causal, float("-inf")))  # the causal mask before any product
    xdt = x * dt.unsqueeze(-1)
    y = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cm, Bm, w, xdt)  # within the chunk
    r = torch.exp(acs[..., -1:] - acs)  # after s -> chunk end
    local = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bm, r, xdt)  # chunk-local states
    E = torch.exp(acs[..., -1])  # [b,H,nc] whole-chunk decay
    S = torch.zeros_like(local[:, 0])
    starts = []
    for c in range(nc):  # state passing, sequential over chunks
        starts.append(S)
        S = E[:, :, c, None, None] * S + local[:, c]
    S0 = torch.stack(starts, dim=1)  # [b,nc,H,P,N]
    y = y + torch.einsum("bclhn,bchpn,bhcl->bclhp", Cm, S0, torch.exp(acs))
    return y.reshape(b, nc * Q, H, P)[:, :T]


class Layer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        D, Di, H, Cc, K = d["D"], d["Di"], d["H"], d["Cc"], d["K"]
        self.d = d
        self.norm = torch.nn.Parameter(torch.empty(D))
        self.in_proj = torch.nn.Linear(D, d["Win"], bias=False)
        self.dt_bias = torch.nn.Parameter(torch.empty(H))
        self.conv = torch.nn.Conv1d(Cc, Cc, K, groups=Cc, padding=K - 1)
        self.A_log = torch.nn.Parameter(torch.empty(H))
        self.Dskip = torch.nn.Parameter(torch.empty(H))
        self.gnorm = torch.nn.Parameter(torch.empty(Di))
        self.out_proj = torch.nn.Linear(Di, D, bias=False)

    def forward(self, h):
        d = self.d
        Di, GN, H, P, G, N = d["Di"], d["G"] * d["N"], d["H"], d["P"], d["G"], d["N"]
        b, T, _ = h.shape
        zxbcdt = self.in_proj(rmsnorm(h, self.norm))
        z, xBC, dt_raw = torch.split(zxbcdt, [Di, Di + 2 * GN, H], dim=-1)
        xBC = Fn.silu(self.conv(xBC.transpose(1, 2))[..., :T]).transpose(1, 2)
        x, Bm, Cm = torch.split(xBC, [Di, GN, GN], dim=-1)
        dt = Fn.softplus(dt_raw + self.dt_bias, threshold=20.0)  # = v above 20 (M2_SOFTPLUS_THRESHOLD)
        A = -torch.exp(self.A_log)
        per = H // G  # head h uses group h / (H/G)
        Bh = Bm.reshape(b, T, G, N).repeat_interleave(per, dim=2)
        Ch = Cm.reshape(b, T, G, N).repeat_interleave(per, dim=2)
        xh = x.reshape(b, T, H, P)
        y = ssd(xh, dt, A, Bh, Ch, d["Q"]) + self.Dskip[:, None] * xh
        v = (y.reshape(b, T, Di) * Fn.silu(z)).reshape(b, T, G, Di // G)
        o = (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)).reshape(b, T, Di) * self.gnorm
        return h + self.out_proj(o)


class Mamba2(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.embed = torch.nn.Linear(d["F"], d["D"])
        self.layers = torch.nn.ModuleList(Layer(d) for _ in range(d["L"]))
        self.norm_f = torch.nn.Parameter(torch.empty(d["D"]))
        self.head = torch.nn.Linear(d["D"], d["O"])

    def forward(self, X):
        h = self.embed(X)
        for layer in self.layers:
            h = layer(h)
        return self.head(rmsnorm(h, self.norm_f))

    def flat_order(self):
        """(name, parameter) in the flat buffer order of docs/MODEL.md section 9."""
        out = [("embed.weight", self.embed.weight), ("embed.bias", self.embed.bias)]
        for i, l in enumerate(self.layers):
            p = f"layers.{i}.mixer."
            out += [(f"layers.{i}.norm.weight", l.norm), (p + "in_proj+x_proj+dt_proj.weight", l.in_proj.weight),
                    (p + "dt_bias", l.dt_bias), (p + "conv1d.weight", l.conv.weight),
                    (p + "conv1d.bias", l.conv.bias), (p + "A_log", l.A_log), (p + "D", l.Dskip),
                    (p + "norm.weight", l.gnorm), (p + "out_proj.weight", l.out_proj.weight)]
        out += [("norm_f.weight", self.norm_f), ("head.weight", self.head.weight), ("head.bias", self.head.bias)]
        return out


def load_flat(model, flat):
    off = 0
    with torch.no_grad():
        for _, p in model.flat_order():
            n = p.numel()
            p.copy_(torch.from_numpy(flat[off:off + n]).reshape(p.shape))
            off += n
    return off


def check(model, d, X, Y):
    """Parameter count, predictions and gradients against ours; returns the number of failed checks."""
    fails = 0
    n_torch = sum(p.numel() for p in model.parameters())
    ok = n_torch == d["n_params"]
    fails += not ok
    print(f"parameters: torch {n_torch}, ours {d['n_params']}: {'OK' if ok else 'FAIL'}")
    model.zero_grad(set_to_none=True)
    pred = model(X)
    sse = ((pred - Y) ** 2).sum()
    sse.backward()
    ours = torch.from_numpy(d["pred"]).reshape(pred.shape)
    scale = ours.abs().max().item()
    err = (pred.detach() - ours).abs().max().item() / scale
    ok = err <= TOL_PRED
    fails += not ok
    print(f"forward: max |torch - ours| / max |ours| = {err:.2e} (tolerance {TOL_PRED:g}): {'OK' if ok else 'FAIL'}")
    print(f"SSE: torch {sse.item():.6f}, ours {d['sse']:.6f}")
    off, worst, worst_name = 0, 0.0, ""
    for name, p in model.flat_order():
        n = p.numel()
        g = torch.from_numpy(d["grads"][off:off + n]).reshape(p.shape)
        off += n
        if p.grad is None:  # a parameter the network does not use
            e = float("inf")
        else:
            e = (p.grad - g).abs().max().item() / max(g.abs().max().item(), 1e-30)
        if e > worst:
            worst, worst_name = e, name
    ok = worst <= TOL_GRAD
    fails += not ok
    print(f"gradients: worst tensor {worst_name}, max |torch - ours| / max |ours| = {worst:.2e} "
          f"(tolerance {TOL_GRAD:g}): {'OK' if ok else 'FAIL'}")
    return fails


def time_torch(fn, model, iters):
    """(best wall seconds, best process CPU seconds) of one forward+backward over iters runs (after the caller's
    warm-up). CPU time counts only this process's own work on a shared machine, as bench_model's "by CPU time"
    line does (both count threads spinning at barriers unless OMP_WAIT_POLICY=passive)."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(iters):
        model.zero_grad(set_to_none=True)
        t0, c0 = time.perf_counter(), time.process_time()
        fn().backward()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu


def time_ours(bench_model, threads):
    """(best wall seconds, best CPU seconds, CPU kernels) of bench_model's forward+backward."""
    out = subprocess.run([bench_model, str(threads)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"forward\+backward: best ([0-9.]+) ms", out)
    c = re.search(r"by CPU time.*?: ([0-9.]+) CPU-s per micro-batch", out)
    if not m or not c:
        sys.exit("torch_mamba2: error: bench_model printed no 'forward+backward: best' or 'by CPU time' line")
    isa = re.search(r"CPU kernels: (\S+)", out)
    return float(m.group(1)) / 1e3, float(c.group(1)), isa.group(1) if isa else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--bench-model", default="build/bench_model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    d = read_export(a.export)
    model = Mamba2(d)
    load_flat(model, d["params"])
    B, T = d["B"], d["T"]
    X = torch.from_numpy(d["X"]).reshape(B, T, d["F"])
    Y = torch.from_numpy(d["Y"]).reshape(B, T, d["O"])
    print(f"torch {torch.__version__}, {a.threads} threads; micro-batch {B} x {T}, fp32")
    fails = check(model, d, X, Y)
    if fails or a.check_only:
        return 1 if fails else 0

    def eager():
        return ((model(X) - Y) ** 2).sum()

    variants = [("eager", eager)]
    if not a.no_compile:
        compiled_model = torch.compile(model)

        def compiled():
            return ((compiled_model(X) - Y) ** 2).sum()

        t0 = time.perf_counter()
        for _ in range(2):  # compiles the forward and the backward graphs
            model.zero_grad(set_to_none=True)
            compiled().backward()
        print(f"torch.compile: first two steps (compilation) {time.perf_counter() - t0:.1f} s")
        variants.append(("compile", compiled))
    for _, fn in variants:  # warm-up
        model.zero_grad(set_to_none=True)
        fn().backward()

    rows = {"ours": []}  # (wall, cpu) per round
    rows.update({name: [] for name, _ in variants})
    isa = "?"
    for r in range(a.rounds):
        t, c, isa = time_ours(a.bench_model, a.threads)
        rows["ours"].append((t, c))
        line = f"round {r + 1}: ours {t * 1e3:.1f} ms ({c * 1e3:.1f} CPU-ms)"
        for name, fn in variants:
            tt, tc = time_torch(fn, model, a.iters)
            rows[name].append((tt, tc))
            line += f", torch {name} {tt * 1e3:.1f} ms ({tc * 1e3:.1f} CPU-ms; {tt / t:.2f}x, by CPU {tc / c:.2f}x)"
        print(line, flush=True)
    med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in rows.items()}
    print(f"median of {a.rounds} rounds (best of {a.iters} forward+backward each; ours: bench_model {a.threads}, "
          f"CPU kernels {isa}): ours {med['ours'][0] * 1e3:.1f} ms, {med['ours'][1] * 1e3:.1f} CPU-ms")
    for name, _ in variants:
        ratio, ratio_cpu = med[name][0] / med["ours"][0], med[name][1] / med["ours"][1]
        print(f"torch {name}: {med[name][0] * 1e3:.1f} ms, ratio torch/ours {ratio:.2f}x "
              f"(goal >= 3x: {'MET' if ratio >= 3 else 'NOT MET'}); by CPU time {ratio_cpu:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
