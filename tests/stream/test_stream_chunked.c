/* Streaming == the chunked forward (m2_model_forward, docs/MODEL.md §3-4) over the same session: the default model
 * and G = 2, a session longer than several chunks and not a multiple of Q, parameters spread away from their
 * init constants (stream_fixture.h).
 *
 * Tolerance: both compute in fp32 and differ only in summation order (the chunked SSD sums within a chunk
 * through C B^T products and carries chunk states; the engine carries S tick by tick; their GEMMs block
 * differently). Each is within ~1e-6 of the fp64 oracle relative to the output scale (test_stream prints the
 * engine's figure; tests/core checks the forward's), so they are within ~2e-6 of each other; 2e-5 leaves
 * 10x margin while any modelling difference (a missing term, a wrong group, a state not carried across a
 * chunk boundary) is orders of magnitude larger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "stream/engine.h"
#include "core/model.h"
#include "stream_fixture.h"

_Static_assert(sizeof(m2_real) == sizeof(float), "the streaming engine is fp32; compare against the fp32 model");

static void compare(fixture_shape shape, int Q, int T, const char *label)
{
    m2_layout lay;
    m2_config cfg;
    m2_config_defaults(&cfg);
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    lay.d.Q = Q;
    float *params = fixture_params(&lay, 21, 1), *X = fixture_inputs(T, shape.F, 22);
    float *chunked = malloc((size_t)T * shape.O * sizeof *chunked),
          *streamed = malloc((size_t)T * shape.O * sizeof *streamed);
    m2_model *m;
    assert_int_equal(m2_model_create(&m, &lay, 1, T), M2_OK);
    assert_int_equal(m2_model_forward(m, params, X, 1, T, chunked), M2_OK);
    m2_model_free(m);
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, NULL, &s), M2_OK);
    for (int t = 0; t < T; t++)
        assert_int_equal(m2_stream_step(s, 0, X + (size_t)t * shape.F, streamed + (size_t)t * shape.O), M2_OK);
    double err = 0, scale = 0;
    for (int i = 0; i < T * shape.O; i++) {
        err = fmax(err, fabs((double)streamed[i] - chunked[i]));
        scale = fmax(scale, fabs((double)chunked[i]));
    }
    printf("  %s (Q=%d, T=%d): max|pred| %.3g, max|stream - chunked| %.3g (rel %.2e)\n", label, Q, T, scale, err,
           err / scale);
    assert_true(scale > 0.05);
    assert_true(err / scale < 2e-5);
    m2_stream_close(s);
    m2_layout_free(&lay);
    free(params);
    free(X);
    free(chunked);
    free(streamed);
}

static void test_default_model(void **state) { compare(fixture_default(), 64, 300, "default"); }

static void test_two_groups(void **state)
{
    fixture_shape s = fixture_default();
    s.G = 2;
    compare(s, 64, 300, "G=2");
}

static void test_small_chunks(void **state)
{
    fixture_shape s = {5, 2, 32, 2, 2, 16, 16, 2, 4};
    compare(s, 16, 203, "small, G=2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_model),
        cmocka_unit_test(test_two_groups),
        cmocka_unit_test(test_small_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
