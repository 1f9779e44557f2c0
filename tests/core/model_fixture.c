#include "model_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

m2_dims m2_fixture_dims(int G, int Q)
{
    m2_dims d = {.F = 3, .O = 2, .D = 8, .L = 2, .E = 2, .P = 4, .N = 4, .G = G, .K = 4, .Q = Q};
    assert_int_equal(m2_dims_derive(&d), 0);
    return d;
}

static double u11(uint64_t key, uint64_t i) { return 2.0 * m2_rng_u01(key, i) - 1.0; }

/* Moves every tensor off its init value: weights by 20% of their scale, biases, D and norm weights by
 * random amounts, and dt_bias so that dt is in about [0.05, 1] (long enough decays to matter). */
static void perturb(const m2_layout *lay, m2_real *p, uint64_t key)
{
    for (size_t i = 0; i < lay->n_params; i++) p[i] += (m2_real)(0.2 * u11(key, i) * (fabs((double)p[i]) + 0.1));
    for (int l = 0; l < lay->d.L; l++) {
        size_t b = m2_layer_base(lay, l);
        for (int h = 0; h < lay->d.H; h++)
            p[b + lay->layer.dt_bias + h] = (m2_real)(-1.5 + 1.5 * m2_rng_u01(key, 1000000 + l * 64 + h));
    }
}

void m2_fixture_init(m2_fixture *f, const m2_dims *d, int B, int T, int burn_in, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->B = B;
    f->T = T;
    f->burn_in = burn_in;
    assert_int_equal(m2_layout_init(&f->lay, d), 0);
    assert_int_equal(m2_model_create(&f->model, &f->lay, B, T), 0);
    size_t n = f->lay.n_params, nx = (size_t)B * T * d->F, ny = (size_t)B * T * d->O;
    float *p32 = malloc(n * sizeof *p32);
    f->params = malloc(n * sizeof *f->params);
    f->grads = calloc(n, sizeof *f->grads);
    f->X = malloc(nx * sizeof *f->X);
    f->Y = malloc(ny * sizeof *f->Y);
    f->pred = malloc(ny * sizeof *f->pred);
    assert_non_null(p32);
    assert_non_null(f->params);
    assert_non_null(f->grads);
    assert_non_null(f->X);
    assert_non_null(f->Y);
    assert_non_null(f->pred);
    m2_params_init(&f->lay, p32, seed);
    for (size_t i = 0; i < n; i++) f->params[i] = p32[i];
    free(p32);
    uint64_t key = m2_rng_key(seed, M2_RNG_TEST, 1, 0);
    perturb(&f->lay, f->params, key);
    for (size_t i = 0; i < nx; i++) f->X[i] = (m2_real)u11(key, 2000000 + i);
    for (size_t i = 0; i < ny; i++) f->Y[i] = (m2_real)u11(key, 3000000 + i);
}

void m2_fixture_free(m2_fixture *f)
{
    m2_model_free(f->model);
    m2_layout_free(&f->lay);
    free(f->params);
    free(f->grads);
    free(f->X);
    free(f->Y);
    free(f->pred);
}

double m2_fixture_sse(const m2_fixture *f, const m2_real *pred)
{
    const int O = f->lay.d.O;
    double s = 0;
    for (int b = 0; b < f->B; b++)
        for (int t = f->burn_in; t < f->T; t++)
            for (int j = 0; j < O; j++) {
                size_t i = ((size_t)b * f->T + t) * O + j;
                if (!isfinite((double)f->Y[i])) continue;
                double e = (double)pred[i] - (double)f->Y[i];
                s += e * e;
            }
    return s;
}

double m2_fixture_loss(m2_fixture *f)
{
    assert_int_equal(m2_model_forward(f->model, f->params, f->X, f->B, f->T, f->pred), 0);
    return m2_fixture_sse(f, f->pred);
}

double m2_fixture_backward(m2_fixture *f)
{
    memset(f->grads, 0, f->lay.n_params * sizeof *f->grads);
    double sse = 0;
    int64_t count = 0;
    assert_int_equal(m2_model_forward_backward(f->model, f->params, f->grads, f->X, f->Y, f->B, f->T, f->burn_in, &sse,
                                               &count, f->pred, NULL, NULL),
                     0);
    return sse;
}
