/* CSV import: timestamps (ISO-8601 and integer ns), quotes and trades, every kind of bad row counted and
 * reported with its line number and never kept, --strict, sessions at gaps, header errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/error.h"
#include "io/import_csv.h"
#include "io/import_files.h"
#include "io_test_util.h"

#define NS INT64_C(1000000000)
#define T0 (INT64_C(1704187800) * NS) /* 2024-01-02T09:30:00Z */

static void test_timestamps(void **state)
{
    int64_t t;
    assert_int_equal(m2_parse_timestamp("2024-01-02T09:30:00Z", &t), M2_OK);
    assert_true(t == T0);
    assert_int_equal(m2_parse_timestamp("2024-01-02 09:30:00", &t), M2_OK); /* no offset: UTC */
    assert_true(t == T0);
    assert_int_equal(m2_parse_timestamp("2024-01-02T10:30:00+01:00", &t), M2_OK);
    assert_true(t == T0);
    assert_int_equal(m2_parse_timestamp("2024-01-02T04:30:00-0500", &t), M2_OK);
    assert_true(t == T0);
    assert_int_equal(m2_parse_timestamp("2024-01-02T09:30:00.5Z", &t), M2_OK);
    assert_true(t == T0 + NS / 2);
    assert_int_equal(m2_parse_timestamp("2024-01-02T09:30:00.123456789123Z", &t), M2_OK); /* sub-ns dropped */
    assert_true(t == T0 + 123456789);
    assert_int_equal(m2_parse_timestamp("1704187800000000001", &t), M2_OK);
    assert_true(t == T0 + 1);
    assert_int_equal(m2_parse_timestamp("1970-01-01T00:00:00Z", &t), M2_OK);
    assert_true(t == 0);
    assert_int_equal(m2_parse_timestamp("2000-02-29T00:00:00Z", &t), M2_OK); /* leap day */
    assert_true(t == INT64_C(951782400) * NS);
    const char *bad[] = {"", "2024-01-02", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2024-01-02T24:00:00Z",
                         "2024-01-02T09:30:00X", "2024-01-02T09:30:00.Z", "12abc", "-5", "2024-01-02T09:30",
                         /* outside int64 ns since 1970 (the range import_csv.h defines): these wrapped silently */
                         "1600-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "1970-01-01T00:30:00+01:00",
                         "2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (m2_parse_timestamp(bad[i], &t) == M2_OK) fail_msg("accepted bad timestamp \"%s\"", bad[i]);
    /* the last year in range still parses, exactly */
    assert_int_equal(m2_parse_timestamp("2261-12-31T23:59:59.999999999Z", &t), M2_OK);
    assert_true(t == INT64_C(9214646399) * NS + 999999999);
}

static const char quotes_csv[] =
    "ts,bid,ask,bid_size,ask_size,venue\n"                          /* line 1; an extra column is ignored */
    "2024-01-02T09:30:00Z,100.00,100.02,300,200,X\n"                /* 2 ok */
    "2024-01-02T09:30:00.5Z,100.01,100.02,100,200,X\n"              /* 3 ok */
    "1704187801000000000,100.01,100.03,100,200,X\n"                 /* 4 ok (ns) */
    "2024-01-02T09:30:02Z,abc,100.03,100,200,X\n"                   /* 5 unparsable bid */
    "2024-01-02T09:30:03Z,100.05,100.03,100,200,X\n"                /* 6 bid > ask */
    "2024-01-02T09:29:00Z,100.01,100.03,100,200,X\n"                /* 7 time goes backwards */
    "2024-01-02T09:30:04Z,-1,100.03,100,200,X\n"                    /* 8 non-positive */
    "2024-01-02T09:30:05Z,100.02,inf,100,200,X\n"                   /* 9 non-finite */
    "\n"                                                            /* 10 blank: skipped, not bad */
    "2024-01-02T09:30:06Z,100.02,100.04\n"                          /* 11 too few fields */
    "2024-01-02T09:30:07Z,100.02,100.04,-5,200,X\n"                 /* 12 negative size */
    "not a time,100.02,100.04,100,200,X\n"                          /* 13 unparsable ts */
    "\"2024-01-02T09:30:08Z\",\"100.02\",100.04,100,200,\"a, b\"\n" /* 14 ok (quoted fields) */
    "2024-01-03T09:30:00Z,100.02,100.04,100,200,X\n"                /* 15 ok, next day: new session */
    "2024-01-03T09:30:01Z,100.03,100.04,100,200,X\r\n"              /* 16 ok (CRLF) */
    "2024-01-03T09:30:02Z,100.03,100.05,100,200,X\n";               /* 17 ok */

