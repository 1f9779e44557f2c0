/* Internals shared by the CPU ops files (ops_cpu.c, ops_cpu_<concern>.c); not part of the ops interface. */
#ifndef MAMBA2_OPS_CPU_H
#define MAMBA2_OPS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "core/ops.h"

#include <math.h>

/* Parameter gradients are sums over tokens. They are formed as partial sums over fixed blocks of rows,
 * then added in block order, so the result is the same for every thread count (docs/ARCHITECTURE.md "Determinism"). */
#define M2_CPU_ROW_BLOCK 64

/* nblk * n zeroed reals for per-block partial sums. The ops have no error path, and these buffers are small
 * (blocks x one gradient tensor), so running out of memory here aborts with a message. */
m2_real *m2_cpu_partials(size_t nblk, size_t n);
/* dst[j] ADDS sum over blocks (in block order) of part[blk * n + j]; frees part. */
void m2_cpu_partials_reduce(m2_real *part, size_t nblk, size_t n, m2_real *dst);
/* A malloc that aborts with a message on failure (same reason). */
void *m2_cpu_xmalloc(size_t bytes);

/* exp for the elementwise ops: base/vmath.h's vectorisable m2_expf in the product; the fp64 test build keeps
 * libm's exp so that finite differences stay exact. */
#ifdef MAMBA2_FP64
static inline m2_real m2_vexp(m2_real x) { return exp(x); }
#else
static inline float m2_vexp(float x) { return m2_expf(x); }
#endif

static inline m2_real m2_sigmoid(m2_real a) { return (m2_real)1 / ((m2_real)1 + m2_vexp(-a)); }

/* The ops, one file per concern. Those files are compiled once per instruction-set level (cmake/isa.cmake;
 * scalar only in the fp64 test build) and each copy is renamed to its level; ops_cpu.c fills the table of the
 * level in use from that level's m2_cpu_kernels (below). */
#ifdef M2_ISA_SUFFIX
#include "base/cpu.h"
#define m2_cpu_rmsnorm_fwd    M2_ISA_FN(m2_cpu_rmsnorm_fwd)
#define m2_cpu_rmsnorm_bwd    M2_ISA_FN(m2_cpu_rmsnorm_bwd)
#define m2_cpu_gated_norm_fwd M2_ISA_FN(m2_cpu_gated_norm_fwd)
#define m2_cpu_gated_norm_bwd M2_ISA_FN(m2_cpu_gated_norm_bwd)
#define m2_cpu_conv_silu_fwd  M2_ISA_FN(m2_cpu_conv_silu_fwd)
#define m2_cpu_conv_silu_bwd  M2_ISA_FN(m2_cpu_conv_silu_bwd)
#define m2_cpu_dt_fwd         M2_ISA_FN(m2_cpu_dt_fwd)
#define m2_cpu_dt_bwd         M2_ISA_FN(m2_cpu_dt_bwd)
#define m2_cpu_mse_loss       M2_ISA_FN(m2_cpu_mse_loss)
#endif
void m2_cpu_rmsnorm_fwd(const m2_ops *o, const m2_real *x, const m2_real *w, int rows, int n, m2_real *y);
void m2_cpu_rmsnorm_bwd(const m2_ops *o, const m2_real *dy, const m2_real *x, const m2_real *w, int rows, int n,
                        m2_real *dx, m2_real *dw, m2_real *y);
void m2_cpu_gated_norm_fwd(const m2_ops *o, const m2_real *y, const m2_real *z, int ld_z, const m2_real *w, int rows,
                           int n, int G, m2_real *out);
void m2_cpu_gated_norm_bwd(const m2_ops *o, const m2_real *dout, const m2_real *y, const m2_real *z, int ld_z,
                           const m2_real *w, int rows, int n, int G, m2_real *dy, m2_real *dz, int ld_dz, m2_real *dw);
void m2_cpu_conv_silu_fwd(const m2_ops *o, const m2_real *in, int ld_in, const m2_real *w, const m2_real *b, int B,
                          int T, int C, int K, m2_real *out);
void m2_cpu_conv_silu_bwd(const m2_ops *o, const m2_real *dout, const m2_real *in, int ld_in, const m2_real *w,
                          const m2_real *b, int B, int T, int C, int K, m2_real *din, int ld_din, m2_real *dw,
                          m2_real *db);
void m2_cpu_dt_fwd(const m2_ops *o, const m2_real *dt_raw, int ld, const m2_real *dt_bias, int rows, int H,
                   m2_real *dt);
