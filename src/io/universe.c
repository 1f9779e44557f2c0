/* Universe writer (universe.h; FORMATS.md "Universe import"). Memory holds one instrument's events and features
 * at a time, plus the per-instrument, per-day row counts and the session index: nothing that grows with the
 * universe's rows. The spool is an unlinked file in the output's folder, so a crash leaves nothing behind. */
#include "io/universe.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

#define DAY_NS 86400000000000LL

/* ---- the spool: each instrument's raw columns, one after the other ---------------------------------- */

typedef struct {
    size_t offset, size; /* of the pointer inside m2_dataset; element size */
} column;

static const column columns[] = {
    {offsetof(m2_dataset, ts_ns), 8},    {offsetof(m2_dataset, bid_px), 8}, {offsetof(m2_dataset, ask_px), 8},
    {offsetof(m2_dataset, bid_sz), 8},   {offsetof(m2_dataset, ask_sz), 8}, {offsetof(m2_dataset, trade_px), 8},
    {offsetof(m2_dataset, trade_sz), 8}, {offsetof(m2_dataset, side), 1},
};
enum { N_COLUMNS = sizeof columns / sizeof columns[0] };

static void **slot(const m2_dataset *ds, int c) { return (void **)((char *)ds + columns[c].offset); }

typedef struct {
    int64_t off, rows, sessions;
    int n_extra;
    double tick;
    char name[64], source[64];
} spooled;

typedef struct {
    int64_t day;             /* UTC day number */
    int64_t first, rows, at; /* the instrument's rows of that day, and where its times start in the spool */
} day_part;

typedef struct {
    int fd;
    int64_t end;
    spooled *inst;
    day_part *parts;
    int64_t n_parts, cap_parts;
} spool;

static int64_t day_of(int64_t t) { return t >= 0 ? t / DAY_NS : -((-t + DAY_NS - 1) / DAY_NS); }

static int put_bytes(spool *sp, const void *p, size_t n)
{
    for (const char *c = p; n > 0;) {
        ssize_t w = pwrite(sp->fd, c, n, (off_t)sp->end);
        if (w <= 0) return m2_fail(M2_EFAIL, "universe (spool): cannot write: %s", strerror(errno));
        c += w;
        n -= (size_t)w;
        sp->end += w;
    }
    return M2_OK;
}

static int get_bytes(const spool *sp, void *p, size_t n, int64_t at)
{
    for (char *c = p; n > 0;) {
        ssize_t r = pread(sp->fd, c, n, (off_t)at);
        if (r <= 0) return m2_fail(M2_EFAIL, "universe (spool): cannot read: %s", r ? strerror(errno) : "short");
        c += r;
        n -= (size_t)r;
        at += r;
    }
    return M2_OK;
}

static int spool_open(spool *sp, const char *path, int n)
{
    memset(sp, 0, sizeof *sp);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.spool.XXXXXX", path);
    sp->fd = mkstemp(tmp);
    if (sp->fd < 0) return m2_fail(M2_EFAIL, "universe (%s): cannot create the spool file: %s", tmp, strerror(errno));
    unlink(tmp); /* anonymous from here on: freed by the kernel whatever happens */
    sp->inst = calloc((size_t)n, sizeof *sp->inst);
    return sp->inst ? M2_OK : m2_fail(M2_EFAIL, "universe (%d instruments): out of memory", n);
}

static void spool_close(spool *sp)
{
    if (sp->fd >= 0) close(sp->fd);
    free(sp->inst);
    free(sp->parts);
}

/* One part per (instrument, UTC day) with rows: rows are in time order, so a day's rows are consecutive. */
static int add_days(spool *sp, const m2_dataset *ev, int64_t ts_at)
{
    for (int64_t i = 0; i < ev->n_rows;) {
        int64_t d = day_of(ev->ts_ns[i]), j = i;
        while (j < ev->n_rows && day_of(ev->ts_ns[j]) == d) j++;
        if (sp->n_parts == sp->cap_parts) {
            int64_t c = sp->cap_parts ? 2 * sp->cap_parts : 1024;
            day_part *p = realloc(sp->parts, sizeof *p * (size_t)c);
            if (!p) return m2_fail(M2_EFAIL, "universe: out of memory for the day index");
            sp->parts = p;
            sp->cap_parts = c;
        }
        sp->parts[sp->n_parts++] = (day_part){d, i, j - i, ts_at + 8 * i};
        i = j;
    }
    return M2_OK;
}

