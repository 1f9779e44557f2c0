/* Op-level tests of the ops interface (core/ops.h), written against the table only (memory through
 * alloc/to_device/to_host), so another backend runs the same checks by adding its table to backends[].
 * Built twice: fp64 (test_ops_f64: forwards against naive loops, backwards against central finite
 * differences) and fp32 (test_ops: forwards, reproducibility for every thread count, AdamW).
 *
 * Tolerances. Forward ops vs naive double loops: fp64 1e-12, fp32 2e-6 of the output's scale (a few eps
 * over sums of <= 100 terms). Backwards vs finite differences (fp64 only): the checked scalar is
 * L = sum(r * out) with random r, step 1e-6, so FD noise is ~1e-16 |L| / 1e-6 ~ 1e-9 and truncation ~1e-11;
 * the bound 1e-7 + 1e-6 |fd| is ~100x above the noise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/adamw.h"
#include "core/ops.h"
#include "core/ops_cpu.h"
#include "base/rng.h"

#ifdef MAMBA2_FP64
#define FWD_TOL 1e-12
#else
#define FWD_TOL 2e-6
#endif

static const m2_ops *ops;

/* ---- helpers: host arrays, backend copies ---- */
static m2_real *rnd(size_t n, double lo, double hi, uint64_t seed)
{
    m2_real *v = malloc((n ? n : 1) * sizeof *v);
    assert_non_null(v);
    uint64_t key = m2_rng_key(seed, M2_RNG_TEST, 77, 0);
    for (size_t i = 0; i < n; i++) v[i] = (m2_real)(lo + (hi - lo) * m2_rng_u01(key, i));
    return v;
}
static m2_real *up(const m2_real *h, size_t n)
{
    m2_real *d = ops->alloc(ops, (n ? n : 1) * sizeof *d);
    assert_non_null(d);
    ops->to_device(ops, d, h, n * sizeof *d);
    return d;
}
static m2_real *zeros_dev(size_t n)
{
    m2_real *d = ops->alloc(ops, (n ? n : 1) * sizeof *d);
    assert_non_null(d);
    ops->memset0(ops, d, n * sizeof *d);
    return d;
}
static m2_real *down(const m2_real *d, size_t n)
{
    m2_real *h = malloc((n ? n : 1) * sizeof *h);
    assert_non_null(h);
    ops->sync(ops);
    ops->to_host(ops, h, d, n * sizeof *h);
    return h;
}
static void close_to(const char *what, const m2_real *got, const double *want, size_t n, double tol)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (scale > 0 ? scale : 1)))
            fail_msg("%s[%zu]: got %.12g, want %.12g (scale %.3g)", what, i, (double)got[i], want[i], scale);
}

/* ---- GEMM: all transposes, alpha, beta, padded leading dimensions, the threaded split ---- */
static void gemm_case(int ta, int tb, int m, int n, int k)
{
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
    const int ra = ta ? k : m, rb = tb ? n : k;
    m2_real *A = rnd((size_t)ra * lda, -1, 1, 1), *Bm = rnd((size_t)rb * ldb, -1, 1, 2);
    m2_real *C = rnd((size_t)m * ldc, -1, 1, 3);
    const double alpha = 0.7, beta = 0.3;
    double *want = malloc((size_t)m * n * sizeof *want);
    assert_non_null(want);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]) *
                     (double)(tb ? Bm[(size_t)j * ldb + p] : Bm[(size_t)p * ldb + j]);
            want[(size_t)i * n + j] = alpha * s + beta * (double)C[(size_t)i * ldc + j];
        }
    m2_real *dA = up(A, (size_t)ra * lda), *dB = up(Bm, (size_t)rb * ldb), *dC = up(C, (size_t)m * ldc);
    ops->gemm(ops, ta, tb, m, n, k, (m2_real)alpha, dA, lda, dB, ldb, (m2_real)beta, dC, ldc);
    m2_real *got = down(dC, (size_t)m * ldc);
    for (int i = 0; i < m; i++) {
        close_to("gemm", got + (size_t)i * ldc, want + (size_t)i * n, (size_t)n, FWD_TOL * sqrt(k));
        for (int j = n; j < ldc; j++) assert_true(got[(size_t)i * ldc + j] == C[(size_t)i * ldc + j]); /* padding */
    }
    free(A), free(Bm), free(C), free(want), free(got);
    ops->free(ops, dA), ops->free(ops, dB), ops->free(ops, dC);
}