/* The report lists exactly these bad rows, in order, each with its reason. */
static void expect_bad_rows(const m2_import_report *rep, const int64_t *lines, const char *const *why, int n)
{
    assert_int_equal(rep->n_listed, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rep->bad_line[i], lines[i]);
        if (!strstr(rep->bad_why[i], why[i]))
            fail_msg("line %lld: '%s' lacks '%s'", (long long)lines[i], rep->bad_why[i], why[i]);
    }
}

static void test_quotes_good_and_bad_rows(void **state)
{
    const char *p = test_path("quotes.csv");
    write_text(p, quotes_csv);
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_OK);
    assert_int_equal(rep.lines, 15);
    assert_int_equal(rep.rows, 7);
    assert_int_equal(rep.bad, 8);
    const int64_t lines[] = {5, 6, 7, 8, 9, 11, 12, 13};
    const char *why[] = {"unparsable bid", "bid 100.05 > ask 100.03", "time goes backwards", "non-positive bid",
                         "non-finite ask", "3 fields, expected 5",    "negative bid_size",   "unparsable ts"};
    expect_bad_rows(&rep, lines, why, 8);
    /* Only good rows were kept, in order. */
    assert_int_equal(ds.n_rows, 7);
    assert_true(ds.ts_ns[0] == T0);
    assert_true(ds.ts_ns[1] == T0 + NS / 2);
    assert_true(ds.ts_ns[2] == T0 + NS);
    assert_true(ds.bid_px[3] == 100.02 && ds.ask_px[3] == 100.04);
    assert_true(ds.bid_sz[0] == 300 && ds.ask_sz[0] == 200);
    assert_true(isnan(ds.trade_px[0]) && ds.side[0] == 0);
    /* Sessions split at the overnight gap; tick size inferred; instrument from the file name. */
    assert_int_equal(ds.n_sessions, 2);
    assert_int_equal(ds.sessions[1], 4);
    assert_true(fabs(ds.tick_size - 0.01) < 1e-12);
    assert_int_equal(rep.tick_inferred, 1);
    assert_string_equal(ds.instrument, "quotes");

    char text[1024];
    m2_import_report_text(&rep, text, sizeof text);
    assert_non_null(strstr(text, "8 bad rows skipped: line 5 (unparsable bid"));
    assert_non_null(strstr(text, "line 13 (unparsable ts"));
    m2_dataset_free(&ds);

    /* A shorter session gap also splits at the 7 s and 1 s gaps (not at the 0.5 s ones). */
    o.session_gap_s = 0.75;
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_OK);
    assert_int_equal(ds.n_sessions, 5);
    m2_dataset_free(&ds);
}

static void test_strict_stops_at_first_bad_row(void **state)
{
    const char *p = test_path("quotes_strict.csv");
    write_text(p, quotes_csv);
    m2_import_opts o;
    m2_import_defaults(&o);
    o.strict = 1;
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "quotes_strict.csv:5"));
    assert_non_null(strstr(m2_last_error(), "unparsable bid"));
    assert_null(ds.ts_ns);
}

