/* io/replay.h: the ticks of a universe's split come out in time order across instruments, each once, each
 * instrument's own rows in order, batched by the window rule (distinct instruments, span <= window, a batch closes
 * only when the next tick is too late or its instrument is already in it), with a reset at each session part's
 * first row; an instrument whose timestamps go back is refused. A small in-memory universe with many ties. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/replay.h"

enum { I = 5, SESS = 3, ROWS = 40 }; /* per instrument: SESS sessions of ROWS rows */

typedef struct {
    m2_dataset ds;
    int64_t ts[I * SESS * ROWS];
    int64_t sessions[I * SESS + 1];
    int32_t session_inst[I * SESS];
    int64_t max_fetch;
    char names[I][64];
} universe;

/* Instrument-major rows (as in a split of FORMATS.md "Universe"); timestamps on a coarse grid so that different
 * instruments often tick at the same nanosecond, and sometimes one instrument twice in a row at the same time. */
static void make_universe(universe *u, uint64_t seed)
{
    memset(u, 0, sizeof *u);
    m2_rng rng = {.key = m2_rng_key(seed, 0x7e91a7, 0, 0)};
    int64_t row = 0;
    for (int i = 0; i < I; i++) {
        int64_t t = 1000 + (int64_t)(m2_rng_next_u64(&rng) % 7);
        for (int s = 0; s < SESS; s++) {
            u->sessions[i * SESS + s] = row;
            u->session_inst[i * SESS + s] = i;
            for (int k = 0; k < ROWS; k++) {
                t += (int64_t)(m2_rng_next_u64(&rng) % 4); /* 0: a tie with the previous tick */
                u->ts[row++] = t;
            }
            t += 50; /* overnight */
        }
    }
    u->sessions[I * SESS] = row;
    u->ds.n_rows = row;
    u->ds.n_sessions = I * SESS;
    u->ds.sessions = u->sessions;
    u->ds.session_inst = u->session_inst;
    u->ds.n_instruments = I;
    for (int i = 0; i < I; i++) snprintf(u->names[i], sizeof u->names[i], "SYN%03d", i);
    u->ds.inst_name = u->names;
    for (int s = 0; s < 3; s++) u->ds.split[s][0] = u->ds.split[s][1] = 0;
}

static int fetch(void *ctx, int64_t row, int64_t n, int64_t *ts)
{
    universe *u = ctx;
    assert_true(row >= 0 && n > 0 && row + n <= u->ds.n_rows);
    if (n > u->max_fetch) u->max_fetch = n;
    memcpy(ts, u->ts + row, sizeof *ts * (size_t)n);
    return M2_OK;
}

static int is_part_begin(const universe *u, int split, int64_t row)
{
    if (row == u->ds.split[split][0]) return 1;
    for (int64_t s = 0; s <= u->ds.n_sessions; s++)
        if (u->sessions[s] == row) return 1;
    return 0;
}

