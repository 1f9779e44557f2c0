/* Evaluation metrics against hand-computed small cases: MSE, zero MSE, R², Pearson IC, Spearman rank IC with
 * average ranks for ties, directional accuracy on nonzero targets, NaN-target skipping, column selection, and
 * the documented edge cases (no rows, constant prediction or target, non-finite prediction).
 * Every expected value below is worked out by hand in the comment next to it; the data are small exact binary
 * fractions, so the only error is double rounding over a handful of terms: 1e-12 is ample. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "base/error.h"
#include "run/metrics.h"

#define TOL 1e-12

/* cmocka 1.1.5 has no double comparison */
#define assert_double_equal(a, b, tol)                                                     \
    do {                                                                                   \
        double a_ = (a), b_ = (b);                                                         \
        if (!(fabs(a_ - b_) <= (tol))) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_); \
    } while (0)

static m2_metrics run(const float *p, const float *y, int64_t M, int ld, int col)
{
    m2_metrics m;
    assert_int_equal(m2_metrics_compute(p, y, M, ld, col, &m), M2_OK);
    return m;
}

static void test_basic_case(void **state)
{
    const float p[] = {1, 2, 3, 4}, y[] = {2, 1, 4, 3};
    m2_metrics m = run(p, y, 4, 1, 0);
    assert_int_equal(m.n, 4);
    assert_int_equal(m.n_dir, 4);
    assert_double_equal(m.mse, 1.0, TOL);      /* every error is ±1 */
    assert_double_equal(m.mse_zero, 7.5, TOL); /* (4+1+16+9)/4 */
    assert_double_equal(m.r2, 0.2, TOL);       /* ȳ = 2.5, SST = 5, SSE = 4: 1 − 4/5 */
    assert_double_equal(m.ic, 0.6, TOL);       /* centred p·y = 3, |p|² = |y|² = 5: 3/5 */
    assert_double_equal(m.rank_ic, 0.6, TOL);  /* the values are their own ranks */
    assert_double_equal(m.dir_acc, 1.0, TOL);  /* all positive */
}

static void test_average_ranks(void **state)
{
    const double v[] = {3, 1, 3, 3, 2};
    double r[5];
    assert_int_equal(m2_average_ranks(v, 5, r), M2_OK);
    const double want[] = {4, 1, 4, 4, 2}; /* the three 3s share ranks 3,4,5 → 4 */
    for (int i = 0; i < 5; i++) assert_double_equal(r[i], want[i], TOL);
}

static void test_rank_ic_with_ties(void **state)
{
    /* ranks p = [1.5,1.5,3,4], ranks y = [1,2.5,2.5,4]; centred: [-1,-1,.5,1.5] and [-1.5,0,0,1.5];
     * products sum 1.5 + 2.25 = 3.75, both squared norms 4.5: rank IC = 3.75/4.5 = 5/6 */
    const float p[] = {1, 1, 2, 3}, y[] = {1, 2, 2, 4};
    m2_metrics m = run(p, y, 4, 1, 0);
    assert_double_equal(m.rank_ic, 5.0 / 6.0, TOL);
    /* Pearson on the raw values differs: p̄ = 1.75, ȳ = 2.25; centred p = [-.75,-.75,.25,1.25],
     * y = [-1.25,-.25,-.25,1.75]: Σ = .9375+.1875−.0625+2.1875 = 3.25, |p|² = 2.75, |y|² = 4.75 */
    assert_double_equal(m.ic, 3.25 / sqrt(2.75 * 4.75), TOL);
}

static void test_nan_targets_skipped_and_column_selected(void **state)
{
    /* two columns (ld = 2): column 1 is the basic case with NaN-target rows mixed in, whose predictions are
     * garbage (even NaN) and must not matter; column 0 is unrelated */
    const float p[] = {9, 1, 9, NAN, 9, 2, 9, 3, 9, 1e30f, 9, 4};
    const float y[] = {0, 2, 0, NAN, 0, 1, 0, 4, 0, NAN, 0, 3};
    m2_metrics m = run(p, y, 6, 2, 1);
    assert_int_equal(m.n, 4);
    assert_double_equal(m.mse, 1.0, TOL);
    assert_double_equal(m.r2, 0.2, TOL);
    assert_double_equal(m.ic, 0.6, TOL);
    assert_double_equal(m.rank_ic, 0.6, TOL);
    /* column 0: targets all zero → no direction rows, zero variance → IC 0, R² NaN */
    m2_metrics z = run(p, y, 6, 2, 0);
    assert_int_equal(z.n, 6);
    assert_int_equal(z.n_dir, 0);
    assert_true(isnan(z.dir_acc));
    assert_true(isnan(z.r2));
    assert_double_equal(z.ic, 0.0, TOL);
    assert_double_equal(z.mse_zero, 0.0, TOL);
}

static void test_direction_on_nonzero_targets(void **state)
{
    /* y = 0 rows are left out; y=1,p=1 hit; y=−1,p=1 miss; y=2,p=0 miss (no call); y=−3,p=−0.5 hit → 2/4 */
    const float p[] = {5, 1, 1, -1, 0, -0.5f}, y[] = {0, 1, -1, 0, 2, -3};
    m2_metrics m = run(p, y, 6, 1, 0);
    assert_int_equal(m.n, 6);
    assert_int_equal(m.n_dir, 4);
    assert_double_equal(m.dir_acc, 0.5, TOL);
}

static void test_zero_variance_and_empty(void **state)
{
    const float c[] = {0.5f, 0.5f, 0.5f}, y[] = {1, -2, 4};
    m2_metrics m = run(c, y, 3, 1, 0);
    assert_double_equal(m.ic, 0.0, TOL); /* constant prediction: defined as 0 */
    assert_double_equal(m.rank_ic, 0.0, TOL);
    /* ȳ = 1, SST = 0+9+9 = 18, SSE = .25+6.25+12.25 = 18.75: R² = 1 − 18.75/18 */
    assert_double_equal(m.r2, 1.0 - 18.75 / 18.0, TOL);
    const float yc[] = {2, 2, 2};
    m2_metrics k = run(y, yc, 3, 1, 0); /* constant target */
    assert_true(isnan(k.r2));
    assert_double_equal(k.ic, 0.0, TOL);
    assert_double_equal(k.rank_ic, 0.0, TOL);
    const float none[] = {NAN, NAN, NAN};
    m2_metrics e = run(y, none, 3, 1, 0);
    assert_int_equal(e.n, 0);
    assert_true(isnan(e.mse) && isnan(e.mse_zero) && isnan(e.r2) && isnan(e.ic) && isnan(e.rank_ic) &&
                isnan(e.dir_acc));
}

static void test_nonfinite_prediction_poisons(void **state)
{
    const float p[] = {1, NAN, 3}, y[] = {1, 2, 3};
    m2_metrics m = run(p, y, 3, 1, 0);
    assert_int_equal(m.n, 3);
    assert_double_equal(m.mse_zero, 14.0 / 3.0, TOL); /* does not depend on the prediction */
    assert_true(isnan(m.mse) && isnan(m.r2) && isnan(m.ic) && isnan(m.rank_ic) && isnan(m.dir_acc));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_case),
        cmocka_unit_test(test_average_ranks),
        cmocka_unit_test(test_rank_ic_with_ties),
        cmocka_unit_test(test_nan_targets_skipped_and_column_selected),
        cmocka_unit_test(test_direction_on_nonzero_targets),
        cmocka_unit_test(test_zero_variance_and_empty),
        cmocka_unit_test(test_nonfinite_prediction_poisons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
