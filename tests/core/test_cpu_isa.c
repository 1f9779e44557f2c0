/* Every instruction-set level of the CPU ops (base/cpu.h) that this machine supports against the portable
 * (scalar) level: a model's forward and backward, whose element-wise ops and chunked SSD are all dispatched,
 * on sizes that are not multiples of any vector width. Also the MAMBA2_CPU cap itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/cpu.h"
#include "core/ops.h"
#include "model_fixture.h"

/* D = 40, Di = 80 in 4 heads of P = 20, N = 12, two groups, chunks of 16: every loop has a vector tail. */
static m2_dims isa_dims(void)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    cfg.model.d_model = 40;
    cfg.model.n_layers = 2;
    cfg.model.expand = 2;
    cfg.model.headdim = 20;
    cfg.model.d_state = 12;
    cfg.model.ngroups = 2;
    cfg.model.d_conv = 4;
    cfg.model.chunk_size = 16;
    m2_dims d;
    assert_int_equal(m2_dims_init(&d, &cfg, 5, 3), 0);
    return d;
}

static double max_abs(const m2_real *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

static void test_levels_match_scalar(void **state)
{
    const m2_dims d = isa_dims();
    const int B = 3, T = 37; /* T: two full chunks of 16 and a tail */
    m2_fixture ref;
    m2_cpu_set_cap(M2_CPU_SCALAR);
    assert_string_equal(m2_ops_cpu_isa(), "scalar");
    m2_fixture_init(&ref, &d, B, T, 4, 11);
    double sse0 = m2_fixture_backward(&ref);
    const size_t n = ref.lay.n_params;
    const double gscale = max_abs(ref.grads, n);
    /* every level up to the CPU's, or up to MAMBA2_CPU where that caps it (then fewer or none to compare) */
    const int top = (int)m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
    for (int level = M2_CPU_AVX2; level <= top; level++) {
        assert_int_equal(m2_cpu_set_cap((m2_cpu_level)level), level);
        assert_string_equal(m2_ops_cpu_isa(), m2_cpu_name((m2_cpu_level)level));
        m2_fixture f;
        m2_fixture_init(&f, &d, B, T, 4, 11);
        double sse = m2_fixture_backward(&f), gerr = 0;
        for (size_t i = 0; i < n; i++) gerr = fmax(gerr, fabs((double)f.grads[i] - ref.grads[i]));
        printf("  %s vs scalar: sse %.9g vs %.9g, max |grad diff| %.2e of max |grad| %.3g\n",
               m2_cpu_name((m2_cpu_level)level), sse, sse0, gerr, gscale);
        /* The same formulas in another summation order (vector partial sums, FMA contraction) and libm-free
         * exp either way (base/vmath.h): fp32 rounding, ~1e-7 relative per op, grown through two layers, 37
         * recurrent steps and the backward's sums: measured 3e-7 of the gradients' scale; 1e-4 leaves room and still
         * catches any wrong index or dropped term (those move the gradients by O(1) of their scale). */
        assert_true(fabs(sse - sse0) <= 1e-4 * sse0);
        assert_true(gerr <= 1e-4 * gscale);
        m2_fixture_free(&f);
    }
    m2_fixture_free(&ref);
    m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
}

static void test_cap_names(void **state)
{
    m2_cpu_level l;
    assert_int_equal(m2_cpu_parse("avx2", &l), 0);
    assert_int_equal(l, M2_CPU_AVX2);
    assert_int_equal(m2_cpu_parse("sse9", &l), 2);
    /* a cap never raises the level above the CPU's, and lowers it to scalar */
    assert_true(m2_cpu_set_cap(M2_CPU_AVX512) <= m2_cpu_supported());
    assert_int_equal(m2_cpu_set_cap(M2_CPU_SCALAR), M2_CPU_SCALAR);
    m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
}

int main(void)
{
    printf("CPU supports %s; MAMBA2_CPU=%s\n", m2_cpu_name(m2_cpu_supported()),
           getenv("MAMBA2_CPU") ? getenv("MAMBA2_CPU") : "(unset)");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_match_scalar),
        cmocka_unit_test(test_cap_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
