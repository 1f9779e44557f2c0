/* Every op of the CUDA backend against the CPU backend (m2_ops_cpu) on the same seeded inputs, with odd sizes,
 * leading dimensions wider than the rows, and outputs that ADD starting from non-zero values. Buffers that an op
 * must not touch (the columns past a strided output's width) start as a sentinel on both sides and are compared
 * too. Without a GPU: one SKIP line, exit 0.
 *
 * Tolerances (relative, norm-wise over the whole output, gpu_util.h):
 * - element-wise ops that do the same float operations in the same order: 1e-6 (libm vs CUDA's expf/log1pf
 *   differ by an ulp or two);
 * - reductions (norm statistics, column sums over rows) formed in another order than the CPU's: 1e-5 (the sums
 *   here have at most a few thousand terms; fp32 reordering moves them by ~sqrt(terms) ulps);
 * - GEMM: fp32 1e-5; tf32 3e-3 and bf16 2e-2: rounding both operands to p bits (tf32 p = 11, bf16 p = 8) gives
 *   each product a relative error of about 0.8 * 2^-p, which on random-sign data is also the norm-wise relative
 *   error of the result (4e-4 and 3e-3): the tolerances leave a margin of about 6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"

static const m2_ops *cpu, *gpu;
enum { SEED = 20240611 };

/* the pairs of gpu_util.h on this file's backend and seed */
typedef m2_pair pair;
#define pair_of(host, n)                m2_pair_of(gpu, host, n)
#define pair_uniform(n, lo, hi, stream) m2_pair_uniform(gpu, n, lo, hi, SEED, stream)
#define pair_fill(n, v)                 m2_pair_fill(gpu, n, v)
#define pair_expect(what, p, tol)       m2_pair_expect(gpu, what, p, tol)
#define pair_free(p)                    m2_pair_free(gpu, p)

static int setup(void **state)
{
    cpu = m2_ops_cpu();
    gpu = m2_gpu_ops();
    return gpu ? 0 : -1;
}

static void test_memory(void **state)
{
    const size_t n = 1001;
    pair a = pair_uniform(n, -1, 1, 1);
    float *d2 = gpu->alloc(gpu, n * sizeof(float));
    assert_non_null(d2);
    gpu->copy(gpu, d2, a.d, n * sizeof(float));
    float *back = m2_host_from(gpu, d2, n);
    assert_memory_equal(back, a.h, n * sizeof(float));
    gpu->memset0(gpu, d2, 10 * sizeof(float));
    gpu->sync(gpu);
    free(back);
    back = m2_host_from(gpu, d2, n);
    for (int i = 0; i < 10; i++) assert_true(back[i] == 0.0f);
    assert_memory_equal(back + 10, a.h + 10, (n - 10) * sizeof(float));
    free(back);
    gpu->free(gpu, d2);
    gpu->free(gpu, NULL);
    pair_free(&a);
}

static void gemm_case(int ta, int tb, int m, int n, int k, m2_cuda_gemm_precision prec, double tol)
{
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    const size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
    pair A = pair_uniform(na, -1, 1, 10), B = pair_uniform(nb, -1, 1, 11), C = pair_uniform(nc, -1, 1, 12);
    m2_ops_cuda_set_gemm_precision(prec);
    cpu->gemm(cpu, ta, tb, m, n, k, 0.7f, A.h, lda, B.h, ldb, 0.3f, C.h, ldc);
    gpu->gemm(gpu, ta, tb, m, n, k, 0.7f, A.d, lda, B.d, ldb, 0.3f, C.d, ldc);
    char what[96];
    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d %s", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
             prec == M2_CUDA_GEMM_BF16   ? "bf16"
             : prec == M2_CUDA_GEMM_TF32 ? "tf32"
                                         : "fp32");
    pair_expect(what, C, tol);
    pair_free(&A);
    pair_free(&B);
    pair_free(&C);
}

