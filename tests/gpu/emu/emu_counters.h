/* TEST-ONLY: what the CUDA emulation counts per kernel launch, for the three-roof model of bench/gpu_roof.c and
 * for tests (docs/TESTING.md, "Counting"). From C or C++.
 *
 * Per launch, aggregated by the launch's name (the `what` of M2_CUDA_LAUNCHED, else the kernel's name) and its
 * kernel key (the kernel's base name with its first template argument, the key tools/sass_report.sh prints):
 * launches, blocks, threads; global-memory bytes read and written, as total accesses and as distinct bytes (each
 * 4-byte word of device memory counted once per launch: the compulsory traffic); tensor-core FLOPs by operand
 * precision (wmma mma_sync, cuBLAS with a _FAST_16BF/_FAST_TF32 compute type) and CUDA-core FLOPs of fp32 cuBLAS
 * products. Bytes of kernels are counted only in the counting build of the emulation (mamba2_cuda_emu_count:
 * the kernel sources compiled with GCC's -fsanitize=thread instrumentation, whose load/store hooks emu_count.cpp
 * implements); in the plain build they stay 0. cuBLAS bytes are its operands and result (read once, written once;
 * C read too when beta != 0). cudaMemsetAsync and device-to-device copies count as launches of their own. */
#ifndef MAMBA2_EMU_COUNTERS_H
#define MAMBA2_EMU_COUNTERS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[96]; /* what the backend called the launch */
    char key[96];  /* kernel base name<first template argument>, or a cuBLAS / runtime call */
    double launches, blocks, threads;
    double read_bytes, write_bytes;                 /* every access (total traffic if nothing were cached) */
    double read_distinct, write_distinct;           /* distinct bytes per launch, summed over launches */
    double accesses;                                /* loads and stores issued by threads (per lane) */
    double flops_bf16, flops_tf32, flops_fp32_cuda; /* tensor cores by precision; fp32 products on CUDA cores */
} m2emu_kernel_count;

/* 1 when this build counts kernel bytes (the instrumented library), else 0. */
int m2emu_counts_bytes(void);
void m2emu_counters_reset(void);
/* Copies up to `max` records (in order of first launch) to out and returns how many exist. */
int m2emu_counters_get(m2emu_kernel_count *out, int max);
/* Device memory: bytes allocated now, and the most since the last reset. */
size_t m2emu_device_bytes(void);
size_t m2emu_device_peak_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
