/* base/vmath.h, the math the CPU ops and the streaming engine share, against libm in double over the ranges they
 * feed it. Bounds: fp32 has a relative spacing of 1.19e-7 (FLT_EPSILON); 2 ulp is what a degree-6/9 polynomial with
 * Cody-Waite reduction reaches, and 4e-7 (about 3.4 ulp) leaves room for the softplus's log1p reconstruction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "base/vmath.h"

static void test_exp(void **state)
{
    double worst = 0;
    for (int i = 0; i <= 400000; i++) {
        float x = (float)(-87.0 + 175.0 * i / 400000.0);
        double want = exp((double)x), rel = fabs((double)m2_expf(x) - want) / want;
        worst = fmax(worst, rel);
    }
    printf("  exp: worst relative error %.3g (FLT_EPSILON %.3g)\n", worst, (double)FLT_EPSILON);
    assert_true(worst <= 2 * FLT_EPSILON);
    /* clamped outside the range: finite, positive, normal */
    assert_true(m2_expf(-1000.0f) > 0 && m2_expf(-1000.0f) < 1e-37f);
    assert_true(isfinite(m2_expf(1000.0f)) && m2_expf(1000.0f) > 1e38f);
    assert_true(isnan(m2_expf(NAN)));
}

static void test_log_softplus_sigmoid(void **state)
{
    double worst_log = 0, worst_sp = 0, worst_sig = 0, worst_silu = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -80.0f + 160.0f * (float)i / 200000.0f;
        double sp = x > 30 ? (double)x + exp(-(double)x) : log1p(exp((double)x));
        worst_sp = fmax(worst_sp, fabs(m2_softplusf(x) - sp) / sp);
        double sig = 1.0 / (1.0 + exp(-(double)x));
        worst_sig = fmax(worst_sig, fabs(m2_sigmoidf(x) - sig) / sig);
        if (fabs(x) > 1e-3) worst_silu = fmax(worst_silu, fabs(m2_siluf(x) - x * sig) / fabs(x * sig));
        float y = expf(-69.0f + 138.0f * (float)i / 200000.0f); /* 1e-30 .. 1e30 */
        worst_log = fmax(worst_log, fabs(m2_logf(y) - log((double)y)) / fmax(fabs(log((double)y)), 1e-3));
    }
    printf("  max rel err: log %.2e, softplus %.2e, sigmoid %.2e, silu %.2e\n", worst_log, worst_sp, worst_sig,
           worst_silu);
    assert_true(worst_log < 4e-7);
    assert_true(worst_sp < 4e-7);
    assert_true(worst_sig < 4e-7);
    assert_true(worst_silu < 4e-7);
    assert_true(fabsf(m2_logf(1.0f)) == 0.0f);
    /* above the threshold softplus is the identity, bit for bit, as the training ops' threshold rule */
    assert_true(m2_softplusf(100.0f) == 100.0f);
    assert_true(m2_softplusf((float)M2_SOFTPLUS_THRESHOLD + 1.0f) == (float)M2_SOFTPLUS_THRESHOLD + 1.0f);
    assert_true(m2_sigmoidf(-1000.0f) >= 0 && m2_sigmoidf(1000.0f) == 1.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exp), cmocka_unit_test(test_log_softplus_sigmoid)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