static void test_gemm(void **state)
{
    const m2_cuda_gemm_precision precs[3] = {M2_CUDA_GEMM_FP32, M2_CUDA_GEMM_TF32, M2_CUDA_GEMM_BF16};
    const double tols[3] = {1e-5, 3e-3, 2e-2};
    m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_FP32);
    for (int p = 0; p < 3; p++)
        for (int t = 0; t < 4; t++) {
            gemm_case(t >> 1, t & 1, 37, 45, 29, precs[p], tols[p]);
            gemm_case(t >> 1, t & 1, 256, 384, 512, precs[p], tols[p]);
        }
    m2_ops_cuda_set_gemm_precision(old);
}

static void test_bias_add(void **state)
{
    const int rows = 1000, n = 19, ld = 23;
    pair Y = pair_uniform((size_t)rows * ld, -1, 1, 20), b = pair_uniform(n, -1, 1, 21),
         db = pair_uniform(n, -1, 1, 22);
    pair x = pair_uniform((size_t)rows * ld, -1, 1, 23);
    cpu->bias_add(cpu, Y.h, ld, b.h, rows, n);
    gpu->bias_add(gpu, Y.d, ld, b.d, rows, n);
    pair_expect("bias_add", Y, 1e-6);
    cpu->bias_grad(cpu, Y.h, ld, rows, n, db.h);
    gpu->bias_grad(gpu, Y.d, ld, rows, n, db.d);
    pair_expect("bias_grad (adds)", db, 1e-5);
    cpu->add(cpu, Y.h, x.h, Y.n);
    gpu->add(gpu, Y.d, x.d, Y.n);
    pair_expect("add", Y, 1e-6);
    pair_free(&Y);
    pair_free(&b);
    pair_free(&db);
    pair_free(&x);
}

static void rmsnorm_case(int rows, int n)
{
    pair x = pair_uniform((size_t)rows * n, -2, 2, 30), w = pair_uniform(n, 0.5f, 1.5f, 31);
    pair y = pair_fill((size_t)rows * n, 0), dy = pair_uniform((size_t)rows * n, -1, 1, 32);
    pair dx = pair_uniform((size_t)rows * n, -1, 1, 33), dw = pair_uniform(n, -1, 1, 34);
    char what[64];
    cpu->rmsnorm_fwd(cpu, x.h, NULL, w.h, rows, n, y.h, M2_ACT_REAL);
    gpu->rmsnorm_fwd(gpu, x.d, NULL, w.d, rows, n, y.d, M2_ACT_REAL);
    snprintf(what, sizeof what, "rmsnorm_fwd %dx%d", rows, n);
    pair_expect(what, y, 1e-6);
    /* with x copied into x_copy (ops.h: the next residual slot's pre-fill): x exactly, y unchanged */
    pair xc = pair_fill((size_t)rows * n, 7.0f), ys = pair_fill((size_t)rows * n, 7.0f);
    cpu->rmsnorm_fwd(cpu, x.h, xc.h, w.h, rows, n, ys.h, M2_ACT_REAL);
    gpu->rmsnorm_fwd(gpu, x.d, xc.d, w.d, rows, n, ys.d, M2_ACT_REAL);
    snprintf(what, sizeof what, "rmsnorm_fwd + copy: copy %dx%d", rows, n);
    pair_expect(what, xc, 0);
    snprintf(what, sizeof what, "rmsnorm_fwd + copy: y %dx%d", rows, n);
    pair_expect(what, ys, 1e-6);
    pair_free(&xc);
    pair_free(&ys);
    pair yb = pair_fill((size_t)rows * n, 7.0f);  /* the backward's recomputed output */
    pair dxa = pair_fill((size_t)rows * n, 7.0f); /* the copy of dx after the add */
    cpu->rmsnorm_bwd(cpu, dy.h, M2_ACT_REAL, x.h, w.h, rows, n, dx.h, dw.h, yb.h, dxa.h, M2_ACT_REAL);
    gpu->rmsnorm_bwd(gpu, dy.d, M2_ACT_REAL, x.d, w.d, rows, n, dx.d, dw.d, yb.d, dxa.d, M2_ACT_REAL);
    snprintf(what, sizeof what, "rmsnorm_bwd dx (adds) %dx%d", rows, n);
    pair_expect(what, dx, 1e-5);
    snprintf(what, sizeof what, "rmsnorm_bwd dx_act (dx) %dx%d", rows, n);
    pair_expect(what, dxa, 1e-5);
    pair_free(&dxa);
    snprintf(what, sizeof what, "rmsnorm_bwd dw (adds) %dx%d", rows, n);
    pair_expect(what, dw, 1e-5);
    snprintf(what, sizeof what, "rmsnorm_bwd y (the forward's) %dx%d", rows, n);
    pair_expect(what, yb, 1e-6);
    pair_free(&yb);
    pair_free(&x);
    pair_free(&w);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dw);
}