static void test_trades_with_and_without_side(void **state)
{
    const char *p = test_path("trades.csv");
    write_text(p, "TS,Price,Size,Side\n"
                  "1704187800000000000,50.5,10,buy\n"
                  "1704187800100000000,50.25,5,S\n"
                  "1704187800200000000,50.25,7,\n"        /* no side: kept, tick rule keeps S */
                  "1704187800300000000,50.5,,B\n"         /* empty size counts as 1 */
                  "1704187800400000000,50.5,3,sideways\n" /* bad side */
                  "1704187800500000000,0,3,B\n");         /* bad price */
    m2_import_opts o;
    m2_import_defaults(&o);
    o.instrument = "XYZ";
    o.tick_size = 0.25;
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_OK);
    assert_int_equal(rep.rows, 4);
    assert_int_equal(rep.bad, 2);
    assert_int_equal(rep.bad_line[0], 6);
    assert_int_equal(rep.bad_line[1], 7);
    int8_t side[] = {1, -1, -1, 1};
    assert_memory_equal(ds.side, side, 4);
    assert_true(ds.trade_sz[3] == 1 && ds.trade_sz[0] == 10);
    assert_true(ds.bid_px[1] == 50.25 && ds.ask_px[1] == 50.25 && ds.trade_px[1] == 50.25);
    assert_string_equal(ds.instrument, "XYZ");
    assert_true(ds.tick_size == 0.25 && rep.tick_inferred == 0);
    m2_dataset_free(&ds);

    /* Without a side column every direction comes from the tick rule (the first trade has none). */
    write_text(p, "ts,price\n1,10\n2,10.5\n3,10.5\n4,10\n");
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_OK);
    int8_t rule[] = {0, 1, 1, -1};
    assert_memory_equal(ds.side, rule, 4);
    assert_true(ds.trade_sz[0] == 1);
    m2_dataset_free(&ds);
}

static void expect_import_error(const char *text, const char *fragment)
{
    const char *p = test_path("bad.csv");
    write_text(p, text);
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv_events(p, &o, &ds, &rep), M2_EFAIL);
    if (!strstr(m2_last_error(), fragment)) fail_msg("'%s' lacks '%s'", m2_last_error(), fragment);
}

static void test_file_level_errors(void **state)
{
    expect_import_error("time,bid,ask\n1,2,3\n", "bad.csv:1): no ts column");
    expect_import_error("ts,bid\n1,2\n", "needs bid,ask (quotes) or price (trades)");
    expect_import_error("ts,bid,ask,bid\n1,2,3,4\n", "column bid appears twice");
    expect_import_error("", "empty file");
    expect_import_error("ts,bid,ask\n1,2,1\n2,3,1\n", "0 valid rows");
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv_events(test_path("missing.csv"), &o, &ds, &rep), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "No such file"));
}

static void test_full_import_builds_features(void **state)
{
    /* 3 sessions of 200 quotes (one a second, 1 h apart): a complete dataset with features and splits. */
    const char *p = test_path("full.csv");
    FILE *f = fopen(p, "w");
    fprintf(f, "ts,bid,ask,bid_size,ask_size\n");
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 200; i++) {
            int64_t ts = T0 + (int64_t)s * 7200 * NS + (int64_t)i * NS;
            double mid = 100 + 0.01 * ((i * 7 + s) % 13);
            fprintf(f, "%lld,%.2f,%.2f,%d,%d\n", (long long)ts, mid - 0.01, mid + 0.01, 100 + i, 300 - i);
        }
    fclose(f);
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_parse_split("0.6,0.2,0.2", "--split", &o.feat);
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv(p, &o, &ds, &rep), M2_OK);
    assert_int_equal(ds.n_rows, 600);
    /* 0.6·600 = 360 and 0.8·600 = 480 are 40 and 80 rows from a boundary, more than a quarter of the
     * 120-row splits next to them: both sessions are cut there instead of snapping. */
    assert_int_equal(ds.n_sessions, 5);
    assert_int_equal(ds.split[0][1], 360);
    assert_int_equal(ds.split[1][1], 480);
    assert_int_equal(ds.n_features, 8);
    assert_int_equal(m2_dataset_check(&ds, "import"), M2_OK);
    m2_dataset_free(&ds);
}

/* Finite but absurd prices are bad rows with their line (they were kept, and the import failed at the end with
 * "feature spread_ticks has mean inf" and no line to look at). */