static int spool_put(spool *sp, int k, const m2_dataset *ev)
{
    spooled *s = &sp->inst[k];
    s->off = sp->end;
    s->rows = ev->n_rows;
    s->sessions = ev->n_sessions;
    s->n_extra = ev->n_extra;
    s->tick = ev->tick_size;
    snprintf(s->name, sizeof s->name, "%s", ev->instrument);
    snprintf(s->source, sizeof s->source, "%s", ev->source);
    int rc = add_days(sp, ev, sp->end);
    for (int c = 0; rc == M2_OK && c < N_COLUMNS; c++)
        rc = put_bytes(sp, *slot(ev, c), columns[c].size * (size_t)ev->n_rows);
    if (rc == M2_OK && ev->n_extra) rc = put_bytes(sp, ev->extra, sizeof(float) * (size_t)(ev->n_rows * ev->n_extra));
    if (rc == M2_OK) rc = put_bytes(sp, ev->sessions, sizeof(int64_t) * (size_t)(ev->n_sessions + 1));
    return rc;
}

/* Instrument k's events back, as its source made them (without the optional book). */
static int spool_get(const spool *sp, int k, m2_dataset *ev)
{
    const spooled *s = &sp->inst[k];
    memset(ev, 0, sizeof *ev);
    ev->n_rows = s->rows;
    ev->n_sessions = s->sessions;
    ev->n_extra = s->n_extra;
    ev->tick_size = s->tick;
    snprintf(ev->instrument, sizeof ev->instrument, "%s", s->name);
    int64_t at = s->off;
    int rc = M2_OK;
    for (int c = 0; rc == M2_OK && c < N_COLUMNS; c++) {
        size_t n = columns[c].size * (size_t)s->rows;
        rc = (*slot(ev, c) = malloc(n)) ? get_bytes(sp, *slot(ev, c), n, at)
                                        : m2_fail(M2_EFAIL, "universe: out of memory");
        at += (int64_t)n;
    }
    size_t ne = sizeof(float) * (size_t)(s->rows * s->n_extra), ns = sizeof(int64_t) * (size_t)(s->sessions + 1);
    if (rc == M2_OK && ne)
        rc = (ev->extra = malloc(ne)) ? get_bytes(sp, ev->extra, ne, at) : m2_fail(M2_EFAIL, "universe: out of memory");
    if (rc == M2_OK)
        rc = (ev->sessions = malloc(ns)) ? get_bytes(sp, ev->sessions, ns, at + (int64_t)ne)
                                         : m2_fail(M2_EFAIL, "universe: out of memory");
    if (rc) m2_dataset_free(ev);
    return rc;
}

/* ---- the calendar cuts, from the day counts ------------------------------------------------------- */

