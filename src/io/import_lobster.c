/* LOBSTER message/orderbook pairs (FORMATS.md "LOBSTER import"). A message row is one book event: time in seconds
 * after midnight (the date is in the file name), event type 1-7, order id, size, price x 10000, direction (+1 a
 * buy order, -1 a sell order); the orderbook row of the same line number is the book after it: ask price, ask
 * size, bid price, bid size for levels 1..N. Executions (types 4, 5) are trades; the resting order's direction is
 * the passive side, so the trade's side is its opposite. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/features.h"
#include "io/import_rows.h"

/* LOBSTER marks an empty level with these prices. */
#define EMPTY_ASK 9999999999.0
#define EMPTY_BID -9999999999.0

int m2_lobster_is_message(const char *path)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    return strstr(b, "_message_") != NULL;
}

/* The orderbook file of a message file: the last "_message_" becomes "_orderbook_". */
static int orderbook_path(const char *message, char *out, size_t cap)
{
    const char *m = NULL;
    for (const char *p = strstr(message, "_message_"); p; p = strstr(p + 1, "_message_")) m = p;
    if (!m || (size_t)snprintf(out, cap, "%.*s_orderbook_%s", (int)(m - message), message, m + 9) >= cap)
        return m2_fail(M2_EUSAGE, "LOBSTER (%s): not a message file name", message);
    return M2_OK;
}

/* The date of TICKER_YYYY-MM-DD_..._message_N.csv as midnight UTC in ns. */
static int file_date(const char *message, int64_t *midnight_ns)
{
    const char *b = strrchr(message, '/') ? strrchr(message, '/') + 1 : message;
    const char *u = strchr(b, '_');
    char text[32];
    if (u && strlen(u + 1) >= 10) {
        snprintf(text, sizeof text, "%.10sT00:00:00Z", u + 1);
        if (m2_parse_timestamp(text, midnight_ns) == M2_OK) return M2_OK;
    }
    return m2_fail(M2_EUSAGE,
                   "LOBSTER (%s): file name has no date (TICKER_YYYY-MM-DD_START_END_message_N.csv): "
                   "message times are seconds after midnight of that day",
                   message);
}

static int split_numbers(char *line, double *v, int cap)
{
    int n = 0;
    for (char *p = line; n < cap;) {
        char *end;
        v[n] = strtod(p, &end);
        if (end == p) return -1;
        n++;
        while (*end == ' ' || *end == '\t') end++;
        if (*end != ',') return *end == '\n' || *end == '\r' || *end == '\0' ? n : -1;
        p = end + 1;
    }
    return n;
}


/* One row pair into e; NULL when good, else why it is skipped. */
static const char *parse_pair(char *msg, char *book, int levels, int64_t midnight, int depth, event *e, char *why)
{
    double m[6], ob[4 * 64];
    if (split_numbers(msg, m, 6) != 6) return "message row needs 6 numbers (time, type, id, size, price, direction)";
    int got = split_numbers(book, ob, 4 * levels);
    if (got != 4 * levels) {
        snprintf(why, 80, "orderbook row has %d numbers, the file name says %d levels (%d)", got, levels, 4 * levels);
        return why;
    }
    if (ob[0] >= EMPTY_ASK || ob[2] <= EMPTY_BID) return "empty best quote on one side";
    *e = (event){.ts = midnight + (int64_t)llround(m[0] * 1e9),
                 .ask = ob[0] / 1e4,
                 .asz = ob[1],
                 .bid = ob[2] / 1e4,
                 .bsz = ob[3],
                 .tpx = NAN,
                 .tsz = 0};
    int type = (int)m[1];
    if (type == 4 || type == 5) {
        e->tpx = m[4] / 1e4;
        e->tsz = m[3];
        e->side = m[5] > 0 ? -1 : 1;
        e->has_trade = 1;
    }
    if (!(e->bid > 0) || e->bid > e->ask) return "bid > ask or non-positive bid";
    for (int l = 0; depth && l < depth; l++) /* an empty level counts as size 0 */
        if (ob[4 * l] >= EMPTY_ASK || ob[4 * l + 2] <= EMPTY_BID) {
            ob[4 * l + 1] = ob[4 * l] >= EMPTY_ASK ? 0 : ob[4 * l + 1];
            ob[4 * l + 3] = ob[4 * l + 2] <= EMPTY_BID ? 0 : ob[4 * l + 3];
        }
    if (depth) m2_depth_imbalance(ob, depth, e->extra);
    return NULL;
}

