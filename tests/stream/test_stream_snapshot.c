/* Stream state snapshots (mamba2_stream.h: m2_stream_snapshot / m2_stream_restore; docs/FORMATS.md): a stream
 * restored into another handle, at another index and ring position, continues bit for bit as the saved one does;
 * the snapshot's form does not depend on where the engine keeps the state; bf16 and fp32 handles of the same
 * parameters take each other's snapshots; every bad buffer is refused with its reason and leaves the stream as it
 * was. The shape has sizes off the 16-lane padding (Cc = 68, P = 12) so that a padded copy would show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "stream/engine.h"
#include "stream_fixture.h"

enum { T = 40, T_SAVE = 17, HEADER = 64 };

static const fixture_shape SHAPE = {5, 2, 24, 2, 2, 12, 10, 1, 4}; /* F O D L E P N G K: Di 48, H 4, Cc 68 */

typedef struct {
    m2_layout lay;
    float *params, *X;
} model;

static void model_init(model *m, fixture_shape shape, uint64_t seed)
{
    assert_int_equal(fixture_layout(&m->lay, shape), M2_OK);
    m->params = fixture_params(&m->lay, seed, 1);
    m->X = fixture_inputs(T, shape.F, seed + 100);
}

static void model_free(model *m)
{
    m2_layout_free(&m->lay);
    free(m->params);
    free(m->X);
}

static m2_stream *open_model(const model *m, int max_streams, int bf16)
{
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = max_streams;
    opt.bf16 = bf16;
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(&m->lay, m->params, NULL, NULL, &opt, &s), M2_OK);
    return s;
}

/* Ticks t0..t1 of m's inputs through stream id, predictions to pred (rows t0..t1). */
static void run(m2_stream *s, int id, const model *m, int t0, int t1, float *pred)
{
    const int F = m->lay.d.F, O = m->lay.d.O;
    for (int t = t0; t < t1; t++)
        assert_int_equal(m2_stream_step(s, id, m->X + (size_t)t * F, pred + (size_t)t * O), M2_OK);
}

/* Saved after T_SAVE ticks from stream 1 of a 3-stream handle; restored into stream 0 of another handle whose ring
 * stands elsewhere (4 other ticks: position 1, the saver's is 17 mod 3 = 2): the rest of the session's predictions
 * are bitwise those of the saver, and the restored stream's own snapshot is byte for byte the one restored. */
static void continues_bitwise(int bf16)
{
    model m;
    model_init(&m, SHAPE, 7);
    const int O = m.lay.d.O;
    m2_stream *a = open_model(&m, 3, bf16), *b = open_model(&m, 2, bf16);
    const size_t bytes = m2_stream_snapshot_bytes(a);
    /* header + per layer (K-1) Cc + H N P floats (the canonical form carries no padding) + the featuriser's block */
    assert_int_equal(bytes, HEADER + 2 * (3 * 68 + 4 * 10 * 12) * sizeof(float) + 64);
    unsigned char *snap = malloc(bytes), *again = malloc(bytes);
    float *pa = calloc((size_t)T * O, sizeof *pa), *pb = calloc((size_t)T * O, sizeof *pb);
    run(a, 1, &m, 0, T_SAVE, pa);
    assert_int_equal(m2_stream_snapshot(a, 1, snap, bytes), M2_OK);
    run(a, 1, &m, T_SAVE, T, pa);
    run(b, 0, &m, 30, 34, pb); /* other ticks first: another ring position, a state to overwrite */
    assert_int_equal(m2_stream_restore(b, 0, snap, bytes), M2_OK);
    assert_int_equal(m2_stream_snapshot(b, 0, again, bytes), M2_OK);
    assert_memory_equal(again, snap, bytes);
    run(b, 0, &m, T_SAVE, T, pb);
    assert_memory_equal(pb + (size_t)T_SAVE * O, pa + (size_t)T_SAVE * O, (size_t)(T - T_SAVE) * O * sizeof *pa);
    m2_stream_close(a);
    m2_stream_close(b);
    free(snap);
    free(again);
    free(pa);
    free(pb);
    model_free(&m);
}

static void test_restore_continues_bitwise(void **state) { continues_bitwise(0); }
static void test_restore_continues_bitwise_bf16(void **state) { continues_bitwise(1); }

/* A bf16 handle's snapshot restores into an fp32 handle of the same parameters (the state is fp32 in both), and the
 * fp32 handle then predicts close to a session run in fp32 throughout: within 3e-2 of the output scale, the
 * bound test_stream.c's test_bf16_close justifies for bf16 against fp32 (the state carries that rounding). The
 * buffer is offset by one byte: a caller's buffer need not be aligned. */