static int cmp_part(const void *a, const void *b)
{
    const day_part *x = a, *y = b;
    return (x->day > y->day) - (x->day < y->day);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The time of the pooled row of rank r inside the day made of parts [a, b): only that day's times are read. */
static int time_in_day(const spool *sp, int64_t a, int64_t b, int64_t r, int64_t *t)
{
    int64_t n = 0;
    for (int64_t p = a; p < b; p++) n += sp->parts[p].rows;
    int64_t *ts = malloc(sizeof *ts * (size_t)n);
    if (!ts) return m2_fail(M2_EFAIL, "universe (%lld rows in one day): out of memory", (long long)n);
    int rc = M2_OK;
    for (int64_t p = a, at = 0; rc == M2_OK && p < b; at += sp->parts[p].rows, p++)
        rc = get_bytes(sp, ts + at, sizeof *ts * (size_t)sp->parts[p].rows, sp->parts[p].at);
    if (rc == M2_OK) {
        qsort(ts, (size_t)n, sizeof *ts, cmp_i64);
        *t = ts[r];
    }
    free(ts);
    return rc;
}

/* The cut for pooled row rank r: the UTC midnight before or after that row's time, whichever leaves a row count
 * closer to r, when that moves the cut by at most `tol` rows (a cut in the overnight gap splits no session); else
 * the time of row r itself. */
static int place_cut(const spool *sp, int64_t N, int64_t r, double tol, int64_t *cut)
{
    if (r >= N) {
        *cut = INT64_MAX;
        return M2_OK;
    }
    int64_t rl = 0, a = 0;
    for (;;) {
        int64_t b = a, rows = 0;
        while (b < sp->n_parts && sp->parts[b].day == sp->parts[a].day) rows += sp->parts[b++].rows;
        if (r < rl + rows) {
            int64_t rh = rl + rows, lo = sp->parts[a].day * DAY_NS;
            int64_t moved = r - rl <= rh - r ? r - rl : rh - r;
            if ((double)moved <= tol) {
                *cut = r - rl <= rh - r ? lo : lo + DAY_NS;
                return M2_OK;
            }
            return time_in_day(sp, a, b, r - rl, cut);
        }
        rl += rows;
        a = b;
    }
}

static int universe_cuts(spool *sp, int64_t N, const double f[3], int64_t cut_ns[2])
{
    if (N < 1) return m2_fail(M2_EFAIL, "universe: no events");
    qsort(sp->parts, (size_t)sp->n_parts, sizeof *sp->parts, cmp_part);
    double nr = (double)N, q[2] = {f[0], f[0] + f[1]};
    double tol[2] = {0.25 * nr * (f[0] < f[1] ? f[0] : f[1]), 0.25 * nr * (f[1] < f[2] ? f[1] : f[2])};
    for (int k = 0; k < 2; k++)
        if (place_cut(sp, N, (int64_t)(nr * q[k] + 0.5), tol[k], &cut_ns[k])) return M2_EFAIL;
    return M2_OK;
}

/* ---- pass 2: one instrument at a time into its places --------------------------------------------- */

/* First row at or after time t (rows in time order). */
static int64_t lower_bound(const int64_t *ts, int64_t n, int64_t t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Rows of each instrument in each split: `count` [n][3]. */
static int split_counts(const spool *sp, int n, const int64_t cut_ns[2], int64_t (*count)[3])
{
    for (int i = 0; i < n; i++) {
        const spooled *s = &sp->inst[i];
        int64_t *ts = malloc(sizeof *ts * (size_t)s->rows);
        if (!ts) return m2_fail(M2_EFAIL, "universe (instrument %s): out of memory", s->name);
        int rc = get_bytes(sp, ts, sizeof *ts * (size_t)s->rows, s->off);
        int64_t c1 = lower_bound(ts, s->rows, cut_ns[0]), c2 = lower_bound(ts, s->rows, cut_ns[1]);
        free(ts);
        if (rc) return rc;
        if (c1 == 0)
            return m2_fail(M2_EFAIL,
                           "universe (instrument %s): no rows before the train cut: its events all lie in the "
                           "val or test period of the universe",
                           s->name);
        count[i][0] = c1;
        count[i][1] = c2 - c1;
        count[i][2] = s->rows - c2;
        if (s->n_extra != sp->inst[0].n_extra)
            return m2_fail(M2_EUSAGE, "universe (instrument %s): %d depth features, instrument %s has %d", s->name,
                           s->n_extra, sp->inst[0].name, sp->inst[0].n_extra);
    }
    return M2_OK;
}

int m2_session_list_add(m2_session_list *l, int64_t row, int inst)
{
    if (l->n == l->cap) {
        int64_t c = l->cap ? 2 * l->cap : 256;
        int64_t *r = realloc(l->row, sizeof *r * (size_t)c);
        if (r) l->row = r;
        int32_t *s = r ? realloc(l->inst, sizeof *s * (size_t)c) : NULL;
        if (!s) return m2_fail(M2_EFAIL, "universe: out of memory for the session index");
        l->inst = s;
        l->cap = c;
    }
    l->row[l->n] = row;
    l->inst[l->n++] = inst;
    return M2_OK;
}

/* Writes split k of instrument i (built) at row *at and lists its session parts. */
static int place(m2_dataset_writer *dw, const m2_dataset *ev, int i, int k, int64_t *at, m2_session_list *l)
{
    int64_t b = ev->split[k][0], e = ev->split[k][1];
    if (m2_dataset_writer_put(dw, *at, ev, b, e)) return M2_EFAIL;
    for (int64_t s = 0; s < ev->n_sessions; s++) {
        int64_t sb, se;
        m2_dataset_session_part(ev, k, s, &sb, &se);
        if (sb < se && m2_session_list_add(l, *at + (sb - b), i)) return M2_EFAIL;
    }
    *at += e - b;
    return M2_OK;
}

/* Instrument i's statistics into the index; the first also names the columns. */
static void describe(m2_dataset *meta, const m2_dataset *ev, int i, int n)
{
    const int F = ev->n_features;
    if (i == 0) {
        memcpy(meta->feature_names, ev->feature_names, sizeof meta->feature_names);
        memcpy(meta->horizons, ev->horizons, sizeof meta->horizons);
        meta->clip = ev->clip;
        meta->tick_size = ev->tick_size;
        snprintf(meta->instrument, sizeof meta->instrument, "%s", n == 1 ? ev->instrument : "universe");
        /* Stored rows are already z-scored per instrument: the root statistics are the identity, and a universe
         * of one keeps its instrument's (as a file of version 1 has them). */
        for (int j = 0; j < F; j++) {
            meta->mean[j] = n == 1 ? ev->mean[j] : 0.0;
            meta->std[j] = n == 1 ? ev->std[j] : 1.0;
        }
    }
    snprintf(meta->inst_name[i], sizeof meta->inst_name[i], "%s", ev->instrument);
    memcpy(meta->inst_mean + i * M2_MAX_FEATURES, ev->mean, sizeof(double) * (size_t)F);
    memcpy(meta->inst_std + i * M2_MAX_FEATURES, ev->std, sizeof(double) * (size_t)F);
    meta->inst_tick[i] = ev->tick_size;
}

static int build_one(const spool *sp, int i, const m2_feature_opts *o, const int64_t cut_ns[2], m2_dataset *ev)
{
    if (spool_get(sp, i, ev)) return M2_EFAIL;
    int64_t c1 = lower_bound(ev->ts_ns, ev->n_rows, cut_ns[0]), c2 = lower_bound(ev->ts_ns, ev->n_rows, cut_ns[1]);
    /* the check covers what the file's reader checks of X and y (finite features), which the writer cannot see */
    if (m2_features_split_at(ev, c1, c2) || m2_features_compute(ev, o) || m2_features_normalise(ev, o->clip) ||
        m2_dataset_check(ev, ev->instrument)) {
        m2_dataset_free(ev);
        return M2_EFAIL;
    }
    return M2_OK;
}

/* The session index in split-major order: the three lists one after the other. */
static int join_sessions(m2_dataset *meta, m2_session_list l[3])
{
    int64_t S = l[0].n + l[1].n + l[2].n;
    free(meta->session_inst);
    meta->sessions = malloc(sizeof(int64_t) * (size_t)(S + 1));
    meta->session_inst = malloc(sizeof(int32_t) * (size_t)(S > 0 ? S : 1));
    if (!meta->sessions || !meta->session_inst) return m2_fail(M2_EFAIL, "universe: out of memory for the index");
    for (int k = 0, at = 0; k < 3; at += (int)l[k].n, k++) {
        memcpy(meta->sessions + at, l[k].row, sizeof(int64_t) * (size_t)l[k].n);
        memcpy(meta->session_inst + at, l[k].inst, sizeof(int32_t) * (size_t)l[k].n);
    }
    meta->n_sessions = S;
    meta->sessions[S] = meta->n_rows;
    return M2_OK;
}

static int write_pass(const spool *sp, int n, const int64_t (*count)[3], const m2_feature_opts *o, const char *path,
                      m2_dataset *meta)
{
    int64_t at[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        at[1] += count[i][0], at[2] += count[i][0] + count[i][1], meta->n_rows += sp->inst[i].rows;
    for (int k = 0; k < 3; k++) meta->split[k][0] = at[k];
    meta->n_features = M2_N_FEATURES + sp->inst[0].n_extra;
    meta->n_targets = o->n_horizons;
    m2_dataset_writer *dw = NULL;
    m2_session_list l[3] = {{0}};
    int rc = m2_dataset_alloc_universe(meta, n);
    if (rc == M2_OK) rc = m2_dataset_writer_open(&dw, path, meta->n_rows, meta->n_features, meta->n_targets);
    for (int i = 0; rc == M2_OK && i < n; i++) {
        m2_dataset ev;
        rc = build_one(sp, i, o, meta->cut_ns, &ev);
        for (int k = 0; rc == M2_OK && k < 3; k++) rc = place(dw, &ev, i, k, &at[k], &l[k]);
        if (rc == M2_OK) describe(meta, &ev, i, n);
        m2_dataset_free(&ev); /* zeroed by a failed build_one, so freeing again is safe */
    }
    for (int k = 0; k < 3; k++) meta->split[k][1] = at[k];
    if (rc == M2_OK) rc = join_sessions(meta, l);
    for (int k = 0; k < 3; k++) {
        free(l[k].row);
        free(l[k].inst);
    }
    if (rc == M2_OK) return m2_dataset_writer_finish(dw, meta);
    m2_dataset_writer_abort(dw);
    return rc;
}

int m2_universe_write(const char *path, int n, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                      const char *source, m2_dataset *meta)
{
    memset(meta, 0, sizeof *meta);
    spool sp;
    int rc = spool_open(&sp, path, n);
    int64_t N = 0, (*count)[3] = NULL;
    for (int k = 0; rc == M2_OK && k < n; k++) {
        m2_dataset ev;
        memset(&ev, 0, sizeof ev);
        rc = get(ctx, k, &ev);
        if (rc == M2_OK) rc = spool_put(&sp, k, &ev);
        N += ev.n_rows;
        m2_dataset_free(&ev);
    }
    if (rc == M2_OK) rc = universe_cuts(&sp, N, o->split, meta->cut_ns);
    if (rc == M2_OK && !(count = calloc((size_t)n, sizeof *count)))
        rc = m2_fail(M2_EFAIL, "universe (%d instruments): out of memory", n);
    if (rc == M2_OK) rc = split_counts(&sp, n, meta->cut_ns, count);
    snprintf(meta->source, sizeof meta->source, "%s", source ? source : sp.inst[0].source);
    if (rc == M2_OK) rc = write_pass(&sp, n, (const int64_t(*)[3])count, o, path, meta);
    free(count);
    spool_close(&sp);
    if (rc) m2_dataset_free(meta);
    return rc;
}
