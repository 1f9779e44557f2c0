/* The narrow ops interface (docs/ARCHITECTURE.md "The ops interface"): every piece of arithmetic the model graph
 * (model.c) needs, as a table of function pointers that a backend fills. The CPU backend (ops_cpu.c and
 * ops_cpu_<concern>.c, OpenMP + OpenBLAS) is m2_ops_cpu(); a CUDA backend (the .cu files in kernels/) fills
 * the same table with device pointers.
 *
 * Conventions, the same for every backend:
 * - Every pointer argument is backend memory (device memory for CUDA) unless it says "host".
 *   Workspace comes from alloc/free; to_device/to_host move bytes across.
 * - Matrices are row-major. "[M,n] ld" means element (r, j) at p[r*ld + j]. Rows are tokens (M = B*T,
 *   token (b,t) is row b*T + t) unless the op says otherwise.
 * - Outputs marked ADDS accumulate (gradients of parameters, the residual stream's gradient); all other
 *   outputs are overwritten. Reductions over tokens (parameter gradients) happen in a fixed order that does
 *   not depend on the thread count, so a run is reproducible.
 * - The functions run in order on one stream; results are visible to the host after sync (the CPU backend
 *   is synchronous). Scalars returned to the host (the loss) imply a sync.
 * - m2_real is float in the product and double in the fp64 test build (real.h); AdamW works on the fp32
 *   master buffers in both. */
#ifndef MAMBA2_OPS_H
#define MAMBA2_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/vmath.h"
#include "core/real.h"
#include "core/ssd.h"


typedef struct m2_ops m2_ops;

/* Element type of the activations a backend stores between kernels (docs/MODEL.md §8, docs/ARCHITECTURE.md "The ops
 * interface"): the kept in_proj output zxbcdt, the conv+SiLU output xBC, the SSD output y and its gradient dy (the
 * gated norm's), the forward projections' inputs, and in the backward the GEMM operands around the two projections:
 * the in_proj output's gradient dzx (dz, the conv's input gradient, ddt_raw), the norms' recomputed outputs, d(o) and
 * a copy of the residual stream's gradient, and the SSD backward's token-row gradients dx, dB, dC (the conv
 * backward's d(out)). M2_ACT_REAL is m2_real; M2_ACT_BF16 is bf16 (2 bytes, the upper half of
 * an fp32), widened to fp32 by every reader, which computes in fp32. An op's `void *` activation arguments are in the
 * type its m2_act_type argument names, and a backend is only handed the types its act_type reports (the CPU backend:
 * M2_ACT_REAL always). Every other gradient and every reduction (parameter gradients) stays m2_real. */
typedef enum { M2_ACT_REAL = 0, M2_ACT_BF16 = 1 } m2_act_type;
static inline size_t m2_act_bytes(m2_act_type t) { return t == M2_ACT_BF16 ? 2 : sizeof(m2_real); }

struct m2_ops {
    const char *name; /* "cpu", "cuda" */
    int host_memory;  /* 1: buffers are host memory, handed to MPI as they are (the CPU); 0: device memory */
    void *ctx;        /* backend state (CPU: its level's kernels, ops_cpu.c; CUDA: stream, cuBLAS handle) */

    /* ---- memory ---- */
    void *(*alloc)(const m2_ops *o, size_t bytes); /* NULL when out of memory; contents undefined */
    void (*free)(const m2_ops *o, void *p);        /* p may be NULL */
    void (*memset0)(const m2_ops *o, void *p, size_t bytes);
    void (*copy)(const m2_ops *o, void *dst, const void *src, size_t bytes);           /* backend to backend */
    void (*to_device)(const m2_ops *o, void *dst, const void *host_src, size_t bytes); /* host to backend */
    void (*to_host)(const m2_ops *o, void *host_dst, const void *src, size_t bytes);   /* backend to host */
    void (*sync)(const m2_ops *o);                                                     /* wait for all work */