static void test_gemm(void **state)
{
    for (int threads = 1; threads <= 2; threads++) {
        m2_ops_cpu_set_threads(threads);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                gemm_case(ta, tb, 7, 5, 3);     /* small: one call */
                gemm_case(ta, tb, 301, 70, 40); /* split by rows */
                gemm_case(ta, tb, 40, 310, 50); /* split by columns */
            }
    }
    m2_ops_cpu_set_threads(1);
}

/* ---- bias, add ---- */
static void test_bias_and_add(void **state)
{
    const int rows = 150, n = 7, ld = 9;
    m2_real *Y = rnd((size_t)rows * ld, -1, 1, 4), *b = rnd(n, -1, 1, 5), *db0 = rnd(n, -1, 1, 6);
    m2_real *dY = up(Y, (size_t)rows * ld), *dbias = up(b, n), *ddb = up(db0, n);
    ops->bias_add(ops, dY, ld, dbias, rows, n);
    ops->bias_grad(ops, dY, ld, rows, n, ddb); /* sums of the biased rows, ADDED to db0 */
    m2_real *gotY = down(dY, (size_t)rows * ld), *gotdb = down(ddb, n);
    double want_db[7];
    for (int j = 0; j < n; j++) {
        want_db[j] = db0[j];
        for (int r = 0; r < rows; r++) {
            assert_true(gotY[(size_t)r * ld + j] == Y[(size_t)r * ld + j] + b[j]);
            want_db[j] += (double)Y[(size_t)r * ld + j] + b[j];
        }
    }
    close_to("bias_grad", gotdb, want_db, n, FWD_TOL * 10);
    ops->add(ops, dY, dY, (size_t)rows * ld);
    m2_real *twice = down(dY, (size_t)rows * ld);
    for (size_t i = 0; i < (size_t)rows * ld; i++) assert_true(twice[i] == 2 * gotY[i]);
    free(Y), free(b), free(db0), free(gotY), free(gotdb), free(twice);
    ops->free(ops, dY), ops->free(ops, dbias), ops->free(ops, ddb);
}

/* ---- the differentiable ops, described uniformly for forward and FD checks ----
 * An op case has inputs (host arrays, some of them differentiable), a forward that writes `out` on the
 * backend and a backward that, given dout = r, returns the gradients of each differentiable input. */
enum { MAX_IN = 4 };
typedef struct op_case op_case;
struct op_case {
    const char *name;
    int n_in;
    const char *in_name[MAX_IN];
    m2_real *in[MAX_IN];
    size_t in_n[MAX_IN];
    int diff[MAX_IN];                /* checked by finite differences */
    int adds[MAX_IN];                /* the backward ADDS this gradient (the others are overwritten) */
    int in_w[MAX_IN], in_ld[MAX_IN]; /* a strided input: row width and stride (0: contiguous) */
    size_t out_n;
    void (*fwd)(const op_case *c, m2_real *const *din, m2_real *dout_buf);
    /* writes the gradient of each differentiable input into grads[i] (backend buffers, zeroed) */
    void (*bwd)(const op_case *c, m2_real *const *din, const m2_real *dr, m2_real **grads);
    void (*naive)(const op_case *c, double *out); /* the forward by definition, in double */
    int B, T, C, K, rows, n, G, ld;
};

static m2_real **upload_inputs(const op_case *c)
{
    m2_real **d = calloc(MAX_IN, sizeof *d);
    assert_non_null(d);
    for (int i = 0; i < c->n_in; i++) d[i] = up(c->in[i], c->in_n[i]);
    return d;
}
static void free_inputs(const op_case *c, m2_real **d)
{
    for (int i = 0; i < c->n_in; i++) ops->free(ops, d[i]);
    free(d);
}

#ifdef MAMBA2_FP64
static double loss_of(const op_case *c, const m2_real *r)
{
    m2_real **d = upload_inputs(c);
    m2_real *out = zeros_dev(c->out_n);
    c->fwd(c, d, out);
    m2_real *h = down(out, c->out_n);
    double L = 0;
    for (size_t i = 0; i < c->out_n; i++) L += (double)r[i] * (double)h[i];
    free(h);
    ops->free(ops, out);
    free_inputs(c, d);
    return L;
}
#endif

