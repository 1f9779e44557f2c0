/* Stability (docs/MODEL.md §3's numerical rules): forward and backward over a long window (T = 4096, 64 chunks)
 * with extreme dt give finite predictions, loss and gradients, in fp32 (where overflow would show).
 * dt_bias = +10: dt ~ 10, dt*A down to -160, decays underflow to 0 (a decay computed as exp of a positive
 * difference of cumulative sums would overflow). dt_bias = -20: dt ~ 2e-9, decays ~1 over the whole
 * window, states accumulate over 4096 ticks. Mixed: both kinds of heads in one layer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "model_fixture.h"

enum { T_LONG = 4096 };

static m2_dims long_dims(void)
{
    m2_dims d = {.F = 4, .O = 2, .D = 16, .L = 2, .E = 2, .P = 8, .N = 16, .G = 1, .K = 4, .Q = 64};
    assert_int_equal(m2_dims_derive(&d), 0);
    return d;
}

static void all_finite(const char *what, const m2_real *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite((double)v[i])) fail_msg("%s[%zu] = %g", what, i, (double)v[i]);
}

/* bias_of(h) gives each head's dt_bias. */
static void run_with_dt_bias(double (*bias_of)(int h))
{
    m2_fixture f;
    m2_dims d = long_dims();
    m2_fixture_init(&f, &d, 1, T_LONG, 16, 99);
    /* inputs with a trend and large swings, so states would grow if decays were wrong */
    for (int t = 0; t < f.T; t++)
        for (int j = 0; j < d.F; j++) f.X[(size_t)t * d.F + j] += (m2_real)(3.0 * sin(0.01 * t * (j + 1)));
    for (int l = 0; l < d.L; l++)
        for (int h = 0; h < d.H; h++)
            f.params[m2_layer_base(&f.lay, l) + f.lay.layer.dt_bias + h] = (m2_real)bias_of(h);
    double sse = m2_fixture_backward(&f);
    assert_true(isfinite(sse));
    all_finite("pred", f.pred, (size_t)f.T * d.O);
    double gsum = 0;
    for (int i = 0; i < f.lay.n_tensors; i++) {
        const m2_tensor *t = &f.lay.tensors[i];
        all_finite(t->name, f.grads + t->offset, t->numel);
        for (size_t k = 0; k < t->numel; k++) gsum += fabs((double)f.grads[t->offset + k]);
    }
    assert_true(gsum > 0);
    printf("  sse %.6g, sum |grad| %.6g\n", sse, gsum);
    m2_fixture_free(&f);
}

static double large(int h) { return 10.0; }
static double small(int h) { return -20.0; }
static double mixed(int h) { return h % 2 ? 10.0 : -20.0; }

static void test_large_dt(void **state) { run_with_dt_bias(large); }
static void test_small_dt(void **state) { run_with_dt_bias(small); }
static void test_mixed_dt(void **state) { run_with_dt_bias(mixed); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_dt),
        cmocka_unit_test(test_small_dt),
        cmocka_unit_test(test_mixed_dt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
