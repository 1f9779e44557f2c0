/* Streaming engine (stream/mamba2_stream.h) against the fp64 tick-by-tick oracle (ref_stream.c): the default model,
 * G = 2, odd sizes that take the portable kernels; batched == single streams; reset; warm; bf16; standardize (one
 * instrument, and a universe's instruments bitwise as training z-scored them); errors.
 *
 * Tolerances. The engine computes in fp32 (unit roundoff u = 6e-8) with a different summation order from
 * the oracle (packed GEMV with 8 interleaved accumulators, 2 interleaved SSM partial sums, a polynomial exp
 * within 2 ulp). Each layer's outputs then carry a relative error of a few u times the condition of the
 * sums (dot products of length D..Di = 128..256 with random signs: about sqrt(256) u ~ 1e-6), the state
 * accumulates errors over ~1/dt ticks with decay < 1 so they do not grow without bound, and the residual
 * stream adds L of them. Measured max |err| / max |pred| over 200 ticks is ~3e-7..1e-6 (printed below); the
 * bound 2e-5 leaves 20x margin yet catches any real mistake (a wrong index or a missing term moves
 * predictions by 1e-3 or more: see test_reset, where a state left over from another session does exactly that). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "stream/engine.h"
#include "stream/engine.h"
#include "io/dataset.h"
#include "io/features.h"
#include "ref_stream.h"
#include "stream_fixture.h"

#define REL_TOL 2e-5

/* Streams X [T,F] through stream `id` of s into pred [T,O]. */
static void run(m2_stream *s, int id, const float *X, int T, float *pred)
{
    const int F = m2_stream_n_features(s), O = m2_stream_n_targets(s);
    for (int t = 0; t < T; t++) assert_int_equal(m2_stream_step(s, id, X + (size_t)t * F, pred + (size_t)t * O), M2_OK);
}

static double max_abs(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

static double max_abs_f(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)v[i]));
    return m;
}

/* Max |a - b| relative to max |b|. */
static double rel_err_fd(const float *a, const double *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e / fmax(max_abs(b, n), 1e-30);
}

static double rel_err_ff(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return e / fmax(m, 1e-30);
}

/* One session of T ticks through a fresh engine and through the fp64 oracle (ref_stream.c); the caller frees both. */
static void stream_and_oracle(const m2_layout *lay, const float *params, const float *X, int T, float **pred,
                              double **ref)
{
    const size_t n = (size_t)T * lay->d.O;
    *pred = malloc(n * sizeof **pred);
    *ref = malloc(n * sizeof **ref);
    ref_session(lay, params, X, T, *ref);
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(lay, params, NULL, NULL, NULL, &s), M2_OK);
    run(s, 0, X, T, *pred);
    m2_stream_close(s);
}

static void check_against_oracle(fixture_shape shape, int T, const char *label)
{
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 7, 1), *X = fixture_inputs(T, shape.F, 11);
    float *pred;
    double *ref;
    stream_and_oracle(&lay, params, X, T, &pred, &ref);
    double e = rel_err_fd(pred, ref, (size_t)T * shape.O);
    printf("  %s: max|pred| %.3g, rel err vs fp64 oracle %.2e over %d ticks\n", label,
           max_abs(ref, (size_t)T * shape.O), e, T);
    assert_true(e < REL_TOL);
    assert_true(max_abs(ref, (size_t)T * shape.O) > 0.05); /* the comparison is not between near-zeros */
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(pred);
    free(ref);
}

static void test_default_model(void **state) { check_against_oracle(fixture_default(), 200, "default"); }

static void test_two_groups(void **state)
{
    fixture_shape s = fixture_default();
    s.G = 2;
    check_against_oracle(s, 200, "G=2");
}

/* Sizes that are not multiples of 16, P outside the vectorised SSM cases, K = 3, one layer and many panels. */
static void test_odd_sizes(void **state)
{
    fixture_shape s = {5, 2, 40, 3, 3, 20, 10, 3, 3};
    check_against_oracle(s, 150, "odd sizes");
    fixture_shape k1 = {3, 1, 16, 1, 2, 16, 16, 1, 1}; /* no conv history at all */
    check_against_oracle(k1, 50, "K=1");
    fixture_shape k5 = {4, 2, 32, 2, 2, 64, 8, 1, 5}; /* the conv's general path; P = 64 */
    check_against_oracle(k5, 60, "K=5");
}