static void test_rmsnorm(void **state)
{
    rmsnorm_case(70, 200);
    rmsnorm_case(333, 771); /* rows past a column-sum block, widths past one block of threads */
    rmsnorm_case(3, 12100); /* too wide for the weight partials in shared memory (kernels/norm_cuda.cu) */
}

/* One conv shape; the kernels pick 4 channels per thread when C and both strides are multiples of 4, and a window
 * of 4 or 16 taps (kernels/conv_cuda.cu). */
static void conv_case(int B, int T, int C, int K, int ld_in, int ld_din)
{
    const int rows = B * T;
    pair in = pair_uniform((size_t)rows * ld_in, -2, 2, 40), w = pair_uniform((size_t)C * K, -0.5f, 0.5f, 41);
    pair b = pair_uniform(C, -0.5f, 0.5f, 42), out = pair_fill((size_t)rows * C, 0);
    pair dout = pair_uniform((size_t)rows * C, -1, 1, 43), din = pair_fill((size_t)rows * ld_din, 7.0f);
    pair dw = pair_uniform((size_t)C * K, -1, 1, 44), db = pair_uniform(C, -1, 1, 45);
    cpu->conv_silu_fwd(cpu, in.h, ld_in, M2_ACT_REAL, w.h, b.h, B, T, C, K, out.h);
    gpu->conv_silu_fwd(gpu, in.d, ld_in, M2_ACT_REAL, w.d, b.d, B, T, C, K, out.d);
    pair_expect("conv_silu_fwd", out, 1e-6);
    cpu->conv_silu_bwd(cpu, dout.h, in.h, ld_in, M2_ACT_REAL, w.h, b.h, B, T, C, K, din.h, ld_din, dw.h, db.h);
    gpu->conv_silu_bwd(gpu, dout.d, in.d, ld_in, M2_ACT_REAL, w.d, b.d, B, T, C, K, din.d, ld_din, dw.d, db.d);
    pair_expect("conv_silu_bwd din (+ untouched columns)", din, 1e-5);
    pair_expect("conv_silu_bwd dw (adds)", dw, 1e-5);
    pair_expect("conv_silu_bwd db (adds)", db, 1e-5);
    pair_free(&in);
    pair_free(&w);
    pair_free(&b);
    pair_free(&out);
    pair_free(&dout);
    pair_free(&din);
    pair_free(&dw);
    pair_free(&db);
}

