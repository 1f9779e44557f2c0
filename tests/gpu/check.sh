#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, in under 8 minutes on one H100/H200,
#   1. build the CUDA backend, its tests and the benchmark (own build dir build-gpucheck, Release, -Werror);
#   2. run every GPU test: each op against the CPU backend, the SSD against the fp64 oracle, the whole model's
#      forward/backward against the CPU, 50 training steps whose losses must track the CPU's, NCCL on one rank; the
#      first that fails runs again under compute-sanitizer's memcheck, whose first reports the log keeps;
#   3. train with mamba2_train itself: 50 steps of configs/tiny.ini with model.device=cuda (NCCL, one rank) whose
#      per-step losses must track a CPU run's, MFU in its metrics; then `mpirun -np 1` with dist.backend=nccl, 2 steps,
#      a checkpoint and a resume to step 4 that must equal a straight 4-step GPU run bit for bit; mamba2_eval of the
#      GPU run's checkpoint with --device cuda, whose predictions must match --device cpu's;
#   4. run the GPU benchmark (configs/8gpu.ini's layer shape, T = 2048): tokens/s, MFU, per-kernel times, memory;
#      then the reference, the same network from upstream's PyTorch+Triton Mamba2 (tests/gpu/bench_reference.py),
#      when python3 has PyTorch and upstream's source is at MAMBA_SSM_SRC (default .ref/mamba, git-ignored: put
#      the `mamba_ssm` folder of a state-spaces/mamba snapshot there and carry .ref); its line is information
#      (INFO), never a failure;
#   5. with the time left (the check still ends within its budget): compute-sanitizer's racecheck, synccheck and
#      initcheck on test_gpu_ssd and test_gpu_ops (where the toolkit has compute-sanitizer; a reported hazard fails,
#      a tool that runs out of its time slot is INFO), and a profile of one bench_gpu step at 8gpu.ini's layer
#      shape (Nsight Compute's ncu, one metric: each kernel's time): measured time per launch, printed beside the
#      predicted H200 times of bench/predicted_h200.tsv (bench_gpu_emu's three-roof model, BENCHMARKS.md) by
#      tests/gpu/kernel_times.py, as INFO;
#   6. print the GPU's name and one PASS/FAIL line per stage, then "GPU CHECK: PASS" or "GPU CHECK: FAIL".
# Usage: tests/gpu/check.sh            (from anywhere; exit status 0 only on PASS)
# Log: $OUT/gpu_check.log when OUT is set (the workplace's device runner), else <build dir>/gpu_check.log.
#
# A machine without the project's build dependencies (HDF5, Open MPI, OpenBLAS, inih, cmocka: the workplace's H200
# image has nvcc and CMake but none of these, and no network) cannot configure the project. Then check.sh runs the
# prebuilt binaries of tests/gpu/make_bundle.sh instead: GPU_BUNDLE=<gpu-bundle.tar.xz>, by default
# build-gpubundle/gpu-bundle.tar.xz (carry it to the GPU machine; it is git-ignored). Stage 1 then says "bundle".
# Overridable: BUILD (build dir), JOBS (parallel build jobs), BENCH_ARGS (extra bench_gpu arguments), CHECK_BUDGET_S
# (seconds the whole check may take, default 480: the optional stages are skipped or cut short to stay inside it).
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
budget=${CHECK_BUDGET_S:-480}

results=()
failed=0
record() { # stage status detail; INFO is reported and never fails the check
  results+=("$(printf '%-4s %-18s %s' "$2" "$1" "$3")")
  [ "$2" = PASS ] || [ "$2" = INFO ] || failed=$((failed + 1))
}
elapsed() { echo "$(( $(date +%s) - t_start )) s"; }
# shellcheck source=tests/gpu/bundle_env.sh
. "$root/tests/gpu/bundle_env.sh"
tool() { m2_cuda_tool "$1"; }

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
tests="test_gpu_ops test_gpu_ssd test_gpu_act test_gpu_model test_gpu_train test_gpu_nccl"
programs="mamba2_train mamba2_ticks mamba2_eval"
mode=build
bindir="$build/tests"
progdir="$build"
echo "== 1/4 build ($(elapsed))"
if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMAMBA2_CUDA=ON -DMAMBA2_WERROR=ON > "$build/configure.log" 2>&1; then
  # shellcheck disable=SC2086
  if cmake --build "$build" -j "${JOBS:-$(nproc)}" --target $tests bench_gpu $programs > "$build/build.log" 2>&1; then
    record build PASS "cmake Release, CUDA on ($(elapsed))"
  else
    tail -40 "$build/build.log"
    record build FAIL "compile/link errors: $build/build.log"
  fi
