#!/usr/bin/env bash
# The PyTorch build of docs/MODEL.md's network (bench/torch_mamba2.py) has our parameter count and gives our
# predictions and gradients of the SSE loss for our parameters (tolerances justified in torch_mamba2.py: TOL_PRED,
# TOL_GRAD). PyTorch is an optional dependency (bench/torch_bench.sh says how to install it): without it this test
# prints a SKIP line and exits 77, which ctest reports as skipped.
source "$(dirname "$0")/../lib/cli.sh"
test_begin
rc=0
out=$(bash "$src/bench/torch_bench.sh" --check "$bin" 1 1 2>&1) || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "SKIP: $out"
  exit 77
fi
echo "$out"
[ "$rc" -eq 0 ] || fail "torch_bench.sh --check exited $rc"
for what in parameters forward gradients; do
  grep -q "^$what: .*OK$" <<<"$out" || fail "no OK line for $what"
done
echo "ok: the PyTorch network matches ours"
