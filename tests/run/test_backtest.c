/* The trading view and the selection rule on hand-worked cases: the H-row book, half-spread costs, turnover, hit
 * rate, drawdown and the Sharpe from blocks (backtest.h); deciles; the block-shuffle control (research.h); the
 * best-so-far / patience rule and train.select_by parsing (select.h, config.h). The data are small binary fractions,
 * so sums are exact up to double rounding: 1e-12. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/config.h"
#include "base/error.h"
#include "run/backtest.h"
#include "run/research.h"
#include "run/select.h"

#define TOL 1e-12
#define assert_near(a, b)                                                                \
    do {                                                                                 \
        double a_ = (a), b_ = (b);                                                       \
        if (!(fabs(a_ - b_) <= TOL)) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_); \
    } while (0)

static m2_dataset one_session(int64_t n, int64_t *sessions)
{
    m2_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n_rows = n;
    ds.n_sessions = 1;
    sessions[0] = 0;
    sessions[1] = n;
    ds.sessions = sessions;
    return ds;
}

static void test_book_costs_and_stats(void **state)
{
    (void)state;
    int64_t sessions[2], row[6] = {0, 1, 2, 3, 4, 5};
    m2_dataset ds = one_session(6, sessions);
    /* H = 2, scale 1: pos = clip(pred) = [1, 1, -1, -.5, 1, 0] (row 5 has no target, so no position).
     * Book P = (pos_t + pos_t-1) / 2 = [.5, 1, 0, -.75, .25, .5], closed after row 5:
     * traded .5 + .5 + 1 + .75 + 1 + (.25 + .5) = 4.5, cost 4.5 x .5 = 2.25; gross pos * y / 2 = [1, 2, 1, -1.5, .5, 0]
     * = 3; net .75. Hits: pos * y > 0 in 4 of the 5 rows with a position. */
    const float pred[6] = {1, 3, -1, -0.5f, 2, 1}, y[6] = {2, 4, -2, 6, 1, NAN}, hs[6] = {.5, .5, .5, .5, .5, .5};
    float cum[6];
    m2_bt_stats s;
    assert_int_equal(m2_backtest(&ds, row, pred, y, hs, 6, 1, 0, 2, 1.0, &s, cum), M2_OK);
    assert_near(s.gross_bp_day, 3.0);
    assert_near(s.cost_bp_day, 2.25);
    assert_near(s.net_bp_day, 0.75);
    assert_near(s.turnover_day, 4.5);
    assert_near(s.hit_rate, 0.8);
    /* per-row net: 1 - .25, 2 - .25, 1 - .5, -1.5 - .375, .5 - .5, 0 - .375 -> cum .75, 2.5, 3, 1.125, 1.125, .75 */
    const double want_cum[6] = {0.75, 2.5, 3.0, 1.125, 1.125, 0.75};
    for (int i = 0; i < 6; i++) assert_near(cum[i], want_cum[i]);
    assert_near(s.max_dd_bp, 3.0 - 0.75);
    /* one session < M2_BT_MIN_DAYS: 13 blocks, rows land in blocks (i * 13) / 6 = 0, 2, 4, 6, 8, 10 */
    assert_int_equal(s.periods, M2_BT_BLOCKS);
    assert_int_equal(s.periods_per_day, M2_BT_BLOCKS);
    const double net[6] = {0.75, 1.75, 0.5, -1.875, 0, -0.375};
    double mean = 0.75 / 13, var = 0;
    for (int i = 0; i < 6; i++) var += (net[i] - mean) * (net[i] - mean);
    var += 7 * mean * mean;
    double sd = sqrt(var / 12);
    assert_near(s.sharpe_t, mean / sd * sqrt(13.0));
    assert_near(s.sharpe, mean / sd * sqrt(252.0 * 13));
    /* without quotes: no cost */
    assert_int_equal(m2_backtest(&ds, row, pred, y, NULL, 6, 1, 0, 2, 1.0, &s, NULL), M2_OK);
    assert_near(s.net_bp_day, 3.0);
}

