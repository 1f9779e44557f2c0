/* OpenBLAS's kernels raised to the level in use (core/blas_core.h): the choice from a core name and a level, and,
 * end to end, that after m2_blas_core_ensure this process's OpenBLAS runs kernels at the level its own loops run
 * at. On a CPU that OpenBLAS knows the second test finds nothing to do; on one it does not (an Intel Emerald
 * Rapids with Debian's 0.3.21 picks Prescott) it is the re-exec that makes it pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "core/blas_core.h"

static void test_wanted_raises_only_below_the_level(void **state)
{
    (void)state;
    /* the fallback of a CPU OpenBLAS does not know, and its other pre-AVX2 cores */
    assert_string_equal(m2_blas_core_wanted("Prescott", M2_CPU_AVX512), "SkylakeX");
    assert_string_equal(m2_blas_core_wanted("Prescott", M2_CPU_AVX2), "Haswell");
    assert_string_equal(m2_blas_core_wanted("Sandybridge", M2_CPU_AVX2), "Haswell");
    assert_string_equal(m2_blas_core_wanted("Unknown", M2_CPU_AVX512), "SkylakeX");
    /* AVX2 kernels on an AVX-512 CPU */
    assert_string_equal(m2_blas_core_wanted("Haswell", M2_CPU_AVX512), "SkylakeX");
    assert_string_equal(m2_blas_core_wanted("Zen", M2_CPU_AVX512), "SkylakeX");
    /* at or above the level: left alone, never lowered (MAMBA2_CPU caps this project's loops, not OpenBLAS) */
    assert_null(m2_blas_core_wanted("Haswell", M2_CPU_AVX2));
    assert_null(m2_blas_core_wanted("SkylakeX", M2_CPU_AVX512));
    assert_null(m2_blas_core_wanted("Cooperlake", M2_CPU_AVX2));
    assert_null(m2_blas_core_wanted("SapphireRapids", M2_CPU_AVX512));
    /* a scalar level asks for nothing; a name this table does not know is OpenBLAS's business */
    assert_null(m2_blas_core_wanted("Prescott", M2_CPU_SCALAR));
    assert_null(m2_blas_core_wanted("Zen5", M2_CPU_AVX512));
    assert_null(m2_blas_core_wanted(NULL, M2_CPU_AVX512));
}

/* Which cores the chunked SSD hands beta 0 to (core/ssd_chunk.h, m2_ssd_gemm): the AVX-512 ones only. */
static void test_beta0_fast_only_on_avx512_cores(void **state)
{
    (void)state;
    assert_int_equal(m2_blas_core_beta0_fast("SkylakeX"), 1);
    assert_int_equal(m2_blas_core_beta0_fast("Cooperlake"), 1);
    assert_int_equal(m2_blas_core_beta0_fast("SapphireRapids"), 1);
    assert_int_equal(m2_blas_core_beta0_fast("Haswell"), 0);
    assert_int_equal(m2_blas_core_beta0_fast("Zen"), 0);
    assert_int_equal(m2_blas_core_beta0_fast("Prescott"), 0);
    assert_int_equal(m2_blas_core_beta0_fast("Zen5"), 0); /* unknown to the table: the safe way, C zeroed first */
    assert_int_equal(m2_blas_core_beta0_fast(NULL), 0);
    /* the process's own answer is the one for its core */
    assert_int_equal(m2_blas_beta0_fast(), m2_blas_core_beta0_fast(openblas_get_corename()));
}

static void test_ensure_leaves_no_core_below_the_level(void **state)
{
    (void)state;
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *detected = getenv("MAMBA2_OPENBLAS_DETECTED");
    if (user && *user && !(detected && *detected)) skip(); /* the user's own choice is not ours to judge */
    const char *core = openblas_get_corename();
    assert_null(m2_blas_core_wanted(core, m2_cpu_active()));
    char line[160];
    m2_blas_core_describe(line, sizeof line);
    assert_non_null(strstr(line, core));
    if (detected && *detected) { /* this run is the re-exec: the line says so */
        assert_non_null(strstr(line, "chosen by mamba2"));
        assert_non_null(strstr(line, detected));
    }
    /* the raised kernels compute: a 3x2 by 2x2 product */
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 0, 0, 2};
    float c[6] = {0};
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 3, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2);
    const float want[6] = {1, 4, 3, 8, 5, 12};
    for (int i = 0; i < 6; i++) assert_float_equal(c[i], want[i], 0); /* small integers: exact in fp32 */
}

int main(int argc, char **argv)
{
    (void)argc;
    m2_blas_core_ensure(argv); /* the call under test: it may run this test again, as it does the programs */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wanted_raises_only_below_the_level),
        cmocka_unit_test(test_beta0_fast_only_on_avx512_cores),
        cmocka_unit_test(test_ensure_leaves_no_core_below_the_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