/* Replays `split` with `window` and checks every property in the header. */
static void check_replay(universe *u, int split, int64_t window)
{
    const int64_t lo = u->ds.split[split][0], hi = u->ds.split[split][1];
    m2_replay r;
    assert_int_equal(m2_replay_init(&r, &u->ds, split, window, fetch, u), M2_OK);
    static int seen[I * SESS * ROWS];
    memset(seen, 0, sizeof seen);
    int64_t rows[I], last_row[I], prev_ts = INT64_MIN, prev_t0 = 0, total = 0, batches = 0;
    int streams[I], prev_inst[I], prev_n = 0, prev_stream = -1, n;
    unsigned char reset[I];
    for (int i = 0; i < I; i++) last_row[i] = -1;
    while (assert_int_equal(m2_replay_next(&r, rows, streams, reset, &n), M2_OK), n > 0) {
        const int64_t t0 = u->ts[rows[0]];
        if (batches > 0) { /* why the previous batch closed: too late, or its instrument was in it */
            int in_prev = 0;
            for (int k = 0; k < prev_n; k++) in_prev |= prev_inst[k] == streams[0];
            assert_true(t0 - prev_t0 > window || in_prev);
        }
        for (int k = 0; k < n; k++) {
            const int64_t row = rows[k], t = u->ts[row];
            assert_true(row >= lo && row < hi);
            assert_int_equal(seen[row]++, 0);
            for (int j = 0; j < k; j++) assert_int_not_equal(streams[j], streams[k]); /* one tick per stream */
            assert_true(t - t0 <= window && t >= t0);
            /* time order across the whole replay, ties by instrument index */
            assert_true(t > prev_ts || (t == prev_ts && streams[k] >= prev_stream));
            assert_true(row > last_row[streams[k]]); /* an instrument's own order */
            int64_t s = 0;
            while (u->sessions[s + 1] <= row) s++;
            assert_int_equal(streams[k], u->session_inst[s]);
            assert_int_equal(reset[k], is_part_begin(u, split, row));
            last_row[streams[k]] = row;
            prev_ts = t;
            prev_stream = streams[k];
            prev_inst[k] = streams[k];
        }
        prev_n = n;
        prev_t0 = t0;
        total += n;
        batches++;
    }
    assert_int_equal(total, hi - lo);
    assert_true(u->max_fetch <= M2_REPLAY_BUF);
    assert_true(batches < total || window == 0); /* the grid has ties: some batches hold several ticks */
    m2_replay_free(&r);
}

static void test_whole_and_cut_splits(void **state)
{
    (void)state;
    universe *u = malloc(sizeof *u);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        make_universe(u, seed);
        u->ds.split[0][1] = u->ds.n_rows; /* everything in train */
        for (int64_t w = 0; w <= 8; w += 4) check_replay(u, 0, w);
        /* a test split that starts inside a session: its first row is a part's first row */
        u->ds.split[2][0] = ROWS / 2;
        u->ds.split[2][1] = u->ds.n_rows - 3;
        check_replay(u, 2, 0);
        check_replay(u, 2, 5);
    }
    free(u);
}

/* Window 0 on this grid must put simultaneous ticks of different instruments together at least once. */
static void test_window_zero_batches_ties(void **state)
{
    (void)state;
    universe *u = malloc(sizeof *u);
    make_universe(u, 7);
    u->ds.split[0][1] = u->ds.n_rows;
    m2_replay r;
    assert_int_equal(m2_replay_init(&r, &u->ds, 0, 0, fetch, u), M2_OK);
    int64_t rows[I];
    int streams[I], n, widest = 0;
    unsigned char reset[I];
    while (assert_int_equal(m2_replay_next(&r, rows, streams, reset, &n), M2_OK), n > 0) {
        if (n > widest) widest = n;
        for (int k = 1; k < n; k++) assert_true(u->ts[rows[k]] == u->ts[rows[0]]);
    }
    assert_true(widest >= 2);
    m2_replay_free(&r);
    free(u);
}

static void test_time_going_back_is_refused(void **state)
{
    (void)state;
    universe *u = malloc(sizeof *u);
    make_universe(u, 3);
    u->ds.split[0][1] = u->ds.n_rows;
    const int64_t bad = 2 * SESS * ROWS + 17; /* instrument 2 */
    u->ts[bad] = u->ts[bad - 1] - 1000;
    m2_replay r;
    int rc = m2_replay_init(&r, &u->ds, 0, 0, fetch, u);
    int64_t rows[I];
    int streams[I], n = 1;
    unsigned char reset[I];
    while (rc == M2_OK && n > 0) rc = m2_replay_next(&r, rows, streams, reset, &n);
    assert_int_equal(rc, M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "instrument SYN002, row 257: timestamp"));
    assert_non_null(strstr(m2_last_error(), "is before the previous tick's"));
    m2_replay_free(&r);
    assert_int_equal(m2_replay_init(&r, &u->ds, 0, -1, fetch, u), M2_EUSAGE);
    m2_replay_free(&r);
    free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_and_cut_splits),
        cmocka_unit_test(test_window_zero_batches_ties),
        cmocka_unit_test(test_time_going_back_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