static int levels_of(const char *message, int *levels)
{
    const char *m = NULL;
    for (const char *p = strstr(message, "_message_"); p; p = strstr(p + 1, "_message_")) m = p;
    *levels = m ? atoi(m + 9) : 0;
    if (*levels < 1 || *levels > 64)
        return m2_fail(M2_EUSAGE, "LOBSTER (%s): the file name gives %d book levels, need 1..64", message, *levels);
    return M2_OK;
}

static int read_pair(gzFile fm, gzFile fb, const char *message, const char *book, const m2_import_opts *o, int levels,
                     int64_t midnight, rows *r, m2_import_report *rep)
{
    char *lm = NULL, *lb = NULL, why[80];
    size_t cm = 0, cb = 0;
    int rc = M2_OK;
    for (int64_t line = 1; rc == M2_OK; line++) {
        ssize_t a = m2_gz_line(fm, &lm, &cm), b = m2_gz_line(fb, &lb, &cb);
        if (a < 0 && b < 0) break;
        if (a < 0 || b < 0) {
            rc = m2_fail(M2_EFAIL,
                         "LOBSTER pair (%s, %s): the %s file ends at row %lld, the other goes on: the two "
                         "files must have the same rows",
                         message, book, a < 0 ? "message" : "orderbook", (long long)line - 1);
            break;
        }
        event e;
        const char *bad = parse_pair(lm, lb, levels, midnight, o->depth_levels, &e, why);
        if (!bad && r->n > 0 && e.ts < r->ts[r->n - 1]) bad = "time goes backwards";
        if (bad && o->strict)
            rc = m2_fail(M2_EFAIL, "row (%s:%lld): %s (--strict)", message, (long long)line, bad);
        else if (bad)
            m2_import_note_bad(rep, line, bad, message);
        else
            rc = m2_rows_keep(r, &e);
        rep->lines++;
    }
    free(lm);
    free(lb);
    int err = Z_OK;
    const char *zm = gzerror(fm, &err), *zb = NULL;
    if (rc == M2_OK && err != Z_OK && err != Z_STREAM_END)
        rc = m2_fail(M2_EFAIL, "LOBSTER (%s): gzip data corrupt or truncated: %s", message, zm);
    zb = gzerror(fb, &err);
    if (rc == M2_OK && err != Z_OK && err != Z_STREAM_END)
        rc = m2_fail(M2_EFAIL, "LOBSTER (%s): gzip data corrupt or truncated: %s", book, zb);
    return rc;
}

int m2_lobster_read(const char *message, const m2_import_opts *o, rows *r, m2_import_report *rep)
{
    char book[4096];
    int64_t midnight;
    int levels;
    int rc = orderbook_path(message, book, sizeof book);
    if (rc == M2_OK) rc = file_date(message, &midnight);
    if (rc == M2_OK) rc = levels_of(message, &levels);
    if (rc == M2_OK && o->depth_levels > levels)
        rc = m2_fail(M2_EUSAGE, "--depth %d: the LOBSTER files (%s) have %d levels", o->depth_levels, message, levels);
    if (rc) return rc;
    gzFile fm = gzopen(message, "rb"), fb = gzopen(book, "rb");
    if (!fm || !fb) {
        rc = m2_fail(M2_EFAIL, "LOBSTER (%s): %s", fm ? book : message, strerror(errno ? errno : ENOMEM));
    } else {
        gzbuffer(fm, 1 << 18);
        gzbuffer(fb, 1 << 18);
        rc = read_pair(fm, fb, message, book, o, levels, midnight, r, rep);
    }
    if (fm) gzclose(fm);
    if (fb) gzclose(fb);
    return rc;
}
