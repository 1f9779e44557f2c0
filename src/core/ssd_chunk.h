/* Internals of the chunked SSD shared by ssd.c, ssd_forward.c and ssd_backward.c (not a public API).
 *
 * Work decomposition (both passes), nc = ceil(T/Q) chunks per sequence:
 *   1. chunk-local pass, parallel over tasks (b, chunk, group);
 *   2. state passing across chunks, parallel over (b, h): nc small P×N axpys, sequential in c;
 *   3. chunk-local pass that needs the passed states, parallel over (b, chunk, group).
 * A task handles all heads of its group: the group's C·Bᵀ (and in the backward its gradient) is formed once
 * for all of them, and the products with the states are done for all heads of the group in one GEMM
 * (states are stored [b][c][h][P][N], so a group's states form one (heads·P)×N matrix), which makes a third
 * fewer BLAS calls than one GEMM per head (the same speed at the default shape; less call overhead at small P).
 * Measured at the default shape, ~70% of the time is in BLAS (OpenBLAS small-matrix kernels at 60-90 GFLOP/s
 * on one core), the rest in the O(Q²) decay/mask loops and the row-wise scaling, all vectorised.
 * Every task writes disjoint outputs, and the few reductions (dA, dD) go through per-(b, c, h) partials
 * summed afterwards in a fixed order, so results are bitwise independent of the thread count.
 *
 * BLAS: each task calls M2_GEMM on matrices of at most max(Q, heads·P)×max(Q, N). OpenBLAS (pthread build)
 * must be single-threaded in the process (openblas_set_num_threads(1), as ops_cpu.c does), otherwise each
 * call inside the OpenMP region would start its own threads on top of OpenMP's. */
#ifndef MAMBA2_SSD_CHUNK_H
#define MAMBA2_SSD_CHUNK_H

#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/blas_core.h"
#include "core/ssd.h"

typedef struct {
    m2_ssd_shape s;
    int nc;            /* chunks per sequence */
    int hpg;           /* heads per group */
    size_t pn;         /* P*N: one state */
    size_t n_chunks;   /* B*nc*H */
    size_t n_states;   /* B*nc*H*P*N: chunk-start states, or their gradients in the backward */
    size_t off_decay;  /* scratch: chunk decays E (n_chunks) */
    size_t off_part;   /* scratch: dA and dD partials (2*n_chunks) */
    size_t off_states; /* scratch: states (forward without `saved`) / state gradients (backward) */
    size_t off_thread; /* scratch: first per-thread block */
    size_t per_thread; /* size of one per-thread block */
} m2_ssd_plan;

/* Index of (b, c, h) in the per-chunk arrays (E, partials); times P*N: the state's offset. */
static inline size_t m2_ssd_bch(const m2_ssd_plan *pl, int b, int c, int h)
{
    return ((size_t)b * pl->nc + c) * pl->s.H + h;
}

/* One thread's buffers. Per head j of the group (j < hpg, row stride Qr = Q rounded up): dtv, a, e, r.
 * Vectors of Q: run, v1..v5. Q×Q matrices (row stride Q): cb, m, g, dcb, tm. Q×N panel (stride N): p1.
 * Q×(hpg·P) panels (stride hpg·P): wide1, wide2. One state: st. */
typedef struct {
    size_t Qr;
    m2_real *dtv, *a, *e, *r;
    m2_real *run, *v1, *v2, *v3, *v4, *v5;
    m2_real *cb, *m, *g, *dcb, *tm;
    m2_real *p1, *wide1, *wide2;
    m2_real *st;
} m2_ssd_tbuf;

void m2_ssd_plan_init(m2_ssd_plan *pl, const m2_ssd_shape *s);
void m2_ssd_tbuf_init(const m2_ssd_plan *pl, m2_real *scratch, int tid, m2_ssd_tbuf *tb);

