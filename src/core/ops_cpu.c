/* The CPU backend of the ops interface: the vtable, memory, GEMM, the small elementwise ops, the SSD and AdamW
 * wrappers. Norms, conv/dt and the loss live in ops_cpu_norm.c, ops_cpu_conv.c and ops_cpu_loss.c.
 *
 * Threads. OpenBLAS here is the pthread build: its worker threads are a second pool beside OpenMP's, and each
 * pool spins for a while after its work, stealing the cores the other pool needs next. So OpenBLAS stays
 * single-threaded. Inside the model's lanes (model.c) every op, GEMMs included, runs single-threaded on its
 * lane's thread. Outside them (a micro-batch of one sequence, or a caller using the ops directly) a GEMM is
 * split across the OpenMP threads by rows or columns of C, one single-threaded BLAS call per block: on the
 * in_proj shapes (4096 x 648 x 128 and its weight gradient) that was as fast or faster than OpenBLAS's own
 * two threads in every trial (e.g. 88 vs 46-56 GFLOP/s; 2 cores, shared machine). The SSD (ssd.c) may call
 * BLAS inside its own OpenMP regions safely. */
#include "core/ops.h"

#include "core/adamw.h"
#include "core/ops_cpu.h"

#include "base/cpu.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

typedef struct {
    int threads;
} cpu_ctx;

static cpu_ctx g_ctx = {0};

void *m2_cpu_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "mamba2: fatal: CPU ops: out of memory for %zu bytes of scratch\n", bytes);
        abort();
    }
    return p;
}

m2_real *m2_cpu_partials(size_t nblk, size_t n)
{
    m2_real *p = m2_cpu_xmalloc(nblk * n * sizeof *p);
    memset(p, 0, nblk * n * sizeof *p);
    return p;
}

void m2_cpu_partials_reduce(m2_real *part, size_t nblk, size_t n, m2_real *dst)
{
    const long nn = (long)n;
#pragma omp parallel for schedule(static)
    for (long j = 0; j < nn; j++) {
        m2_real s = 0;
        for (size_t b = 0; b < nblk; b++) s += part[b * n + (size_t)j];
        dst[j] += s;
    }
    free(part);
}

/* ---- memory: host memory, 64-byte aligned so rows of the big buffers start on cache lines ---- */
static void *cpu_alloc(const m2_ops *o, size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}
static void cpu_free(const m2_ops *o, void *p) { free(p); }
static void cpu_memset0(const m2_ops *o, void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(const m2_ops *o, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_sync(const m2_ops *o) {}

/* ---- GEMM ----
 * C is cut into one block per thread along its larger dimension (columns in multiples of 16 so blocks start
 * on cache lines); each block is one single-threaded BLAS call. */
static void gemm_block(int ta, int tb, int m, int n, int k, m2_real alpha, const m2_real *A, int lda, const m2_real *B,
                       int ldb, m2_real beta, m2_real *C, int ldc)
{
    if (m <= 0 || n <= 0) return;
    M2_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B,
            ldb, beta, C, ldc);
}

static void cpu_gemm(const m2_ops *o, int ta, int tb, int m, int n, int k, m2_real alpha, const m2_real *A, int lda,
                     const m2_real *B, int ldb, m2_real beta, m2_real *C, int ldc)
{
    /* Inside the model's lanes (an active parallel region) each GEMM is one single-threaded call. */
    int nt = omp_in_parallel() ? 1 : g_ctx.threads;
    /* Too little work to share (the head GEMMs): one call. */
    if (nt <= 1 || (double)m * n * k < 2e5) {
        gemm_block(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int split_rows = m >= n;
    int len = split_rows ? m : n;
    int unit = split_rows ? 8 : 16;
    int per = ((len + nt - 1) / nt + unit - 1) / unit * unit;
#pragma omp parallel num_threads(nt)
    {
        int i = omp_get_thread_num();
        int b0 = i * per, b1 = b0 + per < len ? b0 + per : len;
        if (b0 < b1) {
            if (split_rows)
                gemm_block(ta, tb, b1 - b0, n, k, alpha, ta ? A + b0 : A + (size_t)b0 * lda, lda, B, ldb, beta,
                           C + (size_t)b0 * ldc, ldc);
            else
                gemm_block(ta, tb, m, b1 - b0, k, alpha, A, lda, tb ? B + (size_t)b0 * ldb : B + b0, ldb, beta, C + b0,
                           ldc);
        }
    }
}

/* ---- bias, residual ---- */
static void cpu_bias_add(const m2_ops *o, m2_real *Y, int ldy, const m2_real *bias, int rows, int n)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) Y[(size_t)r * ldy + j] += bias[j];
}

static void cpu_bias_grad(const m2_ops *o, const m2_real *dY, int ldy, int rows, int n, m2_real *db)
{
    size_t nblk = ((size_t)rows + M2_CPU_ROW_BLOCK - 1) / M2_CPU_ROW_BLOCK;
    m2_real *part = m2_cpu_partials(nblk, (size_t)n);
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < nblk; blk++) {
        m2_real *p = part + blk * (size_t)n;
        size_t r1 = (blk + 1) * M2_CPU_ROW_BLOCK < (size_t)rows ? (blk + 1) * M2_CPU_ROW_BLOCK : (size_t)rows;
        for (size_t r = blk * M2_CPU_ROW_BLOCK; r < r1; r++)
            for (int j = 0; j < n; j++) p[j] += dY[r * ldy + j];
    }
    m2_cpu_partials_reduce(part, nblk, (size_t)n, db);
}

