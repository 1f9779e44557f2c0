/* Ridge baseline: the Cholesky solver on a hand-solved system and a non-PD one, recovery of a planted linear
 * relation (with NaN targets, a constant feature and an intercept), ~0 out-of-sample IC on pure noise, and a
 * clear error for a horizon without any finite target. Data are drawn from the project's counter RNG with
 * fixed keys, so the figures are deterministic; the bounds are still set from the sampling theory so that
 * they would hold for any seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "run/metrics.h"
#include "run/ridge.h"
#include "base/rng.h"

#define assert_close(a, b, tol)                                                                                \
    do {                                                                                                       \
        double a_ = (a), b_ = (b);                                                                             \
        if (!(fabs(a_ - b_) <= (tol))) fail_msg("%s = %.10g, expected %.10g ± %g", #a, a_, b_, (double)(tol)); \
    } while (0)

static double gauss(m2_rng *r)
{
    double u = m2_rng_next_u01(r), v = m2_rng_next_u01(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static void test_cholesky(void **state)
{
    /* [[4,2],[2,3]] w = [2,1]: inverse (1/8)[[3,-2],[-2,4]] gives w = [0.5, 0] */
    double A[] = {4, 2, 2, 3}, b[] = {2, 1};
    assert_int_equal(m2_cholesky_solve(A, b, 2), M2_OK);
    assert_close(b[0], 0.5, 1e-15);
    assert_close(b[1], 0.0, 1e-15);
    double N[] = {1, 2, 2, 1}, c[] = {1, 1}; /* eigenvalues 3 and −1 */
    assert_int_equal(m2_cholesky_solve(N, c, 2), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "not positive definite"));
}

enum { F = 5, O = 2, NR = 4000 };

/* X ~ N(0,1) except feature 3, which is the constant 0.7 (collinear with the intercept: only λ makes the
 * system definite); y0 = 2 x0 − x2 + 0.5 + 0.1 ε, y1 = −x4 + 0.1 ε with every 7th target NaN. */
static void planted(float *X, float *y, uint64_t seed)
{
    m2_rng r = {m2_rng_key(seed, M2_RNG_TEST, 0, 0), 0};
    for (int i = 0; i < NR; i++) {
        float *x = X + i * F;
        for (int j = 0; j < F; j++) x[j] = (float)gauss(&r);
        x[3] = 0.7f;
        y[i * O + 0] = (float)(2 * x[0] - x[2] + 0.5 + 0.1 * gauss(&r));
        y[i * O + 1] = i % 7 == 3 ? NAN : (float)(-x[4] + 0.1 * gauss(&r));
    }
}

static void test_recovers_planted_relation(void **state)
{
    float *X = malloc(sizeof(float) * NR * F), *y = malloc(sizeof(float) * NR * O);
    planted(X, y, 11);
    m2_ridge r;
    assert_int_equal(m2_ridge_fit(&r, X, y, NR, F, O, M2_RIDGE_LAMBDA), M2_OK);
    assert_int_equal(r.n_fit[0], NR);
    assert_int_equal(r.n_fit[1], NR - (NR + 3) / 7); /* rows 3, 10, 17, ... are NaN */
    /* Standard error of each weight is σ/√n = 0.1/√4000 ≈ 0.0016 and the ridge shrinkage is λ·|w| ≤ 0.002:
     * 0.02 is about ten standard errors plus the bias, and a wrong fit misses by ~1. The constant feature's
     * weight and the intercept trade off through λ only: check the sum that predictions see instead. */
    const double *w0 = r.w, *w1 = r.w + (F + 1);
    double want0[] = {2, 0, -1, 0, 0}, want1[] = {0, 0, 0, 0, -1};
    for (int j = 0; j < F; j++) {
        if (j == 3) continue;
        assert_close(w0[j], want0[j], 0.02);
        assert_close(w1[j], want1[j], 0.02);
    }
    assert_close(w0[F] + 0.7 * w0[3], 0.5, 0.02);
    assert_close(w1[F] + 0.7 * w1[3], 0.0, 0.02);
    /* out of sample, the fit explains almost everything: noise variance 0.01 against signal variance 5 */
    planted(X, y, 12);
    float *p = malloc(sizeof(float) * NR * O);
    m2_ridge_predict(&r, X, NR, p);
    m2_metrics m;
    assert_int_equal(m2_metrics_compute(p, y, NR, O, 0, &m), M2_OK);
    assert_true(m.r2 > 0.99);
    assert_close(m.mse, 0.01, 0.002); /* the noise variance; relative sd of a 4000-sample variance is √(2/n) ≈ 2% */
    m2_ridge_free(&r);
    free(X);
    free(y);
    free(p);
}

static void test_noise_gives_zero_ic(void **state)
{
    float *X = malloc(sizeof(float) * NR * F), *y = malloc(sizeof(float) * NR * O), *p = malloc(sizeof(float) * NR * O);
    m2_rng r = {m2_rng_key(5, M2_RNG_TEST, 1, 0), 0};
    for (int i = 0; i < NR * F; i++) X[i] = (float)gauss(&r);
    for (int i = 0; i < NR * O; i++) y[i] = (float)gauss(&r);
    m2_ridge fit;
    assert_int_equal(m2_ridge_fit(&fit, X, y, NR, F, O, M2_RIDGE_LAMBDA), M2_OK);
    /* fresh test rows: under no relation the IC is ~N(0, 1/√n) = ±0.016; 5 standard deviations is 0.08 */
    for (int i = 0; i < NR * F; i++) X[i] = (float)gauss(&r);
    for (int i = 0; i < NR * O; i++) y[i] = (float)gauss(&r);
    m2_ridge_predict(&fit, X, NR, p);
    for (int o = 0; o < O; o++) {
        m2_metrics m;
        assert_int_equal(m2_metrics_compute(p, y, NR, O, o, &m), M2_OK);
        assert_close(m.ic, 0.0, 0.08);
        assert_close(m.rank_ic, 0.0, 0.08);
        assert_true(m.r2 < 0.01); /* an overfit model would lose, never gain, out of sample */
        for (int j = 0; j <= F; j++) assert_close(fit.w[o * (F + 1) + j], 0.0, 0.08); /* 5 SE of 1/√n */
    }
    m2_ridge_free(&fit);
    free(X);
    free(y);
    free(p);
}

static void test_horizon_without_targets(void **state)
{
    float X[3 * F] = {0}, y[3 * O] = {1, NAN, 2, NAN, 3, NAN};
    m2_ridge r;
    assert_int_equal(m2_ridge_fit(&r, X, y, 3, F, O, M2_RIDGE_LAMBDA), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "horizon 1"));
    assert_null(r.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cholesky),
        cmocka_unit_test(test_recovers_planted_relation),
        cmocka_unit_test(test_noise_gives_zero_ic),
        cmocka_unit_test(test_horizon_without_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
