/* CSV import (see import_csv.h for the accepted format and the bad-row rules). */
#include "io/import_csv.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base/error.h"
#include "io/decimal.h"
#include "io/import_rows.h"

void m2_import_defaults(m2_import_opts *o)
{
    memset(o, 0, sizeof *o);
    o->session_gap_s = 3600;
    m2_feature_opts_defaults(&o->feat);
}

/* ---- timestamps ----------------------------------------------------------------------------------- */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (eras of 400 years = 146097 days). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                  /* [0, 399] */
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1; /* [0, 365], March-based */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;          /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* Reads exactly n digits. */
static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i])) return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int parse_offset(const char *p, int64_t *offset_s)
{
    *offset_s = 0;
    if (*p == '\0') return 0;
    if (*p == 'Z' || *p == 'z') return p[1] == '\0' ? 0 : -1;
    if (*p != '+' && *p != '-') return -1;
    int sign = *p == '-' ? -1 : 1, hh, mm = 0;
    p++;
    if (digits(&p, 2, &hh)) return -1;
    if (*p == ':') p++;
    if (*p && digits(&p, 2, &mm)) return -1;
    if (*p || hh > 23 || mm > 59) return -1;
    *offset_s = sign * (hh * 3600 + mm * 60);
    return 0;
}

int m2_parse_timestamp(const char *text, int64_t *ns)
{
    const char *p = text;
    int64_t v;
    if (m2_decimal_parse_u63(p, &v) == 0) {
        *ns = v;
        return M2_OK;
    }
    if (isdigit((unsigned char)*p) && strspn(p, "0123456789") == strlen(p)) return M2_EFAIL; /* beyond int64 */
    int y, mo, d, h, mi, s;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d)) return M2_EFAIL;
    if (y < M2_TS_FIRST_YEAR || y > M2_TS_LAST_YEAR) return M2_EFAIL; /* int64 ns since 1970 holds up to 2262 */
    if ((*p != 'T' && *p != 't' && *p != ' ') || (p++, digits(&p, 2, &h)) || *p++ != ':' || digits(&p, 2, &mi) ||
        *p++ != ':' || digits(&p, 2, &s))
        return M2_EFAIL;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59) return M2_EFAIL;
    int64_t frac = 0;
    if (*p == '.' || *p == ',') {
        p++;
        int n = 0;
        for (; isdigit((unsigned char)*p); p++, n++)
            if (n < 9) frac = frac * 10 + (*p - '0'); /* digits beyond nanoseconds are dropped */
        if (n == 0) return M2_EFAIL;
        for (int k = n; k < 9; k++) frac *= 10;
    }
    int64_t offset;
    if (parse_offset(p, &offset)) return M2_EFAIL;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset;
    if (secs < 0) return M2_EFAIL;    /* 1970-01-01 with a positive UTC offset */
    *ns = secs * 1000000000LL + frac; /* secs < 2262-01-01's: no overflow */
    return M2_OK;
}

/* ---- CSV fields ----------------------------------------------------------------------------------- */

#define MAX_FIELDS 64

/* Splits a line in place into fields (RFC 4180 quotes, "" inside quotes), trimming blanks and CR/LF. */
static int split_fields(char *line, char **f, int cap)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *out = p, *start = p;
        if (*p == '"') {
            p++;
            for (; *p; p++) {
                if (*p == '"' && p[1] == '"')
                    *out++ = *p++;
                else if (*p == '"') {
                    p++;
                    break;
                } else
                    *out++ = *p;
            }
            while (*p && *p != ',') p++;
        } else {
            while (*p && *p != ',') p++;
            out = p;
        }
        char sep = *p;
        *out = '\0';
        while (out > start && isspace((unsigned char)out[-1])) *--out = '\0';
        if (n < cap) f[n] = start;
        n++;
        if (sep != ',') return n;
        p++;
    }
}