static void test_parts_restart_the_book(void **state)
{
    (void)state;
    /* rows 0,1 | 3,4 (a gap: two parts); H = 2, pos = 1 everywhere: each part trades .5, .5 then closes 1 -> 2 */
    int64_t sessions[2], row[4] = {0, 1, 3, 4};
    m2_dataset ds = one_session(5, sessions);
    const float pred[4] = {1, 1, 1, 1}, y[4] = {1, 1, 1, 1}, hs[4] = {1, 1, 1, 1};
    m2_bt_stats s;
    assert_int_equal(m2_backtest(&ds, row, pred, y, hs, 4, 1, 0, 2, 1.0, &s, NULL), M2_OK);
    assert_int_equal(s.sessions, 2);
    assert_near(s.turnover_day, 2.0);
    assert_near(s.gross_bp_day, 1.0); /* 4 rows x 1 x 1 / 2, over 2 parts */
}

static void test_deciles_and_scale(void **state)
{
    (void)state;
    float p[21], y[21];
    for (int i = 0; i < 20; i++) p[i] = (float)(19 - i), y[i] = (float)(2 * (19 - i)); /* decreasing order */
    p[20] = NAN, y[20] = 5;                                                            /* dropped */
    double mean[M2_DECILES];
    assert_int_equal(m2_bt_deciles(p, y, 21, 1, 0, mean), M2_OK);
    for (int d = 0; d < M2_DECILES; d++) assert_near(mean[d], 4.0 * d + 1); /* rows 2d, 2d+1: y = 4d, 4d + 2 */
    const float q[4] = {1, 3, NAN, 5};
    assert_near(m2_bt_scale(q, 4, 1, 0), 2.0); /* sd of 1, 3, 5 (n - 1) */
}

static void test_control_moves_blocks(void **state)
{
    (void)state;
    enum { n = 26 };
    int64_t sessions[2], row[n];
    float pred[n], target[n], moved[n];
    for (int i = 0; i < n; i++) row[i] = i, pred[i] = 0, target[i] = (float)i;
    m2_dataset ds = one_session(n, sessions);
    m2_eval_rows rows = {.M = n, .O = 1, .row = row, .pred = pred, .target = target};
    assert_int_equal(m2_control_shuffle(&ds, &rows, moved), M2_OK);
    /* 13 blocks of 2 rows; block i takes block (i + 6) mod 13 */
    for (int i = 0; i < n; i++) assert_near(moved[i], ((i / 2 + 6) % 13) * 2 + i % 2);
    rows.M = 1;
    assert_int_equal(m2_control_shuffle(&ds, &rows, moved), M2_EUSAGE); /* one row: one block */
}

static void test_selection_rule(void **state)
{
    (void)state;
    m2_selection s = {NAN, -1, 0};
    assert_int_equal(m2_selection_update(&s, NAN, 1), 0); /* a NaN score is never a best */
    assert_int_equal(m2_selection_update(&s, -3.0, 2), 1);
    assert_int_equal(m2_selection_update(&s, -3.0, 3), 0); /* equal is not better */
    assert_int_equal(s.since, 1);
    assert_false(m2_selection_exhausted(&s, 2));
    assert_int_equal(m2_selection_update(&s, -4.0, 4), 0);
    assert_true(m2_selection_exhausted(&s, 2));
    assert_false(m2_selection_exhausted(&s, 0)); /* patience 0: never */
    assert_int_equal(m2_selection_update(&s, -2.5, 5), 1);
    assert_int_equal(s.best_step, 5);
    assert_int_equal(s.since, 0);
    m2_val_result v = {.loss = 2.0, .O = 2, .horizons = {10, 100}};
    v.m[1].ic = 0.25;
    assert_near(m2_select_score(&v, 0), -2.0);
    assert_near(m2_select_score(&v, 100), 0.25);
    assert_true(isnan(m2_select_score(&v, 50)));
    assert_int_equal(m2_select_by_horizon("val_loss"), 0);
    assert_int_equal(m2_select_by_horizon("ic@100"), 100);
    const char *bad[] = {"ic@", "ic@0", "ic@-5", "ic@10x", "loss", "IC@10", "ic@ 10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(m2_select_by_horizon(bad[i]), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_book_costs_and_stats), cmocka_unit_test(test_parts_restart_the_book),
        cmocka_unit_test(test_deciles_and_scale),    cmocka_unit_test(test_control_moves_blocks),
        cmocka_unit_test(test_selection_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