/* S streams stepped together (including a subset in a scrambled order) == each stream stepped alone. */
static void batch_vs_single(int bf16)
{
    fixture_shape shape = fixture_default();
    const int S = 13, T = 40, F = shape.F, O = shape.O; /* 13 = two full 6-stream tiles and a remainder */
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 3, 1);
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = S;
    opt.bf16 = bf16; /* bf16: the k-pairs must line up in the GEMM's tiles too */
    m2_stream *batch, *single;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &batch), M2_OK);
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &single), M2_OK);
    float *X = fixture_inputs(T * S, F, 5);
    float *pb = malloc((size_t)S * O * sizeof *pb), *ps = malloc((size_t)S * O * sizeof *ps);
    float *xb = malloc((size_t)S * F * sizeof *xb);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        /* odd ticks: only 7 streams, in a scrambled order; even ticks: all, in order */
        int ids[S], n = (t % 2) ? 7 : S;
        for (int i = 0; i < n; i++) ids[i] = (t % 2) ? (5 * i + 3) % S : i;
        for (int i = 0; i < n; i++) memcpy(xb + (size_t)i * F, X + ((size_t)t * S + ids[i]) * F, F * sizeof *xb);
        assert_int_equal(m2_stream_step_batch(batch, n, (t % 2) ? ids : NULL, xb, pb), M2_OK);
        for (int i = 0; i < n; i++) {
            assert_int_equal(m2_stream_step(single, ids[i], xb + (size_t)i * F, ps + (size_t)i * O), M2_OK);
        }
        worst = fmax(worst, rel_err_ff(pb, ps, (size_t)n * O));
    }
    printf("  batch vs single (%s): rel err %.2e\n", bf16 ? "bf16" : "fp32", worst);
    /* Same arithmetic except the GEMM's summation order (one accumulator set per stream tile vs 2-4
     * interleaved sets in the GEMV): a few ulp in fp32. bf16 rounds each GEMV's input, where such a few-ulp
     * difference can flip a rounding (a term moved by 2^-8 of itself; test_stream_isa): measured 1.4e-3 to 4.0e-3
     * on the CPUs tried. */
    assert_true(worst < (bf16 ? 5e-3 : 1e-5));
    m2_stream_close(batch);
    m2_stream_close(single);
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(pb);
    free(ps);
    free(xb);
}

static void test_batch_equals_single(void **state) { batch_vs_single(0); }
static void test_batch_equals_single_bf16(void **state) { batch_vs_single(1); }

/* After a reset a stream computes exactly what a fresh handle computes; without it, the old session leaks in. */
static void test_reset(void **state)
{
    fixture_shape shape = fixture_default();
    const int T = 30, O = shape.O, F = shape.F;
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 9, 1), *A = fixture_inputs(T, F, 1), *B = fixture_inputs(T, F, 2);
    float *fresh = malloc((size_t)T * O * sizeof *fresh), *after = malloc((size_t)T * O * sizeof *after);
    m2_stream *s, *f;
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = 2;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s), M2_OK);
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &f), M2_OK);
    run(f, 0, B, T, fresh);

    run(s, 1, A, T, after);
    run(s, 1, B, T, after); /* no reset: session A leaks into B */
    assert_true(rel_err_ff(after, fresh, (size_t)T * O) > 1e-3);

    run(s, 0, A, T, after); /* stream 0 busy too: a reset of 1 must not touch it */
    m2_stream_reset(s, 1);
    run(s, 1, B, T, after);
    assert_memory_equal(after, fresh, (size_t)T * O * sizeof *after);

    m2_stream_reset(s, -1);
    run(s, 0, B, T, after);
    assert_memory_equal(after, fresh, (size_t)T * O * sizeof *after);
    m2_stream_close(s);
    m2_stream_close(f);
    m2_layout_free(&lay);
    free(params);
    free(A);
    free(B);
    free(fresh);
    free(after);
}