enum { C_TS, C_BID, C_ASK, C_BID_SIZE, C_ASK_SIZE, C_PRICE, C_SIZE, C_SIDE, N_COLS };
static const char *const col_names[N_COLS] = {"ts", "bid", "ask", "bid_size", "ask_size", "price", "size", "side"};

typedef struct {
    int col[N_COLS]; /* field index of each column, -1 if absent */
    int quotes;      /* bid,ask present */
    int needed;      /* fields a row must have */
} header;

static int parse_header(char *line, const char *csv, header *h)
{
    char *f[MAX_FIELDS];
    int n = split_fields(line, f, MAX_FIELDS);
    if (n > MAX_FIELDS) return m2_fail(M2_EFAIL, "header (%s:1): more than %d columns", csv, MAX_FIELDS);
    for (int c = 0; c < N_COLS; c++) h->col[c] = -1;
    h->needed = 0;
    for (int i = 0; i < n; i++) {
        for (char *p = f[i]; *p; p++) *p = (char)tolower((unsigned char)*p);
        const char *name = f[i] + (strncmp(f[i], "\xef\xbb\xbf", 3) == 0 ? 3 : 0); /* UTF-8 BOM */
        for (int c = 0; c < N_COLS; c++)
            if (strcmp(name, col_names[c]) == 0) {
                if (h->col[c] >= 0)
                    return m2_fail(M2_EFAIL, "header (%s:1): column %s appears twice", csv, col_names[c]);
                h->col[c] = i;
                if (i + 1 > h->needed) h->needed = i + 1;
            }
    }
    if (h->col[C_TS] < 0) return m2_fail(M2_EFAIL, "header (%s:1): no ts column", csv);
    h->quotes = h->col[C_BID] >= 0 && h->col[C_ASK] >= 0;
    if (!h->quotes && h->col[C_PRICE] < 0)
        return m2_fail(M2_EFAIL, "header (%s:1): needs bid,ask (quotes) or price (trades) columns", csv);
    return M2_OK;
}

/* ---- rows ----------------------------------------------------------------------------------------- */

static int rows_grow(rows *r)
{
    int64_t cap = r->cap ? 2 * r->cap : 4096;
    void **arrays[] = {(void **)&r->ts,  (void **)&r->bid, (void **)&r->ask, (void **)&r->bsz,
                       (void **)&r->asz, (void **)&r->tpx, (void **)&r->tsz};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        void *p = realloc(*arrays[i], (size_t)cap * 8);
        if (!p) return m2_fail(M2_EFAIL, "import: out of memory");
        *arrays[i] = p;
    }
    int8_t *s = realloc(r->side, (size_t)cap);
    float *x = r->n_extra ? realloc(r->extra, (size_t)cap * (size_t)r->n_extra * sizeof *x) : NULL;
    if (!s || (r->n_extra && !x)) return m2_fail(M2_EFAIL, "import: out of memory");
    r->side = s;
    if (r->n_extra) r->extra = x;
    r->cap = cap;
    return M2_OK;
}

/* A number in a field: empty gives `dflt` (when allowed); otherwise it must parse completely and be finite. */
static const char *number(const char *text, const char *name, double dflt, int empty_ok, double *out, char *why)
{
    if (!*text) {
        if (empty_ok) {
            *out = dflt;
            return NULL;
        }
        sprintf(why, "empty %s", name);
        return why;
    }
    double v;
    if (m2_decimal_parse(text, &v)) {
        snprintf(why, 80, "unparsable %s \"%.20s\"", name, text);
        return why;
    }
    if (!isfinite(v)) {
        sprintf(why, "non-finite %s", name);
        return why;
    }
    *out = v;
    return NULL;
}

