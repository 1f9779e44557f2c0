/* Features and targets: hand-computed values on a tiny event list, NaN targets exactly where a horizon crosses a
 * session end, statistics from the train split only, time splits at session boundaries, option parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/error.h"
#include "io/features.h"
#include "io/synth.h"
#include "io_test_util.h"

/* n events in one session, all arrays allocated (the caller fills them). */
static void alloc_events(m2_dataset *ds, int64_t n)
{
    memset(ds, 0, sizeof *ds);
    ds->n_rows = n;
    ds->ts_ns = calloc((size_t)n, sizeof *ds->ts_ns);
    double **cols[] = {&ds->bid_px, &ds->ask_px, &ds->bid_sz, &ds->ask_sz, &ds->trade_px, &ds->trade_sz};
    for (int i = 0; i < 6; i++) *cols[i] = calloc((size_t)n, sizeof(double));
    ds->side = calloc((size_t)n, 1);
    ds->n_sessions = 1;
    ds->sessions = malloc(2 * sizeof *ds->sessions);
    ds->sessions[0] = 0;
    ds->sessions[1] = n;
    ds->tick_size = 0.01;
}

static void test_hand_computed_features(void **state)
{
    m2_dataset ds;
    alloc_events(&ds, 3);
    const int64_t t0 = INT64_C(1704187800) * 1000000000; /* 2024-01-02 09:30:00 UTC */
    double bid[] = {100.00, 100.01, 100.01}, ask[] = {100.02, 100.02, 100.04};
    double bs[] = {300, 200, 0}, as[] = {100, 100, 0};
    for (int i = 0; i < 3; i++) {
        ds.bid_px[i] = bid[i];
        ds.ask_px[i] = ask[i];
        ds.bid_sz[i] = bs[i];
        ds.ask_sz[i] = as[i];
        ds.trade_px[i] = NAN;
        ds.ts_ns[i] = t0 + i * INT64_C(1500000000); /* 1.5 s apart */
    }
    ds.trade_px[2] = 100.03;
    ds.trade_sz[2] = 50;
    ds.side[2] = -1;
    m2_feature_opts o;
    m2_feature_opts_defaults(&o);
    o.n_horizons = 2;
    o.horizons[0] = 1;
    o.horizons[1] = 2;
    assert_int_equal(m2_features_compute(&ds, &o), M2_OK);
    const float *x = ds.X;
    const int F = M2_N_FEATURES;
    /* Tolerance: the features are computed in double and stored as float (relative error ~6e-8). */
    const double tol = 1e-5;
    /* row 0: first of its session: no return, no OFI, no dt */
    assert_float_equal(x[M2_FEAT_MID_RET], 0, tol);
    assert_float_equal(x[M2_FEAT_SPREAD], 2, tol);
    assert_float_equal(x[M2_FEAT_QUEUE_IMB], 0.5, tol); /* (300-100)/400 */
    assert_float_equal(x[M2_FEAT_OFI], 0, tol);
    assert_float_equal(x[M2_FEAT_DT], 0, tol);
    double tod = 9.5 / 24 * 2 * M_PI;
    assert_float_equal(x[M2_FEAT_TOD_SIN], sin(tod), tol);
    assert_float_equal(x[M2_FEAT_TOD_COS], cos(tod), tol);
    /* row 1: bid up a tick with 200 → e = +200 (bid) - 100 (ask same: -q_a,t + q_a,t-1 = -100 + 100) = 200 */
    assert_float_equal(x[F + M2_FEAT_MID_RET], 1e4 * log(100.015 / 100.01), tol);
    assert_float_equal(x[F + M2_FEAT_SPREAD], 1, tol);
    assert_float_equal(x[F + M2_FEAT_OFI], log1p(200), tol);
    assert_float_equal(x[F + M2_FEAT_DT], log1p(1.5), tol);
    assert_float_equal(x[F + M2_FEAT_TRADE], 0, tol);
    /* row 2: bid same (+0 - 200), ask up (ask_t >= ask_t-1: + q_a,t-1 = +100) → e = -100; sell of 50 */
    assert_float_equal(x[2 * F + M2_FEAT_OFI], -log1p(100), tol);
    assert_float_equal(x[2 * F + M2_FEAT_QUEUE_IMB], 0, tol); /* sizes unknown */
    assert_float_equal(x[2 * F + M2_FEAT_TRADE], -log1p(50), tol);
    /* targets: forward mid log-return in bp; NaN past the session end */
    assert_float_equal(ds.y[0], 1e4 * log(100.015 / 100.01), tol);
    assert_float_equal(ds.y[1], 1e4 * log(100.025 / 100.01), tol);
    assert_float_equal(ds.y[2], 1e4 * log(100.025 / 100.015), tol);
    assert_true(isnan(ds.y[3]));
    assert_true(isnan(ds.y[4]) && isnan(ds.y[5]));
    assert_string_equal(ds.feature_names[M2_FEAT_OFI], "ofi");
    m2_dataset_free(&ds);
}

