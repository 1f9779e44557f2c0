#!/usr/bin/env bash
# Our CPU training step against the same network in plain PyTorch (bench/torch_mamba2.py): exports our parameters,
# a micro-batch and our forward/gradients (build/torch_export), checks PyTorch's parameter count, forward and
# gradients against them, then times forward+backward eager and under torch.compile, alternated with
# `bench_model THREADS` in each round, and prints the medians and the ratios.
#
#   bench/torch_bench.sh [BUILD_DIR [ROUNDS [THREADS]]]      defaults: build, 5, 2
#   bench/torch_bench.sh --check [BUILD_DIR]                 only the checks (what tests/run/test_torch_check.sh runs)
#
# PyTorch is an optional dependency, in a venv outside the repository (PyPI's default wheel, ~5 GB with its CUDA
# libraries, runs on the CPU too; torch.compile needs a C++ compiler, g++):
#   python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy
# Wall-clock ratios are the goal's; each round also prints CPU-time ratios, which on a shared machine count only each
# side's own work (run with OMP_WAIT_POLICY=passive there, so that threads waiting at barriers sleep; the variable
# reaches both bench_model and PyTorch's OpenMP). MAMBA2_CPU=<level> caps our kernels (base/cpu.h);
# ATEN_CPU_CAPABILITY=<default|avx2|avx512> caps PyTorch's.
# The interpreter is $TORCH_PYTHON, else /work/venv-torch/bin/python3, else python3 if it imports torch.
set -euo pipefail
check=0
if [[ ${1:-} == --check ]]; then
    check=1
    shift
fi
build=${1:-build}
rounds=${2:-5}
threads=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)

torch_python() {
    local py
    for py in "${TORCH_PYTHON:-}" /work/venv-torch/bin/python3 python3; do
        [[ -n $py ]] && "$py" -c 'import torch, numpy' 2> /dev/null && { echo "$py"; return 0; }
    done
    return 1
}
py=$(torch_python) || { echo "torch_bench.sh: no Python with torch and numpy (see the header of $0)" >&2; exit 3; }
[[ -x $build/torch_export && -x $build/bench_model ]] ||
    { echo "torch_bench.sh: error: $build/torch_export or $build/bench_model not built" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/torch_export" "$tmp/export.bin"
if ((check)); then
    "$py" "$here/torch_mamba2.py" "$tmp/export.bin" --check-only --threads "$threads"
else
    read -r load _ < /proc/loadavg
    echo "torch_bench.sh: $(date -u +%Y-%m-%dT%H:%MZ), load average $load at start"
    "$py" "$here/torch_mamba2.py" "$tmp/export.bin" --bench-model "$build/bench_model" \
        --rounds "$rounds" --threads "$threads"
    read -r load _ < /proc/loadavg
    echo "load average $load at the end"
fi