elif [ -f "$bundle" ]; then
  echo "configure failed (missing build dependencies?), using the prebuilt bundle $bundle:"
  grep -m3 -i "error\|could not\|not found" "$build/configure.log" | sed 's/^/  /'
  mode=bundle
  bundle_bin="$build/bundle/bin" bundle_missing=""
  m2_bundle_unpack "$bundle" "$build" || bundle_missing="the bundle $bundle could not be unpacked (above)"
  bindir="$bundle_bin"
  progdir="$bindir"
  cat "$build/bundle/BUNDLE.txt" 2>/dev/null
  missing="$bundle_missing"
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
echo "== 2/4 GPU tests ($(elapsed))"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" OPENBLAS_NUM_THREADS=1 MAMBA2_SRC="$root" MAMBA2_BIN="$build"
for t in $tests; do
  if [ ! -x "$bindir/$t" ]; then
    record "$t" FAIL "not built"
    continue
  fi
  echo "-- $t"
  out="$build/$t.out"
  # seconds each on an H200 but for the CPU references; a hang (a first contact with the hardware) must not eat the
  # budget
  timeout 120 "$bindir/$t" > "$out" 2>&1
  rc=$?
  cat "$out"
  if grep -q "^SKIP: no CUDA GPU" "$out"; then
    record "$t" FAIL "skipped: no usable GPU"
  elif [ $rc -eq 0 ]; then
    record "$t" PASS "$(grep -c '^\[       OK \]' "$out") cases"
  else
    record "$t" FAIL "exit $rc; $(grep -m1 -E '^\[  (FAILED|ERROR)|error|fatal' "$out" | cut -c1-120)"
    # the first real failure again under memcheck (launches synchronous, every access checked): the kernel, the
    # thread and the address, for the session that fixes it without another GPU run
    if [ -z "${memchecked:-}" ] && [ -n "$(tool compute-sanitizer)" ]; then
      memchecked=$t
      echo "-- $t again under compute-sanitizer memcheck (90 s at most):"
      timeout 90 "$(tool compute-sanitizer)" --tool memcheck --print-limit 10 --error-exitcode 3 "$bindir/$t" \
        > "$build/memcheck.$t.out" 2>&1
      grep -m40 -E "=========|FAILED|ERROR" "$build/memcheck.$t.out"
    fi
  fi
done

