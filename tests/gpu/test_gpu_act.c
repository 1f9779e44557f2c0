/* The ops on bf16 stored activations (core/ops.h m2_act_type; docs/MODEL.md §8) against the CPU backend and against
 * the same CUDA ops on fp32 storage. Without a GPU: one SKIP line, exit 0.
 *
 * - to_act rounds to nearest, ties to even, bitwise as the host rounding below (ties included).
 * - Readers (conv+SiLU, dt, the gated norm, forward and backward) get a bf16 device copy; the CPU gets the same values
 *   widened to fp32 on the host (exact), so the inputs are identical and the tolerances are test_gpu_ops.c's for the
 *   fp32 ops: 1e-6 element-wise, 1e-5 where a reduction runs in another order.
 * - Writers (the rmsnorm output, the in_proj GEMM's output, the conv+SiLU output, the SSD output y, and in the
 *   backward the gated norm's dy, dz and recomputed output, the SSD's dx, dB, dC, the conv's input gradient, ddt_raw,
 *   the rmsnorm backward's recomputed output and its copy of dx) compute in fp32 and round once on the store: their bf16 output must equal,
 *   bitwise, the host rounding of the same op's fp32 output on the GPU from fp32 inputs holding the same values (the
 *   strided outputs with their untouched columns). The parameter gradients stay fp32 sums of fp32 values: compared
 *   with the CPU at the tolerances above (dt_bias's also with the fp32 run's at 1e-6, which a sum of the rounded
 *   ddt_raw would miss by ~1e-3). The GEMM on bf16
 *   operands with an fp32 output is compared with the CPU GEMM on the widened operands: every product of two bf16
 *   values is exact in fp32, so only the summation order differs (1e-5, as the fp32 GEMM).
 * - The SSD on bf16 token rows (x, B, C, dy) computes what it computes on fp32 rows holding the same values (its
 *   bf16 outputs y, dx, dB, dC rounded once, the fp32 ddt, dA, dD up to an ulp per multiply-add the compiler fuses
 *   differently: ssd_rows_case).
 * - The SSD's chunk-start states, stored in bf16 at bf16 precision, are the fp32 state passing's values rounded once
 *   (test_ssd_states_rounded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* base/bf16.h is the host reference: written apart from the conversions under test (the device's, or on the
 * emulation tests/gpu/emu/cuda_bf16.h's) */
#include "base/bf16.h"
#include "gpu_util.h"
#include "ssd_cuda.h"

static const m2_ops *cpu, *gpu;
enum { SEED = 20261202 };

/* A bf16 device copy of n host values, made by the backend's to_act, and the values it holds, widened on the host. */
typedef struct {
    void *d;
    float *ref;
    size_t n;
} act;

static act act_of(const float *host, size_t n)
{
    float *f = m2_dev_from(gpu, host, n);
    act a = {gpu->alloc(gpu, n * 2), malloc(n * sizeof(float)), n};
    uint16_t *b = malloc(n * 2);
    assert_true(a.d && a.ref && b);
    gpu->to_act(gpu, f, n, a.d, M2_ACT_BF16);
    gpu->to_host(gpu, b, a.d, n * 2);
    for (size_t i = 0; i < n; i++) {
        if (b[i] != (uint16_t)m2_bf16_bits(host[i]))
            fail_msg("to_act: element %zu: 0x%04x, want 0x%04x", i, b[i], (uint16_t)m2_bf16_bits(host[i]));
        a.ref[i] = m2_bf16_float(b[i]);
    }
    free(b);
    gpu->free(gpu, f);
    return a;
}

/* A bf16 device buffer of n elements all v (exact in bf16), for the outputs with untouched columns. */
static act act_fill(size_t n, float v)
{
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = v;
    act a = act_of(h, n);
    free(h);
    return a;
}

/* An fp32 device copy of the values a holds. */
static float *act_wide(const act *a) { return m2_dev_from(gpu, a->ref, a->n); }

static act act_uniform(size_t n, float lo, float hi, uint64_t stream)
{
    float *h = m2_host_uniform(n, lo, hi, SEED, stream);
    act a = act_of(h, n);
    free(h);
    return a;
}

