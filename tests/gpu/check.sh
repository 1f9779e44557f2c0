#!/usr/bin/env bash
# The GPU check (issue 6): on a machine with an NVIDIA GPU, in under 8 minutes on one H100/H200,
#   1. build the CUDA backend, its tests and the benchmark (own build dir build-gpucheck, Release, -Werror);
#   2. run every GPU test: each op against the CPU backend, the SSD against the fp64 oracle, the whole model's
#      forward/backward against the CPU, 50 training steps whose losses must track the CPU's, NCCL on one rank;
#   3. run the GPU benchmark (configs/8gpu.ini's layer shape, T = 2048): tokens/s, MFU, per-kernel times, memory;
#   4. print the GPU's name and one PASS/FAIL line per stage, then "GPU CHECK: PASS" or "GPU CHECK: FAIL".
# Usage: tests/gpu/check.sh            (from anywhere; exit status 0 only on PASS)
# Log: $OUT/gpu_check.log when OUT is set (the workplace's device runner), else <build dir>/gpu_check.log.
#
# A machine without the project's build dependencies (HDF5, Open MPI, OpenBLAS, inih, cmocka: the workplace's H200
# image has nvcc and CMake but none of these, and no network) cannot configure the project. Then check.sh runs the
# prebuilt binaries of tests/gpu/make_bundle.sh instead: GPU_BUNDLE=<gpu-bundle.tar.xz>, by default
# build-gpubundle/gpu-bundle.tar.xz (carry it to the GPU machine; it is git-ignored). Stage 1 then says "bundle".
# Overridable: BUILD (build dir), JOBS (parallel build jobs), BENCH_ARGS (extra bench_gpu arguments).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build-gpucheck}"
bundle="${GPU_BUNDLE:-$root/build-gpubundle/gpu-bundle.tar.xz}"
mkdir -p "$build"
log="${OUT:+$OUT/gpu_check.log}"
log="${log:-$build/gpu_check.log}"
mkdir -p "$(dirname "$log")"
exec > >(tee "$log") 2>&1
t_start=$(date +%s)

results=()
failed=0
record() { # stage status detail
  results+=("$(printf '%-4s %-18s %s' "$2" "$1" "$3")")
  [ "$2" = PASS ] || failed=$((failed + 1))
}
elapsed() { echo "$(( $(date +%s) - t_start )) s"; }

echo "== mamba2 GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
gpu_name="unknown"
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>/dev/null
else
  echo "nvidia-smi not found"
fi
echo "GPU: ${gpu_name:-unknown}"

# ---- 1. build (or unpack the bundle) ----------------------------------------------------------------------------
tests="test_gpu_ops test_gpu_ssd test_gpu_model test_gpu_train test_gpu_nccl"
mode=build
bindir="$build/tests"
echo "== 1/3 build ($(elapsed))"
if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMAMBA2_CUDA=ON -DMAMBA2_WERROR=ON > "$build/configure.log" 2>&1; then
  # shellcheck disable=SC2086
  if cmake --build "$build" -j "${JOBS:-$(nproc)}" --target $tests bench_gpu > "$build/build.log" 2>&1; then
    record build PASS "cmake Release, CUDA on ($(elapsed))"
  else
    tail -40 "$build/build.log"
    record build FAIL "compile/link errors: $build/build.log"
  fi
elif [ -f "$bundle" ]; then
  echo "configure failed (missing build dependencies?), using the prebuilt bundle $bundle:"
  grep -m3 -i "error\|could not\|not found" "$build/configure.log" | sed 's/^/  /'
  mode=bundle
  rm -rf "$build/bundle" && tar -C "$build" -xJf "$bundle"
  bindir="$build/bundle/bin"
  cat "$build/bundle/BUNDLE.txt"
  # cuBLAS, cuBLASLt, NCCL and the CUDA runtime come from this machine: the CUDA toolkit or PyTorch's wheels
  libpath="$build/bundle/lib"
  for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
    found=$(find /usr/local /usr/lib /opt -xdev -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && libpath="$libpath:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  missing=$(for t in $tests bench_gpu; do ldd "$bindir/$t" | grep "not found"; done | sort -u)
  if [ -n "$missing" ]; then
    echo "$missing"
    record build FAIL "bundle: libraries not found (above)"
  else
    record build PASS "bundle (configure failed here: $build/configure.log)"
  fi
else
  tail -20 "$build/configure.log"
  record build FAIL "configure failed and no bundle at $bundle (tests/gpu/make_bundle.sh makes one)"
fi

# ---- 2. the GPU tests ---------------------------------------------------------------------------------------------
echo "== 2/3 GPU tests ($(elapsed))"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" OPENBLAS_NUM_THREADS=1 MAMBA2_SRC="$root" MAMBA2_BIN="$build"
for t in $tests; do
  if [ ! -x "$bindir/$t" ]; then
    record "$t" FAIL "not built"
    continue
  fi
  echo "-- $t"
  out="$build/$t.out"
  timeout 300 "$bindir/$t" > "$out" 2>&1
  rc=$?
  cat "$out"
  if grep -q "^SKIP: no CUDA GPU" "$out"; then
    record "$t" FAIL "skipped: no usable GPU"
  elif [ $rc -eq 0 ]; then
    record "$t" PASS "$(grep -c '^\[       OK \]' "$out") cases"
  else
    record "$t" FAIL "exit $rc; $(grep -m1 -E '^\[  (FAILED|ERROR)|error|fatal' "$out" | cut -c1-120)"
  fi
done

# ---- 3. the benchmark ---------------------------------------------------------------------------------------------
echo "== 3/3 GPU benchmark ($(elapsed))"
if [ -x "$bindir/bench_gpu" ]; then
  # shellcheck disable=SC2086
  timeout 300 "$bindir/bench_gpu" --config "$root/configs/8gpu.ini" ${BENCH_ARGS:-} > "$build/bench_gpu.out" 2>&1
  rc=$?
  cat "$build/bench_gpu.out"
  summary=$(grep -m1 '^bench_gpu: .*tokens/s' "$build/bench_gpu.out" | sed 's/^bench_gpu: //')
  if grep -q "^SKIP: no CUDA GPU" "$build/bench_gpu.out"; then
    record bench_gpu FAIL "skipped: no usable GPU"
  elif [ $rc -eq 0 ] && [ -n "$summary" ]; then
    record bench_gpu PASS "$summary"
  else
    record bench_gpu FAIL "exit $rc"
  fi
else
  record bench_gpu FAIL "not built"
fi

# ---- summary ------------------------------------------------------------------------------------------------------
echo "== summary: GPU ${gpu_name:-unknown}, mode $mode, $(elapsed), log $log"
for r in "${results[@]}"; do echo "$r"; done
if [ $failed -eq 0 ]; then
  echo "GPU CHECK: PASS"
  exit 0
fi
echo "GPU CHECK: FAIL ($failed failed)"
exit 1