static void check_forward(const op_case *c)
{
    m2_real **d = upload_inputs(c);
    m2_real *out = zeros_dev(c->out_n);
    c->fwd(c, d, out);
    m2_real *got = down(out, c->out_n);
    double *want = calloc(c->out_n, sizeof *want);
    assert_non_null(want);
    c->naive(c, want);
    close_to(c->name, got, want, c->out_n, FWD_TOL);
    free(got), free(want);
    ops->free(ops, out);
    free_inputs(c, d);
}

/* The backward of case c for upstream gradient r (host, out_n) into zeroed gradients: g[i] receives host copies
 * (malloc'ed) of every input's gradient. */
static void backward_into_zeros(const op_case *c, const m2_real *r, m2_real *g[MAX_IN])
{
    m2_real **d = upload_inputs(c);
    m2_real *dr = up(r, c->out_n);
    m2_real *grads[MAX_IN] = {0};
    for (int i = 0; i < c->n_in; i++) grads[i] = zeros_dev(c->in_n[i]);
    c->bwd(c, d, dr, grads);
    for (int i = 0; i < c->n_in; i++) {
        g[i] = down(grads[i], c->in_n[i]);
        ops->free(ops, grads[i]);
    }
    ops->free(ops, dr);
    free_inputs(c, d);
}

static void check_backward(op_case *c)
{
#ifdef MAMBA2_FP64
    m2_real *r = rnd(c->out_n, -1, 1, 99);
    m2_real *gs[MAX_IN] = {0};
    backward_into_zeros(c, r, gs);
    for (int i = 0; i < c->n_in; i++) {
        m2_real *g = gs[i];
        if (!c->diff[i]) {
            free(g);
            continue;
        }
        for (size_t j = 0; j < c->in_n[i]; j++) {
            const double h = 1e-6;
            m2_real keep = c->in[i][j];
            c->in[i][j] = keep + (m2_real)h;
            double lp = loss_of(c, r);
            c->in[i][j] = keep - (m2_real)h;
            double lm = loss_of(c, r);
            c->in[i][j] = keep;
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(fd - (double)g[j]) <= 1e-7 + 1e-6 * fabs(fd)))
                fail_msg("%s: d/d%s[%zu]: backward %.12g, finite difference %.12g", c->name, c->in_name[i], j,
                         (double)g[j], fd);
        }
        free(g);
    }
    free(r);
#endif
}

/* Reproducibility: the backward's outputs are bitwise the same for 1, 2 and 3 threads. */
static void check_thread_independence(const op_case *c)
{
    m2_real *r = rnd(c->out_n, -1, 1, 98);
    m2_real *first[MAX_IN] = {0};
    for (int threads = 1; threads <= 3; threads++) {
        m2_ops_cpu_set_threads(threads);
        m2_real *gs[MAX_IN] = {0};
        backward_into_zeros(c, r, gs);
        for (int i = 0; i < c->n_in; i++) {
            if (threads == 1)
                first[i] = gs[i];
            else {
                assert_memory_equal(gs[i], first[i], c->in_n[i] * sizeof *gs[i]);
                free(gs[i]);
            }
        }
    }
    for (int i = 0; i < c->n_in; i++) free(first[i]);
    free(r);
    m2_ops_cpu_set_threads(1);
}

/* ADDS vs overwrite: a backward into buffers holding 0.5 gives 0.5 + (the result from zeros) for the
 * gradients the interface says ADD (to a few ulp: the add may be fused with the product), exactly the result
 * from zeros for the others, and leaves the padding of strided gradients untouched. */
