/* IC standard errors against simulations with a known answer: an AR(1) predictor and overlapping H-row forward
 * sums of one-row returns, many independent replications. The spread of the IC across replications is the true
 * standard error; the mean of the reported standard errors must match it, with and without a planted signal, and
 * the paired model-minus-baseline difference likewise. Also: the t-test's size under the null, and the
 * long-run variance of a known MA process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/rng.h"
#include "run/significance.h"

enum { N = 4000, H = 20, REPS = 400 };

static double gauss(m2_rng *r)
{
    double u1 = m2_rng_next_u01(r), u2 = m2_rng_next_u01(r);
    return sqrt(-2.0 * log(u1 > 1e-300 ? u1 : 1e-300)) * cos(2.0 * M_PI * u2);
}

/* One replication: x AR(1) with phi 0.95 (unit variance); r[t+1] = beta x[t] + e; y[t] = r[t+1] + ... + r[t+H];
 * a = x, b = x + noise (a weaker baseline, correlated with a). */
static void simulate(uint64_t rep, double beta, float *a, float *b, float *y)
{
    m2_rng g = {m2_rng_key(13, 1, rep, 0), 0};
    static double x[N + H], r[N + H + 1];
    double phi = 0.95, s = sqrt(1 - phi * phi);
    x[0] = gauss(&g);
    for (int t = 1; t < N + H; t++) x[t] = phi * x[t - 1] + s * gauss(&g);
    r[0] = 0;
    for (int t = 0; t < N + H; t++) r[t + 1] = beta * x[t] + gauss(&g);
    for (int t = 0; t < N; t++) {
        double sum = 0;
        for (int k = 1; k <= H; k++) sum += r[t + k];
        y[t] = (float)sum;
        a[t] = (float)x[t];
        b[t] = (float)(x[t] + 1.5 * gauss(&g));
    }
}

typedef struct {
    double sd_ic, mean_se, sd_diff, mean_diff_se, reject;
} mc_result;

static mc_result monte_carlo(double beta)
{
    static float a[N], b[N], y[N];
    double s1 = 0, s2 = 0, d1 = 0, d2 = 0, se = 0, dse = 0;
    int reject = 0;
    for (int rep = 0; rep < REPS; rep++) {
        simulate((uint64_t)rep + (beta > 0 ? 100000 : 0), beta, a, b, y);
        m2_ic_pair p;
        assert_int_equal(m2_ic_significance(a, b, y, N, 1, 0, H, &p), M2_OK);
        assert_int_equal(p.a.n, N);
        s1 += p.a.ic;
        s2 += p.a.ic * p.a.ic;
        d1 += p.diff;
        d2 += p.diff * p.diff;
        se += p.a.se;
        dse += p.diff_se;
        reject += fabs(p.a.t) > 1.96;
    }
    mc_result m;
    m.sd_ic = sqrt((s2 - s1 * s1 / REPS) / (REPS - 1));
    m.sd_diff = sqrt((d2 - d1 * d1 / REPS) / (REPS - 1));
    m.mean_se = se / REPS;
    m.mean_diff_se = dse / REPS;
    m.reject = (double)reject / REPS;
    print_message("beta %.2f: sd(IC) %.4f, mean SE %.4f (ratio %.3f); sd(diff) %.4f, mean SE %.4f (ratio %.3f); "
                  "|t| > 1.96 in %.3f\n",
                  beta, m.sd_ic, m.mean_se, m.mean_se / m.sd_ic, m.sd_diff, m.mean_diff_se, m.mean_diff_se / m.sd_diff,
                  m.reject);
    return m;
}

/* With 400 replications the standard deviation across them is known to about 1/sqrt(2*400) = 3.5% (one sigma);
 * the HAC estimate has a small-sample bias of a few percent for n/H = 200 effective samples. +-15% is ~4 sigma
 * of the Monte Carlo noise; a kernel that ignored the overlap would be off by a factor near sqrt(H) = 4.5. */
static void test_null_standard_error(void **state)
{
    (void)state;
    mc_result m = monte_carlo(0.0);
    assert_true(m.mean_se > 0.85 * m.sd_ic && m.mean_se < 1.15 * m.sd_ic);
    assert_true(m.mean_diff_se > 0.85 * m.sd_diff && m.mean_diff_se < 1.15 * m.sd_diff);
    /* size of a nominal 5% test: binomial sd over 400 draws is 1.1%; 2%..9% allows the small-sample bias */
    assert_true(m.reject > 0.02 && m.reject < 0.09);
}

static void test_signal_standard_error(void **state)
{
    (void)state;
    mc_result m = monte_carlo(0.05);
    assert_true(m.mean_se > 0.85 * m.sd_ic && m.mean_se < 1.15 * m.sd_ic);
    assert_true(m.mean_diff_se > 0.85 * m.sd_diff && m.mean_diff_se < 1.15 * m.sd_diff);
    assert_true(m.reject > 0.5); /* the planted signal (IC ~ 0.2) is found */
}

/* MA(q) x_t = e_t + e_{t-1} + ... + e_{t-q}: long-run variance (q+1)^2 for unit e; with horizon = q + 1 the
 * truncated kernel covers every nonzero lag. 200000 draws: relative sampling error ~ sqrt(2(2q+1)/n) ~ 2%. */
static void test_lrv_of_ma(void **state)
{
    (void)state;
    enum { n = 200000, q = 4 };
    double *e = malloc(sizeof(double) * (n + q)), *x = malloc(sizeof(double) * n);
    assert_non_null(e);
    assert_non_null(x);
    m2_rng g = {m2_rng_key(13, 2, 0, 0), 0};
    for (int t = 0; t < n + q; t++) e[t] = gauss(&g);
    for (int t = 0; t < n; t++) {
        x[t] = 0;
        for (int k = 0; k <= q; k++) x[t] += e[t + k];
    }
    double v = m2_hac_lrv(x, n, q + 1);
    assert_true(fabs(v / ((q + 1) * (q + 1)) - 1) < 0.1);
    free(e);
    free(x);
}

static void test_edge_cases(void **state)
{
    (void)state;
    const float a[] = {1, 2, NAN, 4}, y[] = {1, NAN, 3, 2}, c[] = {5, 5, 5, 5};
    m2_ic_pair p;
    assert_int_equal(m2_ic_significance(a, NULL, y, 4, 1, 0, 1, &p), M2_OK);
    assert_int_equal(p.a.n, 2); /* rows 1 and 2 have a non-finite value: 2 rows left, fewer than 3 */
    assert_true(isnan(p.a.ic) && isnan(p.a.se) && isnan(p.diff));
    assert_int_equal(m2_ic_significance(c, NULL, c, 4, 1, 0, 1, &p), M2_OK);
    assert_true(p.a.ic == 0 && !(fabs(p.a.t) > 0)); /* constant columns carry no information */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_standard_error),
        cmocka_unit_test(test_signal_standard_error),
        cmocka_unit_test(test_lrv_of_ma),
        cmocka_unit_test(test_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