static void small_synth(m2_dataset *ds, int64_t ticks, int sessions)
{
    m2_synth_opts o;
    m2_synth_defaults(&o);
    o.ticks = ticks;
    o.sessions = sessions;
    o.seed = 7;
    assert_int_equal(m2_synth_events(&o, ds, NULL), M2_OK);
}

static void test_nan_targets_exactly_at_session_ends(void **state)
{
    m2_dataset ds;
    small_synth(&ds, 3000, 3);
    m2_feature_opts o;
    m2_feature_opts_defaults(&o);
    o.split[0] = 0.55; /* a cut inside session 2 (rows 1000..2000): splits it */
    o.split[1] = 0.12; /* a cut at 2010: snaps to the boundary at 2000 */
    o.split[2] = 0.33;
    assert_int_equal(m2_features_build(&ds, &o), M2_OK);
    assert_int_equal(ds.n_sessions, 4); /* the cut at 1650 became a session boundary */
    int64_t nan_count = 0;
    for (int64_t s = 0; s < ds.n_sessions; s++)
        for (int64_t i = ds.sessions[s]; i < ds.sessions[s + 1]; i++)
            for (int k = 0; k < ds.n_targets; k++) {
                int crosses = i + ds.horizons[k] >= ds.sessions[s + 1];
                float v = ds.y[i * ds.n_targets + k];
                if (crosses != (int)isnan(v))
                    fail_msg("row %lld horizon %d: NaN %d, crosses %d", (long long)i, (int)ds.horizons[k],
                             (int)isnan(v), crosses);
                nan_count += crosses;
            }
    assert_int_equal(nan_count, 4 * (10 + 50 + 100));
    m2_dataset_free(&ds);
}

static void test_statistics_from_train_only(void **state)
{
    m2_dataset a, b;
    small_synth(&a, 20000, 10);
    small_synth(&b, 20000, 10);
    m2_feature_opts o;
    m2_feature_opts_defaults(&o);
    assert_int_equal(m2_features_split(&b, o.split), M2_OK);
    int64_t val0 = b.split[M2_SPLIT_VAL][0];
    /* Change every val/test row: prices, sizes, trades and times. */
    for (int64_t i = val0; i < b.n_rows; i++) {
        b.bid_px[i] *= 3;
        b.ask_px[i] = b.ask_px[i] * 3 + 0.05;
        b.bid_sz[i] += 1000;
        b.trade_sz[i] *= 10;
        b.side[i] = (int8_t)-b.side[i];
        b.ts_ns[i] += (i - val0) * INT64_C(7000000000);
    }
    assert_int_equal(m2_features_build(&a, &o), M2_OK);
    assert_int_equal(m2_features_build(&b, &o), M2_OK);
    assert_int_equal(a.split[M2_SPLIT_VAL][0], val0);
    assert_memory_equal(a.mean, b.mean, sizeof a.mean);
    assert_memory_equal(a.std, b.std, sizeof a.std);
    assert_memory_equal(a.X, b.X, (size_t)(val0 * a.n_features) * sizeof(float));
    /* ... and the val rows did change (so the comparison above could have failed). */
    assert_memory_not_equal(a.X + val0 * a.n_features, b.X + val0 * b.n_features,
                            (size_t)((a.n_rows - val0) * a.n_features) * sizeof(float));

    /* Changing one train row does change the statistics. */
    m2_dataset c;
    small_synth(&c, 20000, 10);
    c.bid_sz[5] += 1e6;
    assert_int_equal(m2_features_build(&c, &o), M2_OK);
    assert_true(c.mean[M2_FEAT_QUEUE_IMB] != a.mean[M2_FEAT_QUEUE_IMB]);

    /* The train rows are z-scored: mean 0, std 1 up to clipping (clip 5 moves a few heavy-tailed values). */
    int64_t n = a.split[0][1];
    for (int j = 0; j < a.n_features; j++) {
        double s = 0, ss = 0;
        for (int64_t i = 0; i < n; i++) {
            s += a.X[i * a.n_features + j];
            ss += (double)a.X[i * a.n_features + j] * a.X[i * a.n_features + j];
        }
        assert_float_equal(s / (double)n, 0, 0.05);
        assert_float_equal(sqrt(ss / (double)n), 1, 0.1);
    }
    m2_dataset_free(&a);
    m2_dataset_free(&b);
    m2_dataset_free(&c);
}

