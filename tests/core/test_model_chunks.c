/* The chunked model equals the same model with Q = 1 (every tick its own chunk: no intra-chunk products,
 * the SSD degenerates to the recurrence) and with Q = 16 > T (one partial chunk), predictions and every
 * gradient, in fp64. Only the order of floating-point sums differs, so the bound is fp64 rounding:
 * |a - b| <= 1e-10 * (the array's scale), ~1e5 x eps, while a wrong chunk-boundary term is O(1) relative. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_fixture.h"

#define TOL 1e-10

static void close_arrays(const char *what, const m2_real *a, const m2_real *b, size_t n)
{
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
    if (!(worst <= TOL * scale)) fail_msg("%s: differs by %.3g at scale %.3g", what, worst, scale);
}

static void compare_chunk_sizes(int G, int Q)
{
    m2_fixture a, b;
    m2_dims da = m2_fixture_dims(G, 4), db = m2_fixture_dims(G, Q);
    m2_fixture_init(&a, &da, 2, 11, 1, 5);
    m2_fixture_init(&b, &db, 2, 11, 1, 5);
    assert_memory_equal(a.params, b.params, a.lay.n_params * sizeof *a.params); /* Q is not in the layout */
    double sa = m2_fixture_backward(&a), sb = m2_fixture_backward(&b);
    assert_true(fabs(sa - sb) <= TOL * sa);
    close_arrays("pred", a.pred, b.pred, (size_t)a.B * a.T * da.O);
    for (int i = 0; i < a.lay.n_tensors; i++) {
        const m2_tensor *t = &a.lay.tensors[i];
        close_arrays(t->name, a.grads + t->offset, b.grads + t->offset, t->numel);
    }
    m2_fixture_free(&a);
    m2_fixture_free(&b);
}

static void test_q1_one_group(void **state) { compare_chunk_sizes(1, 1); }
static void test_q1_two_groups(void **state) { compare_chunk_sizes(2, 1); }
static void test_one_partial_chunk(void **state) { compare_chunk_sizes(2, 16); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q1_one_group),
        cmocka_unit_test(test_q1_two_groups),
        cmocka_unit_test(test_one_partial_chunk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