static void test_restore_across_weights(void **state)
{
    model m;
    model_init(&m, SHAPE, 8);
    const int O = m.lay.d.O;
    m2_stream *b16 = open_model(&m, 1, 1), *f32 = open_model(&m, 1, 0), *ref = open_model(&m, 1, 0);
    const size_t bytes = m2_stream_snapshot_bytes(b16);
    assert_int_equal(bytes, m2_stream_snapshot_bytes(f32));
    unsigned char *raw = malloc(bytes + 1), *snap = raw + 1;
    float *p16 = calloc((size_t)T * O, sizeof *p16), *p32 = calloc((size_t)T * O, sizeof *p32);
    run(b16, 0, &m, 0, T_SAVE, p16);
    run(ref, 0, &m, 0, T, p32);
    assert_int_equal(m2_stream_snapshot(b16, 0, snap, bytes), M2_OK);
    assert_int_equal(m2_stream_restore(f32, 0, snap, bytes), M2_OK);
    run(f32, 0, &m, T_SAVE, T, p16);
    double e = 0, scale = 0;
    for (size_t i = (size_t)T_SAVE * O; i < (size_t)T * O; i++) {
        e = fmax(e, fabs((double)p16[i] - p32[i]));
        scale = fmax(scale, fabs((double)p32[i]));
    }
    assert_true(e <= 3e-2 * scale);
    m2_stream_close(b16);
    m2_stream_close(f32);
    m2_stream_close(ref);
    free(raw);
    free(p16);
    free(p32);
    model_free(&m);
}

/* Restores snap[0..bytes) into stream 0 of s, expecting M2_EUSAGE with `why` in the message. */
static void refused(m2_stream *s, const void *snap, size_t bytes, const char *why)
{
    assert_int_equal(m2_stream_restore(s, 0, snap, bytes), M2_EUSAGE);
    if (!strstr(m2_last_error(), why)) fail_msg("expected \"%s\" in: %s", why, m2_last_error());
}

/* Every kind of bad buffer is refused with its reason; the stream refused them all then predicts bitwise as a twin
 * that was never offered one. */
static void test_restore_refuses(void **state)
{
    model m, other_shape, other_params;
    model_init(&m, SHAPE, 9);
    fixture_shape wider = SHAPE;
    wider.N = 12;
    model_init(&other_shape, wider, 9);
    model_init(&other_params, SHAPE, 10);
    const int O = m.lay.d.O;
    m2_stream *s = open_model(&m, 2, 0), *twin = open_model(&m, 2, 0);
    m2_stream *so = open_model(&other_shape, 1, 0), *sp = open_model(&other_params, 1, 0);
    const size_t bytes = m2_stream_snapshot_bytes(s);
    unsigned char *good = malloc(bytes + 8), *bad = malloc(bytes + 8);
    float *ps = calloc((size_t)T * O, sizeof *ps), *pt = calloc((size_t)T * O, sizeof *pt);
    run(s, 0, &m, 0, T_SAVE, ps);
    run(twin, 0, &m, 0, T_SAVE, pt);
    run(s, 1, &m, 20, 30, ps); /* the snapshot offered below: another point of the same session */
    assert_int_equal(m2_stream_snapshot(s, 1, good, bytes), M2_OK);

    /* the calls' own arguments */
    assert_int_equal(m2_stream_snapshot(s, 2, good, bytes), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "stream"));
    assert_int_equal(m2_stream_snapshot(s, 0, bad, bytes - 1), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "m2_stream_snapshot_bytes"));
    assert_int_equal(m2_stream_restore(s, -1, good, bytes), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "stream"));
    refused(s, good, 10, "header");
    refused(s, NULL, bytes, "header");

    memset(bad, 0, bytes);
    refused(s, bad, bytes, "not a stream snapshot");
    memcpy(bad, good, bytes);
    bad[8] = 2; /* the version's low byte */
    refused(s, bad, bytes, "version 2");
    const size_t other_bytes = m2_stream_snapshot_bytes(so);
    unsigned char *wide = malloc(other_bytes);
    assert_int_equal(m2_stream_snapshot(so, 0, wide, other_bytes), M2_OK);
    refused(s, wide, other_bytes, "N = 12, this handle's has 10");
    assert_int_equal(m2_stream_snapshot(sp, 0, bad, bytes), M2_OK);
    refused(s, bad, bytes, "other parameters");
    refused(s, good, bytes - 4, "truncated");
    memcpy(bad, good, bytes);
    refused(s, bad, bytes + 4, "trailing bytes");
    bad[HEADER + 100] ^= 0x10; /* one bit of the payload */
    refused(s, bad, bytes, "checksum");
    /* a NaN under a checksum that matches it: a buffer made by other code, or damaged before it was summed */
    memcpy(bad, good, bytes);
    const float nan = NAN;
    memcpy(bad + HEADER + 5 * sizeof(float), &nan, sizeof nan);
    const uint64_t sum = m2_hash64(bad + HEADER, bytes - HEADER, 0);
    memcpy(bad + 56, &sum, sizeof sum); /* the checksum's place in the header (docs/FORMATS.md) */
    refused(s, bad, bytes, "non-finite value (float 5)");

    run(s, 0, &m, T_SAVE, T, ps);
    run(twin, 0, &m, T_SAVE, T, pt);
    assert_memory_equal(ps + (size_t)T_SAVE * O, pt + (size_t)T_SAVE * O, (size_t)(T - T_SAVE) * O * sizeof *ps);
    m2_stream_close(s);
    m2_stream_close(twin);
    m2_stream_close(so);
    m2_stream_close(sp);
    free(good);
    free(bad);
    free(wide);
    free(ps);
    free(pt);
    model_free(&m);
    model_free(&other_shape);
    model_free(&other_params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_continues_bitwise),
        cmocka_unit_test(test_restore_continues_bitwise_bf16),
        cmocka_unit_test(test_restore_across_weights),
        cmocka_unit_test(test_restore_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
