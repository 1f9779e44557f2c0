/* 50 training steps on the GPU and on the CPU from the same initial parameters on the same batches: the losses
 * must track each other step by step and both must fall. Drives m2_model_forward_backward and the backend's
 * AdamW directly (the loss normalised by its count as the trainer does: grads / count, docs/MODEL.md §4), so it does
 * not depend on the trainer's device selection. Prints the two loss curves. Without a GPU: one SKIP line, exit 0.
 *
 * Tolerances: with fp32 GEMMs the runs differ by summation order only, and 50 Adam steps amplify that to well
 * under 1e-2 relative; with bf16 GEMMs (the default; the SSD's per-chunk products then run in bf16 too) every
 * step's gradient carries a few 1e-2 of relative error (test_gpu_model.c), which Adam's normalised steps turn into a loss gap of a few percent: 1e-1. Learning: the
 * final loss (mean of the last 5 steps) is below 0.7 of the first step's on both backends.
 * M2_GPU_TEST_STEPS (at least 10) runs fewer steps: the CPU emulation of the kernels (test_cuda_emu_train) uses it
 * to stay within seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/layout.h"
#include "core/model.h"
#include "base/rng.h"
#include "gpu_util.h"

enum { POOL = 4, B = 4, T = 64, BURN = 8 };
#define LR 3e-3f
#define WD 0.1f

static m2_dims dims(void)
{
    m2_dims d = {.F = 6, .O = 2, .D = 32, .L = 2, .E = 2, .P = 16, .N = 16, .G = 1, .K = 4, .Q = 16};
    assert_int_equal(m2_dims_derive(&d), 0);
    return d;
}

/* A learnable causal signal: y0 = mean of feature 0 over the last 4 ticks, y1 = 0.8 * feature 1 five ticks ago
 * plus a little noise. */
static void make_batch(const m2_dims *d, int k, float *X, float *Y)
{
    uint64_t key = m2_rng_key(99, M2_RNG_TEST, (uint64_t)k, 0);
    for (int i = 0; i < B * T * d->F; i++) X[i] = (float)(2 * m2_rng_u01(key, (uint64_t)i) - 1);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *x = X + ((size_t)b * T) * d->F;
            float *y = Y + ((size_t)b * T + t) * d->O;
            double m = 0;
            for (int s = t - 3; s <= t; s++) m += s >= 0 ? x[(size_t)s * d->F] : 0.0;
            y[0] = (float)(m / 4);
            y[1] = (float)((t >= 5 ? 0.8 * x[(size_t)(t - 5) * d->F + 1] : 0.0) +
                           0.05 * (2 * m2_rng_u01(key, 1000000 + (uint64_t)(b * T + t)) - 1));
        }
}

typedef struct {
    const m2_ops *o;
    m2_model *model;
    float *params, *grads, *m, *v, *X[POOL], *Y[POOL];
    unsigned char *mask;
    float *host_grads;
} trainer;

static void *up(const m2_ops *o, const void *src, size_t bytes)
{
    void *p = o->alloc(o, bytes);
    assert_non_null(p);
    o->to_device(o, p, src, bytes);
    return p;
}

static void trainer_init(trainer *tr, const m2_ops *o, const m2_layout *lay, const float *params,
                         const unsigned char *mask, float *const *X, float *const *Y)
{
    const size_t n = lay->n_params, bytes = n * sizeof(float);
    tr->o = o;
    assert_int_equal(m2_model_create_with_ops(&tr->model, lay, B, T, o), 0);
    tr->params = up(o, params, bytes);
    tr->grads = o->alloc(o, bytes);
    tr->m = o->alloc(o, bytes);
    tr->v = o->alloc(o, bytes);
    assert_true(tr->grads && tr->m && tr->v);
    o->memset0(o, tr->m, bytes);
    o->memset0(o, tr->v, bytes);
    tr->mask = up(o, mask, n);
    for (int k = 0; k < POOL; k++) {
        tr->X[k] = up(o, X[k], (size_t)B * T * lay->d.F * sizeof(float));
        tr->Y[k] = up(o, Y[k], (size_t)B * T * lay->d.O * sizeof(float));
    }
    tr->host_grads = malloc(bytes);
    assert_non_null(tr->host_grads);
}

static void trainer_free(trainer *tr)
{
    const m2_ops *o = tr->o;
    m2_model_free(tr->model);
    void *bufs[] = {tr->params, tr->grads, tr->m, tr->v, tr->mask};
    for (int i = 0; i < 5; i++) o->free(o, bufs[i]);
    for (int k = 0; k < POOL; k++) {
        o->free(o, tr->X[k]);
        o->free(o, tr->Y[k]);
    }
    free(tr->host_grads);
}

