/* The step path allocates nothing: this binary is linked with -Wl,--wrap for malloc, calloc, realloc, free,
 * aligned_alloc and posix_memalign, so every call from the engine's objects goes through a counter. After open
 * and one warm-up tick, 10000 single-stream steps with m2_stream_warm calls between them, 1000 batched steps,
 * resets, standardize and featuriser calls and state snapshots and restores must leave the counter where it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "stream/engine.h"
#include "stream_fixture.h"

static volatile long calls; /* volatile: GCC assumes malloc leaves globals alone */

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t al, size_t n);
int __real_posix_memalign(void **p, size_t al, size_t n);

void *__wrap_malloc(size_t n)
{
    calls++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    calls++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    calls++;
    return __real_realloc(p, n);
}
void __wrap_free(void *p)
{
    calls++;
    __real_free(p);
}
void *__wrap_aligned_alloc(size_t al, size_t n)
{
    calls++;
    return __real_aligned_alloc(al, n);
}
int __wrap_posix_memalign(void **p, size_t al, size_t n)
{
    calls++;
    return __real_posix_memalign(p, al, n);
}

/* The counter sees allocations made from this binary's objects (so the test can fail). */
static void test_counter_counts(void **state)
{
    long before = calls;
    void *volatile p = malloc(16); /* volatile: GCC may not pair up and drop the malloc/free */
    free(p);
    assert_int_equal(calls - before, 2);
}

static void run_ticks(int bf16)
{
    fixture_shape shape = fixture_default();
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), 0);
    float *params = fixture_params(&lay, 2, 1), *X = fixture_inputs(256, shape.F, 3);
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = 8;
    opt.bf16 = bf16;
    m2_stream *s;
    long at_open = calls;
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, &opt, &s), 0);
    assert_true(calls > at_open); /* the library's own allocations are seen (open does allocate) */
    float pred[8 * 3], x[8];
    double raw[8] = {0};
    int ids[3] = {6, 1, 4};
    m2_stream_step(s, 0, X, pred); /* warm-up */
    m2_stream_step_batch(s, 8, NULL, X, pred);
    const size_t snap_bytes = m2_stream_snapshot_bytes(s);
    unsigned char *snap = malloc(snap_bytes); /* the caller's buffer, before the count starts */
    long before = calls;
    for (int t = 0; t < 10000; t++) {
        if (t % 1000 == 0) m2_stream_reset(s, 0);
        m2_stream_standardize(s, raw, x);
        assert_int_equal(m2_stream_step(s, 0, X + (size_t)(t % 256) * shape.F, pred), 0);
        if (t % 10 == 0) assert_int_equal(m2_stream_warm(s, t % 20 ? 1 : 8, NULL), 0);
        if (t % 100 == 0) assert_int_equal(m2_stream_snapshot(s, 0, snap, snap_bytes), 0);
        if (t % 100 == 50) assert_int_equal(m2_stream_restore(s, 3, snap, snap_bytes), 0);
        const m2_stream_event ev = {.ts_ns = 1000000 * (int64_t)t,
                                    .bid_px = 100,
                                    .ask_px = 100.01 + 1e-3 * (t % 3),
                                    .bid_sz = 5 + t % 7,
                                    .ask_sz = 3,
                                    .trade_sz = t % 5,
                                    .side = t % 5 ? 1 : 0};
        assert_int_equal(m2_stream_features(s, 2, &ev, 0.01, NULL, raw), 0);
    }
    for (int t = 0; t < 1000; t++) {
        if (t % 100 == 0) m2_stream_reset(s, -1);
        assert_int_equal(
            m2_stream_step_batch(s, t % 2 ? 3 : 8, t % 2 ? ids : NULL, X + (size_t)(t % 32) * shape.F, pred), 0);
    }
    assert_int_equal(calls, before);
    free(snap);
    m2_stream_close(s);
    m2_layout_free(&lay);
    free(params);
    free(X);
}

static void test_no_allocation_per_tick(void **state) { run_ticks(0); }
static void test_no_allocation_per_tick_bf16(void **state) { run_ticks(1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_counts),
        cmocka_unit_test(test_no_allocation_per_tick),
        cmocka_unit_test(test_no_allocation_per_tick_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
