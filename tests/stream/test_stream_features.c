/* The live featuriser (mamba2_stream.h: m2_stream_features): over a simulated market's events, session by session,
 * it gives the features m2_features_compute put in the dataset's rows, bit for bit, with and without depth
 * features; a snapshot carries the stream's last event to another handle; bad events and models whose features
 * are not the featuriser's are refused with the reason, and a refused event leaves the stream's memory as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/features.h"
#include "io/synth.h"
#include "stream/engine.h"
#include "stream_fixture.h"

typedef struct {
    m2_dataset ds;
    m2_layout lay;
    float *params;
    int levels;
} market;

/* A simulated market of 3 sessions with `levels` book levels (0: no depth features), its unnormalised features, and
 * a small model taking them. */
static void market_init(market *m, int levels)
{
    memset(m, 0, sizeof *m);
    m2_synth_opts o;
    m2_synth_defaults(&o);
    o.ticks = 3000;
    o.sessions = 3;
    o.levels = levels;
    assert_int_equal(m2_synth_events(&o, &m->ds, NULL), M2_OK);
    assert_int_equal(m2_features_compute(&m->ds, &o.feat), M2_OK);
    fixture_shape shape = {m->ds.n_features, 3, 16, 1, 2, 16, 16, 1, 4};
    assert_int_equal(fixture_layout(&m->lay, shape), M2_OK);
    m->params = fixture_params(&m->lay, 3, 1);
    m->levels = levels;
}

static void market_free(market *m)
{
    m2_dataset_free(&m->ds);
    m2_layout_free(&m->lay);
    free(m->params);
}

static m2_stream *open_market(const market *m, int max_streams)
{
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = max_streams;
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(&m->lay, m->params, NULL, NULL, &opt, &s), M2_OK);
    return s;
}

static m2_stream_event event_at(const m2_dataset *ds, int64_t i)
{
    m2_stream_event e = {.ts_ns = ds->ts_ns[i],
                         .bid_px = ds->bid_px[i],
                         .ask_px = ds->ask_px[i],
                         .bid_sz = ds->bid_sz[i],
                         .ask_sz = ds->ask_sz[i],
                         .trade_sz = ds->trade_sz[i],
                         .side = ds->side[i]};
    return e;
}

static int features_at(m2_stream *s, int stream, const market *m, int64_t i, double *raw)
{
    const m2_stream_event e = event_at(&m->ds, i);
    return m2_stream_features(s, stream, &e, m->ds.tick_size, m->levels ? m->ds.book + i * 4 * m->levels : NULL, raw);
}

/* Every row of every session, the stream reset at each session's start, against the dataset's row. */
static void matches_dataset(int levels)
{
    market m;
    market_init(&m, levels);
    const int F = m.ds.n_features;
    assert_int_equal(F, M2_N_FEATURES + (levels ? levels + 1 : 0));
    m2_stream *s = open_market(&m, 2);
    double raw[M2_MAX_FEATURES];
    for (int64_t k = 0; k < m.ds.n_sessions; k++) {
        m2_stream_reset(s, 1);
        for (int64_t i = m.ds.sessions[k]; i < m.ds.sessions[k + 1]; i++) {
            assert_int_equal(features_at(s, 1, &m, i, raw), M2_OK);
            for (int f = 0; f < F; f++) {
                const float x = (float)raw[f];
                if (raw[f] != (double)x || memcmp(&x, m.ds.X + i * F + f, sizeof x) != 0)
                    fail_msg("row %lld feature %d: %.9g, the dataset has %.9g", (long long)i, f, raw[f],
                             (double)m.ds.X[i * F + f]);
            }
        }
    }
    m2_stream_close(s);
    market_free(&m);
}

static void test_matches_dataset(void **state) { matches_dataset(0); }
static void test_matches_dataset_depth(void **state) { matches_dataset(3); }

/* The last event travels in a snapshot: the event after the hand-over gets the features of a session's middle
 * (its time step and return from the previous event), not of a session's first row. */