/* One step: forward/backward, grads / count, AdamW. Returns the loss (sse / count). */
static double trainer_step(trainer *tr, size_t n, int step)
{
    const m2_ops *o = tr->o;
    double sse = 0;
    int64_t count = 0;
    o->memset0(o, tr->grads, n * sizeof(float));
    assert_int_equal(m2_model_forward_backward(tr->model, tr->params, tr->grads, tr->X[step % POOL], tr->Y[step % POOL],
                                               B, T, BURN, &sse, &count, NULL, NULL, NULL),
                     0);
    assert_true(count > 0);
    o->to_host(o, tr->host_grads, tr->grads, n * sizeof(float));
    for (size_t i = 0; i < n; i++) tr->host_grads[i] /= (float)count;
    o->to_device(o, tr->grads, tr->host_grads, n * sizeof(float));
    o->adamw(o, tr->params, tr->grads, tr->m, tr->v, tr->mask, n, LR, 0.9f, 0.95f, 1e-8f, WD, step + 1);
    return sse / (double)count;
}

/* 50, or M2_GPU_TEST_STEPS (at least 10: the learning check averages the last 5 steps). */
static int n_steps(void)
{
    const char *e = getenv("M2_GPU_TEST_STEPS");
    int s = e ? atoi(e) : 50;
    return s >= 10 ? s : 50;
}

static void train_compare(m2_cuda_gemm_precision prec, double tol)
{
    const int steps = n_steps();
    m2_dims d = dims();
    m2_layout lay;
    assert_int_equal(m2_layout_init(&lay, &d), 0);
    const size_t n = lay.n_params;
    float *params = malloc(n * sizeof(float));
    unsigned char *mask = malloc(n);
    assert_true(params && mask);
    m2_params_init(&lay, params, 7);
    m2_layout_decay_mask(&lay, mask);
    float *X[POOL], *Y[POOL];
    for (int k = 0; k < POOL; k++) {
        X[k] = malloc((size_t)B * T * d.F * sizeof(float));
        Y[k] = malloc((size_t)B * T * d.O * sizeof(float));
        assert_true(X[k] && Y[k]);
        make_batch(&d, k, X[k], Y[k]);
    }
    m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(prec);
    trainer cpu, gpu;
    trainer_init(&cpu, m2_ops_cpu(), &lay, params, mask, X, Y);
    trainer_init(&gpu, m2_gpu_ops(), &lay, params, mask, X, Y);

    printf(" %d steps, GEMMs %s, %zu parameters\n  step   cpu loss     gpu loss     rel diff\n", steps,
           prec == M2_CUDA_GEMM_BF16 ? "bf16" : "fp32", n);
    double first[2] = {0, 0}, last[2] = {0, 0}, worst = 0;
    for (int s = 0; s < steps; s++) {
        const double lc = trainer_step(&cpu, n, s), lg = trainer_step(&gpu, n, s);
        const double rel = fabs(lg - lc) / lc;
        if (!(rel <= worst)) worst = rel;
        if (s == 0) {
            first[0] = lc;
            first[1] = lg;
        }
        if (s >= steps - 5) {
            last[0] += lc / 5;
            last[1] += lg / 5;
        }
        if (s % 5 == 0 || s == steps - 1) printf("  %4d   %.6f     %.6f     %.2e\n", s + 1, lc, lg, rel);
        if (!(rel <= tol))
            fail_msg("step %d: gpu loss %.6g vs cpu %.6g (rel %.2e above %.1e)", s + 1, lg, lc, rel, tol);
    }
    printf("  worst step gap %.2e (tol %.1e); loss %.4f -> %.4f (cpu), %.4f -> %.4f (gpu)\n", worst, tol, first[0],
           last[0], first[1], last[1]);
    assert_true(last[0] < 0.7 * first[0]);
    assert_true(last[1] < 0.7 * first[1]);

    trainer_free(&cpu);
    trainer_free(&gpu);
    m2_ops_cuda_set_gemm_precision(old);
    for (int k = 0; k < POOL; k++) {
        free(X[k]);
        free(Y[k]);
    }
    free(params);
    free(mask);
    m2_layout_free(&lay);
}

static void test_train_fp32(void **state) { train_compare(M2_CUDA_GEMM_FP32, 1e-2); }
static void test_train_bf16(void **state) { train_compare(M2_CUDA_GEMM_BF16, 1e-1); }

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_fp32),
        cmocka_unit_test(test_train_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