void m2_cpu_dt_bwd(const m2_ops *o, const m2_real *ddt, const m2_real *dt_raw, int ld, const m2_real *dt_bias, int rows,
                   int H, m2_real *ddt_raw, m2_real *ddt_bias);
void m2_cpu_mse_loss(const m2_ops *o, const m2_real *pred, const m2_real *Y, int B, int T, int O, int burn_in,
                     m2_real *dpred, double *sse, int64_t *count);

/* One level's element-wise ops and chunked SSD (ops_cpu_isa.c). */
typedef struct {
    int level; /* m2_cpu_level */
    void (*rmsnorm_fwd)(const m2_ops *, const m2_real *, const m2_real *, int, int, m2_real *);
    void (*rmsnorm_bwd)(const m2_ops *, const m2_real *, const m2_real *, const m2_real *, int, int, m2_real *,
                        m2_real *, m2_real *);
    void (*gated_norm_fwd)(const m2_ops *, const m2_real *, const m2_real *, int, const m2_real *, int, int, int,
                           m2_real *);
    void (*gated_norm_bwd)(const m2_ops *, const m2_real *, const m2_real *, const m2_real *, int, const m2_real *, int,
                           int, int, m2_real *, m2_real *, int, m2_real *);
    void (*conv_silu_fwd)(const m2_ops *, const m2_real *, int, const m2_real *, const m2_real *, int, int, int, int,
                          m2_real *);
    void (*conv_silu_bwd)(const m2_ops *, const m2_real *, const m2_real *, int, const m2_real *, const m2_real *, int,
                          int, int, int, m2_real *, int, m2_real *, m2_real *);
    void (*dt_fwd)(const m2_ops *, const m2_real *, int, const m2_real *, int, int, m2_real *);
    void (*dt_bwd)(const m2_ops *, const m2_real *, const m2_real *, int, const m2_real *, int, int, m2_real *,
                   m2_real *);
    void (*mse_loss)(const m2_ops *, const m2_real *, const m2_real *, int, int, int, int, m2_real *, double *,
                     int64_t *);
    void (*ssd_forward)(const m2_ssd_shape *, const m2_real *, const m2_real *, const m2_real *, const m2_real *,
                        const m2_real *, const m2_real *, m2_real *, m2_real *, m2_real *);
    void (*ssd_backward)(const m2_ssd_shape *, const m2_real *, const m2_real *, const m2_real *, const m2_real *,
                         const m2_real *, const m2_real *, const m2_real *, const m2_real *, m2_real *, m2_real *,
                         m2_real *, m2_real *, m2_real *, m2_real *, m2_real *);
} m2_cpu_kernels;

/* The kernels of a level (m2_cpu_level; capped at what this build holds: scalar only in the fp64 build). */
const m2_cpu_kernels *m2_cpu_kernels_for(int level);

/* The table's entries for the ops with stored activations (ops_cpu_act.c): the level's kernels on m2_real. */
void m2_cpu_act_rmsnorm_fwd(const m2_ops *o, const m2_real *x, const m2_real *w, int rows, int n, void *y,
                            m2_act_type yt);
void m2_cpu_act_conv_silu_fwd(const m2_ops *o, const void *in, int ld_in, m2_act_type it, const m2_real *w,
                              const m2_real *b, int B, int T, int C, int K, void *out);
/* rmsnorm_bwd: the level's kernel, then dx_act (when wanted) a copy of dx */
void m2_cpu_act_rmsnorm_bwd(const m2_ops *o, const void *dy, m2_act_type dyt, const m2_real *x, const m2_real *w,
                            int rows, int n, m2_real *dx, m2_real *dw, void *y, void *dx_act, m2_act_type yt);
void m2_cpu_act_conv_silu_bwd(const m2_ops *o, const void *dout, const void *in, int ld_in, m2_act_type it,
                              const m2_real *w, const m2_real *b, int B, int T, int C, int K, void *din, int ld_din,
                              m2_real *dw, m2_real *db);
void m2_cpu_act_dt_fwd(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias, int rows,
                       int H, m2_real *dt);
void m2_cpu_act_dt_bwd(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                       const m2_real *dt_bias, int rows, int H, void *ddt_raw, m2_real *ddt_bias);
void m2_cpu_act_gated_norm_fwd(const m2_ops *o, const void *y, const void *z, int ld_z, m2_act_type at,
                               const m2_real *w, int rows, int n, int G, void *out, m2_act_type ot);
void m2_cpu_act_gated_norm_bwd(const m2_ops *o, const void *dout, const void *y, const void *z, int ld_z,
                               m2_act_type at, const m2_real *w, int rows, int n, int G, void *dy, void *dz, int ld_dz,
                               m2_real *dw);

#endif