static void test_snapshot_carries_last_event(void **state)
{
    market m;
    market_init(&m, 0);
    m2_stream *a = open_market(&m, 1), *b = open_market(&m, 2);
    double ra[M2_MAX_FEATURES], rb[M2_MAX_FEATURES];
    for (int64_t i = 0; i < 10; i++) assert_int_equal(features_at(a, 0, &m, i, ra), M2_OK);
    const size_t bytes = m2_stream_snapshot_bytes(a);
    unsigned char *snap = malloc(bytes);
    assert_int_equal(m2_stream_snapshot(a, 0, snap, bytes), M2_OK);
    assert_int_equal(m2_stream_restore(b, 1, snap, bytes), M2_OK);
    assert_int_equal(features_at(a, 0, &m, 10, ra), M2_OK);
    assert_int_equal(features_at(b, 1, &m, 10, rb), M2_OK);
    assert_memory_equal(ra, rb, sizeof(double) * (size_t)m.ds.n_features);
    assert_true(ra[M2_FEAT_DT] > 0); /* a first row's would be 0 */
    m2_stream_close(a);
    m2_stream_close(b);
    free(snap);
    market_free(&m);
}

/* Calls m2_stream_features with event e on stream 0, expecting M2_EUSAGE and `why` in the message. */
static void refused(m2_stream *s, const m2_stream_event *e, double tick, const double *book, const char *why)
{
    double raw[M2_MAX_FEATURES];
    assert_int_equal(m2_stream_features(s, 0, e, tick, book, raw), M2_EUSAGE);
    if (!strstr(m2_last_error(), why)) fail_msg("expected \"%s\" in: %s", why, m2_last_error());
}

static void test_refusals(void **state)
{
    market m, deep;
    market_init(&m, 0);
    market_init(&deep, 2);
    m2_stream *s = open_market(&m, 1), *twin = open_market(&m, 1), *sd = open_market(&deep, 1);
    double raw[M2_MAX_FEATURES], want[M2_MAX_FEATURES];
    assert_int_equal(features_at(s, 0, &m, 0, raw), M2_OK);
    assert_int_equal(features_at(twin, 0, &m, 0, raw), M2_OK);
    const m2_stream_event good = event_at(&m.ds, 1);
    m2_stream_event e = good;
    assert_int_equal(m2_stream_features(s, 1, &good, m.ds.tick_size, NULL, raw), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "stream"));
    refused(s, &good, 0.0, NULL, "tick_size");
    refused(s, NULL, m.ds.tick_size, NULL, "NULL");
    e.bid_px = NAN;
    refused(s, &e, m.ds.tick_size, NULL, "bid_px");
    e = good;
    e.ask_sz = -1;
    refused(s, &e, m.ds.tick_size, NULL, "ask_sz");
    e = good;
    e.side = 2;
    refused(s, &e, m.ds.tick_size, NULL, "side");
    e = good;
    e.ts_ns = m.ds.ts_ns[0] - 1;
    refused(s, &e, m.ds.tick_size, NULL, "ts_ns");
    refused(sd, &good, m.ds.tick_size, NULL, "book");
    /* after the refusals, the stream's memory is still event 0: the same features as the twin's for event 1 */
    assert_int_equal(features_at(s, 0, &m, 1, raw), M2_OK);
    assert_int_equal(features_at(twin, 0, &m, 1, want), M2_OK);
    assert_memory_equal(raw, want, sizeof(double) * M2_N_FEATURES);
    /* a model whose features are other than the featuriser's (the checkpoint's names; or a count it cannot make) */
    char names[M2_MAX_FEATURES][32];
    for (int f = 0; f < M2_N_FEATURES; f++) strcpy(names[f], m2_feature_name[f]);
    strcpy(names[3], "my_ofi");
    m2s_set_feature_names(s, (const char(*)[32])names);
    refused(s, &good, m.ds.tick_size, NULL, "feature 3 is 'my_ofi', the featuriser's is 'ofi'");
    fixture_shape nine = {M2_N_FEATURES + 1, 3, 16, 1, 2, 16, 16, 1, 4};
    m2_layout lay9;
    assert_int_equal(fixture_layout(&lay9, nine), M2_OK);
    float *p9 = fixture_params(&lay9, 1, 0);
    m2_stream *s9;
    assert_int_equal(m2_stream_open_params(&lay9, p9, NULL, NULL, NULL, &s9), M2_OK);
    refused(s9, &good, m.ds.tick_size, NULL, "takes 9 features");
    m2_stream_close(s9);
    m2_layout_free(&lay9);
    free(p9);
    m2_stream_close(s);
    m2_stream_close(twin);
    m2_stream_close(sd);
    market_free(&m);
    market_free(&deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_dataset),
        cmocka_unit_test(test_matches_dataset_depth),
        cmocka_unit_test(test_snapshot_carries_last_event),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