    /* ---- dense ---- */
    /* C [m,n] ldc = alpha * op(A) op(B) + beta * C, op(A) [m,k], op(B) [k,n]; trans_* != 0 means the stored
     * matrix is the transpose (A stored [k,m] with lda, B stored [n,k] with ldb). */
    void (*gemm)(const m2_ops *o, int trans_a, int trans_b, int m, int n, int k, m2_real alpha, const m2_real *A,
                 int lda, const m2_real *B, int ldb, m2_real beta, m2_real *C, int ldc);
    /* The same product with A and B of type ab and C of type c (the projections and their gradients on stored
     * activations: fp32 accumulation). NULL where act_type is NULL (then every activation is m2_real and gemm does
     * it). */
    void (*gemm_act)(const m2_ops *o, int trans_a, int trans_b, int m, int n, int k, m2_real alpha, const void *A,
                     int lda, const void *B, int ldb, m2_act_type ab, m2_real beta, void *C, int ldc, m2_act_type c);
    /* dst [n] of type t = x [n] rounded to t (a bf16 copy of a weight for gemm_act); NULL where act_type is. */
    void (*to_act)(const m2_ops *o, const m2_real *x, size_t n, void *dst, m2_act_type t);
    /* Y [rows,n] ldy += bias [n] on every row. */
    void (*bias_add)(const m2_ops *o, m2_real *Y, int ldy, const m2_real *bias, int rows, int n);
    /* db [n] ADDS the column sums of dY [rows,n] ldy. */
    void (*bias_grad)(const m2_ops *o, const m2_real *dY, int ldy, int rows, int n, m2_real *db);
    /* y [n] += x [n] (the residual stream). */
    void (*add)(const m2_ops *o, m2_real *y, const m2_real *x, size_t n);

    /* ---- RMSNorm: y = x * rsqrt(mean(x^2) + eps) * w, per row of n (x, y, dx, dy [rows,n] contiguous) ---- */
    /* y in type yt (bf16: the in_proj's input; the statistics stay fp32). x_copy [rows,n] (NULL: none) is written
     * with x: the next residual-stream slot pre-filled with h_l, onto which the out_proj GEMM adds its product
     * (beta = 1), copied by the norm that reads x anyway (model.c layer_forward). */
    void (*rmsnorm_fwd)(const m2_ops *o, const m2_real *x, m2_real *x_copy, const m2_real *w, int rows, int n, void *y,
                        m2_act_type yt);
    /* dx ADDS (it is the residual stream's gradient), dw [n] ADDS. y [rows,n] (NULL: not wanted) is written with the
     * forward's output, recomputed from the x the backward reads anyway, so that a model which needs it after the
     * backward (the in_proj's weight gradient) makes no second pass over x (model.c layer_backward). dx_act [rows,n]
     * (NULL: not wanted) is written with dx after the add (the operand of the next GEMMs that read it). y and dx_act
     * are of type yt; dy is of type dyt, yt or m2_real (a layer's d(u), the in_proj's input gradient, is a GEMM output
     * in the activation type; norm_f's comes from the head's fp32 GEMM). */
    void (*rmsnorm_bwd)(const m2_ops *o, const void *dy, m2_act_type dyt, const m2_real *x, const m2_real *w, int rows,
                        int n, m2_real *dx, m2_real *dw, void *y, void *dx_act, m2_act_type yt);