static void act_free(act *a)
{
    gpu->free(gpu, a->d);
    free(a->ref);
}

/* the pairs of gpu_util.h on this file's backend and seed */
typedef m2_pair pair;
#define pair_uniform(n, lo, hi, stream) m2_pair_uniform(gpu, n, lo, hi, SEED, stream)
#define pair_fill(n, v)                 m2_pair_fill(gpu, n, v)
#define pair_expect(what, p, tol)       m2_pair_expect(gpu, what, p, tol)
#define pair_free(p)                    m2_pair_free(gpu, p)

/* The bf16 output d of an op equals the rounding of its fp32 output f (device), element by element. */
static void expect_rounded(const char *what, const void *d, const float *f, size_t n)
{
    uint16_t *b = malloc(n * 2);
    float *h = m2_host_from(gpu, f, n);
    assert_non_null(b);
    gpu->to_host(gpu, b, d, n * 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += b[i] != (uint16_t)m2_bf16_bits(h[i]);
    printf("  %-44s %zu of %zu elements differ from the rounded fp32 output\n", what, bad, n);
    assert_true(bad == 0);
    free(b);
    free(h);
}

static int setup(void **state)
{
    cpu = m2_ops_cpu();
    gpu = m2_gpu_ops();
    return gpu ? 0 : -1;
}

static void test_to_act_ties(void **state)
{
    /* exact ties between two bf16 values (8 significant bits): to the even one, either way, and both signs */
    const float h[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 3.0f + 0x1p-7f, 0x1p-130f, 65504.0f};
    act a = act_of(h, sizeof h / sizeof h[0]);
    assert_true(a.ref[0] == 1.0f && a.ref[1] == 1.0f + 0x1p-6f && a.ref[2] == -1.0f && a.ref[3] == 3.0f);
    act_free(&a);
}

static void conv_case(int B, int T, int C, int K, int ld_in, int ld_din)
{
    const int rows = B * T;
    act in = act_uniform((size_t)rows * ld_in, -2, 2, 40);
    pair w = pair_uniform((size_t)C * K, -0.5f, 0.5f, 41), b = pair_uniform(C, -0.5f, 0.5f, 42);
    pair out = pair_fill((size_t)rows * C, 0);
    act dout = act_uniform((size_t)rows * C, -1, 1, 43); /* the SSD backward's dx, dB, dC */
    pair din = pair_fill((size_t)rows * ld_din, 7.0f), dw = pair_uniform((size_t)C * K, -1, 1, 44);
    pair db = pair_uniform(C, -1, 1, 45);
    cpu->conv_silu_fwd(cpu, in.ref, ld_in, M2_ACT_REAL, w.h, b.h, B, T, C, K, out.h);
    float *in_wide = act_wide(&in);
    gpu->conv_silu_fwd(gpu, in_wide, ld_in, M2_ACT_REAL, w.d, b.d, B, T, C, K, out.d);
    pair_expect("conv_silu_fwd (the bf16 input's values)", out, 1e-6);
    void *ob = gpu->alloc(gpu, out.n * 2); /* the SSD's x, B, C: the same output, rounded once */
    gpu->conv_silu_fwd(gpu, in.d, ld_in, M2_ACT_BF16, w.d, b.d, B, T, C, K, ob);
    expect_rounded("conv_silu_fwd (bf16 input and output)", ob, out.d, out.n);
    gpu->free(gpu, ob);
    gpu->free(gpu, in_wide);
    /* fp32 input, dout and din holding the bf16 values (dw, db of this run are not compared) */
    float *dw_wide = m2_dev_from(gpu, dw.h, dw.n), *db_wide = m2_dev_from(gpu, db.h, db.n);
    cpu->conv_silu_bwd(cpu, dout.ref, in.ref, ld_in, M2_ACT_REAL, w.h, b.h, B, T, C, K, din.h, ld_din, dw.h, db.h);
    in_wide = act_wide(&in);
    float *dout_wide = act_wide(&dout);
    gpu->conv_silu_bwd(gpu, dout_wide, in_wide, ld_in, M2_ACT_REAL, w.d, b.d, B, T, C, K, din.d, ld_din, dw_wide,
                       db_wide);
    pair_expect("conv_silu_bwd din (the bf16 values)", din, 1e-5);
    /* bf16 input, dout and din: din the fp32 din rounded once, dw and db fp32 sums */
    act dinb = act_fill(din.n, 7.0f);
    gpu->conv_silu_bwd(gpu, dout.d, in.d, ld_in, M2_ACT_BF16, w.d, b.d, B, T, C, K, dinb.d, ld_din, dw.d, db.d);
    expect_rounded("conv_silu_bwd din (bf16 input and din)", dinb.d, din.d, din.n);
    pair_expect("conv_silu_bwd dw (bf16 input and dout)", dw, 1e-5);
    pair_expect("conv_silu_bwd db (bf16 input and dout)", db, 1e-5);
    gpu->free(gpu, in_wide);
    gpu->free(gpu, dout_wide);
    gpu->free(gpu, dw_wide);
    gpu->free(gpu, db_wide);
    act_free(&dinb);
    act_free(&in);
    act_free(&dout);
    pair *ps[] = {&w, &b, &out, &din, &dw, &db};
    for (int i = 0; i < 6; i++) pair_free(ps[i]);
}

static void test_conv(void **state)
{
    conv_case(3, 29, 40, 4, 52, 55); /* one channel per thread */
    conv_case(2, 70, 40, 4, 52, 44); /* 4 channels per thread (8-byte bf16 loads) */
    conv_case(2, 45, 12, 6, 16, 12); /* the 16-tap window */
}

static void test_dt(void **state)
{
    const int rows = 83, H = 6, ld = 11;
    act raw = act_uniform((size_t)rows * ld, -30, 30, 50); /* across the softplus threshold */
    pair bias = pair_uniform(H, -2, 2, 51), dt = pair_fill((size_t)rows * H, 0);
    pair ddt = pair_uniform((size_t)rows * H, -1, 1, 52), draw = pair_fill((size_t)rows * ld, 7.0f);
    pair dbias = pair_uniform(H, -1, 1, 53);
    /* A and dA_log ride along (test_gpu_ops.c checks them) */
    pair Alog = pair_uniform(H, -1, 3, 54), A = pair_fill(H, 0), dA = pair_uniform(H, -1, 1, 55);
    pair dAlog = pair_fill(H, 0);
    cpu->dt_fwd(cpu, raw.ref, ld, M2_ACT_REAL, bias.h, Alog.h, rows, H, dt.h, A.h);
    gpu->dt_fwd(gpu, raw.d, ld, M2_ACT_BF16, bias.d, Alog.d, rows, H, dt.d, A.d);
    pair_expect("dt_fwd (bf16 dt_raw)", dt, 1e-6);
    /* fp32 dt_raw and ddt_raw holding the bf16 dt_raw's values, ddt_bias from the same start */
    float *raw_wide = act_wide(&raw), *dbias_wide = m2_dev_from(gpu, dbias.h, dbias.n);
    cpu->dt_bwd(cpu, ddt.h, raw.ref, ld, M2_ACT_REAL, bias.h, dA.h, Alog.h, rows, H, draw.h, dbias.h, dAlog.h);
    gpu->dt_bwd(gpu, ddt.d, raw_wide, ld, M2_ACT_REAL, bias.d, dA.d, Alog.d, rows, H, draw.d, dbias_wide, dAlog.d);
    pair_expect("dt_bwd ddt_raw (the bf16 dt_raw's values)", draw, 1e-6);
    /* bf16 dt_raw and ddt_raw: ddt_raw the fp32 one rounded once, ddt_bias the sum of the fp32 values */
    act drawb = act_fill(draw.n, 7.0f);
    gpu->dt_bwd(gpu, ddt.d, raw.d, ld, M2_ACT_BF16, bias.d, dA.d, Alog.d, rows, H, drawb.d, dbias.d, dAlog.d);
    expect_rounded("dt_bwd ddt_raw (bf16 dt_raw and ddt_raw)", drawb.d, draw.d, draw.n);
    pair_expect("dt_bwd ddt_bias (bf16 dt_raw)", dbias, 1e-5);
    float *got = m2_host_from(gpu, dbias.d, dbias.n), *wide = m2_host_from(gpu, dbias_wide, dbias.n);
    m2_expect_close("dt_bwd ddt_bias (bf16 against fp32 ddt_raw)", got, wide, dbias.n, 1e-6);
    free(got);
    free(wide);
    gpu->free(gpu, raw_wide);
    gpu->free(gpu, dbias_wide);
    act_free(&drawb);
    act_free(&raw);
    pair *ps[] = {&bias, &dt, &ddt, &draw, &dbias, &Alog, &A, &dA, &dAlog};
    for (int i = 0; i < 9; i++) pair_free(ps[i]);
}

static void gated_case(int rows, int n, int G, int ld_z)
{
    act y = act_uniform((size_t)rows * n, -2, 2, 60), z = act_uniform((size_t)rows * ld_z, -3, 3, 61);
    act dout = act_uniform((size_t)rows * n, -1, 1, 63);
    pair w = pair_uniform(n, 0.5f, 1.5f, 62), out = pair_fill((size_t)rows * n, 0);
    pair dy = pair_fill((size_t)rows * n, 0);
    pair dz = pair_fill((size_t)rows * ld_z, 7.0f), dw = pair_uniform(n, -1, 1, 64);
    cpu->gated_norm_fwd(cpu, y.ref, z.ref, ld_z, M2_ACT_REAL, w.h, rows, n, G, out.h, M2_ACT_REAL);
    gpu->gated_norm_fwd(gpu, y.d, z.d, ld_z, M2_ACT_BF16, w.d, rows, n, G, out.d, M2_ACT_REAL);
    pair_expect("gated_norm_fwd (bf16 y, z)", out, 1e-6);
    void *ob = gpu->alloc(gpu, out.n * 2); /* the out_proj's input: the same output, rounded once */
    gpu->gated_norm_fwd(gpu, y.d, z.d, ld_z, M2_ACT_BF16, w.d, rows, n, G, ob, M2_ACT_BF16);
    expect_rounded("gated_norm_fwd (bf16 output)", ob, out.d, out.n);
    gpu->free(gpu, ob);
    cpu->gated_norm_bwd(cpu, dout.ref, y.ref, z.ref, ld_z, M2_ACT_REAL, w.h, rows, n, G, dy.h, dz.h, ld_z, dw.h, NULL);
    /* fp32 dout, y, z holding the bf16 values: dy, dz and the recomputed output against the CPU and the forward */
    float *doutw = act_wide(&dout), *yw = act_wide(&y), *zw = act_wide(&z);
    float *dw_wide = gpu->alloc(gpu, dw.n * sizeof(float)); /* dw of this run is not compared */
    float *outw = gpu->alloc(gpu, out.n * sizeof(float));
    gpu->memset0(gpu, dw_wide, dw.n * sizeof(float));
    gpu->gated_norm_bwd(gpu, doutw, yw, zw, ld_z, M2_ACT_REAL, w.d, rows, n, G, dy.d, dz.d, ld_z, dw_wide, outw);
    pair_expect("gated_norm_bwd dy (the bf16 values)", dy, 1e-5);
    pair_expect("gated_norm_bwd dz (the bf16 values)", dz, 1e-5);
    /* everything in bf16: dy, dz (with its untouched columns) and the output, the fp32 ones rounded once; dw an
     * fp32 sum */
    void *dyb = gpu->alloc(gpu, dy.n * 2), *outb = gpu->alloc(gpu, out.n * 2);
    act dzb = act_fill(dz.n, 7.0f);
    gpu->gated_norm_bwd(gpu, dout.d, y.d, z.d, ld_z, M2_ACT_BF16, w.d, rows, n, G, dyb, dzb.d, ld_z, dw.d, outb);
    expect_rounded("gated_norm_bwd dy (bf16)", dyb, dy.d, dy.n);
    expect_rounded("gated_norm_bwd dz (bf16)", dzb.d, dz.d, dz.n);
    expect_rounded("gated_norm_bwd out (bf16)", outb, outw, out.n);
    pair_expect("gated_norm_bwd dw (bf16 dout, y, z)", dw, 1e-5);
    gpu->free(gpu, dyb);
    gpu->free(gpu, outb);
    gpu->free(gpu, doutw);
    gpu->free(gpu, yw);
    gpu->free(gpu, zw);
    gpu->free(gpu, dw_wide);
    gpu->free(gpu, outw);
    act_free(&dzb);
    act_free(&dout);
    act_free(&y);
    act_free(&z);
    pair *ps[] = {&w, &out, &dy, &dz, &dw};
    for (int i = 0; i < 5; i++) pair_free(ps[i]);
}

static void test_gated_norm(void **state)
{
    gated_case(37, 48, 2, 61);      /* one channel per access (ld_z odd) */
    gated_case(37, 48, 2, 64);      /* 4 channels per access */
    gated_case(3, 12100, 2, 12100); /* too wide for the weight partials in shared memory: the column-sum term */
}

static void test_rmsnorm_out(void **state)
{
    const int rows = 70, n = 200;
    pair x = pair_uniform((size_t)rows * n, -2, 2, 30), w = pair_uniform(n, 0.5f, 1.5f, 31);
    pair y = pair_fill((size_t)rows * n, 0), dy = pair_uniform((size_t)rows * n, -1, 1, 32);
    pair dx = pair_uniform((size_t)rows * n, -1, 1, 33), dw = pair_uniform(n, -1, 1, 34);
    void *yb = gpu->alloc(gpu, (size_t)rows * n * 2);
    gpu->rmsnorm_fwd(gpu, x.d, NULL, w.d, rows, n, y.d, M2_ACT_REAL);
    gpu->rmsnorm_fwd(gpu, x.d, NULL, w.d, rows, n, yb, M2_ACT_BF16);
    expect_rounded("rmsnorm_fwd (bf16 output)", yb, y.d, y.n);
    /* the backward's recomputed output and copy of dx (after the add): in fp32, then in bf16 from the same start */
    float *dx2 = m2_dev_from(gpu, dx.h, dx.n), *dw2 = m2_dev_from(gpu, dw.h, dw.n);
    float *yw = gpu->alloc(gpu, y.n * sizeof(float)), *dxw = gpu->alloc(gpu, y.n * sizeof(float));
    void *dxb = gpu->alloc(gpu, y.n * 2);
    cpu->rmsnorm_bwd(cpu, dy.h, M2_ACT_REAL, x.h, w.h, rows, n, dx.h, dw.h, NULL, NULL, M2_ACT_REAL);
    gpu->rmsnorm_bwd(gpu, dy.d, M2_ACT_REAL, x.d, w.d, rows, n, dx2, dw2, yw, dxw, M2_ACT_REAL);
    gpu->rmsnorm_bwd(gpu, dy.d, M2_ACT_REAL, x.d, w.d, rows, n, dx.d, dw.d, yb, dxb, M2_ACT_BF16);
    expect_rounded("rmsnorm_bwd y (bf16)", yb, yw, y.n);
    expect_rounded("rmsnorm_bwd dx_act (bf16)", dxb, dxw, y.n);
    pair_expect("rmsnorm_bwd dx (bf16 outputs)", dx, 1e-5);
    pair_expect("rmsnorm_bwd dw (bf16 outputs)", dw, 1e-5);
    /* dy in bf16 too (a layer's d(u), ops.h): the CPU on the widened values, continuing from the sums above */
    act dyb = act_of(dy.h, dy.n);
    cpu->rmsnorm_bwd(cpu, dyb.ref, M2_ACT_REAL, x.h, w.h, rows, n, dx.h, dw.h, NULL, NULL, M2_ACT_REAL);
    gpu->rmsnorm_bwd(gpu, dyb.d, M2_ACT_BF16, x.d, w.d, rows, n, dx.d, dw.d, yb, dxb, M2_ACT_BF16);
    pair_expect("rmsnorm_bwd dx (bf16 dy)", dx, 1e-5);
    pair_expect("rmsnorm_bwd dw (bf16 dy)", dw, 1e-5);
    act_free(&dyb);
    gpu->free(gpu, yb);
    gpu->free(gpu, dxb);
    gpu->free(gpu, dx2);
    gpu->free(gpu, dw2);
    gpu->free(gpu, yw);
    gpu->free(gpu, dxw);
    pair *ps[] = {&x, &w, &y, &dy, &dx, &dw};
    for (int i = 0; i < 6; i++) pair_free(ps[i]);
}

/* C [m,n] = A [m,k] B^T (B stored [n,k]), the in_proj's shape, on bf16 operands */
static void test_gemm_act(void **state)
{
    const int m = 37, n = 53, k = 29;
    act A = act_uniform((size_t)m * k, -1, 1, 20), B = act_uniform((size_t)n * k, -1, 1, 21);
    pair C = pair_fill((size_t)m * n, 0);
    void *Cb = gpu->alloc(gpu, (size_t)m * n * 2);
    cpu->gemm(cpu, 0, 1, m, n, k, 1, A.ref, k, B.ref, k, 0, C.h, n);
    gpu->gemm_act(gpu, 0, 1, m, n, k, 1, A.d, k, B.d, k, M2_ACT_BF16, 0, C.d, n, M2_ACT_REAL);
    pair_expect("gemm_act (bf16 in, fp32 out)", C, 1e-5);
    gpu->gemm_act(gpu, 0, 1, m, n, k, 1, A.d, k, B.d, k, M2_ACT_BF16, 0, Cb, n, M2_ACT_BF16);
    expect_rounded("gemm_act (bf16 in, bf16 out)", Cb, C.d, C.n);
    gpu->free(gpu, Cb);
    act_free(&A);
    act_free(&B);
    pair_free(&C);
}

/* The SSD on bf16 token rows: x, B, C (the conv output) and dy (the gated norm's) in bf16, and the token rows it writes
 * stored in bf16: y, and the backward's dx, dB, dC. Against the same ops on fp32 rows holding the same values
 * (ssd_cuda.cuh, ssd_io: the tensor-core operands and every fp32 expression are the same): y and dx, dB, dC are theirs
 * rounded once (expect_rounded, bitwise), and ddt, dA, dD theirs up to the multiply-adds the compiler fuses
 * differently in the two instantiations (the fp32 and bf16 kernels are separate code): an ulp per fused term, so 1e-6
 * relative; measured here 5e-8 for ddt and 6e-8 to 4e-7 for dA and dD, where the row sums the scalars add differ by
 * an ulp. A row, column or head read from the wrong place would be off by O(1). */
static void ssd_rows_case(int T)
{
    /* one row of xbc (and of its gradient) holds x [H*P], B [G*N] and C [G*N]: 96 values; two heads per group */
    const m2_ssd_shape s = {.B = 2, .T = T, .H = 4, .P = 8, .G = 2, .N = 16, .Q = 16, .ld_x = 96, .ld_bc = 96};
    const size_t rows = (size_t)s.B * s.T, ny = rows * s.H * s.P, nxbc = rows * s.ld_x, ndt = rows * s.H;
    const size_t HP = (size_t)s.H * s.P, GN = (size_t)s.G * s.N;
    act xbc = act_uniform(nxbc, -1, 1, 70), dy = act_uniform(ny, -1, 1, 74);
    pair dt = pair_uniform(ndt, 0.01f, 0.2f, 71), A = pair_uniform(s.H, -2, -0.5f, 72),
         D = pair_uniform(s.H, -1, 1, 73);
    float *xw = act_wide(&xbc), *dyw = act_wide(&dy);
    float *saved = gpu->alloc(gpu, gpu->ssd_saved_size(gpu, &s) * sizeof(float));
    float *scratch = gpu->alloc(gpu, gpu->ssd_scratch_size(gpu, &s, 1) * sizeof(float));
    void *y[2], *dxbc[2]; /* in the rows' type */
    float *got[2][3];     /* ddt, dA, dD on the host */
    const size_t n_out[3] = {ndt, (size_t)s.H, (size_t)s.H};
    for (int t = 0; t < 2; t++) { /* 0: fp32 rows, 1: bf16 rows */
        const m2_act_type at = t ? M2_ACT_BF16 : M2_ACT_REAL;
        const size_t eb = t ? 2 : sizeof(float);
        const char *x = t ? (const char *)xbc.d : (const char *)xw;
        const void *Bm = x + HP * eb, *Cm = x + (HP + GN) * eb, *dyp = t ? dy.d : (const void *)dyw;
        y[t] = gpu->alloc(gpu, ny * eb);
        dxbc[t] = gpu->alloc(gpu, nxbc * eb);
        char *dx = dxbc[t];
        float *d[3];
        for (int k = 0; k < 3; k++) {
            d[k] = gpu->alloc(gpu, n_out[k] * sizeof(float));
            gpu->memset0(gpu, d[k], n_out[k] * sizeof(float));
        }
        gpu->ssd_fwd(gpu, &s, x, dt.d, A.d, Bm, Cm, D.d, y[t], at, saved, scratch);
        gpu->ssd_bwd(gpu, &s, x, dt.d, A.d, Bm, Cm, D.d, dyp, at, saved, dx, d[0], d[1], dx + HP * eb,
                     dx + (HP + GN) * eb, d[2], scratch);
        for (int k = 0; k < 3; k++) {
            got[t][k] = m2_host_from(gpu, d[k], n_out[k]);
            gpu->free(gpu, d[k]);
        }
    }
    printf("  T = %d:\n", T);
    expect_rounded("ssd_fwd y (bf16 rows and store)", y[1], y[0], ny);
    expect_rounded("ssd_bwd dx, dB, dC (bf16 rows and store)", dxbc[1], dxbc[0], nxbc);
    static const char *const names[3] = {"ssd_bwd ddt (bf16 rows)", "ssd_bwd dA (bf16 rows)", "ssd_bwd dD (bf16 rows)"};
    for (int k = 0; k < 3; k++) {
        m2_expect_close(names[k], got[1][k], got[0][k], n_out[k], 1e-6);
        free(got[0][k]);
        free(got[1][k]);
    }
    for (int t = 0; t < 2; t++) {
        gpu->free(gpu, y[t]);
        gpu->free(gpu, dxbc[t]);
    }
    gpu->free(gpu, xw);
    gpu->free(gpu, dyw);
    gpu->free(gpu, saved);
    gpu->free(gpu, scratch);
    act_free(&xbc);
    act_free(&dy);
    pair *ps[] = {&dt, &A, &D};
    for (int i = 0; i < 3; i++) pair_free(ps[i]);
}

static void test_ssd_rows(void **state)
{
    ssd_rows_case(45); /* a short tail chunk; T not a multiple of 4: element loads */
    ssd_rows_case(64); /* 4-element loads (8 bytes of bf16) */
}

/* The chunk-start states kept in bf16 (kernels/ssd_cuda.cuh, ssd_states_type) are the fp32 state passing's S_c
 * rounded once to nearest even, bitwise, the passing's inputs being the chunk states st_c, each rounded once to
 * nearest even from its fp32 sum by the states product. Inputs that make every fp32 value exact: A = 0 (every decay
 * e^0 = 1), dt = 1, x and B multiples of 1/4 in [-4, 4] (exact in bf16, so the states product's operands are the
 * inputs themselves): each chunk state st_c = sum_s x_s B_s^T, and each S_c = bf16(st_0) + ... + bf16(st_{c-1}), is a
 * multiple of 1/16 below 2^10, exact in fp32 on any summation order, and needs up to 14 significant bits, so the
 * rounding to bf16's 8 is exercised, ties included. Read from the saved buffer, where the states are kept: acs, CB,
 * the three decay tables, then S, each region rounded up to a multiple of 64 floats (ssd_cuda.cuh, "Buffers"). */
static void test_ssd_states_rounded(void **state)
{
    (void)state;
    const m2_ssd_shape s = {.B = 2, .T = 48, .H = 2, .P = 8, .G = 1, .N = 8, .Q = 16, .ld_x = 16, .ld_bc = 8};
    const int nc = s.T / s.Q, PN = s.P * s.N;
    const size_t rows = (size_t)s.B * s.T, heads = (size_t)s.B * nc * s.H;
    assert_int_equal(gpu->act_type(gpu), M2_ACT_BF16); /* the default precision: bf16 */
    float *hx = m2_host_uniform(rows * s.ld_x, -16, 16, SEED, 80),
          *hb = m2_host_uniform(rows * s.ld_bc, -16, 16, SEED, 81);
    for (size_t i = 0; i < rows * s.ld_x; i++) hx[i] = rintf(hx[i]) / 4;
    for (size_t i = 0; i < rows * s.ld_bc; i++) hb[i] = rintf(hb[i]) / 4;
    float *hdt = m2_host_fill(rows * s.H, 1.0f), *hzero = m2_host_fill(s.H, 0.0f);
    float *x = m2_dev_from(gpu, hx, rows * s.ld_x), *Bm = m2_dev_from(gpu, hb, rows * s.ld_bc),
          *dt = m2_dev_from(gpu, hdt, rows * s.H), *A = m2_dev_from(gpu, hzero, s.H), *D = m2_dev_from(gpu, hzero, s.H);
    float *y = gpu->alloc(gpu, rows * s.H * s.P * sizeof(float));
    const m2_cuda_ssd_states old = m2_ops_cuda_set_ssd_states(M2_CUDA_SSD_KEEP_STATES);
    const size_t n_saved = gpu->ssd_saved_size(gpu, &s);
    float *saved = gpu->alloc(gpu, n_saved * sizeof(float));
    float *scratch = gpu->alloc(gpu, gpu->ssd_scratch_size(gpu, &s, 0) * sizeof(float));
    gpu->ssd_fwd(gpu, &s, x, dt, A, Bm, Bm, D, y, M2_ACT_REAL, saved, scratch); /* C = B: only S is checked */
    m2_ops_cuda_set_ssd_states(old);
    float *hs = m2_host_from(gpu, saved, n_saved);
    const size_t groups = (size_t)s.B * nc * s.G, ht = (heads * s.Q + 63) / 64 * 64;
    const size_t s_at = 4 * ht + (groups * s.Q * s.Q + 63) / 64 * 64; /* acs, CB, eA, wR, dtc */
    assert_true(s_at + (heads * PN + 1) / 2 <= n_saved);
    uint16_t *S = malloc(heads * PN * 2);
    assert_non_null(S);
    memcpy(S, hs + s_at, heads * PN * 2);
    int inexact = 0, st_inexact = 0;
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++)
            for (int pn = 0; pn < PN; pn++) {
                const int p = pn / s.N, n = pn % s.N;
                double run = 0; /* S_c, exact: the sum of the rounded chunk states */
                for (int c = 0; c < nc; c++) {
                    const size_t zh = ((size_t)b * nc + c) * s.H + h;
                    const uint16_t want = (uint16_t)m2_bf16_bits((float)run);
                    if (S[zh * PN + pn] != want)
                        fail_msg("S[b %d, c %d, h %d][%d][%d]: 0x%04x, want 0x%04x (%.4f rounded)", b, c, h, p, n,
                                 S[zh * PN + pn], want, run);
                    inexact += m2_bf16_float(want) != (float)run;
                    double st = 0; /* st_c, exact */
                    for (int l = 0; l < s.Q; l++) {
                        const size_t r = (size_t)b * s.T + (size_t)c * s.Q + l;
                        st += (double)hx[r * s.ld_x + (size_t)h * s.P + p] * hb[r * s.ld_bc + n];
                    }
                    const float st_stored = m2_bf16_float((uint16_t)m2_bf16_bits((float)st));
                    st_inexact += c < nc - 1 && st_stored != (float)st; /* st_{nc-1} is never formed */
                    run += st_stored;
                }
            }
    printf("  %zu states, %d of them rounded (the others exact in bf16); %d chunk states rounded\n", heads * PN,
           inexact, st_inexact);
    assert_true(inexact > 0 && st_inexact > 0);
    float *bufs[] = {x, Bm, dt, A, D, y, saved, scratch};
    for (int i = 0; i < 8; i++) gpu->free(gpu, bufs[i]);
    free(hx);
    free(hb);
    free(hdt);
    free(hzero);
    free(hs);
    free(S);
}

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_act_ties), cmocka_unit_test(test_conv),
        cmocka_unit_test(test_dt),          cmocka_unit_test(test_gated_norm),
        cmocka_unit_test(test_rmsnorm_out), cmocka_unit_test(test_gemm_act),
        cmocka_unit_test(test_ssd_rows),    cmocka_unit_test(test_ssd_states_rounded),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