static void test_absurd_prices_are_bad_rows(void **state)
{
    const char *p = test_path("absurd.csv");
    FILE *f = fopen(p, "w");
    fprintf(f, "ts,bid,ask,bid_size,ask_size,price,size\n");
    for (int i = 0; i < 400; i++) {
        int64_t ts = T0 + (int64_t)i * NS;
        double mid = 100 + 0.01 * (i % 7);
        if (i == 10)
            fprintf(f, "%lld,1,1e300,100,100,,\n", (long long)ts); /* line 12 */
        else if (i == 20)
            fprintf(f, "%lld,1e300,1e300,100,100,,\n", (long long)ts); /* line 22 */
        else if (i == 30)
            fprintf(f, "%lld,%.2f,%.2f,100,100,1e13,5\n", (long long)ts, mid - 0.01, mid + 0.01); /* line 32 */
        else
            fprintf(f, "%lld,%.2f,%.2f,%d,%d,,\n", (long long)ts, mid - 0.01, mid + 0.01, 100 + i, 500 - i);
    }
    fclose(f);
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_dataset ds;
    m2_import_report rep;
    assert_int_equal(m2_import_csv(p, &o, &ds, &rep), M2_OK);
    assert_int_equal(rep.bad, 3);
    const int64_t lines[] = {12, 22, 32};
    const char *why[] = {"ask 1e+300 above 1e+12", "bid 1e+300 above 1e+12", "price 1e+13 above 1e+12"};
    expect_bad_rows(&rep, lines, why, 3);
    assert_int_equal(ds.n_rows, 397);
    assert_int_equal(m2_dataset_check(&ds, "import"), M2_OK);
    m2_dataset_free(&ds);
}

/* Collects the pieces m2_import_events_pieces emits into one series (sessions renumbered), keeping the last tick:
 * the first piece begins a session, a later one may continue the previous piece's last session (rows before its
 * sessions[0]) or be empty (the last one, which carries the final tick size). */
typedef struct {
    int64_t n, n_sessions, pieces, ts[64], sessions[64];
    double bid[64], ask[64], tpx[64], tick;
    int8_t side[64];
} collected;

static int collect(void *sink, const m2_dataset *p)
{
    collected *c = sink;
    assert_true(p->sessions[p->n_sessions] == p->n_rows && (c->n > 0 || (p->n_rows > 0 && p->sessions[0] == 0)));
    assert_true(c->n + p->n_rows <= 64 && c->n_sessions + p->n_sessions < 64);
    for (int64_t s = 0; s < p->n_sessions; s++) c->sessions[c->n_sessions++] = c->n + p->sessions[s];
    memcpy(c->ts + c->n, p->ts_ns, sizeof *c->ts * (size_t)p->n_rows);
    memcpy(c->bid + c->n, p->bid_px, sizeof *c->bid * (size_t)p->n_rows);
    memcpy(c->ask + c->n, p->ask_px, sizeof *c->ask * (size_t)p->n_rows);
    memcpy(c->tpx + c->n, p->trade_px, sizeof *c->tpx * (size_t)p->n_rows);
    memcpy(c->side + c->n, p->side, (size_t)p->n_rows);
    c->n += p->n_rows;
    c->tick = p->tick_size;
    c->pieces++;
    assert_string_equal(p->instrument, "SYM");
    return M2_OK;
}