/* m2_stream_warm changes nothing a step sees: three streams stepped alone and in batches, with warm calls of every
 * kind between the ticks (code and weights only, one stream, a named subset, all), give bitwise the predictions of a
 * handle never warmed; and a reset, which clears the streams, does not disturb the private state either. */
static void warm_is_invisible(int bf16)
{
    fixture_shape shape = fixture_default();
    const int S = 3, T = 40, F = shape.F, O = shape.O;
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 12, 1), *X = fixture_inputs(T * S, F, 13);
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = S;
    opt.bf16 = bf16;
    m2_stream *warmed, *plain;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &warmed), M2_OK);
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &plain), M2_OK);
    float *pw = malloc((size_t)T * S * O * sizeof *pw), *pp = malloc((size_t)T * S * O * sizeof *pp);
    const int two[2] = {2, 0};
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * S * F;
        float *out_w = pw + (size_t)t * S * O, *out_p = pp + (size_t)t * S * O;
        if (t == T / 2) { /* a session boundary in the middle */
            m2_stream_reset(warmed, -1);
            m2_stream_reset(plain, -1);
        }
        switch (t % 4) {
        case 0: assert_int_equal(m2_stream_warm(warmed, 0, NULL), M2_OK); break;
        case 1: assert_int_equal(m2_stream_warm(warmed, 1, &two[1]), M2_OK); break;
        case 2: assert_int_equal(m2_stream_warm(warmed, 2, two), M2_OK); break;
        default: assert_int_equal(m2_stream_warm(warmed, S, NULL), M2_OK); break;
        }
        if (t % 2) { /* odd ticks: a batch of all streams; even: one at a time, with a warm call between them */
            assert_int_equal(m2_stream_step_batch(warmed, S, NULL, x, out_w), M2_OK);
            assert_int_equal(m2_stream_step_batch(plain, S, NULL, x, out_p), M2_OK);
        } else
            for (int i = 0; i < S; i++) {
                assert_int_equal(m2_stream_step(warmed, i, x + (size_t)i * F, out_w + (size_t)i * O), M2_OK);
                assert_int_equal(m2_stream_warm(warmed, 1, &i), M2_OK);
                assert_int_equal(m2_stream_step(plain, i, x + (size_t)i * F, out_p + (size_t)i * O), M2_OK);
            }
    }
    assert_memory_equal(pw, pp, (size_t)T * S * O * sizeof *pw);
    assert_true(max_abs_f(pp, (size_t)T * S * O) > 0.05); /* not a comparison of zeros */
    m2_stream_close(warmed);
    m2_stream_close(plain);
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(pw);
    free(pp);
}

static void test_warm_is_invisible(void **state) { warm_is_invisible(0); }
static void test_warm_is_invisible_bf16(void **state) { warm_is_invisible(1); }

/* The bf16 mode: predictions stay close to fp32 ones. Tolerance: a bf16 weight and a bf16 input each carry a
 * relative rounding error up to 2^-9 (0.2%), independent across terms, so a dot product of K terms with random
 * signs moves by about 2^-9 / sqrt(K)..2^-8 of its magnitude; through L = 4 layers and the head that stays
 * around 0.1-1% of the output scale. Measured 0.58% (printed; 0.3% when only the weights were rounded); 3%
 * catches a wrong conversion (a truncated exponent or a swapped half is off by orders of magnitude) while
 * allowing for the rounding. */
static void test_bf16_close(void **state)
{
    fixture_shape shape = fixture_default();
    const int T = 200, O = shape.O;
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 4, 1), *X = fixture_inputs(T, shape.F, 8);
    float *p32 = malloc((size_t)T * O * sizeof *p32), *p16 = malloc((size_t)T * O * sizeof *p16);
    m2_stream_options opt = m2_stream_defaults();
    m2_stream *s32, *s16;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s32), M2_OK);
    opt.bf16 = 1;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s16), M2_OK);
    run(s32, 0, X, T, p32);
    run(s16, 0, X, T, p16);
    double e = rel_err_ff(p16, p32, (size_t)T * O);
    printf("  bf16 vs fp32: rel err %.2e, weight bytes %zu vs %zu\n", e, m2_stream_weight_bytes(s16),
           m2_stream_weight_bytes(s32));
    assert_true(e < 3e-2);
    assert_true(e > 0); /* the weights really are rounded */
    assert_true(m2_stream_weight_bytes(s16) < 0.55 * m2_stream_weight_bytes(s32));
    m2_stream_close(s32);
    m2_stream_close(s16);
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(p32);
    free(p16);
}