# ---- 3. training with mamba2_train --------------------------------------------------------------------------------
echo "== 3/4 training ($(elapsed))"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tdir="$build/train"
rm -rf "$tdir" && mkdir -p "$tdir"
# train NAME [mpirun] ARGS...: configs/tiny.ini on the check's dataset into $tdir/NAME, the output in $tdir/NAME.log
train() {
  local name=$1 launch=()
  shift
  if [ "${1:-}" = mpirun ]; then launch=(mpirun -np 1); shift; fi
  timeout 150 "${launch[@]}" "$progdir/mamba2_train" --config "$root/configs/tiny.ini" --set data.path="$tdir/ticks.h5" \
    --set train.run_dir="$tdir/$name" --set train.log_every=10 --set train.eval_every=25 "$@" > "$tdir/$name.log" 2>&1
  local rc=$?
  echo "-- $name: exit $rc"
  grep -E "^(backend:|step [0-9]|resume:|stopping)|error" "$tdir/$name.log" | sed 's/^/   /'
  return $rc
}
losses() { sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/' "$tdir/$1/metrics.jsonl"; }
last_field() { grep -o "\"$2\": [0-9.e+-]*" "$tdir/$1/metrics.jsonl" | tail -1 | sed 's/.*: //'; }
# worst |b - a| / |a| over the steps, line by line (inf when the step numbers do not line up)
worst_gap() {
  paste -d' ' <(losses "$1") <(losses "$2") |
    awk '{d = $1 == $3 ? ($4 - $2) / $2 : "inf"; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}'
}
why=""
if [ ! -x "$progdir/mamba2_train" ] || [ ! -x "$progdir/mamba2_ticks" ]; then
  why="mamba2_train/mamba2_ticks not built"
elif ! "$progdir/mamba2_ticks" synth --out "$tdir/ticks.h5" --ticks 60000 --sessions 4 --seed 11 --signal memory \
       > "$tdir/synth.log" 2>&1; then
  why="mamba2_ticks synth failed: $(tail -1 "$tdir/synth.log")"
elif ! train cpu --set model.device=cpu --set train.steps=50; then
  why="the CPU run failed: $(grep -m1 error "$tdir/cpu.log")"
elif ! train gpu --set model.device=cuda --set train.steps=50; then
  why="the GPU run failed: $(grep -m1 error "$tdir/gpu.log")"
elif ! grep -q "^backend: cuda .*collectives: nccl" "$tdir/gpu.log"; then
  why="the GPU run is not on CUDA with NCCL: $(grep -m1 '^backend' "$tdir/gpu.log")"
elif [ "$(losses gpu | wc -l)" -ne 50 ]; then
  why="the GPU run logged $(losses gpu | wc -l) steps, not 50"
else
  # bf16 GEMM operands: 50 Adam steps carry their rounding into a loss gap of a few percent (test_gpu_train.c)
  gap=$(worst_gap cpu gpu)
  mfu=$(last_field gpu mfu)
  if ! awk -v g="$gap" 'BEGIN {exit !(g <= 0.1)}'; then
    why="GPU losses do not track the CPU's: worst step gap $gap above 1e-1"
  elif [ -z "$mfu" ]; then
    why="no mfu in the GPU run's metrics.jsonl"
  elif ! train gpu4 --set model.device=cuda --set train.steps=4 ||
       ! train nccl mpirun --set model.device=cuda --set dist.backend=nccl --set train.steps=4 --set train.stop_at=2 ||
       ! train nccl mpirun --set model.device=cuda --set dist.backend=nccl --set train.steps=4 --resume auto; then
    why="the mpirun -np 1 NCCL runs failed"
  elif ! grep -q "^resume: .*ckpt_2.h5 (step 2" "$tdir/nccl.log"; then
    why="the NCCL run did not resume from step 2"
  elif ! diff <(losses gpu4) <(losses nccl) > /dev/null; then
    why="NCCL 2 steps + resume + 2 steps differ from 4 straight GPU steps: $(diff <(losses gpu4) <(losses nccl) | tr '\n' ' ')"
  else
    for d in cpu cuda; do
      "$progdir/mamba2_eval" --checkpoint "$tdir/gpu/ckpt_50.h5" --split val --device $d --json "$tdir/eval_$d.json" \
        > "$tdir/eval_$d.log" 2>&1 || why="mamba2_eval --device $d failed: $(tail -1 "$tdir/eval_$d.log")"
    done
    cat "$tdir/eval_cuda.log"
    # the model's IC on the validation split, per horizon: bf16 GEMM operands move it in the third digit at most
    ics() { grep -o '"ic":[-0-9.e+]*' "$tdir/eval_$1.json" | sed -n '1~2p' | cut -d: -f2; }
    if [ -z "$why" ] && ! grep -q ', on cuda (' "$tdir/eval_cuda.log"; then
      why="mamba2_eval --device cuda did not run on the GPU"
    elif [ -z "$why" ] && ! paste <(ics cpu) <(ics cuda) | awk 'NF == 2 {n++; d = $1 - $2; if (d < 0) d = -d; if (d > 0.01) bad++}
                                                          END {exit !(n > 0 && !bad)}'; then
      why="mamba2_eval on the GPU: ICs $(ics cuda | tr '\n' ' ') differ from the CPU's $(ics cpu | tr '\n' ' ') by > 0.01"
    fi
  fi
fi
if [ -z "$why" ]; then
  record training PASS "50 steps: loss gap $gap (tol 1e-1), $(last_field gpu ticks_per_s) ticks/s (CPU $(last_field cpu ticks_per_s)), MFU $mfu; NCCL resume bitwise"
else
  record training FAIL "$why"
fi

# ---- 4. the benchmark ---------------------------------------------------------------------------------------------
echo "== 4/4 GPU benchmark ($(elapsed))"
if [ -x "$progdir/bench_gpu" ]; then
  # shellcheck disable=SC2086
  timeout 180 "$progdir/bench_gpu" --config "$root/configs/8gpu.ini" ${BENCH_ARGS:-} > "$build/bench_gpu.out" 2>&1
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

if [ $(( $(date +%s) - t_start )) -gt $(( budget - 180 )) ]; then # the check must end within its budget
  record reference INFO "not run: $(elapsed) already spent"
elif command -v python3 >/dev/null 2>&1; then
  timeout 150 python3 "$root/tests/gpu/bench_reference.py" --config "$root/configs/8gpu.ini" --iters 3 --warmup 1 \
    > "$build/bench_reference.out" 2>&1
  rc=$?
  tail -5 "$build/bench_reference.out"
  record reference INFO "$(grep -m1 '^bench_reference: ' "$build/bench_reference.out" | sed 's/^bench_reference: //' |
                           cut -c1-200) (exit $rc)"
