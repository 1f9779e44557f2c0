#!/usr/bin/env python3
"""The reference figure for bench_gpu (the goal: "at least the throughput of the reference PyTorch+Triton Mamba-2
implementation on the same GPU"): the same network as docs/MODEL.md section 2 -- embed, n_layers x (RMSNorm, the upstream
Mamba2 mixer, residual), RMSNorm, head -- built from state-spaces/mamba's `Mamba2` module (its Triton SSD kernels),
timed for one training micro-step (forward, MSE loss, backward) at configs/8gpu.ini's shape, in bf16 autocast with
fp32 parameters, as upstream trains. Prints one line "bench_reference: N tokens/s ..." like bench_gpu's summary.

The GPU image has PyTorch and Triton but not mamba_ssm (and no network): pass the upstream source folder that holds
the `mamba_ssm` package (--src, or MAMBA_SSM_SRC). Its package __init__ imports every model, some of which need
compiled extensions; this script loads the package as a bare namespace so only the Triton path of Mamba2 is imported.
Without causal_conv1d's compiled kernels upstream falls back to torch's conv1d and its non-fused path
(use_mem_eff_path=False), which the printed line says. Exit 3 when PyTorch, Triton, a GPU or the source is missing.

    python3 tests/gpu/bench_reference.py [--src DIR] [--config configs/8gpu.ini] [--batch B] [--seq T] [--iters N]
"""
import argparse
import configparser
import importlib
import os
import statistics
import sys
import time
import types


def unavailable(why):
    print(f"bench_reference: not run: {why}")
    sys.exit(3)


def parse():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", default=os.environ.get("MAMBA_SSM_SRC", os.path.join(root, ".ref", "mamba")))
    p.add_argument("--config", default=os.path.join(root, "configs", "8gpu.ini"))
    p.add_argument("--batch", type=int, default=0, help="default: the config's train.micro_batch")
    p.add_argument("--seq", type=int, default=0, help="default: the config's train.seq_len")
    p.add_argument("--features", type=int, default=32)  # bench_gpu's defaults
    p.add_argument("--targets", type=int, default=4)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    return p.parse_args()


def load_mamba2(src):
    """Mamba2 from src/mamba_ssm without running the package's __init__ (see the module text)."""
    pkg = os.path.join(src, "mamba_ssm")
    if not os.path.isdir(pkg):
        unavailable(f"no mamba_ssm package under {src} (--src or MAMBA_SSM_SRC)")
    ns = types.ModuleType("mamba_ssm")
    ns.__path__ = [pkg]
    sys.modules["mamba_ssm"] = ns
    try:
        return importlib.import_module("mamba_ssm.modules.mamba2").Mamba2
    except Exception as e:  # a missing dependency of upstream's: report, do not fail the GPU check
        unavailable(f"importing mamba_ssm.modules.mamba2: {type(e).__name__}: {e}")


def main():
    a = parse()
    try:
        import torch
        import triton  # noqa: F401  (upstream's SSD kernels)
    except ImportError as e:
        unavailable(f"{e}")
    if not torch.cuda.is_available():
        unavailable("no CUDA GPU visible to PyTorch")
    Mamba2 = load_mamba2(a.src)
    cfg = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    if not cfg.read(a.config):
        unavailable(f"cannot read {a.config}")
    m, t = cfg["model"], cfg["train"]
    D, L = m.getint("d_model"), m.getint("n_layers")
    B = a.batch or t.getint("micro_batch")
    T = a.seq or t.getint("seq_len")
    try:
        conv_fast = importlib.import_module("causal_conv1d") is not None
    except ImportError:
        conv_fast = False

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(a.features, D)
            self.norms = torch.nn.ModuleList(torch.nn.RMSNorm(D, eps=1e-5) for _ in range(L))
            self.mixers = torch.nn.ModuleList(
                Mamba2(d_model=D, d_state=m.getint("d_state"), d_conv=m.getint("d_conv"), expand=m.getint("expand"),
                       headdim=m.getint("headdim"), ngroups=m.getint("ngroups"), chunk_size=m.getint("chunk_size"),
                       rmsnorm=True, norm_before_gate=False, bias=False, use_mem_eff_path=conv_fast)
                for _ in range(L))
            self.norm_f = torch.nn.RMSNorm(D, eps=1e-5)
            self.head = torch.nn.Linear(D, a.targets)

        def forward(self, x):
            h = self.embed(x)
            for norm, mixer in zip(self.norms, self.mixers):
                h = h + mixer(norm(h))
            return self.head(self.norm_f(h))

    dev = torch.device("cuda")
    net = Net().to(dev)
    x = torch.randn(B, T, a.features, device=dev)
    y = torch.randn(B, T, a.targets, device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(net(x).float(), y)
        loss.backward()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    mem = torch.cuda.max_memory_allocated() / (B * T)
    print(f"bench_reference: {B * T / s:.0f} tokens/s, {s * 1e3:.1f} ms per {B}x{T} micro-step (median of "
          f"{a.iters}), upstream Mamba2 x {L} (D {D}), bf16 autocast, "
          f"{'fused conv+scan' if conv_fast else 'torch conv1d, unfused path: no causal_conv1d'}, "
          f"{mem / 1024:.1f} KiB peak GPU memory per token, {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