static void check_accumulation(const op_case *c)
{
    const double eps = sizeof(m2_real) == sizeof(float) ? FLT_EPSILON : DBL_EPSILON;
    m2_real *r = rnd(c->out_n, -1, 1, 97);
    m2_real *res[2][MAX_IN] = {{0}};
    for (int pass = 0; pass < 2; pass++) {
        m2_real **d = upload_inputs(c);
        m2_real *dr = up(r, c->out_n);
        m2_real *grads[MAX_IN] = {0};
        for (int i = 0; i < c->n_in; i++) {
            m2_real *fill = malloc(c->in_n[i] * sizeof *fill);
            assert_non_null(fill);
            for (size_t j = 0; j < c->in_n[i]; j++) fill[j] = (m2_real)(pass ? 0.5 : 0.0);
            grads[i] = up(fill, c->in_n[i]);
            free(fill);
        }
        c->bwd(c, d, dr, grads);
        for (int i = 0; i < c->n_in; i++) {
            res[pass][i] = down(grads[i], c->in_n[i]);
            ops->free(ops, grads[i]);
        }
        ops->free(ops, dr);
        free_inputs(c, d);
    }
    for (int i = 0; i < c->n_in; i++) {
        if (!c->diff[i]) continue;
        for (size_t j = 0; j < c->in_n[i]; j++) {
            const int padding = c->in_ld[i] && (int)(j % (size_t)c->in_ld[i]) >= c->in_w[i];
            const double got = (double)res[1][i][j], g0 = (double)res[0][i][j];
            int ok;
            if (padding)
                ok = got == 0.5;
            else if (c->adds[i])
                ok = fabs(got - (0.5 + g0)) <= 4 * eps * fabs(0.5 + g0);
            else
                ok = got == g0;
            if (!ok)
                fail_msg("%s: d%s[%zu] %s: %.9g from 0.5, %.9g from 0", c->name, c->in_name[i], j,
                         padding      ? "is padding, must stay"
                         : c->adds[i] ? "must ADD"
                                      : "must overwrite",
                         got, g0);
        }
        free(res[0][i]);
        free(res[1][i]);
    }
    free(r);
}

static void run_case(op_case *c)
{
    check_forward(c);
    check_backward(c);
    check_accumulation(c);
    check_thread_independence(c);
    for (int i = 0; i < c->n_in; i++) free(c->in[i]);
}

/* ---- RMSNorm: in = {x [rows,n], w [n]} ---- */
static void rms_fwd(const op_case *c, m2_real *const *d, m2_real *out)
{
    ops->rmsnorm_fwd(ops, d[0], NULL, d[1], c->rows, c->n, out, M2_ACT_REAL);
}
static void rms_bwd(const op_case *c, m2_real *const *d, const m2_real *dr, m2_real **g)
{
    ops->rmsnorm_bwd(ops, dr, M2_ACT_REAL, d[0], d[1], c->rows, c->n, g[0], g[1], NULL, NULL, M2_ACT_REAL);
}
static void rms_naive(const op_case *c, double *out)
{
    for (int r = 0; r < c->rows; r++) {
        const m2_real *x = c->in[0] + (size_t)r * c->n;
        double ss = 0;
        for (int j = 0; j < c->n; j++) ss += (double)x[j] * x[j];
        double rs = 1 / sqrt(ss / c->n + M2_NORM_EPS);
        for (int j = 0; j < c->n; j++) out[(size_t)r * c->n + j] = x[j] * rs * c->in[1][j];
    }
}
static void test_rmsnorm(void **state)
{
    op_case c = {.name = "rmsnorm",
                 .n_in = 2,
                 .in_name = {"x", "w"},
                 .rows = 70,
                 .n = 6,
                 .fwd = rms_fwd,
                 .bwd = rms_bwd,
                 .naive = rms_naive,
                 .diff = {1, 1},
                 .adds = {1, 1}};
    c.in_n[0] = (size_t)c.rows * c.n, c.in_n[1] = (size_t)c.n, c.out_n = c.in_n[0];
    c.in[0] = rnd(c.in_n[0], -2, 2, 10), c.in[1] = rnd(c.in_n[1], 0.5, 1.5, 11);
    run_case(&c);
}

