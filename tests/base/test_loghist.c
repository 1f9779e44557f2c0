/* The bounded histogram's quantiles against the exact nearest-rank quantiles of the same values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "base/loghist.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double exact(const double *sorted, int64_t n, double q)
{
    int64_t r = (int64_t)(q * (double)n + 0.5);
    if (r > 0) r--;
    return sorted[r < n ? r : n - 1];
}

/* Heavy-tailed "latencies" from 50 ns to ~1 ms: every quantile within the bucket's half width (1/512 of the value,
 * 0.2%; 0.4% allows for a value at a bucket edge), min/max/mean exact. */
static void test_quantiles_match_exact(void **state)
{
    (void)state;
    enum { N = 200001 };
    double *v = malloc(sizeof *v * N);
    assert_non_null(v);
    static m2_loghist h;
    m2_loghist_init(&h);
    uint64_t x = 7;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(x >> 11) / 9007199254740992.0;
        v[i] = 50 + 1000 / pow(1 - u * 0.9999, 1.2);
        m2_loghist_add(&h, v[i]);
        sum += v[i];
    }
    qsort(v, N, sizeof *v, cmp);
    const double qs[] = {0, 0.01, 0.5, 0.9, 0.99, 0.999, 0.9999, 1};
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        double e = exact(v, N, qs[k]), a = m2_loghist_quantile(&h, qs[k]);
        assert_true(fabs(a - e) <= 0.004 * e);
    }
    assert_true(m2_loghist_quantile(&h, 1) == v[N - 1] && h.max == v[N - 1] && h.min == v[0]);
    assert_true(h.n == N && fabs(h.sum - sum) <= 1e-9 * sum);
    free(v);
}

/* Out-of-range values land in the end buckets and are reported clamped to what was seen. */
static void test_edges(void **state)
{
    (void)state;
    static m2_loghist h;
    m2_loghist_init(&h);
    assert_true(m2_loghist_quantile(&h, 0.5) == 0);
    m2_loghist_add(&h, 0.25);
    m2_loghist_add(&h, 1e15);
    assert_true(m2_loghist_quantile(&h, 0) == 0.25);
    assert_true(m2_loghist_quantile(&h, 1) == 1e15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_quantiles_match_exact), cmocka_unit_test(test_edges)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