    /* ---- causal depthwise conv1d + bias + SiLU over C channels, per sequence of T ticks (docs/MODEL.md §2 step 3) ----
     * in [B*T,C] ld_in of type it (a slice of zxbcdt), w [C,K], b [C]; out [B*T,C] contiguous, of type it too (the
     * SSD's x, B, C). Zero before each sequence's first tick. */
    void (*conv_silu_fwd)(const m2_ops *o, const void *in, int ld_in, m2_act_type it, const m2_real *w,
                          const m2_real *b, int B, int T, int C, int K, void *out);
    /* dout [B*T,C] contiguous is d(out) (the SSD backward's dx, dB, dC); din [B*T,C] ld_din is written; dout and
     * din are of type it, as in. dw [C,K] and db [C] ADD (summed from the fp32 values, before din's rounding). The
     * pre-activation is recomputed from in (nothing but the conv input is kept). */
    void (*conv_silu_bwd)(const m2_ops *o, const void *dout, const void *in, int ld_in, m2_act_type it,
                          const m2_real *w, const m2_real *b, int B, int T, int C, int K, void *din, int ld_din,
                          m2_real *dw, m2_real *db);

    /* ---- the per-head parameters' transforms (docs/MODEL.md §2 step 4): dt = softplus(dt_raw + dt_bias), dt_raw
     * [rows,H] ld of type rt, dt [rows,H] contiguous (m2_real); A = -exp(A_log) [H] (written whatever rows is). One
     * op for both: A takes no launch of its own on a device backend. ---- */
    void (*dt_fwd)(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias,
                   const m2_real *A_log, int rows, int H, m2_real *dt, m2_real *A);
    /* ddt [rows,H] contiguous; ddt_raw [rows,H] with the same ld and type as dt_raw is written; ddt_bias [H] ADDS the
     * column sums of ddt_raw's fp32 values (before any rounding to rt); dA_log [H] ADDS dA [H] * A (whatever rows
     * is). */
    void (*dt_bwd)(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                   const m2_real *dt_bias, const m2_real *dA, const m2_real *A_log, int rows, int H, void *ddt_raw,
                   m2_real *ddt_bias, m2_real *dA_log);

    /* ---- chunked SSD (ssd.h: layouts, what ADDS); sizes in m2_reals for this backend's thread count ---- */
    size_t (*ssd_saved_size)(const m2_ops *o, const m2_ssd_shape *s);
    /* scratch for ssd_fwd and ssd_bwd; with_backward 0: for ssd_fwd with saved == NULL only (inference) */
    size_t (*ssd_scratch_size)(const m2_ops *o, const m2_ssd_shape *s, int with_backward);
    /* x, Bm, Cm (slices of the conv output) and y [B*T, H*P] (the kept SSD output) in type at */
    void (*ssd_fwd)(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                    const void *Bm, const void *Cm, const m2_real *Dsk, void *y, m2_act_type at, m2_real *saved,
                    m2_real *scratch);
    /* x, Bm, Cm and dy [B*T, H*P] in type at, and the token rows' gradients dx, dBm, dCm (the same layout as x, Bm,
     * Cm: the conv backward's d(out)) written in type at too, each rounded once from its fp32 sum; ddt, dA, dD
     * m2_real: ddt and dA written, dD added (src/core/ssd.h) */
    void (*ssd_bwd)(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                    const void *Bm, const void *Cm, const m2_real *Dsk, const void *dy, m2_act_type at,
                    const m2_real *saved, void *dx, m2_real *ddt, m2_real *dA, void *dBm, void *dCm, m2_real *dD,
                    m2_real *scratch);

    /* ---- gated RMSNorm in G groups (docs/MODEL.md §2 step 6): v = y * silu(z), out = v * rsqrt(mean_group(v^2) + eps)
     * * w. y [rows,n] contiguous and z [rows,n] ld_z both of type at (the kept activations); out [rows,n]
     * contiguous of type ot (bf16: the out_proj's input); w [n]; a group is n/G consecutive channels. ---- */
    void (*gated_norm_fwd)(const m2_ops *o, const void *y, const void *z, int ld_z, m2_act_type at, const m2_real *w,
                           int rows, int n, int G, void *out, m2_act_type ot);
    /* dout [rows,n] contiguous is d(out); dy [rows,n] contiguous (the SSD backward's input) and dz [rows,n] ld_dz are
     * written; dw [n] ADDS. out [rows,n] contiguous (NULL: not wanted) is written with the forward's output, as
     * rmsnorm_bwd's y is (the out_proj's weight gradient). dout, dy, dz and out are of type at, as y and z are. */
    void (*gated_norm_bwd)(const m2_ops *o, const void *dout, const void *y, const void *z, int ld_z, m2_act_type at,
                           const m2_real *w, int rows, int n, int G, void *dy, void *dz, int ld_dz, m2_real *dw,
                           void *out);

