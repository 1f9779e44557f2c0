/* The CPU backend's entries for the ops that take stored activations (ops.h, m2_act_type): the CPU stores every
 * activation as m2_real (its act_type is NULL), so each entry hands its pointers, as m2_real, to the kernels of the
 * table's instruction-set level (ops_cpu_isa.c), whose arithmetic is the reference of every other backend. */
#include "core/ops_cpu.h"

#include <string.h>

static const m2_cpu_kernels *kern(const m2_ops *o) { return (const m2_cpu_kernels *)o->ctx; }

void m2_cpu_act_rmsnorm_fwd(const m2_ops *o, const m2_real *x, const m2_real *w, int rows, int n, void *y,
                            m2_act_type yt)
{
    kern(o)->rmsnorm_fwd(o, x, w, rows, n, (m2_real *)y);
}

void m2_cpu_act_conv_silu_fwd(const m2_ops *o, const void *in, int ld_in, m2_act_type it, const m2_real *w,
                              const m2_real *b, int B, int T, int C, int K, void *out)
{
    kern(o)->conv_silu_fwd(o, (const m2_real *)in, ld_in, w, b, B, T, C, K, (m2_real *)out);
}

void m2_cpu_act_rmsnorm_bwd(const m2_ops *o, const void *dy, m2_act_type dyt, const m2_real *x, const m2_real *w,
                            int rows, int n, m2_real *dx, m2_real *dw, void *y, void *dx_act, m2_act_type yt)
{
    kern(o)->rmsnorm_bwd(o, (const m2_real *)dy, x, w, rows, n, dx, dw, (m2_real *)y);
    if (dx_act) memcpy(dx_act, dx, (size_t)rows * n * sizeof(m2_real));
}

void m2_cpu_act_conv_silu_bwd(const m2_ops *o, const void *dout, const void *in, int ld_in, m2_act_type it,
                              const m2_real *w, const m2_real *b, int B, int T, int C, int K, void *din, int ld_din,
                              m2_real *dw, m2_real *db)
{
    kern(o)->conv_silu_bwd(o, (const m2_real *)dout, (const m2_real *)in, ld_in, w, b, B, T, C, K, (m2_real *)din,
                           ld_din, dw, db);
}

void m2_cpu_act_dt_fwd(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias, int rows,
                       int H, m2_real *dt)
{
    kern(o)->dt_fwd(o, (const m2_real *)dt_raw, ld, dt_bias, rows, H, dt);
}

void m2_cpu_act_dt_bwd(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                       const m2_real *dt_bias, int rows, int H, void *ddt_raw, m2_real *ddt_bias)
{
    kern(o)->dt_bwd(o, ddt, (const m2_real *)dt_raw, ld, dt_bias, rows, H, (m2_real *)ddt_raw, ddt_bias);
}

void m2_cpu_act_gated_norm_fwd(const m2_ops *o, const void *y, const void *z, int ld_z, m2_act_type at,
                               const m2_real *w, int rows, int n, int G, void *out, m2_act_type ot)
{
    kern(o)->gated_norm_fwd(o, (const m2_real *)y, (const m2_real *)z, ld_z, w, rows, n, G, (m2_real *)out);
}

void m2_cpu_act_gated_norm_bwd(const m2_ops *o, const void *dout, const void *y, const void *z, int ld_z,
                               m2_act_type at, const m2_real *w, int rows, int n, int G, void *dy, void *dz, int ld_dz,
                               m2_real *dw)
{
    kern(o)->gated_norm_bwd(o, (const m2_real *)dout, (const m2_real *)y, (const m2_real *)z, ld_z, w, rows, n, G,
                            (m2_real *)dy, (m2_real *)dz, ld_dz, dw);
}