/* Pre-activations in the hundreds (W_in scaled by 300): SiLU and softplus far outside the range a trained
 * model uses, where the clamped exp must still give finite outputs equal to the oracle's. */
static void test_extreme_activations(void **state)
{
    fixture_shape shape = {4, 2, 32, 2, 2, 16, 16, 1, 4};
    const int T = 40;
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 5, 1), *X = fixture_inputs(T, shape.F, 6);
    for (int l = 0; l < shape.L; l++) {
        float *w = params + m2_layer_base(&lay, l) + lay.layer.W_in;
        for (int i = 0; i < lay.d.Win * shape.D; i++) w[i] *= 300.0f;
    }
    float *pred;
    double *ref;
    stream_and_oracle(&lay, params, X, T, &pred, &ref);
    for (int i = 0; i < T * shape.O; i++) assert_true(isfinite(pred[i]));
    double e = rel_err_fd(pred, ref, (size_t)T * shape.O);
    printf("  extreme activations: rel err vs fp64 oracle %.2e\n", e);
    assert_true(e < 1e-4); /* fp32 rounding of activations in the hundreds: ~100x the usual 1e-6 */
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(pred);
    free(ref);
}

static void test_standardize(void **state)
{
    fixture_shape shape = {3, 1, 16, 1, 2, 16, 16, 1, 4};
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 1, 0);
    double mean[3] = {1.0, -2.0, 0.5}, sd[3] = {2.0, 0.5, 1.0}, raw[3] = {3.0, -2.0, 100.0};
    m2_stream_options opt = m2_stream_defaults();
    opt.clip = 4.0f;
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(&lay, params, mean, sd, &opt, &s), M2_OK);
    float x[3];
    m2_stream_standardize(s, raw, x);
    assert_float_equal(x[0], 1.0f, 1e-7);
    assert_float_equal(x[1], 0.0f, 1e-7);
    assert_float_equal(x[2], 4.0f, 1e-7); /* (100 - 0.5) / 1 clipped */
    m2_stream_close(s);
    m2_layout_free(&lay);
    free(params);
}

/* Raw features z-scored as training z-scored the dataset (m2_features_apply: the float the dataset held, then
 * (x - mean) / std in double, clipped), bit for bit, for each instrument of a universe with its own statistics; the
 * instrument found by name; m2_stream_standardize refusing to guess on a universe (NaN and a message). */