/* ---- conv1d + SiLU: in = {x [B*T, ld], w [C,K], b [C]}; x strided (ld > C) ---- */
static void conv_fwd(const op_case *c, m2_real *const *d, m2_real *out)
{
    ops->conv_silu_fwd(ops, d[0], c->ld, M2_ACT_REAL, d[1], d[2], c->B, c->T, c->C, c->K, out);
}
static void conv_bwd(const op_case *c, m2_real *const *d, const m2_real *dr, m2_real **g)
{
    ops->conv_silu_bwd(ops, dr, d[0], c->ld, M2_ACT_REAL, d[1], d[2], c->B, c->T, c->C, c->K, g[0], c->ld, g[1], g[2]);
}
static void conv_naive(const op_case *c, double *out)
{
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->T; t++)
            for (int ch = 0; ch < c->C; ch++) {
                double a = c->in[2][ch];
                for (int k = 0; k < c->K; k++) {
                    int ts = t - c->K + 1 + k;
                    if (ts >= 0) a += (double)c->in[1][ch * c->K + k] * c->in[0][((size_t)b * c->T + ts) * c->ld + ch];
                }
                out[((size_t)b * c->T + t) * c->C + ch] = a / (1 + exp(-a));
            }
}
static void test_conv_silu(void **state)
{
    /* T = 70 crosses the CPU's 64-tick work blocks; ld = C + 3 */
    op_case c = {.name = "conv_silu",
                 .n_in = 3,
                 .in_name = {"x", "w", "b"},
                 .B = 2,
                 .T = 70,
                 .C = 5,
                 .K = 4,
                 .fwd = conv_fwd,
                 .bwd = conv_bwd,
                 .naive = conv_naive,
                 .diff = {1, 1, 1},
                 .adds = {0, 1, 1}};
    c.ld = c.C + 3;
    c.in_w[0] = c.C, c.in_ld[0] = c.ld;
    c.in_n[0] = (size_t)c.B * c.T * c.ld, c.in_n[1] = (size_t)c.C * c.K, c.in_n[2] = (size_t)c.C;
    c.out_n = (size_t)c.B * c.T * c.C;
    c.in[0] = rnd(c.in_n[0], -2, 2, 12), c.in[1] = rnd(c.in_n[1], -1, 1, 13), c.in[2] = rnd(c.in_n[2], -1, 1, 14);
    run_case(&c);
}

/* ---- dt = softplus(dt_raw + bias): in = {dt_raw [rows, ld], bias [H]}; some values above the threshold. The op's A
 * and dA_log (test_a below) go to a scratch here. ---- */
static m2_real a_scratch[3][8]; /* A_log (0), A, dA_log; dA is A_log's zeros */
static void dt_fwd(const op_case *c, m2_real *const *d, m2_real *out)
{
    ops->dt_fwd(ops, d[0], c->ld, M2_ACT_REAL, d[1], a_scratch[0], c->rows, c->n, out, a_scratch[1]);
}
static void dt_bwd(const op_case *c, m2_real *const *d, const m2_real *dr, m2_real **g)
{
    ops->dt_bwd(ops, dr, d[0], c->ld, M2_ACT_REAL, d[1], a_scratch[0], a_scratch[0], c->rows, c->n, g[0], g[1],
                a_scratch[2]);
}
static void dt_naive(const op_case *c, double *out)
{
    for (int r = 0; r < c->rows; r++)
        for (int h = 0; h < c->n; h++) {
            double v = (double)c->in[0][(size_t)r * c->ld + h] + c->in[1][h];
            out[(size_t)r * c->n + h] = v > M2_SOFTPLUS_THRESHOLD ? v : log1p(exp(v));
        }
}
static void test_dt(void **state)
{
    op_case c = {.name = "dt",
                 .n_in = 2,
                 .in_name = {"dt_raw", "dt_bias"},
                 .rows = 67,
                 .n = 3,
                 .fwd = dt_fwd,
                 .bwd = dt_bwd,
                 .naive = dt_naive,
                 .diff = {1, 1},
                 .adds = {0, 1}};
    c.ld = 5;
    c.in_w[0] = c.n, c.in_ld[0] = c.ld;
    c.in_n[0] = (size_t)c.rows * c.ld, c.in_n[1] = (size_t)c.n, c.out_n = (size_t)c.rows * c.n;
    c.in[0] = rnd(c.in_n[0], -25, 25, 15), c.in[1] = rnd(c.in_n[1], -1, 1, 16);
    for (size_t i = 0; i < c.in_n[0]; i++) /* keep clear of the kink at 20 for finite differences */
        if (fabs((double)c.in[0][i] - 20) < 2) c.in[0][i] += 4;
    run_case(&c);
}

