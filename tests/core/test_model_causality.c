/* Causality (docs/MODEL.md §2): changing tick t's features changes no prediction before t, exactly (bitwise),
 * and changes nothing in the other sequences of the micro-batch. In fp32, the product's precision, over
 * several chunks (T = 23, Q = 4) and at chunk boundaries. Exactness holds because every op either works per
 * token or, for time mixing (conv, SSD), masks future positions before multiplying; a leak of any size
 * (even a rounding-level one through a chunk-level sum) fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "model_fixture.h"

static void check_change_at(m2_fixture *f, const m2_real *pred0, int b, int t)
{
    const int F = f->lay.d.F, O = f->lay.d.O;
    const size_t ny = (size_t)f->B * f->T * O;
    m2_real *keep = malloc((size_t)F * sizeof *keep), *pred = malloc(ny * sizeof *pred);
    assert_non_null(keep);
    assert_non_null(pred);
    m2_real *x = f->X + ((size_t)b * f->T + t) * F;
    memcpy(keep, x, (size_t)F * sizeof *keep);
    for (int j = 0; j < F; j++) x[j] += (m2_real)(0.75 + 0.5 * j);
    assert_int_equal(m2_model_forward(f->model, f->params, f->X, f->B, f->T, pred), 0);
    memcpy(x, keep, (size_t)F * sizeof *keep);

    for (int bb = 0; bb < f->B; bb++) {
        const size_t row0 = (size_t)bb * f->T * O;
        if (bb != b) {
            assert_memory_equal(pred + row0, pred0 + row0, (size_t)f->T * O * sizeof *pred);
            continue;
        }
        if (t > 0) assert_memory_equal(pred + row0, pred0 + row0, (size_t)t * O * sizeof *pred);
        /* and the change does reach tick t (the test would be vacuous otherwise) */
        assert_memory_not_equal(pred + row0 + (size_t)t * O, pred0 + row0 + (size_t)t * O, (size_t)O * sizeof *pred);
    }
    free(keep);
    free(pred);
}

static void test_no_prediction_before_t_changes(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(2, 4);
    m2_fixture_init(&f, &d, 2, 23, 0, 7);
    const size_t ny = (size_t)f.B * f.T * d.O;
    m2_real *pred0 = malloc(ny * sizeof *pred0);
    assert_non_null(pred0);
    assert_int_equal(m2_model_forward(f.model, f.params, f.X, f.B, f.T, pred0), 0);
    const int ticks[] = {0, 1, 3, 4, 5, 11, 12, 21, 22};
    for (size_t i = 0; i < sizeof ticks / sizeof *ticks; i++) {
        check_change_at(&f, pred0, 0, ticks[i]);
        check_change_at(&f, pred0, 1, ticks[i]);
    }
    free(pred0);
    m2_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_prediction_before_t_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