/* m2_import_events_pieces with pieces of piece_rows rows (0: the default) collected equal the concatenation. */
static void pieces_match(const char *const *f, m2_import_opts *o, int64_t piece_rows, const m2_dataset *ds,
                         const m2_import_report *whole_rep)
{
    o->piece_rows = piece_rows;
    collected c = {0};
    m2_import_report rep;
    const m2_import_report whole = *whole_rep;
    assert_int_equal(m2_import_events_pieces(f, 3, o, collect, &c, &rep), M2_OK);
    assert_true(piece_rows ? c.pieces >= ds->n_rows / piece_rows : c.pieces == 1);
    assert_int_equal(c.n, ds->n_rows);
    assert_int_equal(c.n_sessions, ds->n_sessions);
    assert_int_equal(ds->n_sessions, 4);
    assert_memory_equal(c.sessions, ds->sessions, sizeof *c.sessions * (size_t)c.n_sessions);
    assert_memory_equal(c.ts, ds->ts_ns, sizeof *c.ts * (size_t)c.n);
    assert_memory_equal(c.bid, ds->bid_px, sizeof *c.bid * (size_t)c.n);
    assert_memory_equal(c.ask, ds->ask_px, sizeof *c.ask * (size_t)c.n);
    assert_memory_equal(c.tpx, ds->trade_px, sizeof *c.tpx * (size_t)c.n);
    assert_memory_equal(c.side, ds->side, (size_t)c.n);
    assert_int_equal(c.side[4], 1); /* unchanged price after the boundary keeps the up-tick before it */
    assert_true(c.tick == ds->tick_size && fabs(c.tick - 0.005) < 1e-12);
    assert_true(rep.rows == whole.rows && rep.lines == whole.lines && rep.bad == whole.bad && rep.bad == 1);
    assert_int_equal(rep.bad_line[0], whole.bad_line[0]);
    assert_string_equal(rep.bad_why[0], whole.bad_why[0]);
    assert_int_equal(rep.tick_inferred, whole.tick_inferred);
}

/* Three daily files read one at a time give the rows, sessions, trade sides, tick size and report of their
 * concatenation: a session continues across the first file boundary (gap 1 s <= 3600 s), the smallest price step
 * (0.005) lies across that boundary, and the tick rule there needs the previous file's last trade. */
static void test_pieces_match_the_concatenation(void **state)
{
    const char *f[] = {test_path("SYM_20240102.csv"), test_path("SYM_20240103.csv"), test_path("SYM_20240104.csv")};
    write_text(f[0], "ts,bid,ask,price,size\n"
                     "0,100.00,100.02,100.01,1\n1000000000,100.01,100.03,100.02,1\n"
                     "7200000000000,100.00,100.02,100.01,1\n7201000000000,100.01,100.03,100.03,1\n");
    write_text(f[1], "ts,bid,ask,price,size\n"
                     "7202000000000,100.015,100.03,100.03,1\n7203000000000,abc,100.03,100.03,1\n"
                     "7204000000000,100.035,100.05,100.02,1\n20000000000000,100.00,100.02,100.01,1\n");
    write_text(f[2], "ts,bid,ask,price,size\n"
                     "40000000000000,100.00,100.02,100.01,1\n40001000000000,100.02,100.04,100.00,1\n");
    m2_import_opts o;
    m2_import_defaults(&o);
    o.instrument = "SYM";
    m2_dataset ds;
    m2_import_report whole;
    assert_int_equal(m2_import_events_files(f, 3, &o, &ds, &whole), M2_OK);
    /* pieces of 2 to 4 rows cut sessions and files anywhere (row 0 of the next piece is kept back to tell a
     * continued session from a new one); the default (65536 rows) gives one piece here */
    for (int64_t piece_rows = 2; piece_rows <= 4; piece_rows++) pieces_match(f, &o, piece_rows, &ds, &whole);
    pieces_match(f, &o, 0, &ds, &whole);
    m2_dataset_free(&ds);
}

/* A quote CSV of n rows in 4 sessions (2 h gaps), a random walk on a 0.01 grid, trades on every third row (a
 * side given on every other one, the tick rule for the rest) and one bad row. */
static void write_quotes(const char *path, int n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "ts,bid,ask,bid_size,ask_size,price,size,side\n");
    uint64_t x = 12345;
    int64_t ts = T0;
    long bid = 10000;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int u = (int)(x >> 33);
        bid += u % 3 - 1;
        ts += i > 0 && i % (n / 4) == 0 ? 7200 * NS : (int64_t)(u % 997 + 1) * 1000000;
        long ask = bid + 1 + u % 2;
        if (i % 3 == 0)
            fprintf(f, "%lld,%ld.%02ld,%ld.%02ld,%d,%d,%ld.%02ld,%d,%s\n", (long long)ts, bid / 100, bid % 100,
                    ask / 100, ask % 100, u % 50 + 1, u % 70 + 1, ask / 100, ask % 100, u % 9 + 1,
                    i % 2       ? ""
                    : u % 4 < 2 ? "buy"
                                : "sell");
        else
            fprintf(f, "%lld,%ld.%02ld,%ld.%02ld,%d,%d,,,\n", (long long)ts, bid / 100, bid % 100, ask / 100, ask % 100,
                    u % 50 + 1, u % 70 + 1);
        if (i == n / 3) fprintf(f, "%lld,abc,1,1,1,,,\n", (long long)ts);
    }
    fclose(f);
}