/* ---- A = -exp(A_log): in = {A_log [H]}; dt_fwd and dt_bwd on no rows (their dt part does nothing) ---- */
static void a_fwd(const op_case *c, m2_real *const *d, m2_real *out)
{
    ops->dt_fwd(ops, NULL, c->n, M2_ACT_REAL, NULL, d[0], 0, c->n, NULL, out);
}
static void a_bwd(const op_case *c, m2_real *const *d, const m2_real *dr, m2_real **g)
{
    ops->dt_bwd(ops, NULL, NULL, c->n, M2_ACT_REAL, NULL, dr, d[0], 0, c->n, NULL, a_scratch[1], g[0]);
}
static void a_naive(const op_case *c, double *out)
{
    for (int h = 0; h < c->n; h++) out[h] = -exp((double)c->in[0][h]);
}
static void test_a(void **state)
{
    op_case c = {.name = "A",
                 .n_in = 1,
                 .in_name = {"A_log"},
                 .n = 5,
                 .fwd = a_fwd,
                 .bwd = a_bwd,
                 .naive = a_naive,
                 .diff = {1},
                 .adds = {1}};
    c.in_n[0] = c.out_n = 5;
    c.in[0] = rnd(5, 0, 2.8, 17);
    run_case(&c);
}

/* ---- gated RMSNorm in G groups: in = {y [rows,n], z [rows, ld], w [n]} ---- */
static void gn_fwd(const op_case *c, m2_real *const *d, m2_real *out)
{
    ops->gated_norm_fwd(ops, d[0], d[1], c->ld, M2_ACT_REAL, d[2], c->rows, c->n, c->G, out, M2_ACT_REAL);
}
static void gn_bwd(const op_case *c, m2_real *const *d, const m2_real *dr, m2_real **g)
{
    ops->gated_norm_bwd(ops, dr, d[0], d[1], c->ld, M2_ACT_REAL, d[2], c->rows, c->n, c->G, g[0], g[1], c->ld, g[2],
                        NULL);
}
static void gn_naive(const op_case *c, double *out)
{
    const int ng = c->n / c->G;
    for (int r = 0; r < c->rows; r++)
        for (int g = 0; g < c->G; g++) {
            double v[64], ss = 0;
            for (int j = 0; j < ng; j++) {
                double z = c->in[1][(size_t)r * c->ld + g * ng + j];
                v[j] = c->in[0][(size_t)r * c->n + g * ng + j] * z / (1 + exp(-z));
                ss += v[j] * v[j];
            }
            double rs = 1 / sqrt(ss / ng + M2_NORM_EPS);
            for (int j = 0; j < ng; j++) out[(size_t)r * c->n + g * ng + j] = v[j] * rs * c->in[2][g * ng + j];
        }
}
static void test_gated_norm(void **state)
{
    for (int G = 1; G <= 2; G++) {
        op_case c = {.name = G == 1 ? "gated_norm G=1" : "gated_norm G=2",
                     .n_in = 3,
                     .in_name = {"y", "z", "w"},
                     .rows = 66,
                     .n = 8,
                     .G = G,
                     .fwd = gn_fwd,
                     .bwd = gn_bwd,
                     .naive = gn_naive,
                     .diff = {1, 1, 1},
                     .adds = {0, 0, 1}};
        c.ld = 11;
        c.in_w[1] = c.n, c.in_ld[1] = c.ld;
        c.in_n[0] = (size_t)c.rows * c.n, c.in_n[1] = (size_t)c.rows * c.ld, c.in_n[2] = (size_t)c.n;
        c.out_n = c.in_n[0];
        c.in[0] = rnd(c.in_n[0], -2, 2, 18), c.in[1] = rnd(c.in_n[1], -3, 3, 19);
        c.in[2] = rnd(c.in_n[2], 0.5, 1.5, 20);
        run_case(&c);
    }
}

/* ---- the norms' backwards with their recomputed outputs (ops.h: the model's backward takes the norms' outputs
 * from them instead of a second forward): the output equals the forward's bitwise, and asking for it changes no
 * other result's bits; RMSNorm's dx_act (the model's copy of dh for its GEMMs) is dx, bitwise. Rows over two blocks of M2_CPU_ROW_BLOCK, a group wider than the 16 partial sums. ---- */