else
  record reference INFO "not run: no python3"
fi

# ---- 5. compute-sanitizer and nsys, in the time left -------------------------------------------------------------
echo "== 5 sanitizers and profile ($(elapsed))"
sanitizer=$(tool compute-sanitizer)
if [ -z "$sanitizer" ]; then
  record sanitizer INFO "not run: no compute-sanitizer"
else
  for t in test_gpu_ssd test_gpu_ops; do
    for check in racecheck synccheck initcheck; do
      left=$(( budget - 80 - $(date +%s) + t_start )) # 80 s kept for the profile
      if [ $left -lt 20 ] || [ ! -x "$bindir/$t" ]; then
        record "$check $t" INFO "not run: $(elapsed) spent or not built"
        continue
      fi
      slot=$(( left < 45 ? left : 45 ))
      # racecheck is slow: on test_gpu_ssd, the model's head shape alone (its 16-byte-load kernels, bf16 and tf32)
      filter=()
      [ "$check.$t" = racecheck.test_gpu_ssd ] && filter=("*production*")
      timeout $slot "$sanitizer" --tool $check --error-exitcode 3 "$bindir/$t" "${filter[@]}" > "$build/$check.$t.out" 2>&1
      rc=$?
      summary=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$build/$check.$t.out" | cut -c1-100)
      if [ $rc -eq 124 ]; then
        record "$check $t" INFO "not finished within ${slot} s"
      elif [ $rc -eq 0 ]; then
        record "$check $t" PASS "${summary:-no hazards}"
      else
        grep -m5 -E "Error|Race|Hazard" "$build/$check.$t.out"
        record "$check $t" FAIL "exit $rc: ${summary:-see $build/$check.$t.out}"
      fi
    done
  done
fi
# Nsight Systems does not make reports on the workplace's H200 image; Nsight Compute does, one kernel at a time
# (serialised, each replayed once for its one metric), so it profiles a 4-layer step, and times compare per launch.
ncu=$(tool ncu)
left=$(( budget - 15 - $(date +%s) + t_start ))
if [ -z "$ncu" ] || [ ! -x "$progdir/bench_gpu" ]; then
  record profile INFO "not run: no ncu (or no bench_gpu)"
elif [ $left -lt 30 ]; then
  record profile INFO "not run: $(elapsed) already spent"
else
  timeout $left "$ncu" --csv --print-units base --clock-control none \
    --metrics gpu__time_duration.sum --launch-count 600 "$progdir/bench_gpu" --config "$root/configs/8gpu.ini" \
    --layers 4 --iters 1 --warmup 0 > "$build/ncu.csv" 2> "$build/ncu.err"
  rc=$?
  if python3 "$root/tests/gpu/kernel_times.py" "$build/ncu.csv" "$root/bench/predicted_h200.tsv" > "$build/kernel_times.out" 2>&1; then
    cat "$build/kernel_times.out"
    record profile INFO "ncu (exit $rc): $(tail -1 "$build/kernel_times.out" | sed 's/^kernel_times: //')"
  else
    tail -5 "$build/ncu.err" "$build/kernel_times.out"
    record profile INFO "ncu exit $rc, no kernel times: $build/ncu.err"
  fi
  [ -n "${OUT:-}" ] && cp "$build/ncu.csv" "$build/kernel_times.out" "$OUT/" 2>/dev/null
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