/* `mamba2_ticks import FILE.csv` streams (m2_import_one: pieces of 7 rows through the spool, pass 2 in blocks)
 * and writes the same datasets as the in-memory reference (m2_import_csv + m2_dataset_write), bit for bit. */
static void test_one_file_streams_as_in_memory(void **state)
{
    const char *csv = test_path("one.csv"), *a = test_path("mem.h5"), *b = test_path("streamed.h5");
    write_quotes(csv, 6000);
    m2_import_opts o;
    m2_import_defaults(&o);
    m2_dataset mem, meta, x, y;
    m2_import_report r1, r2;
    assert_int_equal(m2_import_csv(csv, &o, &mem, &r1), M2_OK);
    assert_int_equal(m2_dataset_write(a, &mem), M2_OK);
    o.piece_rows = 7;
    assert_int_equal(m2_import_one(csv, &o, b, &meta, &r2), M2_OK);
    assert_true(r1.rows == r2.rows && r1.lines == r2.lines && r1.bad == 1 && r2.bad == 1);
    assert_int_equal(r1.bad_line[0], r2.bad_line[0]);
    assert_int_equal(m2_dataset_read(a, &x, 1), M2_OK);
    assert_int_equal(m2_dataset_read(b, &y, 1), M2_OK);
    assert_true(x.n_rows == y.n_rows && x.n_sessions == y.n_sessions && x.n_sessions > 4); /* split cuts inside */
    assert_true(x.n_features == y.n_features && x.n_targets == y.n_targets && y.n_instruments == 1);
    assert_true(y.cut_ns[0] == INT64_MIN && x.cut_ns[0] == INT64_MIN); /* version 1: no /universe, split by rows */
    assert_memory_equal(x.split, y.split, sizeof x.split);
    assert_memory_equal(x.sessions, y.sessions, sizeof *x.sessions * (size_t)(x.n_sessions + 1));
    assert_memory_equal(x.X, y.X, sizeof(float) * (size_t)(x.n_rows * x.n_features));
    assert_memory_equal(x.y, y.y, sizeof(float) * (size_t)(x.n_rows * x.n_targets));
    assert_memory_equal(x.mean, y.mean, sizeof x.mean);
    assert_memory_equal(x.std, y.std, sizeof x.std);
    assert_memory_equal(x.feature_names, y.feature_names, sizeof x.feature_names);
    assert_true(x.tick_size == y.tick_size && x.clip == y.clip);
    assert_string_equal(x.instrument, y.instrument);
    assert_string_equal(x.source, y.source);
    const void *cx[] = {x.ts_ns, x.bid_px, x.ask_px, x.bid_sz, x.ask_sz, x.trade_px, x.trade_sz};
    const void *cy[] = {y.ts_ns, y.bid_px, y.ask_px, y.bid_sz, y.ask_sz, y.trade_px, y.trade_sz};
    for (int c = 0; c < 7; c++) assert_memory_equal(cx[c], cy[c], 8 * (size_t)x.n_rows);
    assert_memory_equal(x.side, y.side, (size_t)x.n_rows);
    m2_dataset_free(&mem);
    m2_dataset_free(&meta);
    m2_dataset_free(&x);
    m2_dataset_free(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_quotes_good_and_bad_rows),
        cmocka_unit_test(test_strict_stops_at_first_bad_row),
        cmocka_unit_test(test_trades_with_and_without_side),
        cmocka_unit_test(test_file_level_errors),
        cmocka_unit_test(test_full_import_builds_features),
        cmocka_unit_test(test_absurd_prices_are_bad_rows),
        cmocka_unit_test(test_pieces_match_the_concatenation),
        cmocka_unit_test(test_one_file_streams_as_in_memory),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_test_dir();
    return rc;
}
