#!/usr/bin/env bash
# The trainer on the CUDA backend's kernels, run on the CPU emulation of the CUDA runtime (mamba2_train_emu: the same
# program built with tests/run/emu_device_api.c and the emulated kernels), against the CPU path:
#   - model.device = cuda takes the device path on the emulated GPU, with NCCL (emulated over MPI) by default;
#   - 6 steps track the CPU run: per-step losses within 1e-2 relative, and the final parameters and Adam moments
#     within 2e-2 relative (L2). Why: the GEMMs round their operands to bf16 (2^-9 relative) as on the GPU, and a few
#     Adam steps carry that into the parameters (measured: losses 2e-4, parameters and moments about 1e-3). A wiring
#     fault is far outside: Adam hides a missing 1/count in the losses, not in the moments (off by the count, ~100x);
#     a shard or all-gather fault leaves parameters unchanged or zero;
#   - model.precision = fp32 (fp32 operands in every matrix product) tracks the CPU at least 10x closer than the
#     default bf16 (measured: loss gap 1.4e-4 in bf16), and the backend line says which precision ran;
#   - model.ssd_states = keep (chunk states saved, not recomputed in the backward) gives the default run bit for bit;
#   - resume on the device: 3 steps, stop, resume to 6 gives bitwise the straight run (the emulated kernels are
#     deterministic, like the real ones).
#   - 2 ranks, one emulated device each: the NCCL collectives (bucket reductions to the owning ranks during the
#     backward, the parameter all-gather) give bit for bit what the host-staged MPI ones give (a sum of two floats
#     does not depend on the order), through the trainer itself;
#   - mamba2_eval --device cuda on the emulated kernels: the CPU checkpoint's predictions on the validation split
#     within 1e-2 relative (L2) of the CPU evaluation's, in stream and window mode (bf16 GEMM operands again;
#     measured about 4e-3), and the same rows.
# About 30 s: the emulation runs a block's threads one by one. Exits 77 without python3+numpy+h5py or the program.
mpirun="$1"
source "$(dirname "$0")/../lib/cli.sh"
test_begin
emu="$bin/tests/mamba2_train_emu"
evalemu="$bin/tests/mamba2_eval_emu"
py=/usr/bin/python3
[ -x "$emu" ] && [ -x "$evalemu" ] || { echo "SKIP: $emu or $evalemu not built"; exit 77; }
$py -c 'import numpy, h5py' 2>/dev/null || { echo "SKIP: $py has no numpy/h5py"; exit 77; }
command -v h5diff >/dev/null || { echo "SKIP: h5diff (hdf5-tools) not found"; exit 77; }
make_dataset "$work/ticks.h5" --signal memory
args=(--config "$src/configs/tiny.ini" --set data.path="$work/ticks.h5" "${fast_model[@]}" --set train.steps=6
      --set train.warmup=2 --set train.eval_every=3 --set checkpoint.every=3)
run() { # run NAME [-np R] PROGRAM [ARGS...]
  local name=$1 launch=(); shift
  if [ "$1" = -np ]; then launch=("$mpirun" -np "$2" --oversubscribe -x M2_EMU_DEVICES="$2"); shift 2; fi
  local prog=$1; shift
  timeout 120 "${launch[@]}" "$prog" "${args[@]}" --set train.run_dir="$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    { tail -5 "$work/$name.log" >&2; fail "run $name failed"; }
}

run cpu "$bin/mamba2_train"
run emu "$emu" --set model.device=cuda
grep -q "^backend: cuda-emulated (.*collectives: nccl (ZeRO-1 on device buffers" "$work/emu.log" ||
  fail "emu: not on the emulated device with NCCL"

# 2 ranks: NCCL (emulated) against the host-staged MPI collectives, bit for bit
run nccl2 -np 2 "$emu" --set model.device=cuda --set dist.backend=nccl
run mpi2 -np 2 "$emu" --set model.device=cuda --set dist.backend=mpi
grep -q "^backend: cuda-emulated (.*collectives: nccl" "$work/nccl2.log" || fail "nccl2: not on NCCL"
grep -q "^backend: cuda-emulated (.*collectives: mpi" "$work/mpi2.log" || fail "mpi2: not on MPI"
diff <(sed -E 's/, "ticks_per_s".*//' "$work/nccl2/metrics.jsonl") <(sed -E 's/, "ticks_per_s".*//' "$work/mpi2/metrics.jsonl") \
  >&2 || fail "2 ranks: NCCL and MPI per-step numbers differ"
for group in /model /optim/m /optim/v; do
  h5diff "$work/nccl2/ckpt_6.h5" "$work/mpi2/ckpt_6.h5" "$group" "$group" >/dev/null ||
    fail "2 ranks: NCCL and MPI differ in $group"
done
run emu32 "$emu" --set model.device=cuda --set model.precision=fp32
grep -q "^backend: cuda-emulated (.*, fp32 matrix products, " "$work/emu32.log" || fail "emu32: precision not in the backend line"
grep -q "^backend: cuda-emulated (.*, bf16 matrix products, SSD chunk states: recompute)" "$work/emu.log" ||
  fail "emu: bf16 or the recomputed chunk states (the default) not in the backend line"