static void cpu_add(const m2_ops *o, m2_real *y, const m2_real *x, size_t n)
{
    const long nn = (long)n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < nn; i++) y[i] += x[i];
}

/* ---- dt and A (ops.h dt_fwd): the level's dt, then A = -exp(A_log); the backward's dA_log += dA * A ---- */
static void cpu_dt_fwd(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias,
                       const m2_real *A_log, int rows, int H, m2_real *dt, m2_real *A)
{
    if (rows > 0) m2_cpu_act_dt_fwd(o, dt_raw, ld, rt, dt_bias, rows, H, dt);
    for (int h = 0; h < H; h++) A[h] = -M2_EXP(A_log[h]);
}

static void cpu_dt_bwd(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                       const m2_real *dt_bias, const m2_real *dA, const m2_real *A_log, int rows, int H, void *ddt_raw,
                       m2_real *ddt_bias, m2_real *dA_log)
{
    if (rows > 0) m2_cpu_act_dt_bwd(o, ddt, dt_raw, ld, rt, dt_bias, rows, H, ddt_raw, ddt_bias);
    for (int h = 0; h < H; h++) dA_log[h] += dA[h] * -M2_EXP(A_log[h]);
}

/* ---- SSD: ssd.c, sized for this backend's thread count ---- */
static size_t cpu_ssd_saved_size(const m2_ops *o, const m2_ssd_shape *s) { return m2_ssd_saved_size(s); }
static size_t cpu_ssd_scratch_size(const m2_ops *o, const m2_ssd_shape *s, int with_backward)
{
    (void)with_backward; /* the per-thread buffers serve both passes; per token it is the states either way */
    return m2_ssd_scratch_size(s, g_ctx.threads);
}

/* The chunked SSD of the table's level: a table's ctx is its level's kernels (cpu_table below), so that a copy
 * of the table (a test's stand-in device) keeps its level. */
static const m2_cpu_kernels *table_kernels(const m2_ops *o);

static void cpu_ssd_fwd(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                        const void *Bm, const void *Cm, const m2_real *Dsk, void *y, m2_act_type at, m2_real *saved,
                        m2_real *scratch)
{
    table_kernels(o)->ssd_forward(s, (const m2_real *)x, dt, A, (const m2_real *)Bm, (const m2_real *)Cm, Dsk,
                                  (m2_real *)y, saved, scratch);
}

static void cpu_ssd_bwd(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                        const void *Bm, const void *Cm, const m2_real *Dsk, const void *dy, m2_act_type at,
                        const m2_real *saved, void *dx, m2_real *ddt, m2_real *dA, void *dBm, void *dCm, m2_real *dD,
                        m2_real *scratch)
{
    table_kernels(o)->ssd_backward(s, (const m2_real *)x, dt, A, (const m2_real *)Bm, (const m2_real *)Cm, Dsk,
                                   (const m2_real *)dy, saved, (m2_real *)dx, ddt, dA, (m2_real *)dBm, (m2_real *)dCm,
                                   dD, scratch);
}

static void cpu_adamw(const m2_ops *o, float *params, const float *grads, float *m, float *v,
                      const unsigned char *decay_mask, size_t n, float lr, float beta1, float beta2, float eps,
                      float weight_decay, int64_t step)
{
    m2_adamw(params, grads, m, v, decay_mask, n, lr, beta1, beta2, eps, weight_decay, step);
}

/* The ZeRO step's shard reductions, in the arithmetic of dist/zero.c (sequential double sum: a fixed order whatever
 * the thread count), so that the device step run on this backend matches the host step bit for bit. */
static double cpu_sumsq(const m2_ops *o, const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

static void cpu_scale(const m2_ops *o, float *x, size_t n, double factor)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)x[i] * factor);
}

/* RMSNorm with its optional copy of x (ops.h): the copy, then the level's norm (bitwise the two ops apart). */
static void cpu_rmsnorm_fwd(const m2_ops *o, const m2_real *x, m2_real *x_copy, const m2_real *w, int rows, int n,
                            void *y, m2_act_type yt)
{
    if (x_copy) memcpy(x_copy, x, (size_t)rows * n * sizeof(m2_real));
    m2_cpu_act_rmsnorm_fwd(o, x, w, rows, n, y, yt);
}

/* The gated norm's backward with its optional recomputed output (ops.h): the level's backward, then, when wanted,
 * its forward (the same values as a separate recompute, bitwise). */
