/* The CPU training ops run with subnormals flushed (core/ops.h, m2_ops_cpu_set_threads; ops_cpu.c says why):
 * FTZ and DAZ set on the calling thread and on every OpenMP thread that runs the ops, and what that means for a
 * value: a subnormal operand reads as zero and a subnormal result is written as zero. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <omp.h>
#include <xmmintrin.h>

#include "core/ops.h"
#include "model_fixture.h"

enum { FTZ_DAZ = 0x8040 };

/* Opaque to the optimiser, so the products below happen at run time under the thread's MXCSR. */
static volatile float g_tiny = FLT_MIN / 4, g_half = 0.5f;

static void test_every_ops_thread_flushes(void **state)
{
    (void)state;
    _mm_setcsr(_mm_getcsr() & ~(unsigned)FTZ_DAZ); /* as a program starts */
    const int threads = 3;                         /* more than CI's cores: the team is not the machine's */
    m2_ops_cpu_set_threads(threads);
    m2_fixture f;
    const m2_dims d = m2_fixture_dims(1, 8);
    m2_fixture_init(&f, &d, 2, 16, 2, 7);
    (void)m2_fixture_backward(&f); /* the ops' own parallel regions */
    int flushing = 0, team = 0;
#pragma omp parallel reduction(+ : flushing, team)
    {
        team += 1;
        flushing += (_mm_getcsr() & FTZ_DAZ) == FTZ_DAZ;
    }
    assert_int_equal(team, threads);
    assert_int_equal(flushing, threads);
    assert_int_equal(_mm_getcsr() & FTZ_DAZ, FTZ_DAZ);
    /* DAZ: a subnormal operand is zero; FTZ: a result below FLT_MIN is zero (without them: FLT_MIN/4 and FLT_MIN/8) */
    assert_true(g_tiny * 1.0f == 0.0f);
    assert_true(FLT_MIN * g_half * g_half == 0.0f);
    m2_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_ops_thread_flushes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