static int parse_side(const char *t)
{
    static const char *const buy[] = {"b", "buy", "1", "+1", "bid"}, *const sell[] = {"s", "sell", "-1", "ask"};
    for (size_t i = 0; i < sizeof buy / sizeof buy[0]; i++)
        if (strcasecmp(t, buy[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof sell / sizeof sell[0]; i++)
        if (strcasecmp(t, sell[i]) == 0) return -1;
    if (!*t || strcmp(t, "0") == 0 || strcasecmp(t, "n") == 0 || strcasecmp(t, "none") == 0) return 0;
    return 2;
}

static const char *price(const char *text, const char *name, double *out, char *why)
{
    if (number(text, name, 0, 0, out, why)) return why;
    if (*out <= 0) {
        sprintf(why, "non-positive %s", name);
        return why;
    }
    if (*out > M2_IMPORT_MAX_PRICE) {
        snprintf(why, 80, "%s %.6g above %g", name, *out, M2_IMPORT_MAX_PRICE);
        return why;
    }
    return NULL;
}

static const char *size(const char *text, const char *name, double dflt, double *out, char *why)
{
    if (number(text, name, dflt, 1, out, why)) return why;
    if (*out < 0) {
        sprintf(why, "negative %s", name);
        return why;
    }
    return NULL;
}

/* Parses one data row; returns NULL or why it is bad (in why[80]). */
static const char *parse_row(char *line, const header *h, event *e, char *why)
{
    char *f[MAX_FIELDS];
    int n = split_fields(line, f, MAX_FIELDS);
    if (n < h->needed) {
        sprintf(why, "%d fields, expected %d", n, h->needed);
        return why;
    }
    const int *c = h->col;
    if (m2_parse_timestamp(f[c[C_TS]], &e->ts)) {
        snprintf(why, 80, "unparsable ts \"%.30s\"", f[c[C_TS]]);
        return why;
    }
    e->bsz = e->asz = 0;
    e->tpx = NAN;
    e->tsz = 0;
    e->side = 0;
    e->has_trade = 0;
    if (h->quotes) {
        if (price(f[c[C_BID]], "bid", &e->bid, why) || price(f[c[C_ASK]], "ask", &e->ask, why) ||
            (c[C_BID_SIZE] >= 0 && size(f[c[C_BID_SIZE]], "bid_size", 0, &e->bsz, why)) ||
            (c[C_ASK_SIZE] >= 0 && size(f[c[C_ASK_SIZE]], "ask_size", 0, &e->asz, why)))
            return why;
        if (e->bid > e->ask) {
            snprintf(why, 80, "bid %.10g > ask %.10g", e->bid, e->ask);
            return why;
        }
    }
    /* The trade columns: required in a trades file, optional (empty = no trade) on a quotes row. */
    if (c[C_PRICE] >= 0 && (!h->quotes || *f[c[C_PRICE]])) {
        if (price(f[c[C_PRICE]], "price", &e->tpx, why)) return why;
        /* A trade of unknown size counts as 1, so its direction still reaches the signed-volume feature. */
        if (c[C_SIZE] >= 0 && size(f[c[C_SIZE]], "size", 1, &e->tsz, why)) return why;
        if (c[C_SIZE] < 0) e->tsz = 1;
        e->has_trade = 1;
        if (c[C_SIDE] >= 0 && (e->side = parse_side(f[c[C_SIDE]])) == 2) {
            snprintf(why, 80, "unknown side \"%.20s\"", f[c[C_SIDE]]);
            return why;
        }
        if (!h->quotes) e->bid = e->ask = e->tpx;
    }
    return NULL;
}

/* ---- the import ----------------------------------------------------------------------------------- */

/* `file` is NULL when there is one input (the report names it once); otherwise each listed row names its file. */
void m2_import_note_bad(m2_import_report *rep, int64_t line, const char *why, const char *file)
{
    if (rep->n_listed < M2_IMPORT_LISTED) {
        rep->bad_line[rep->n_listed] = line;
        const char *base = file && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        snprintf(rep->bad_why[rep->n_listed], sizeof rep->bad_why[0], "%.70s%s%.50s", why, file ? " in " : "",
                 file ? base : "");
        rep->n_listed++;
    }
    rep->bad++;
}

int m2_rows_keep(rows *r, const event *e)
{
    if (r->n == r->cap && rows_grow(r)) return M2_EFAIL;
    int64_t i = r->n++;
    r->ts[i] = e->ts;
    r->bid[i] = e->bid;
    r->ask[i] = e->ask;
    r->bsz[i] = e->bsz;
    r->asz[i] = e->asz;
    r->tpx[i] = e->tpx;
    r->tsz[i] = e->tsz;
    r->side[i] = (int8_t)e->side;
    if (r->n_extra) memcpy(r->extra + i * r->n_extra, e->extra, sizeof(float) * (size_t)r->n_extra);
    r->kept++;
    return r->flush && r->n >= r->flush_at ? r->flush(r->flush_ctx, r) : M2_OK;
}

/* The next line of a plain or gzip-compressed file (zlib reads both) into *buf, growing it: its length, or -1 at
 * the end or on an error (the caller asks gzerror which). */
ssize_t m2_gz_line(gzFile in, char **buf, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        if (*cap - n < 2) {
            size_t c = *cap ? 2 * *cap : 65536;
            char *b = realloc(*buf, c);
            if (!b) return -1;
            *buf = b;
            *cap = c;
        }
        if (!gzgets(in, *buf + n, (int)(*cap - n > INT32_MAX ? INT32_MAX : *cap - n))) return n > 0 ? (ssize_t)n : -1;
        n += strlen(*buf + n);
        if ((n > 0 && (*buf)[n - 1] == '\n') || gzeof(in)) return (ssize_t)n;
    }
}

static int read_rows(gzFile in, const char *csv, const m2_import_opts *o, rows *r, m2_import_report *rep,
                     int name_files)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    header h = {{0}, 0, 0};
    int have_header = 0, rc = M2_OK;
    while (rc == M2_OK && (len = m2_gz_line(in, &line, &cap)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue; /* blank lines carry nothing */
        if (!have_header) {
            rc = parse_header(line, csv, &h);
            have_header = 1;
            continue;
        }
        rep->lines++;
        event e;
        char why[80];
        const char *bad = parse_row(line, &h, &e, why);
        if (!bad && r->n > 0 && e.ts < r->ts[r->n - 1]) {
            snprintf(why, sizeof why, "time goes backwards");
            bad = why;
        }
        char orig[4096];
        int64_t at = lineno;
        int moved = bad && o->origin && o->origin(o->origin_ctx, csv, lineno, orig, sizeof orig, &at) == M2_OK;
        if (bad && o->strict)
            rc = m2_fail(M2_EFAIL, "row (%s:%lld): %s (--strict)", moved ? orig : csv, (long long)at, bad);
        else if (bad)
            m2_import_note_bad(rep, at, bad, moved ? orig : name_files ? csv : NULL);
        else
            rc = m2_rows_keep(r, &e);
    }
    free(line);
    int err = Z_OK;
    const char *zmsg = gzerror(in, &err);
    if (rc == M2_OK && err == Z_ERRNO)
        rc = m2_fail(M2_EFAIL, "import (%s): read error: %s", csv, strerror(errno));
    else if (rc == M2_OK && err != Z_OK && err != Z_STREAM_END)
        rc = m2_fail(M2_EFAIL, "import (%s): gzip data corrupt or truncated: %s", csv, zmsg);
    if (rc == M2_OK && !have_header) rc = m2_fail(M2_EFAIL, "import (%s): empty file", csv);
    return rc;
}

/* The tick rule's memory inside a session: the last trade's price and side. */
typedef struct {
    double px;
    int side;
} trade_memory;

/* Trade direction by the tick rule (up-tick buy, down-tick sell, unchanged keeps the last) where none was given,
 * on rows [at, r->n) of r, whose sessions begin at rows at + starts[0..n_starts) (ascending): the memory is
 * forgotten there and carried in *m from one call to the next (a session continued by the next piece). */
static void tick_rule(rows *r, int64_t at, const int64_t *starts, int64_t n_starts, trade_memory *m)
{
    for (int64_t i = at, k = 0; i < r->n; i++) {
        if (k < n_starts && i == at + starts[k]) *m = (trade_memory){NAN, 0}, k++;
        if (!isfinite(r->tpx[i])) continue;
        if (r->side[i] == 0 && isfinite(m->px))
            r->side[i] = (int8_t)(r->tpx[i] > m->px ? 1 : r->tpx[i] < m->px ? -1 : m->side);
        m->px = r->tpx[i];
        m->side = r->side[i];
    }
}

/* The smallest of `best` and the bid and ask changes between consecutive rows from row `from` (>= 1) on. */
static double min_step(const rows *r, int64_t from, double best)
{
    const double *cols[] = {r->bid, r->ask};
    for (int c = 0; c < 2; c++)
        for (int64_t i = from; i < r->n; i++) {
            double d = fabs(cols[c][i] - cols[c][i - 1]);
            if (d > 5e-10 && d < best) best = d;
        }
    return best;
}

/* The smallest price change seen, rounded to 1e-9 (decimal prices are not exact in binary). */
static double tick_of(double best) { return isfinite(best) ? round(best * 1e9) / 1e9 : 0.01; }

/* The sessions beginning among rows [at, r->n), as offsets from `at`, into ds (sessions[n_sessions] = r->n - at): a
 * row begins one when it is the first row or follows a gap longer than gap_s. With at > 0 the rows before `at`
 * came earlier (the last of them stays in r for this): rows up to the first start continue that session. */
static int make_sessions(const rows *r, int64_t at, double gap_s, m2_dataset *ds)
{
    int64_t n = 0;
    for (int64_t i = at; i < r->n; i++) n += i == 0 || (double)(r->ts[i] - r->ts[i - 1]) * 1e-9 > gap_s;
    ds->sessions = malloc((size_t)(n + 1) * sizeof *ds->sessions);
    if (!ds->sessions) return m2_fail(M2_EFAIL, "import: out of memory");
    int64_t k = 0;
    for (int64_t i = at; i < r->n; i++)
        if (i == 0 || (double)(r->ts[i] - r->ts[i - 1]) * 1e-9 > gap_s) ds->sessions[k++] = i - at;
    ds->sessions[k] = r->n - at;
    ds->n_sessions = n;
    return M2_OK;
}

static void base_name(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    snprintf(out, cap, "%.*s", (int)n, b);
}

static void free_rows(rows *r)
{
    free(r->extra);
    free(r->ts);
    free(r->bid);
    free(r->ask);
    free(r->bsz);
    free(r->asz);
    free(r->tpx);
    free(r->tsz);
    free(r->side);
}

/* The instrument (o->instrument or the first file's base name) and the source line. */
static void name_events(m2_dataset *ds, const char *first, int n_files, const m2_import_opts *o);

/* Moves the rows into ds as its raw arrays, with sessions, trade sides, tick size and names. */
static int take_rows(rows *r, const char *first, int n_files, const m2_import_opts *o, m2_dataset *ds,
                     m2_import_report *rep)
{
    if (make_sessions(r, 0, o->session_gap_s, ds)) return M2_EFAIL;
    trade_memory m = {NAN, 0};
    tick_rule(r, 0, ds->sessions, ds->n_sessions, &m);
    ds->n_rows = rep->rows = r->n;
    ds->ts_ns = r->ts;
    ds->bid_px = r->bid;
    ds->ask_px = r->ask;
    ds->bid_sz = r->bsz;
    ds->ask_sz = r->asz;
    ds->trade_px = r->tpx;
    ds->trade_sz = r->tsz;
    ds->side = r->side;
    ds->extra = r->extra;
    ds->n_extra = r->n_extra;
    rep->tick_inferred = o->tick_size == 0;
    ds->tick_size = o->tick_size > 0 ? o->tick_size : tick_of(min_step(r, 1, INFINITY));
    name_events(ds, first, n_files, o);
    return M2_OK;
}

static void name_events(m2_dataset *ds, const char *first, int n_files, const m2_import_opts *o)
{
    if (o->instrument)
        snprintf(ds->instrument, sizeof ds->instrument, "%s", o->instrument);
    else
        base_name(first, ds->instrument, sizeof ds->instrument);
    const char *base = strrchr(first, '/') ? strrchr(first, '/') + 1 : first;
    if (n_files == 1)
        snprintf(ds->source, sizeof ds->source, "import %s", base);
    else
        snprintf(ds->source, sizeof ds->source, "import %d files from %.40s", n_files, base);
}

static int read_file(const char *csv, const m2_import_opts *o, rows *r, m2_import_report *rep, int name_files)
{
    if (m2_lobster_is_message(csv)) return m2_lobster_read(csv, o, r, rep);
    gzFile in = gzopen(csv, "rb");
    if (!in) return m2_fail(M2_EFAIL, "import (%s): %s", csv, strerror(errno ? errno : ENOMEM));
    gzbuffer(in, 1 << 18);
    int rc = read_rows(in, csv, o, r, rep, name_files);
    gzclose(in);
    return rc;
}

static int check_opts(const m2_import_opts *o)
{
    if (!(o->session_gap_s > 0)) return m2_fail(M2_EUSAGE, "--session-gap (%g): must be > 0 seconds", o->session_gap_s);
    if (o->tick_size < 0 || !isfinite(o->tick_size))
        return m2_fail(M2_EUSAGE, "--tick-size (%g): must be > 0", o->tick_size);
    return M2_OK;
}

int m2_import_events_files(const char *const *csv, int n, const m2_import_opts *o, m2_dataset *ds,
                           m2_import_report *rep)
{
    memset(ds, 0, sizeof *ds);
    memset(rep, 0, sizeof *rep);
    if (check_opts(o)) return M2_EUSAGE;
    rows r = {.n_extra = o->depth_levels > 0 ? o->depth_levels + 1 : 0};
    int rc = M2_OK;
    for (int i = 0; rc == M2_OK && i < n; i++) rc = read_file(csv[i], o, &r, rep, n > 1);
    if (rc == M2_OK && r.n < 2)
        rc = m2_fail(M2_EFAIL, "import (%s): %lld valid rows, need at least 2", csv[0], (long long)r.n);
    if (rc == M2_OK && (rc = take_rows(&r, csv[0], n, o, ds, rep)) == M2_OK) return M2_OK;
    free_rows(&r);
    m2_dataset_free(ds);
    return rc;
}

/* Pass 1 of one instrument in pieces (m2_import_events_pieces): what goes on between two pieces. */
typedef struct {
    const m2_import_opts *o;
    m2_universe_emit emit;
    void *sink;
    m2_dataset piece; /* its names and provisional tick size; the arrays point into the rows */
    int64_t at;       /* 1 when row 0 of the rows is the previous piece's last row (already handed on) */
    double best;      /* the raw smallest price step over all rows so far, rounded only at the end (tick_of) */
    trade_memory trades;
} piece_state;

/* Hands rows [at, r->n) on as one piece (rows.flush): sessions found, trade sides set, the step sizes counted;
 * the last row stays in r as row 0, so the next piece can tell whether it continues that row's session. */
static int flush_piece(void *ctx, rows *r)
{
    piece_state *p = ctx;
    m2_dataset *piece = &p->piece;
    p->best = min_step(r, 1, p->best);
    piece->tick_size = p->o->tick_size > 0 ? p->o->tick_size : tick_of(p->best); /* the last piece's counts */
    if (make_sessions(r, p->at, p->o->session_gap_s, piece)) return M2_EFAIL;
    tick_rule(r, p->at, piece->sessions, piece->n_sessions, &p->trades);
    const int64_t a = p->at;
    piece->n_rows = r->n - a;
    piece->ts_ns = r->ts + a;
    piece->bid_px = r->bid + a;
    piece->ask_px = r->ask + a;
    piece->bid_sz = r->bsz + a;
    piece->ask_sz = r->asz + a;
    piece->trade_px = r->tpx + a;
    piece->trade_sz = r->tsz + a;
    piece->side = r->side + a;
    piece->extra = r->n_extra ? r->extra + a * r->n_extra : NULL;
    piece->n_extra = r->n_extra;
    int rc = p->emit(p->sink, piece);
    free(piece->sessions);
    piece->sessions = NULL;
    if (r->n > 1) { /* the last row moves to the front */
        const int64_t l = r->n - 1;
        r->ts[0] = r->ts[l];
        double *cols[] = {r->bid, r->ask, r->bsz, r->asz, r->tpx, r->tsz};
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) cols[c][0] = cols[c][l];
        r->side[0] = r->side[l];
        if (r->n_extra) memmove(r->extra, r->extra + l * r->n_extra, (size_t)r->n_extra * sizeof *r->extra);
        r->n = 1;
    }
    p->at = r->n;
    return rc;
}

