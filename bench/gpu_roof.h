/* The three-roof model of a kernel on a GPU (BENCHMARKS.md, "Predicted GPU step"): predicted time =
 * max(bytes / HBM bandwidth, tensor FLOPs / dense peak, issued warp instructions / SM issue rate) + a per-launch
 * overhead, from the emulator's counts (tests/gpu/emu/emu_counters.h) and the SASS table of tools/sass_report.py. */
#ifndef MAMBA2_BENCH_GPU_ROOF_H
#define MAMBA2_BENCH_GPU_ROOF_H

#include "emu_counters.h"

typedef struct {
    const char *name;
    double hbm_bytes_s;                  /* HBM bandwidth */
    double bf16_flops_s, tf32_flops_s;   /* dense tensor-core peaks */
    double fp32_flops_s;                 /* CUDA cores, fma = 2 */
    double sms, clock_hz, issue_per_clk; /* warp instructions issued per SM per clock */
    double launch_s;                     /* per launch on one stream, back to back */
} m2_gpu_roof;

/* The published figures (NVIDIA H100 / H200 datasheets, SXM); n set to the count. */
const m2_gpu_roof *m2_gpu_roofs(int *n);

typedef struct { /* one kernel's row of the SASS table */
    char key[96], prec[8];
    double instrs, gmem, loop, loop_gmem, per_hmma, regs, smem, blocks_per_sm;
} m2_sass_row;

typedef struct {
    m2_sass_row *rows;
    int n;
} m2_sass_table;

/* Reads the table (tools/sass_report.py's output); M2_EFAIL with one message when it cannot. */
int m2_sass_load(m2_sass_table *t, const char *path);
void m2_sass_free(m2_sass_table *t);
/* The row of a record's kernel at a precision ("bf16"...; rows with prec "-" match any), else by base name; NULL
 * when the kernel is not in the table (cuBLAS, runtime calls). */
const m2_sass_row *m2_sass_find(const m2_sass_table *t, const char *key, const char *prec);

typedef struct {
    double t_mem, t_tensor, t_issue, t_launch, total; /* seconds */
    double hmma, issued;                              /* HMMA and warp instructions */
    const char *bound;                                /* "memory", "tensor", "issue" or "launch" */
} m2_roof_time;

/* The prediction for a record (its counts already scaled to the step); sass may be NULL. */
m2_roof_time m2_roof_predict(const m2_gpu_roof *g, const m2emu_kernel_count *c, const m2_sass_row *sass);

#endif