/* Chunk c of a sequence covers t in [c*Q, c*Q + len). */
static inline int m2_ssd_chunk_len(const m2_ssd_shape *s, int c)
{
    int rest = s->T - c * s->Q;
    return rest < s->Q ? rest : s->Q;
}

/* Decay factor of a log-decay that is mathematically <= 0: exp(min(d, 0)). The guard keeps a rounding
 * excursion above 0 (or a caller's positive A) from ever producing a growth factor or an overflow.
 *
 * Written out (Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, Taylor polynomial of degree 7 (fp32) or 13
 * (fp64) whose truncation error is below eps/2, scaled by 2^k built in the exponent bits) instead of calling
 * libm, because the calls would keep the O(Q²) decay loops scalar: this form vectorises, and measured
 * ~8x faster than expf per element. Accuracy: within 1 ulp of libm's exp (test_ssd checks 2 ulp). Results
 * below the smallest normal number are flushed to 0 (their true value is below it; no denormal slow paths). */
#ifdef MAMBA2_FP64
#define M2_SSD_EXP_MIN (-708.3964185322641) /* log(DBL_MIN) */
typedef long long m2_ssd_ebits;
#else
#define M2_SSD_EXP_MIN (-87.33654475f) /* log(FLT_MIN) */
typedef int m2_ssd_ebits;
#endif
static inline m2_real m2_ssd_decay(m2_real d)
{
    m2_real x = d < 0 ? d : (m2_real)0;
    const int under = x < (m2_real)M2_SSD_EXP_MIN;
    x = under ? (m2_real)0 : x;
#ifdef MAMBA2_FP64
    const double kf = (x * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0; /* round(x/ln2) */
    const double r = (x - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10;
    static const double c[] = {
        1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
        1.0 / 720,        1.0 / 120,       1.0 / 24,       1.0 / 6,       0.5,          1.0,         1.0};
    const m2_ssd_ebits bits = ((m2_ssd_ebits)kf + 1023) << 52;
#else
    const float kf = (x * 1.44269504f + 12582912.f) - 12582912.f;
    const float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f;
    static const float c[] = {1.f / 5040, 1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f};
    const m2_ssd_ebits bits = ((m2_ssd_ebits)kf + 127) << 23;
#endif
    m2_real p = c[0];
    for (size_t i = 1; i < sizeof c / sizeof *c; i++) p = p * r + c[i];
    m2_real scale;
    memcpy(&scale, &bits, sizeof scale);
    return under ? (m2_real)0 : p * scale;
}

/* out[i] = m2_ssd_decay(d[i]) for i < n (vectorised; out may be d). */
static inline void m2_ssd_decay_row(const m2_real *d, int n, m2_real *out)
{
    for (int i = 0; i < n; i++) out[i] = m2_ssd_decay(d[i]);
}

/* The per-chunk decay helpers below are static inline so that each instruction-set copy of ssd_forward.c and
 * ssd_backward.c (cmake/isa.cmake) compiles them at its own level: compiled once in ssd.c at the portable
 * baseline they ran unvectorised, ~4% of the SSD's time at avx512. */

/* dtv_l = dt[l], a_l = dt_l*A for the L positions of one head in a chunk (dt has row stride H). */
static inline void m2_ssd_log_decay(const m2_real *dt, int H, m2_real A, int L, m2_real *dtv, m2_real *a)
{
    for (int l = 0; l < L; l++) {
        dtv[l] = dt[(size_t)l * H];
        a[l] = dtv[l] * A;
    }
}

/* e_l = decay(sum_{k<=l} a_k), the decay from the chunk start through l; returns e_{L-1}. */
static inline m2_real m2_ssd_start_decay(const m2_real *a, int L, m2_real *e)
{
    m2_real acc = 0;
    for (int l = 0; l < L; l++) e[l] = acc += a[l];
    m2_ssd_decay_row(e, L, e);
    return e[L - 1];
}

/* r_s = decay(sum_{s<k<L} a_k), the decay from after s to the chunk end. */
static inline void m2_ssd_end_decay(const m2_real *a, int L, m2_real *r)
{
    m2_real acc = 0;
    for (int s = L - 1; s >= 0; s--) {
        r[s] = acc;
        acc += a[s];
    }
    m2_ssd_decay_row(r, L, r);
}

/* For each head j of group g in chunk c (rows row..row+L-1 of dt): dtv_j, a_j = dt·A, e_j (start decays; E[j]
 * receives e_j[L-1] when E is not NULL) and r_j (end decays). */
static inline void m2_ssd_group_decays(const m2_ssd_plan *pl, const m2_ssd_tbuf *tb, const m2_real *dt,
                                       const m2_real *A, size_t row, int g, int L, m2_real *E)
{
    const m2_ssd_shape *s = &pl->s;
    for (int j = 0; j < pl->hpg; j++) {
        const int h = g * pl->hpg + j;
        const size_t o = j * tb->Qr;
        m2_ssd_log_decay(dt + row * s->H + h, s->H, A[h], L, tb->dtv + o, tb->a + o);
        const m2_real e_end = m2_ssd_start_decay(tb->a + o, L, tb->e + o);
        if (E) E[j] = e_end;
        m2_ssd_end_decay(tb->a + o, L, tb->r + o);
    }
}

/* Moves the segment sums to row l, element k of run at a time: run[s] = sum_{s<k<=l} a_k for s < l, run[l] = 0;
 * returns decay(run[k]). Each run[s] is a sum of the a's of its own segment only (never a difference of two
 * cumulative sums), so its rounding error is relative to the segment itself. The callers' loops over k <= l
 * use it element-wise, so the advance, the decay and the products that use it are one pass over the row. */
static inline m2_real m2_ssd_seg_decay(m2_real *restrict run, m2_real a_l, int k, int l)
{
    const m2_real v = k < l ? run[k] + a_l : (m2_real)0;
    run[k] = v;
    return m2_ssd_decay(v);
}

/* The skip term D x folded into the intra-chunk matrix: M_ll += D, so that one GEMM gives M·X + D X (forward)
 * and Mᵀ·dY + D dY (backward) without a separate pass over the outputs. */
static inline void m2_ssd_add_diag(m2_real *m, int L, int ld, m2_real D)
{
    for (int l = 0; l < L; l++) m[(size_t)l * ld + l] += D;
}

/* Small vector kernels for the per-row work (restrict + simd so they vectorise; the reduction order is fixed
 * by the build, so results stay bitwise reproducible run to run and across thread counts). */
static inline m2_real m2_ssd_dot(const m2_real *restrict a, const m2_real *restrict b, int n)
{
    m2_real acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

/* y += alpha x */
static inline void m2_ssd_axpy(m2_real alpha, const m2_real *restrict x, m2_real *restrict y, int n)
{
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* y = alpha x */
static inline void m2_ssd_scale(m2_real alpha, const m2_real *restrict x, m2_real *restrict y, int n)
{
    for (int i = 0; i < n; i++) y[i] = alpha * x[i];
}

/* Row-major C = A·B (+ C when beta is 1; beta is 0 or 1), op() = transpose when ta/tb.
 * Where OpenBLAS's kernels zero C with a scalar store per element for beta 0 (0.3.21's Haswell and Zen cores; ~10%
 * of the SSD's time at these small shapes on a Zen), beta 0 is done as C zeroed here, then the GEMM with beta 1:
 * a vectorised memset per row, then the same kernel, the same bits (0 + x is x). Its AVX-512 cores zero C at
 * vector speed, and their small-matrix kernels' beta-0 variants do not read C at all, so there beta 0 goes to
 * OpenBLAS as it is (bench_ssd on an Emerald Rapids, one thread: forward -10%, backward -4%; BENCHMARKS.md). */
static inline void m2_ssd_gemm(int ta, int tb, int M, int N, int K, const m2_real *A, int lda, const m2_real *B,
                               int ldb, m2_real beta, m2_real *C, int ldc)
{
    if (beta == 0 && m2_blas_beta0_fast()) {
        M2_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, (m2_real)1, A,
                lda, B, ldb, (m2_real)0, C, ldc);
        return;
    }
    if (beta == 0) {
        if (ldc == N)
            memset(C, 0, (size_t)M * N * sizeof *C);
        else
            for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    }
    M2_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, (m2_real)1, A, lda,
            B, ldb, (m2_real)1, C, ldc);
}

/* The intra-chunk products around a lower-triangular L×L matrix (the causal mask), each as two GEMMs over the two
 * halves of C's rows that skip the block above the diagonal: a quarter less multiplication and packing at L = Q.
 *   M2_SSD_TRI_OUT: C (L×L) = A·op(B), only C's lower triangle is wanted (C·Bᵀ, dY·Xᵀ); the block above is not written
 *   M2_SSD_TRI_A:   C (L×n) = A·op(B) with A lower triangular (M·X, dCB·B)
 *   M2_SSD_TRI_AT:  C (L×n) = Aᵀ·op(B) with A lower triangular (Mᵀ·dY, dCBᵀ·C)
 * What is skipped are exact zero products (A, AT) or unused outputs (OUT), but the results are not the whole
 * product's bits: OpenBLAS's kernel sums an element in an order that depends on the GEMM's shape (its edge tiles),
 * so they differ within rounding (test_ssd's bounds; still fixed by the sizes, independent of the thread count).
 * bench_ssd 1 thread, CPU time: forward -4%, backward -6%. */
typedef enum { M2_SSD_TRI_OUT, M2_SSD_TRI_A, M2_SSD_TRI_AT } m2_ssd_tri;

/* Where m2_ssd_gemm_tri splits C's rows: a multiple of 8 (whole kernel tiles); 0 = one GEMM. */
static inline int m2_ssd_tri_split(int L) { return (L / 2) & ~7; }

/* Of the L·L products per unit of the other size, the ones m2_ssd_gemm_tri runs: each kind skips h·(L-h). */
static inline double m2_ssd_tri_products(int L)
{
    const double h = m2_ssd_tri_split(L);
    return (double)L * L - h * (L - h);
}

static inline void m2_ssd_gemm_tri(m2_ssd_tri kind, int tb, int L, int n, int K, const m2_real *A, int lda,
                                   const m2_real *B, int ldb, m2_real beta, m2_real *C, int ldc)
{
    const int ta = kind == M2_SSD_TRI_AT, h = m2_ssd_tri_split(L);
    if (h == 0) {
        m2_ssd_gemm(ta, tb, L, n, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    m2_real *Cb = C + (size_t)h * ldc;
    switch (kind) {
    case M2_SSD_TRI_OUT:
        m2_ssd_gemm(0, tb, h, h, K, A, lda, B, ldb, beta, C, ldc);
        m2_ssd_gemm(0, tb, L - h, n, K, A + (size_t)h * lda, lda, B, ldb, beta, Cb, ldc);
        break;
    case M2_SSD_TRI_A:
        m2_ssd_gemm(0, tb, h, n, h, A, lda, B, ldb, beta, C, ldc);
        m2_ssd_gemm(0, tb, L - h, n, K, A + (size_t)h * lda, lda, B, ldb, beta, Cb, ldc);
        break;
    case M2_SSD_TRI_AT:
        m2_ssd_gemm(1, tb, h, n, K, A, lda, B, ldb, beta, C, ldc);
        m2_ssd_gemm(1, tb, L - h, n, K - h, A + (size_t)h * lda + h, lda, tb ? B + h : B + (size_t)h * ldb, ldb, beta,
                    Cb, ldc);
        break;
    }
}

#endif