static m2_real *run_norm_bwd(int gated, int rows, int n, int G, int ld, m2_real *const *d, const m2_real *dr,
                             int want_out)
{
    const size_t nx = (size_t)rows * n, ng = (size_t)rows * ld;
    m2_real *dx = zeros_dev(nx), *dz = zeros_dev(ng), *dw = zeros_dev((size_t)n), *out = zeros_dev(nx);
    if (gated)
        ops->gated_norm_bwd(ops, dr, d[0], d[1], ld, M2_ACT_REAL, d[2], rows, n, G, dx, dz, ld, dw,
                            want_out ? out : NULL);
    else
        ops->rmsnorm_bwd(ops, dr, M2_ACT_REAL, d[0], d[2], rows, n, dx, dw, want_out ? out : NULL, want_out ? dz : NULL,
                         M2_ACT_REAL);
    m2_real *h = malloc((2 * nx + ng + (size_t)n) * sizeof *h), *hx = down(dx, nx), *hz = down(dz, ng);
    if (!gated && want_out) { /* dx_act (in dz's first rows * n) is dx after the add, as it is */
        assert_memory_equal(hz, hx, nx * sizeof *hz);
        memset(hz, 0, nx * sizeof *hz);
    }
    m2_real *hw = down(dw, (size_t)n), *ho = down(out, nx);
    assert_non_null(h);
    memcpy(h, ho, nx * sizeof *h);
    memcpy(h + nx, hx, nx * sizeof *h);
    memcpy(h + 2 * nx, hz, ng * sizeof *h);
    memcpy(h + 2 * nx + ng, hw, (size_t)n * sizeof *h);
    free(hx), free(hz), free(hw), free(ho);
    ops->free(ops, dx), ops->free(ops, dz), ops->free(ops, dw), ops->free(ops, out);
    return h;
}

static void test_norm_bwd_outputs(void **state)
{
    const int rows = 150, n = 40, ld = 43;
    for (int gated = 0; gated <= 1; gated++)
        for (int G = 1; G <= (gated ? 2 : 1); G++) {
            const size_t nx = (size_t)rows * n, ng = (size_t)rows * ld;
            m2_real *hy = rnd(nx, -2, 2, 40 + G), *hz = rnd(ng, -3, 3, 42 + G), *hw = rnd((size_t)n, 0.5, 1.5, 44);
            m2_real *hd = rnd(nx, -1, 1, 45);
            m2_real *d[3] = {up(hy, nx), up(hz, ng), up(hw, (size_t)n)}, *dr = up(hd, nx), *fo = zeros_dev(nx);
            if (gated)
                ops->gated_norm_fwd(ops, d[0], d[1], ld, M2_ACT_REAL, d[2], rows, n, G, fo, M2_ACT_REAL);
            else
                ops->rmsnorm_fwd(ops, d[0], NULL, d[2], rows, n, fo, M2_ACT_REAL);
            m2_real *fwd = down(fo, nx);
            m2_real *with = run_norm_bwd(gated, rows, n, G, ld, d, dr, 1);
            m2_real *without = run_norm_bwd(gated, rows, n, G, ld, d, dr, 0);
            assert_memory_equal(with, fwd, nx * sizeof *fwd);
            assert_memory_equal(with + nx, without + nx, (nx + ng + (size_t)n) * sizeof *fwd);
            for (size_t i = 0; i < nx; i++) assert_true(without[i] == 0); /* NULL: nothing written */
            free(hy), free(hz), free(hw), free(hd), free(fwd), free(with), free(without);
            for (int i = 0; i < 3; i++) ops->free(ops, d[i]);
            ops->free(ops, dr), ops->free(ops, fo);
        }
}

/* ---- RMSNorm's copy of x (ops.h: the next residual slot pre-filled for the out_proj's beta = 1): x_copy == x and
 * y the norm's without a copy, bitwise ---- */
static void test_rmsnorm_copy(void **state)
{
    const int rows = 150, n = 40;
    const size_t nx = (size_t)rows * n;
    m2_real *hx = rnd(nx, -2, 2, 50), *hw = rnd((size_t)n, 0.5, 1.5, 52);
    m2_real *x = up(hx, nx), *w = up(hw, (size_t)n);
    m2_real *xc = zeros_dev(nx), *y1 = zeros_dev(nx), *y2 = zeros_dev(nx);
    ops->rmsnorm_fwd(ops, x, xc, w, rows, n, y1, M2_ACT_REAL);
    ops->rmsnorm_fwd(ops, x, NULL, w, rows, n, y2, M2_ACT_REAL);
    m2_real *gx = down(x, nx), *gxc = down(xc, nx), *gy1 = down(y1, nx), *gy2 = down(y2, nx);
    assert_memory_equal(gx, hx, nx * sizeof *gx); /* x is only read */
    assert_memory_equal(gxc, hx, nx * sizeof *gxc);
    assert_memory_equal(gy1, gy2, nx * sizeof *gy1);
    free(hx), free(hw), free(gx), free(gxc), free(gy1), free(gy2);
    ops->free(ops, x), ops->free(ops, w), ops->free(ops, xc), ops->free(ops, y1), ops->free(ops, y2);
}