# model.ssd_states = keep saves the chunk states instead of recomputing them: the same kernels on the same inputs,
# so the same run bit for bit (a recompute that read a stale or wrong state would change the gradients)
run keep "$emu" --set model.device=cuda --set model.ssd_states=keep
grep -q "^backend: cuda-emulated (.*, SSD chunk states: keep)" "$work/keep.log" || fail "keep: not in the backend line"
diff <(sed -E 's/, "ticks_per_s".*//' "$work/emu/metrics.jsonl") <(sed -E 's/, "ticks_per_s".*//' "$work/keep/metrics.jsonl") \
  >&2 || fail "model.ssd_states: keep and recompute differ per step"
h5diff "$work/emu/ckpt_6.h5" "$work/keep/ckpt_6.h5" /model /model >/dev/null ||
  fail "model.ssd_states: keep and recompute give different parameters"
run resumed "$emu" --set model.device=cuda --set train.stop_at=3
run resumed "$emu" --set model.device=cuda --resume auto
grep -q "resume: .*ckpt_3.h5 (step 3" "$work/resumed.log" || fail "resumed: did not resume at step 3"
for group in /model /optim/m /optim/v; do
  h5diff "$work/emu/ckpt_6.h5" "$work/resumed/ckpt_6.h5" "$group" "$group" >/dev/null ||
    fail "resume on the emulated device: $group differs from the straight run"
done

for mode in stream window; do
  "$bin/mamba2_eval" --checkpoint "$work/cpu/ckpt_6.h5" --split val --mode $mode --device cpu \
    --predictions "$work/pred_cpu_$mode.h5" >"$work/eval_cpu.txt" 2>&1 || fail "eval on the CPU"
  "$evalemu" --checkpoint "$work/cpu/ckpt_6.h5" --split val --mode $mode --device cuda \
    --predictions "$work/pred_emu_$mode.h5" >"$work/eval_emu.txt" 2>&1 || fail "eval on the emulated device"
  grep -q ", on cuda-emulated (" "$work/eval_emu.txt" || fail "eval --device cuda: not on the emulated device"
done

$py - "$work" <<'PY'
import json, sys
import h5py, numpy as np
work = sys.argv[1]
def log(run):
    return [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
cpu, emu, emu32 = log("cpu"), log("emu"), log("emu32")
assert len(cpu) == len(emu) == 6, "6 steps each"
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(cpu, emu))
vals = [(a["val_loss"], b["val_loss"]) for a, b in zip(cpu, emu) if "val_loss" in a]
assert len(vals) == 2 and all("val_loss" in b for a, b in zip(cpu, emu) if "val_loss" in a), "validation at 3 and 6"
worst_val = max(abs(a - b) / abs(a) for a, b in vals)
def tensors(run):
    out = {}
    with h5py.File(f"{work}/{run}/ckpt_6.h5", "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()].astype(np.float64))
                     if isinstance(o, h5py.Dataset) and n.startswith(("model", "optim/m", "optim/v")) else None)
    return out
a, b = tensors("cpu"), tensors("emu")
assert a and a.keys() == b.keys()
rel = {}
for group in ("model", "optim/m", "optim/v"):
    keys = [k for k in a if k.startswith(group)]
    num = sum(float(np.sum((a[k] - b[k]) ** 2)) for k in keys)
    den = sum(float(np.sum(a[k] ** 2)) for k in keys)
    rel[group] = (num / den) ** 0.5
worst32 = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(cpu, emu32))
print(f"model.precision fp32: loss rel {worst32:.2e} (bf16: {worst:.2e}; want at least 10x closer)")
ok = worst <= 1e-2 and worst_val <= 1e-2 and all(r <= 2e-2 for r in rel.values()) and worst32 * 10 <= worst
print(f"{'ok' if ok else 'FAIL'}: emulated CUDA vs CPU over 6 steps: loss rel {worst:.2e}, val loss rel {worst_val:.2e} "
      f"(<= 1e-2); params {rel['model']:.2e}, m {rel['optim/m']:.2e}, v {rel['optim/v']:.2e} (<= 2e-2)")
for mode in ("stream", "window"):
    with h5py.File(f"{work}/pred_cpu_{mode}.h5", "r") as c, h5py.File(f"{work}/pred_emu_{mode}.h5", "r") as e:
        same_rows = np.array_equal(c["row"][...], e["row"][...])
        pc, pe = c["pred"][...].astype(np.float64), e["pred"][...].astype(np.float64)
    erel = float(np.linalg.norm(pe - pc) / np.linalg.norm(pc))
    good = same_rows and pc.size > 0 and erel <= 1e-2
    ok = ok and good
    print(f"{'ok' if good else 'FAIL'}: eval {mode} on the emulated CUDA vs the CPU: {pc.shape[0]} rows "
          f"{'the same' if same_rows else 'DIFFERENT'}, predictions rel {erel:.2e} (<= 1e-2)")
sys.exit(0 if ok else 1)
PY
echo "emulated device: tracks the CPU, resumes bitwise"