static void test_conv(void **state)
{
    conv_case(3, 29, 40, 4, 52, 55); /* one channel per thread */
    conv_case(2, 70, 40, 4, 52, 44); /* 4 channels per thread; sequences over 2 tiles of ticks, rows over 2 blocks */
    conv_case(3, 37, 24, 3, 28, 24); /* fewer taps than the window */
    conv_case(2, 45, 12, 6, 16, 12); /* the 16-tap window */
    conv_case(1, 5, 13, 7, 13, 13);  /* a sequence shorter than the taps, odd widths */
    /* The backward's blocks walk 4 or 2 column-sum blocks of 64 rows when the grid keeps 256 blocks
     * (kernels/conv_cuda.cu, CONV_WALK_MAX): sequences (T not a multiple of 64) that start inside a walk and inside
     * a column-sum block, and sequences shorter than the taps at every row of a walk. */
    conv_case(3, 21800, 8, 4, 12, 8); /* 1022 column-sum blocks: walks of 4 */
    conv_case(5, 6600, 8, 4, 8, 12);  /* 516 blocks: walks of 2 */
    conv_case(11000, 3, 8, 4, 8, 8);  /* 516 blocks of 3-tick sequences: walks of 2 */
    conv_case(5, 6600, 5, 4, 5, 7);   /* walks of 2, one channel per thread */
    conv_case(5, 6600, 8, 3, 8, 8);   /* walks of 2, fewer taps than the window */
    conv_case(2, 130, 8, 1, 8, 8);    /* one tap: no rows past a walk's end (its last partials stored after it) */
}

static void test_dt_and_a(void **state)
{
    const int rows = 83, H = 6, ld = 11;
    /* raw values across the softplus threshold (20) on both sides */
    pair raw = pair_uniform((size_t)rows * ld, -30, 30, 50), bias = pair_uniform(H, -2, 2, 51);
    pair dt = pair_fill((size_t)rows * H, 0), ddt = pair_uniform((size_t)rows * H, -1, 1, 52);
    pair draw = pair_fill((size_t)rows * ld, 7.0f), dbias = pair_uniform(H, -1, 1, 53);
    pair Alog = pair_uniform(H, -1, 3, 54), A = pair_fill(H, 0), dA = pair_uniform(H, -1, 1, 55);
    pair dAlog = pair_uniform(H, -1, 1, 56);
    cpu->dt_fwd(cpu, raw.h, ld, M2_ACT_REAL, bias.h, Alog.h, rows, H, dt.h, A.h);
    gpu->dt_fwd(gpu, raw.d, ld, M2_ACT_REAL, bias.d, Alog.d, rows, H, dt.d, A.d);
    pair_expect("dt_fwd", dt, 1e-6);
    pair_expect("dt_fwd A", A, 1e-6);
    cpu->dt_bwd(cpu, ddt.h, raw.h, ld, M2_ACT_REAL, bias.h, dA.h, Alog.h, rows, H, draw.h, dbias.h, dAlog.h);
    gpu->dt_bwd(gpu, ddt.d, raw.d, ld, M2_ACT_REAL, bias.d, dA.d, Alog.d, rows, H, draw.d, dbias.d, dAlog.d);
    pair_expect("dt_bwd ddt_raw (+ untouched columns)", draw, 1e-6);
    pair_expect("dt_bwd ddt_bias (adds)", dbias, 1e-5);
    pair_expect("dt_bwd dA_log (adds)", dAlog, 1e-6);
    /* no rows: A and dA_log all the same (ops.h) */
    pair A0 = pair_fill(H, 0);
    cpu->dt_fwd(cpu, raw.h, ld, M2_ACT_REAL, bias.h, Alog.h, 0, H, dt.h, A0.h);
    gpu->dt_fwd(gpu, raw.d, ld, M2_ACT_REAL, bias.d, Alog.d, 0, H, dt.d, A0.d);
    pair_expect("dt_fwd A (no rows)", A0, 1e-6);
    cpu->dt_bwd(cpu, ddt.h, raw.h, ld, M2_ACT_REAL, bias.h, dA.h, Alog.h, 0, H, draw.h, dbias.h, dAlog.h);
    gpu->dt_bwd(gpu, ddt.d, raw.d, ld, M2_ACT_REAL, bias.d, dA.d, Alog.d, 0, H, draw.d, dbias.d, dAlog.d);
    pair_expect("dt_bwd dA_log (adds, no rows)", dAlog, 1e-6);
    pair_expect("dt_bwd ddt_bias (no rows: unchanged)", dbias, 1e-5);
    pair *ps[] = {&raw, &bias, &dt, &ddt, &draw, &dbias, &Alog, &A, &dA, &dAlog, &A0};
    for (int i = 0; i < 11; i++) pair_free(ps[i]);
}