static void test_standardize_universe(void **state)
{
    fixture_shape shape = {3, 1, 16, 1, 2, 16, 16, 1, 4};
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 1, 0);
    enum { I = 3, LD = 4, ROWS = 64 };
    const char names[I][64] = {"AAA", "BBB", "CCC"};
    const double mean[I * LD] = {1.0, -2.0, 0.5, 9, 1e3, 0.25, -7.0, 9, 0.0, 0.0, 1e-3, 9};
    const double sd[I * LD] = {2.0, 0.5, 1.0, 9, 37.0, 0.001, 3.0, 9, 1.0, 1e-4, 0.0, 9}; /* 0: counts as 1 */
    m2_stream_options opt = m2_stream_defaults();
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(&lay, params, mean, sd, &opt, &s), M2_OK);
    assert_int_equal(m2_stream_n_instruments(s), 1);
    double raw[3] = {0.123456789012345, -1e3 / 3, 7.77777777777};
    float xs[3], xi[3];
    m2_stream_standardize(s, raw, xs);
    assert_int_equal(m2_stream_standardize_instrument(s, 0, raw, xi), M2_OK);
    assert_memory_equal(xs, xi, sizeof xs);
    const double tick[I] = {0.01, 0.5, 0.25};
    assert_true(m2_stream_tick_size(s, 0) == 0.0); /* open_params: none known */
    assert_int_equal(m2s_set_instruments(s, I, names, mean, sd, LD, tick), M2_OK);
    assert_true(m2_stream_tick_size(s, 1) == 0.5);
    assert_true(m2_stream_tick_size(s, I) == 0.0);
    assert_int_equal(m2_stream_n_instruments(s), I);
    assert_int_equal(m2_stream_instrument(s, "BBB"), 1);
    assert_int_equal(m2_stream_instrument(s, "ZZZ"), -1);
    assert_non_null(strstr(m2_last_error(), "ZZZ"));
    assert_int_equal(m2_stream_standardize_instrument(s, I, raw, xi), M2_EUSAGE);
    m2_stream_standardize(s, raw, xs);
    for (int f = 0; f < 3; f++) assert_true(isnan(xs[f]));
    assert_non_null(strstr(m2_last_error(), "m2_stream_standardize_instrument"));
    uint64_t key = 42;
    for (int i = 0; i < I; i++) {
        m2_dataset ds;
        memset(&ds, 0, sizeof ds);
        ds.n_rows = ROWS;
        ds.n_features = 3;
        ds.X = malloc((size_t)ROWS * 3 * sizeof *ds.X);
        double rows[ROWS][3];
        double sdi[3];
        for (int f = 0; f < 3; f++) sdi[f] = sd[i * LD + f] > 0 ? sd[i * LD + f] : 1.0;
        for (int r = 0; r < ROWS; r++)
            for (int f = 0; f < 3; f++) { /* within and beyond the clip, with more digits than a float holds */
                key = key * 6364136223846793005ull + 1442695040888963407ull;
                const double u = (double)(key >> 11) / 9007199254740992.0;
                rows[r][f] = mean[i * LD + f] + sdi[f] * (14.0 * u - 7.0);
                ds.X[r * 3 + f] = (float)rows[r][f];
            }
        m2_features_apply(&ds, mean + i * LD, sdi, opt.clip);
        for (int r = 0; r < ROWS; r++) {
            assert_int_equal(m2_stream_standardize_instrument(s, i, rows[r], xi), M2_OK);
            assert_memory_equal(xi, ds.X + r * 3, sizeof xi);
        }
        free(ds.X);
    }
    m2_stream_close(s);
    m2_layout_free(&lay);
    free(params);
}

static void test_errors(void **state)
{
    fixture_shape shape = {3, 1, 16, 1, 2, 16, 16, 1, 4};
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 1, 0);
    m2_stream_options opt = m2_stream_defaults();
    m2_stream *s;
    opt.max_streams = 0;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "max_streams"));
    assert_null(s);
    opt.max_streams = 2;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s), M2_OK);
    float x[3] = {0}, pred[2];
    assert_int_equal(m2_stream_step(s, 2, x, pred), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "index"));
    int bad[1] = {-1};
    assert_int_equal(m2_stream_step_batch(s, 1, bad, x, pred), M2_EUSAGE);
    assert_int_equal(m2_stream_step_batch(s, 3, NULL, x, pred), M2_EUSAGE);
    assert_int_equal(m2_stream_step_batch(s, 0, NULL, x, pred), M2_OK);
    assert_int_equal(m2_stream_warm(s, 3, NULL), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "warm"));
    assert_int_equal(m2_stream_warm(s, -1, NULL), M2_EUSAGE);
    assert_int_equal(m2_stream_warm(s, 1, bad), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "index"));
    assert_int_equal(m2_stream_warm(s, 0, NULL), M2_OK);
    m2_stream_close(s);
    m2_layout_free(&lay);
    free(params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_model),
        cmocka_unit_test(test_two_groups),
        cmocka_unit_test(test_odd_sizes),
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_batch_equals_single_bf16),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_warm_is_invisible),
        cmocka_unit_test(test_warm_is_invisible_bf16),
        cmocka_unit_test(test_bf16_close),
        cmocka_unit_test(test_extreme_activations),
        cmocka_unit_test(test_standardize),
        cmocka_unit_test(test_standardize_universe),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