static void test_split_snaps_to_sessions(void **state)
{
    m2_dataset ds;
    small_synth(&ds, 10000, 10);      /* sessions every 1000 rows */
    double f[3] = {0.78, 0.12, 0.10}; /* cuts at 7800 (snaps to 8000) and 9000 (a boundary) */
    assert_int_equal(m2_features_split(&ds, f), M2_OK);
    assert_int_equal(ds.split[0][1], 8000);
    assert_int_equal(ds.split[1][0], 8000);
    assert_int_equal(ds.split[1][1], 9000);
    assert_int_equal(ds.split[2][1], 10000);
    assert_int_equal(ds.n_sessions, 10);
    m2_dataset_free(&ds);

    small_synth(&ds, 10000, 2); /* sessions of 5000: the cuts cannot snap */
    double g[3] = {0.8, 0.1, 0.1};
    assert_int_equal(m2_features_split(&ds, g), M2_OK);
    assert_int_equal(ds.split[0][1], 8000);
    assert_int_equal(ds.split[1][1], 9000);
    assert_int_equal(ds.n_sessions, 4);
    int64_t want[] = {0, 5000, 8000, 9000, 10000};
    assert_memory_equal(ds.sessions, want, sizeof want);
    m2_dataset_free(&ds);
}

/* A split asked for that would get no rows says which one and what it would get (the message was "the train split
 * would be empty" whichever it was, and an empty val or test split was accepted). */
static void test_empty_split_named(void **state)
{
    m2_dataset ds;
    small_synth(&ds, 400, 1);
    double f[3] = {0.001, 0.998, 0.001};
    assert_int_equal(m2_features_split(&ds, f), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "--split (0.001,0.998,0.001): the train split would get 0 of 400 rows"));
    assert_non_null(strstr(m2_last_error(), "0.001 x 400 = 0.4"));
    m2_dataset_free(&ds);

    small_synth(&ds, 10000, 1);
    double g[3] = {0.9999, 0.00005, 0.00005}; /* val gets row 9999, test nothing */
    assert_int_equal(m2_features_split(&ds, g), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "the test split would get 0 of 10000 rows"));
    assert_non_null(strstr(m2_last_error(), "or 0"));
    m2_dataset_free(&ds);

    small_synth(&ds, 400, 1);
    double h[3] = {0.5, 0.5, 0}; /* a split not asked for may be empty */
    assert_int_equal(m2_features_split(&ds, h), M2_OK);
    m2_dataset_free(&ds);
}

static void test_option_parsing(void **state)
{
    m2_feature_opts o;
    m2_feature_opts_defaults(&o);
    assert_int_equal(m2_parse_horizons("1,5, 20", "--horizons", &o), M2_OK);
    assert_int_equal(o.n_horizons, 3);
    assert_int_equal(o.horizons[2], 20);
    assert_int_equal(m2_parse_horizons("10,0", "--horizons", &o), M2_EUSAGE);
    assert_int_equal(m2_parse_horizons("10,10", "--horizons", &o), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "repeated"));
    assert_int_equal(m2_parse_horizons("1.5", "--horizons", &o), M2_EUSAGE);
    assert_int_equal(m2_parse_horizons("", "--horizons", &o), M2_EUSAGE);
    assert_int_equal(m2_parse_horizons("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "--horizons", &o), M2_EUSAGE);
    assert_int_equal(m2_parse_split("0.7,0.2,0.1", "--split", &o), M2_OK);
    assert_true(o.split[1] == 0.2);
    assert_int_equal(m2_parse_split("0.7,0.2", "--split", &o), M2_EUSAGE);
    assert_int_equal(m2_parse_split("0.7,0.2,0.2", "--split", &o), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "sum to 1"));
    assert_int_equal(m2_parse_split("0,0.5,0.5", "--split", &o), M2_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed_features),     cmocka_unit_test(test_nan_targets_exactly_at_session_ends),
        cmocka_unit_test(test_statistics_from_train_only), cmocka_unit_test(test_split_snaps_to_sessions),
        cmocka_unit_test(test_empty_split_named),          cmocka_unit_test(test_option_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