int m2_import_events_pieces(const char *const *csv, int n, const m2_import_opts *o, m2_universe_emit emit, void *sink,
                            m2_import_report *rep)
{
    memset(rep, 0, sizeof *rep);
    if (check_opts(o)) return M2_EUSAGE;
    piece_state p = {.o = o, .emit = emit, .sink = sink, .best = INFINITY, .trades = {NAN, 0}};
    name_events(&p.piece, csv[0], n, o);
    rows r = {.n_extra = o->depth_levels > 0 ? o->depth_levels + 1 : 0,
              .flush = flush_piece,
              .flush_ctx = &p,
              .flush_at = o->piece_rows > 1 ? o->piece_rows : M2_IMPORT_PIECE_ROWS};
    int rc = M2_OK;
    for (int i = 0; rc == M2_OK && i < n; i++) rc = read_file(csv[i], o, &r, rep, n > 1);
    rep->rows = r.kept;
    if (rc == M2_OK && rep->rows < 2)
        rc = m2_fail(M2_EFAIL, "import (%s): %lld valid rows, need at least 2", csv[0], (long long)rep->rows);
    rep->tick_inferred = o->tick_size == 0;
    if (rc == M2_OK) rc = flush_piece(&p, &r); /* the last piece, maybe empty, has the final tick size */
    free_rows(&r);
    return rc;
}

int m2_import_csv_events(const char *csv, const m2_import_opts *o, m2_dataset *ds, m2_import_report *rep)
{
    return m2_import_events_files(&csv, 1, o, ds, rep);
}

int m2_import_csv(const char *csv, const m2_import_opts *o, m2_dataset *ds, m2_import_report *rep)
{
    if (m2_import_csv_events(csv, o, ds, rep)) return M2_EFAIL;
    if (m2_features_build(ds, &o->feat)) {
        m2_dataset_free(ds);
        return M2_EFAIL;
    }
    return M2_OK;
}

void m2_import_report_text(const m2_import_report *rep, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (rep->bad == 0) return;
    size_t n = (size_t)snprintf(buf, cap, "%lld bad row%s skipped:", (long long)rep->bad, rep->bad == 1 ? "" : "s");
    for (int i = 0; i < rep->n_listed && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s line %lld (%s)", i ? "," : "", (long long)rep->bad_line[i],
                              rep->bad_why[i]);
    if (rep->bad > rep->n_listed && n < cap)
        snprintf(buf + n, cap - n, " and %lld more", (long long)(rep->bad - rep->n_listed));
}
