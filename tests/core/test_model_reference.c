/* The model's forward and gradients against the independent numpy reference (tests/core/reference/: sequential
 * SSD recurrence, hand-written reverse mode, self-checked against finite differences), whose outputs for a
 * tiny model (G = 2, T = 11, Q = 4, burn-in and NaN targets) are committed in model_reference.h5.
 * Built twice: in fp64 (test_model_reference_f64) and in the product's fp32 (test_model_reference).
 *
 * Tolerance, per element r of a reference array whose largest magnitude is s:
 *   |model - r| <= REL |r| + ABS s
 * fp64: the reference outputs are stored in float32 (relative rounding 6e-8) and both sides compute in
 *   fp64 (~1e-13), so REL = 1e-6, ABS = 1e-9 is ~15x the storage rounding; measured worst: 0.06 of it.
 * fp32: the model computes in float32 (eps 6e-8) through two layers of norms, GEMMs and the SSD's
 *   exponentials; measured worst error 2e-6 of a value or of its tensor's scale. REL = ABS = 2e-5 leaves
 *   ~10x margin and still catches any wrong term (those move values by percents).  */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/layout.h"
#include "core/model.h"

#ifdef MAMBA2_FP64
#define REL 1e-6
#define ABS 1e-9
#else
#define REL 2e-5
#define ABS 2e-5
#endif

typedef struct {
    hid_t file;
    m2_dims d;
    int B, T, burn_in;
} ref_file;

static int read_int_attr(hid_t file, const char *name)
{
    int v = 0;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Aread(a, H5T_NATIVE_INT, &v) >= 0);
    H5Aclose(a);
    return v;
}

static double read_double_attr(hid_t file, const char *name)
{
    double v = 0;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a);
    return v;
}

/* A whole dataset of n values, as m2_real (malloc'd). */
static m2_real *read_array(hid_t file, const char *name, size_t n)
{
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    assert_int_equal((size_t)H5Sget_simple_extent_npoints(sp), n);
    double *tmp = malloc(n * sizeof *tmp);
    m2_real *out = malloc(n * sizeof *out);
    assert_non_null(tmp);
    assert_non_null(out);
    assert_true(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) >= 0);
    for (size_t i = 0; i < n; i++) out[i] = (m2_real)tmp[i];
    free(tmp);
    H5Sclose(sp);
    H5Dclose(ds);
    return out;
}

static void open_reference(ref_file *r)
{
    const char *src = getenv("MAMBA2_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/core/reference/model_reference.h5", src ? src : ".");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) fail_msg("cannot open %s (set MAMBA2_SRC to the source tree)", path);
    m2_dims *d = &r->d;
    memset(d, 0, sizeof *d);
    d->F = read_int_attr(r->file, "F");
    d->O = read_int_attr(r->file, "O");
    d->D = read_int_attr(r->file, "D");
    d->L = read_int_attr(r->file, "L");
    d->E = read_int_attr(r->file, "E");
    d->P = read_int_attr(r->file, "P");
    d->N = read_int_attr(r->file, "N");
    d->G = read_int_attr(r->file, "G");
    d->K = read_int_attr(r->file, "K");
    d->Q = read_int_attr(r->file, "Q");
    d->Di = d->E * d->D;
    d->H = d->Di / d->P;
    d->Cc = d->Di + 2 * d->G * d->N;
    d->Win = 2 * d->Di + 2 * d->G * d->N + d->H;
    r->B = read_int_attr(r->file, "B");
    r->T = read_int_attr(r->file, "T");
    r->burn_in = read_int_attr(r->file, "burn_in");
}

/* Returns the worst |got - want| / (REL |want| + ABS scale); fails above 1. */
static double compare(const char *what, const m2_real *got, const m2_real *want, size_t n)
{
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)want[i]) > scale) scale = fabs((double)want[i]);
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)want[i]);
        double ratio = err / (REL * fabs((double)want[i]) + ABS * scale);
        if (ratio > worst) worst = ratio;
        if (ratio > 1 || !isfinite((double)got[i]))
            fail_msg("%s[%zu]: model %.9g, reference %.9g", what, i, (double)got[i], (double)want[i]);
    }
    printf("  %-34s scale %9.3e   worst error %.3f of the tolerance\n", what, scale, worst);
    return worst;
}

static void test_matches_numpy_reference(void **state)
{
    ref_file r;
    open_reference(&r);
    m2_layout lay;
    assert_int_equal(m2_layout_init(&lay, &r.d), 0);
    const size_t np_ = lay.n_params, nx = (size_t)r.B * r.T * r.d.F, ny = (size_t)r.B * r.T * r.d.O;
    m2_real *params = read_array(r.file, "params", np_); /* also checks the reference's layout size */
    m2_real *X = read_array(r.file, "X", nx), *Y = read_array(r.file, "Y", ny);
    m2_real *pred_ref = read_array(r.file, "pred", ny), *grads_ref = read_array(r.file, "grads", np_);
    m2_real *dX_ref = read_array(r.file, "dX", nx);
    double sse_ref = read_double_attr(r.file, "sse");
    int count_ref = read_int_attr(r.file, "count");

    m2_model *m;
    assert_int_equal(m2_model_create(&m, &lay, r.B, r.T), 0);
    m2_model_keep_input_grad(m, 1);
    m2_real *grads = calloc(np_, sizeof *grads), *pred = malloc(ny * sizeof *pred);
    assert_non_null(grads);
    assert_non_null(pred);
    double sse = 0;
    int64_t count = 0;
    assert_int_equal(
        m2_model_forward_backward(m, params, grads, X, Y, r.B, r.T, r.burn_in, &sse, &count, pred, NULL, NULL), 0);

    assert_int_equal(count, count_ref);
    printf("  sse: model %.10g, reference %.10g\n", sse, sse_ref);
    assert_true(fabs(sse - sse_ref) <= REL * fabs(sse_ref));
    compare("pred", pred, pred_ref, ny);
    for (int i = 0; i < lay.n_tensors; i++) {
        const m2_tensor *t = &lay.tensors[i];
        compare(t->name, grads + t->offset, grads_ref + t->offset, t->numel);
    }
    compare("input X", m2_model_input_grad(m), dX_ref, nx);

    /* the forward alone gives the same predictions */
    m2_real *pred2 = malloc(ny * sizeof *pred2);
    assert_non_null(pred2);
    assert_int_equal(m2_model_forward(m, params, X, r.B, r.T, pred2), 0);
    assert_memory_equal(pred2, pred, ny * sizeof *pred);

    free(pred2);
    free(params);
    free(X);
    free(Y);
    free(pred_ref);
    free(grads_ref);
    free(dX_ref);
    free(grads);
    free(pred);
    m2_model_free(m);
    m2_layout_free(&lay);
    H5Fclose(r.file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_numpy_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