static void gated_case(int rows, int n, int G, int ld_z, int ld_dz)
{
    pair y = pair_uniform((size_t)rows * n, -2, 2, 60), z = pair_uniform((size_t)rows * ld_z, -3, 3, 61);
    pair w = pair_uniform(n, 0.5f, 1.5f, 62), out = pair_fill((size_t)rows * n, 0);
    pair dout = pair_uniform((size_t)rows * n, -1, 1, 63), dy = pair_fill((size_t)rows * n, 0);
    pair dz = pair_fill((size_t)rows * ld_dz, 7.0f), dw = pair_uniform(n, -1, 1, 64);
    char what[64];
    cpu->gated_norm_fwd(cpu, y.h, z.h, ld_z, M2_ACT_REAL, w.h, rows, n, G, out.h, M2_ACT_REAL);
    gpu->gated_norm_fwd(gpu, y.d, z.d, ld_z, M2_ACT_REAL, w.d, rows, n, G, out.d, M2_ACT_REAL);
    snprintf(what, sizeof what, "gated_norm_fwd %dx%d G=%d", rows, n, G);
    pair_expect(what, out, 1e-6);
    pair ob = pair_fill((size_t)rows * n, 7.0f); /* the backward's recomputed output */
    cpu->gated_norm_bwd(cpu, dout.h, y.h, z.h, ld_z, M2_ACT_REAL, w.h, rows, n, G, dy.h, dz.h, ld_dz, dw.h, ob.h);
    gpu->gated_norm_bwd(gpu, dout.d, y.d, z.d, ld_z, M2_ACT_REAL, w.d, rows, n, G, dy.d, dz.d, ld_dz, dw.d, ob.d);
    snprintf(what, sizeof what, "gated_norm_bwd out (the forward's) %dx%d G=%d", rows, n, G);
    pair_expect(what, ob, 1e-6);
    pair_free(&ob);
    snprintf(what, sizeof what, "gated_norm_bwd dy %dx%d G=%d", rows, n, G);
    pair_expect(what, dy, 1e-5);
    snprintf(what, sizeof what, "gated_norm_bwd dz (+ untouched) %dx%d G=%d", rows, n, G);
    pair_expect(what, dz, 1e-5);
    snprintf(what, sizeof what, "gated_norm_bwd dw (adds) %dx%d G=%d", rows, n, G);
    pair_expect(what, dw, 1e-5);
    pair_free(&y);
    pair_free(&z);
    pair_free(&w);
    pair_free(&out);
    pair_free(&dout);
    pair_free(&dy);
    pair_free(&dz);
    pair_free(&dw);
}

static void test_gated_norm(void **state)
{
    gated_case(37, 48, 1, 61, 59);
    gated_case(37, 48, 2, 61, 59); /* the group size matters in the backward (docs/MODEL.md §3) */
    gated_case(37, 48, 3, 61, 59);
    /* the kernels' paths (kernels/norm_cuda.cu): rows past one block of the weight's column partials, groups wider
     * than what a thread keeps in registers (4-channel accesses, and one channel per access), rows too wide for the
     * column partials in shared memory (the two-kernel weight gradient) */
    gated_case(150, 2 * 2560, 2, 2 * 2560 + 4, 2 * 2560 + 8);
    gated_case(70, 2100, 1, 2101, 2103);
    gated_case(3, 12100, 2, 12100, 12100);
}