/* ---- AdamW: against the rule of adamw.h in double, and by pieces == whole (ZeRO-1 shards) ---- */
static void test_adamw(void **state)
{
    enum { N = 1000 };
    float p[N], g[N], m[N], v[N], p2[N], m2[N], v2[N];
    unsigned char mask[N];
    uint64_t key = m2_rng_key(1, M2_RNG_TEST, 5, 0);
    for (int i = 0; i < N; i++) {
        p[i] = p2[i] = (float)(2 * m2_rng_u01(key, i) - 1);
        g[i] = (float)(2 * m2_rng_u01(key, N + i) - 1);
        m[i] = m2[i] = (float)(0.1 * m2_rng_u01(key, 2 * N + i));
        v[i] = v2[i] = (float)(0.01 * m2_rng_u01(key, 3 * N + i));
        mask[i] = i % 3 == 0;
    }
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const int64_t step = 7;
    float *dp = ops->alloc(ops, sizeof p), *dg = ops->alloc(ops, sizeof g), *dm = ops->alloc(ops, sizeof m);
    float *dv = ops->alloc(ops, sizeof v);
    unsigned char *dmask = ops->alloc(ops, sizeof mask);
    ops->to_device(ops, dp, p, sizeof p), ops->to_device(ops, dg, g, sizeof g), ops->to_device(ops, dm, m, sizeof m);
    ops->to_device(ops, dv, v, sizeof v), ops->to_device(ops, dmask, mask, sizeof mask);
    ops->adamw(ops, dp, dg, dm, dv, dmask, N, lr, b1, b2, eps, wd, step);
    float got[N];
    ops->sync(ops);
    ops->to_host(ops, got, dp, sizeof got);
    for (int i = 0; i < N; i++) {
        double pi = p[i];
        if (mask[i]) pi -= (double)lr * wd * pi;
        double mi = b1 * (double)m[i] + (1 - (double)b1) * g[i];
        double vi = b2 * (double)v[i] + (1 - (double)b2) * g[i] * g[i];
        double mh = mi / (1 - pow(b1, step)), vh = vi / (1 - pow(b2, step));
        double want = pi - lr * mh / (sqrt(vh) + eps);
        if (!(fabs(got[i] - want) <= 1e-6 * fabs(p[i] - want) + 2e-7 * fabs(want)))
            fail_msg("adamw[%d]: got %.9g, want %.9g", i, got[i], want);
    }
    /* the same update applied as three shards of the flat buffer gives the same bits */
    const size_t cut[] = {0, 333, 334, N};
    for (int s = 0; s < 3; s++)
        m2_adamw(p2 + cut[s], g + cut[s], m2 + cut[s], v2 + cut[s], mask + cut[s], cut[s + 1] - cut[s], lr, b1, b2, eps,
                 wd, step);
    assert_memory_equal(p2, got, sizeof got);
    ops->free(ops, dp), ops->free(ops, dg), ops->free(ops, dm), ops->free(ops, dv), ops->free(ops, dmask);
}

int main(void)
{
    /* Backends under test: the CPU one; a device backend adds its table here (skipped without a device). */
    ops = m2_ops_cpu();
    m2_ops_cpu_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),         cmocka_unit_test(test_bias_and_add),
        cmocka_unit_test(test_rmsnorm),      cmocka_unit_test(test_conv_silu),
        cmocka_unit_test(test_dt),           cmocka_unit_test(test_a),
        cmocka_unit_test(test_gated_norm),   cmocka_unit_test(test_norm_bwd_outputs),
        cmocka_unit_test(test_rmsnorm_copy), cmocka_unit_test(test_adamw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