static void cpu_gated_norm_bwd(const m2_ops *o, const void *dout, const void *y, const void *z, int ld_z,
                               m2_act_type at, const m2_real *w, int rows, int n, int G, void *dy, void *dz, int ld_dz,
                               m2_real *dw, void *out)
{
    m2_cpu_act_gated_norm_bwd(o, dout, y, z, ld_z, at, w, rows, n, G, dy, dz, ld_dz, dw);
    if (out) m2_cpu_act_gated_norm_fwd(o, y, z, ld_z, at, w, rows, n, G, out, M2_ACT_REAL);
}

/* The model runs one lane per thread (model.c: "Work units and lanes"). */
static int cpu_lanes(const m2_ops *o) { return g_ctx.threads; }

/* The entries every level shares; ctx and the element-wise ops come from the level's kernels (cpu_table). */
static const m2_ops g_cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .copy = cpu_copy,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .add = cpu_add,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = m2_cpu_act_rmsnorm_bwd,
    .conv_silu_fwd = m2_cpu_act_conv_silu_fwd,
    .conv_silu_bwd = m2_cpu_act_conv_silu_bwd,
    .dt_fwd = cpu_dt_fwd,
    .dt_bwd = cpu_dt_bwd,
    .ssd_saved_size = cpu_ssd_saved_size,
    .ssd_scratch_size = cpu_ssd_scratch_size,
    .ssd_fwd = cpu_ssd_fwd,
    .ssd_bwd = cpu_ssd_bwd,
    .gated_norm_fwd = m2_cpu_act_gated_norm_fwd,
    .gated_norm_bwd = cpu_gated_norm_bwd,
    .adamw = cpu_adamw,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .lanes = cpu_lanes,
};

/* Subnormal floats flushed to zero, as results (FTZ) and as operands (DAZ), on this thread: the MXCSR is per
 * thread, and threads created later inherit it from the thread that creates them.
 *
 * Why: Intel cores take a microcode assist of ~100 cycles for every instruction with a subnormal operand or
 * result unless these bits are set (AMD's Zen cores take none, which is why it went unseen). GCC vectorises
 * base/vmath.h's clamped sigmoid by computing the clamped lanes' result, v * sigmoid(-88.3) (a subnormal
 * constant), for every lane and blending, so the SiLU of the conv and of the gated norm hit one per vector: on an
 * Intel Emerald Rapids their forwards ran 6x slower and the training step 1.4x (BENCHMARKS.md, "Intel Emerald
 * Rapids", part 2). Data can also produce them (small gradients through a saturated sigmoid). What is lost: values
 * below 1.2e-38 become 0, far under any tolerance the model or its tests have. Only the training ops' threads
 * are changed; the streaming engine (src/stream) runs in its caller's thread and leaves its MXCSR alone. */
static void flush_subnormals_here(void) { _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */ }

void m2_ops_cpu_set_threads(int n)
{
    if (n <= 0) n = omp_get_num_procs();
    g_ctx.threads = n;
    omp_set_num_threads(n);
    flush_subnormals_here();
#pragma omp parallel num_threads(n)
    flush_subnormals_here();
    /* the ops' own parallel loops run single-threaded inside the model's lanes */
    omp_set_max_active_levels(1);
    openblas_set_num_threads(1);
}

int m2_ops_cpu_threads(void)
{
    if (g_ctx.threads == 0) m2_ops_cpu_set_threads(omp_get_max_threads());
    return g_ctx.threads;
}

/* One level's kernels per build: all three in the product, the portable ones in the fp64 test build. */
#ifdef MAMBA2_FP64
extern const m2_cpu_kernels m2_cpu_kernels_scalar;
const m2_cpu_kernels *m2_cpu_kernels_for(int level) { return &m2_cpu_kernels_scalar; }
#else
extern const m2_cpu_kernels m2_cpu_kernels_scalar, m2_cpu_kernels_avx2, m2_cpu_kernels_avx512;
const m2_cpu_kernels *m2_cpu_kernels_for(int level)
{
    return level >= M2_CPU_AVX512 ? &m2_cpu_kernels_avx512
           : level == M2_CPU_AVX2 ? &m2_cpu_kernels_avx2
                                  : &m2_cpu_kernels_scalar;
}
#endif

/* One ops table per level, filled at first use. */
static m2_ops g_tables[M2_CPU_N_LEVELS];

static const m2_cpu_kernels *table_kernels(const m2_ops *o) { return (const m2_cpu_kernels *)o->ctx; }

static const m2_ops *cpu_table(int level)
{
    m2_ops *t = &g_tables[level];
    if (!t->name) {
        const m2_cpu_kernels *k = m2_cpu_kernels_for(level);
        *t = g_cpu_ops;
        t->ctx = (void *)k; /* read only, by table_kernels */
        t->mse_loss = k->mse_loss;
    }
    return t;
}

const m2_ops *m2_ops_cpu(void)
{
    m2_ops_cpu_threads(); /* first use: settle the thread counts */
    return cpu_table(m2_cpu_kernels_for(m2_cpu_active())->level);
}

const char *m2_ops_cpu_isa(void) { return m2_cpu_name((m2_cpu_level)m2_cpu_kernels_for(m2_cpu_active())->level); }
