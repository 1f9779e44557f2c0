#!/usr/bin/env bash
# The SSD's tile kernels on a GPU, in about 3 minutes: the focused run after a change to kernels/tile_gemm.cuh or
# kernels/ssd_cuda*.cu (check.sh is the whole check; this is the loop of one kernel change, within a short lease).
#   1. test_gpu_ssd (every SSD product against the fp64 oracle, with element-wise gathers and with the 16-byte loads
#      of the model's shapes), test_gpu_model and test_gpu_train;
#   2. bench_gpu at configs/8gpu.ini's shape: tokens/s and the time per op;
#   3. Nsight Compute's "detailed" sections on the SSD kernels of one 1-layer step, summarised per kernel by
#      tests/gpu/ncu_summary.py (time, registers, occupancy, IPC, throughputs, excess shared-memory wavefronts);
#   4. compute-sanitizer's racecheck on test_gpu_ssd's model-shape case, within RACECHECK_S seconds (default 100;
#      INFO if cut short: the whole file took over 90 s).
# Binaries: those of BUILD (default build-gpucheck, as check.sh builds them) when it has them, else the prebuilt
# bundle GPU_BUNDLE (default build-gpubundle/gpu-bundle.tar.xz, tests/gpu/make_bundle.sh).
# Log: $OUT/profile_ssd.log and $OUT/ncu_ssd.txt when OUT is set (the workplace's device runner), else in BUILD.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build-gpucheck}"
out="${OUT:-$build}"
mkdir -p "$build" "$out"
exec > >(tee "$out/profile_ssd.log") 2>&1
# shellcheck source=tests/gpu/bundle_env.sh
. "$root/tests/gpu/bundle_env.sh"
t0=$(date +%s)
if [ -x "$build/tests/test_gpu_ssd" ] && [ -x "$build/bench_gpu" ]; then
  tests="$build/tests" bench="$build/bench_gpu"
else
  bundle="${GPU_BUNDLE:-$root/build-gpubundle/gpu-bundle.tar.xz}"
  m2_bundle_unpack "$bundle" "$build" ||
    { echo "profile_ssd: no binaries in $build and the bundle $bundle could not be unpacked"; exit 1; }
  [ -z "$bundle_missing" ] || { echo "$bundle_missing"; exit 1; }
  tests="$bundle_bin" bench="$bundle_bin/bench_gpu"
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" OPENBLAS_NUM_THREADS=1 MAMBA2_SRC="$root"
echo "== profile_ssd $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader 2>/dev/null

failed=0
for t in test_gpu_ssd test_gpu_model test_gpu_train; do
  timeout 120 "$tests/$t" > "$out/$t.out" 2>&1
  rc=$?
  echo "-- $t: exit $rc ($(grep -m1 -E '^\[  (PASSED|FAILED)' "$out/$t.out"))"
  [ $rc -eq 0 ] || { grep -E "FAIL|rel err.*\(tol" "$out/$t.out" | head -20; failed=1; }
done

echo "== bench_gpu ($(( $(date +%s) - t0 )) s)"
timeout 150 "$bench" --config "$root/configs/8gpu.ini" || failed=1

echo "== ncu ($(( $(date +%s) - t0 )) s)"
ncu=$(m2_cuda_tool ncu)
if [ -n "$ncu" ]; then
  timeout 150 "$ncu" --set detailed -k 'regex:m2_tile_gemm|ssd_' --launch-count 20 --import-source no \
    "$bench" --config "$root/configs/8gpu.ini" --layers 1 --iters 1 --warmup 0 > "$out/ncu_ssd.txt" 2>&1
  echo "ncu: exit $?"
  python3 "$root/tests/gpu/ncu_summary.py" "$out/ncu_ssd.txt"
else
  echo "ncu: not found"
fi

sanitizer=$(m2_cuda_tool compute-sanitizer)
echo "== racecheck ($(( $(date +%s) - t0 )) s)"
if [ -n "$sanitizer" ]; then
  timeout "${RACECHECK_S:-100}" "$sanitizer" --tool racecheck --error-exitcode 3 "$tests/test_gpu_ssd" '*production*' \
    > "$out/racecheck_ssd.txt" 2>&1
  rc=$?
  case $rc in
    0) echo "racecheck test_gpu_ssd: PASS, $(grep -m1 'RACECHECK SUMMARY' "$out/racecheck_ssd.txt")" ;;
    124) echo "racecheck test_gpu_ssd: INFO, not finished within ${RACECHECK_S:-100} s" ;;
    *) grep -m10 -E "Error|Race|Hazard" "$out/racecheck_ssd.txt"; echo "racecheck test_gpu_ssd: FAIL (exit $rc)"; failed=1 ;;
  esac
fi
echo "== profile_ssd: $([ $failed -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - t0 )) s"
exit $failed