static void test_mse(void **state)
{
    const int B = 3, T = 20, O = 3, burn_in = 5;
    const size_t n = (size_t)B * T * O;
    float *y = m2_host_uniform(n, -1, 1, SEED, 70);
    for (size_t i = 0; i < n; i += 7) y[i] = NAN; /* horizons that cross a session end */
    y[n - 2] = INFINITY;
    pair Y = pair_of(y, n), pred = pair_uniform(n, -1, 1, 71), dp = pair_fill(n, 5.0f);
    double sse_c = 0, sse_g = 0;
    int64_t cnt_c = 0, cnt_g = 0;
    cpu->mse_loss(cpu, pred.h, Y.h, B, T, O, burn_in, dp.h, &sse_c, &cnt_c);
    gpu->mse_loss(gpu, pred.d, Y.d, B, T, O, burn_in, dp.d, &sse_g, &cnt_g);
    assert_int_equal(cnt_g, cnt_c);
    assert_true(cnt_c > 0 && cnt_c < (int64_t)n);
    /* float errors summed in double, in another order: only the last double bits may differ */
    m2_expect_close_scalar("mse_loss sse", sse_g, sse_c, 1e-12);
    float *got = m2_host_from(gpu, dp.d, n);
    for (size_t i = 0; i < n; i++) assert_true(got[i] == dp.h[i]); /* 2*(pred-y), or exactly 0 where masked */
    printf("  mse_loss dpred: bitwise equal (%lld terms)\n", (long long)cnt_c);
    free(got);
    pair_free(&Y);
    pair_free(&pred);
    pair_free(&dp);
}

static void test_adamw(void **state)
{
    const size_t n = 1001;
    pair p = pair_uniform(n, -1, 1, 80), g = pair_uniform(n, -1, 1, 81), m = pair_uniform(n, -0.1f, 0.1f, 82);
    pair v = pair_uniform(n, 0, 0.01f, 83);
    unsigned char *mask = malloc(n);
    assert_non_null(mask);
    for (size_t i = 0; i < n; i++) mask[i] = (unsigned char)(i % 3 == 0);
    unsigned char *dmask = gpu->alloc(gpu, n);
    assert_non_null(dmask);
    gpu->to_device(gpu, dmask, mask, n);
    cpu->adamw(cpu, p.h, g.h, m.h, v.h, mask, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    gpu->adamw(gpu, p.d, g.d, m.d, v.d, dmask, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    pair_expect("adamw params", p, 1e-6);
    pair_expect("adamw m", m, 1e-6);
    pair_expect("adamw v", v, 1e-6);
    gpu->free(gpu, dmask);
    free(mask);
    pair_free(&p);
    pair_free(&g);
    pair_free(&m);
    pair_free(&v);
}

/* Reductions have a fixed order: the same inputs give bitwise the same gradients, run after run. */
static void test_deterministic(void **state)
{
    const int rows = 2000, n = 300;
    pair x = pair_uniform((size_t)rows * n, -2, 2, 90), w = pair_uniform(n, 0.5f, 1.5f, 91);
    pair dy = pair_uniform((size_t)rows * n, -1, 1, 92);
    float *runs[2];
    for (int r = 0; r < 2; r++) {
        float *dx = gpu->alloc(gpu, (size_t)rows * n * sizeof(float)), *dw = gpu->alloc(gpu, n * sizeof(float));
        assert_non_null(dx);
        assert_non_null(dw);
        gpu->memset0(gpu, dx, (size_t)rows * n * sizeof(float));
        gpu->memset0(gpu, dw, n * sizeof(float));
        gpu->rmsnorm_bwd(gpu, dy.d, M2_ACT_REAL, x.d, w.d, rows, n, dx, dw, NULL, NULL, M2_ACT_REAL);
        gpu->bias_grad(gpu, dy.d, n, rows, n, dw);
        runs[r] = m2_host_from(gpu, dw, n);
        gpu->free(gpu, dx);
        gpu->free(gpu, dw);
    }
    assert_memory_equal(runs[0], runs[1], n * sizeof(float));
    printf("  column sums: bitwise identical over 2 runs\n");
    free(runs[0]);
    free(runs[1]);
    pair_free(&x);
    pair_free(&w);
    pair_free(&dy);
}

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),        cmocka_unit_test(test_gemm), cmocka_unit_test(test_bias_add),
        cmocka_unit_test(test_rmsnorm),       cmocka_unit_test(test_conv), cmocka_unit_test(test_dt_and_a),
        cmocka_unit_test(test_gated_norm),    cmocka_unit_test(test_mse),  cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
