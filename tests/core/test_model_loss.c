/* The loss of docs/MODEL.md §4: positions before burn_in and NaN targets contribute nothing: their prediction
 * gradient is exactly 0, and changing such targets (to anything, NaN and infinities included) changes
 * neither the sum, nor the count, nor any parameter gradient (bitwise). fp32 (the product). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "model_fixture.h"

/* The op itself: dpred is exactly 0 where masked, 2 (pred - y) elsewhere; sse and count by hand. */
static void test_mse_op_masks(void **state)
{
    const m2_ops *ops = m2_ops_cpu();
    enum { B = 2, T = 5, O = 3, BURN = 2 };
    m2_real pred[B * T * O], Y[B * T * O], dpred[B * T * O];
    for (int i = 0; i < B * T * O; i++) {
        pred[i] = (m2_real)(0.1 * i - 1);
        Y[i] = (m2_real)(0.05 * i * i - 0.5);
    }
    Y[(0 * T + 3) * O + 1] = NAN;
    Y[(1 * T + 4) * O + 2] = NAN;
    Y[(1 * T + 0) * O + 0] = INFINITY; /* before burn-in anyway */
    double sse = -1;
    int64_t count = -1;
    ops->mse_loss(ops, pred, Y, B, T, O, BURN, dpred, &sse, &count);
    double want = 0;
    int64_t n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < O; j++) {
                int i = (b * T + t) * O + j;
                if (t < BURN || isnan(Y[i])) {
                    assert_true(dpred[i] == 0);
                    continue;
                }
                m2_real e = pred[i] - Y[i];
                assert_true(dpred[i] == 2 * e);
                want += (double)e * e;
                n++;
            }
    assert_int_equal(count, n);
    assert_int_equal(count, B * (T - BURN) * O - 2);
    assert_true(fabs(sse - want) <= 1e-12 * want);
}

typedef struct {
    double sse;
    int64_t count;
    m2_real *grads;
} run_result;

static run_result run(m2_fixture *f)
{
    run_result r = {0};
    r.grads = calloc(f->lay.n_params, sizeof *r.grads);
    assert_non_null(r.grads);
    assert_int_equal(m2_model_forward_backward(f->model, f->params, r.grads, f->X, f->Y, f->B, f->T, f->burn_in, &r.sse,
                                               &r.count, f->pred, NULL, NULL),
                     0);
    return r;
}

static void test_masked_targets_change_nothing(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(1, 4);
    m2_fixture_init(&f, &d, 2, 13, 5, 11);
    const int O = d.O;
    const size_t nat = ((size_t)1 * f.T + 9) * O + 1; /* a NaN target after burn-in */
    f.Y[nat] = NAN;
    run_result a = run(&f);
    assert_int_equal(a.count, (int64_t)f.B * (f.T - f.burn_in) * O - 1);

    /* targets before burn-in: anything */
    for (int b = 0; b < f.B; b++)
        for (int t = 0; t < f.burn_in; t++)
            for (int j = 0; j < O; j++) {
                m2_real *y = &f.Y[((size_t)b * f.T + t) * O + j];
                *y = (t + j) % 3 == 0 ? NAN : (t + j) % 3 == 1 ? (m2_real)1e30 : -INFINITY;
            }
    run_result b = run(&f);
    assert_true(b.sse == a.sse);
    assert_int_equal(b.count, a.count);
    assert_memory_equal(b.grads, a.grads, f.lay.n_params * sizeof *a.grads);

    /* the NaN target counts as nothing: replacing it by the prediction itself (error exactly 0) gives the
     * same sum and gradients, one more term */
    f.Y[nat] = f.pred[nat];
    run_result c = run(&f);
    assert_true(c.sse == a.sse);
    assert_int_equal(c.count, a.count + 1);
    assert_memory_equal(c.grads, a.grads, f.lay.n_params * sizeof *a.grads);

    /* and the test can fail: a target that counts changes the gradients */
    f.Y[nat] += 1;
    run_result e = run(&f);
    assert_true(e.sse > a.sse);
    assert_memory_not_equal(e.grads, a.grads, f.lay.n_params * sizeof *a.grads);

    free(a.grads);
    free(b.grads);
    free(c.grads);
    free(e.grads);
    m2_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mse_op_masks),
        cmocka_unit_test(test_masked_targets_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