    /* ---- loss (docs/MODEL.md §4): over tokens with t >= burn_in and finite targets, sum of squared errors and
     * the number of terms (host scalars); dpred [B*T,O] = d(sse)/d(pred), exactly 0 where masked. ---- */
    void (*mse_loss)(const m2_ops *o, const m2_real *pred, const m2_real *Y, int B, int T, int O, int burn_in,
                     m2_real *dpred, double *sse, int64_t *count);

    /* ---- AdamW over n contiguous fp32 elements (adamw.h has the exact rule) ---- */
    void (*adamw)(const m2_ops *o, float *params, const float *grads, float *m, float *v,
                  const unsigned char *decay_mask, size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t step);

    /* ---- the data-parallel step on a shard of the flat fp32 buffers (dist/zero.h) ----
     * sumsq: sum of x[i]^2 over n elements, accumulated in double in an order fixed by n alone (reproducible),
     * returned to the host (implies a sync). scale: x[i] = (float)((double)x[i] * factor). */
    double (*sumsq)(const m2_ops *o, const float *x, size_t n);
    void (*scale)(const m2_ops *o, float *x, size_t n, double factor);

    /* ---- batching the parameter gradients' last reductions (may be NULL: nothing to batch) ----
     * Between grad_batch(o, 1) and grad_batch(o, 0) the gradients that the backward ops ADD as column sums
     * (rmsnorm_bwd's and gated_norm_bwd's dw, conv_silu_bwd's dw and db, dt_bwd's ddt_bias, bias_grad's db) may be
     * left incomplete until the batch closes: nothing may read them, or write them otherwise, in between. Closing
     * completes them with the sums of unbatched calls, bitwise. The CUDA backend leaves each one's final pass
     * pending and runs them all as one launch at the close (model.c: one per layer backward). */
    void (*grad_batch)(const m2_ops *o, int open);

    /* ---- how the model should drive this backend (may be NULL) ----
     * NULL (a device backend): each op call covers the whole micro-batch. Otherwise the number of host
     * threads ("lanes") the model may run at once, each taking whole sequences one at a time with its own
     * workspace while the ops run single-threaded inside it (model.c says why this suits the CPU). */
    int (*lanes)(const m2_ops *o);

    /* The type this backend stores the kept activations in now (read once when a model is created); NULL: always
     * M2_ACT_REAL (the CPU). The CUDA backend: bf16 when its GEMM precision is bf16, else M2_ACT_REAL. */
    m2_act_type (*act_type)(const m2_ops *o);
};

/* The CPU backend (synchronous; host memory). Its thread count starts at omp_get_max_threads(). */
const m2_ops *m2_ops_cpu(void);
/* The instruction set of the element-wise ops and SSD loops that m2_ops_cpu() runs now (base/cpu.h: chosen from
 * the CPU, capped by MAMBA2_CPU): "scalar", "avx2" or "avx512". */
const char *m2_ops_cpu_isa(void);

/* Threads for the CPU backend (the model's lanes, OpenMP regions, the partitioned GEMMs); n <= 0 means all
 * cores. Also keeps OpenBLAS single-threaded and nested OpenMP regions off (ops_cpu.c says why), and turns on
 * flush-to-zero and denormals-are-zero on the calling thread and every OpenMP thread (ops_cpu.c: subnormal
 * operands cost a microcode assist each on Intel cores). */
void m2_ops_cpu_set_threads(int n);
int m2_ops_cpu_threads(void);

#endif
