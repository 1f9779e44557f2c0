/* Every parameter tensor's gradient and the input gradient match central finite differences of the loss,
 * in the fp64 build of the core (mamba2_core_f64), for G = 1 and G = 2, T = 11 (not a multiple of Q = 4),
 * B = 2, a burn-in and one NaN target.
 *
 * Tolerance: the loss (a sum of squared errors, ~10..100 here) is evaluated in fp64; a central difference
 * with step h has rounding error ~1e-16 |loss| / h and truncation error ~h^2 |f'''| / 6. Measured: with
 * h = 1e-5 the worst error is 1.5e-7 (truncation: third derivatives reach ~1e4), with h = 1e-6 it is 1.3e-8
 * (rounding). h = 2e-6 sits between, worst ~1e-8; the bound |g - fd| <= 1e-7 + 1e-6 |fd| is ~10x above that
 * noise and far below any real error (a wrong or missing term moves a gradient by a fraction of itself, and
 * the smallest gradients checked here, of A_log, are ~1e-2). Checked to fail on planted bugs: the full
 * width instead of the group size in the gated norm's backward (G = 2), softplus' derivative of the wrong
 * sign, a conv tap off by one, the sign of d(A)/d(A_log), RMSNorm's input gradient overwriting the
 * residual stream's instead of adding.  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "model_fixture.h"

#define FD_STEP 2e-6
#define TOL_ABS 1e-7
#define TOL_REL 1e-6

static double fd_at(m2_fixture *f, m2_real *x)
{
    m2_real keep = *x;
    *x = keep + FD_STEP;
    double lp = m2_fixture_loss(f);
    *x = keep - FD_STEP;
    double lm = m2_fixture_loss(f);
    *x = keep;
    return (lp - lm) / (2 * FD_STEP);
}

/* Checks n analytic gradients g against FD of the values at x; returns the worst |g - fd|. */
static double check_range(m2_fixture *f, const char *what, m2_real *x, const m2_real *g, size_t n)
{
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < n; i++) {
        double fd = fd_at(f, x + i), err = fabs((double)g[i] - fd);
        if (err > worst) worst = err;
        if (fabs(fd) > gmax) gmax = fabs(fd);
        if (err > TOL_ABS + TOL_REL * fabs(fd)) {
            fprintf(stderr, "%s[%zu]: analytic %.12g, finite difference %.12g\n", what, i, (double)g[i], fd);
            fail();
        }
    }
    printf("  %-34s max|grad| %9.3e   max|grad - fd| %9.3e\n", what, gmax, worst);
    return worst;
}

static void check_model(int G)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(G, 4);
    m2_fixture_init(&f, &d, 2, 11, 2, 42 + G);
    f.Y[(size_t)(1 * f.T + 7) * d.O + 1] = NAN; /* a target across a session end */
    m2_model_keep_input_grad(f.model, 1);
    m2_fixture_backward(&f);
    /* the analytic gradients are overwritten by later calls: keep copies */
    m2_real *g = malloc(f.lay.n_params * sizeof *g);
    size_t nx = (size_t)f.B * f.T * d.F;
    m2_real *gx = malloc(nx * sizeof *gx);
    assert_non_null(g);
    assert_non_null(gx);
    memcpy(g, f.grads, f.lay.n_params * sizeof *g);
    memcpy(gx, m2_model_input_grad(f.model), nx * sizeof *gx);

    printf("G = %d\n", G);
    for (int i = 0; i < f.lay.n_tensors; i++) {
        const m2_tensor *t = &f.lay.tensors[i];
        check_range(&f, t->name, f.params + t->offset, g + t->offset, t->numel);
    }
    check_range(&f, "input X", f.X, gx, nx);
    free(g);
    free(gx);
    m2_fixture_free(&f);
}

static void test_gradients_one_group(void **state) { check_model(1); }
static void test_gradients_two_groups(void **state) { check_model(2); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_one_group),
        cmocka_unit_test(test_gradients_two_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
