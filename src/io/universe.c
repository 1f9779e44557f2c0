/* Universe writer (universe.h; FORMATS.md "Universe import"): pass 1 spools, the cuts come from per-day counts,
 * pass 2 (universe_rows.c) reads the spool back in blocks of rows. Pass 2 holds a block, the per-instrument,
 * per-day row counts and the session index: nothing that grows with the rows of the universe or of one instrument
 * (pass 1 holds what its source makes: one piece of sessions). The spool is an unlinked file in the output's folder, so a crash leaves nothing behind. */
#include "io/universe.h"
#include "io/universe_spool.h"

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

static int64_t day_of(int64_t t) { return t >= 0 ? t / DAY_NS : -((-t + DAY_NS - 1) / DAY_NS); }

static int pwrite_all(int fd, const void *p, size_t n, int64_t at)
{
    for (const char *c = p; n > 0;) {
        ssize_t w = pwrite(fd, c, n, (off_t)at);
        if (w <= 0) return m2_fail(M2_EFAIL, "universe (spool): cannot write: %s", strerror(errno));
        c += w;
        n -= (size_t)w;
        at += w;
    }
    return M2_OK;
}

static int put_bytes(m2_spool *sp, int f, const void *p, size_t n)
{
    if (pwrite_all(sp->fd[f], p, n, sp->end[f])) return M2_EFAIL;
    sp->end[f] += (int64_t)n;
    return M2_OK;
}

static int get_bytes(const m2_spool *sp, int f, void *p, size_t n, int64_t at)
{
    for (char *c = p; n > 0;) {
        ssize_t r = pread(sp->fd[f], c, n, (off_t)at);
        if (r <= 0) return m2_fail(M2_EFAIL, "universe (spool): cannot read: %s", r ? strerror(errno) : "short");
        c += r;
        n -= (size_t)r;
        at += r;
    }
    return M2_OK;
}

int m2_spool_cache_put(const m2_spool *sp, int64_t at, const void *p, size_t n)
{
    return pwrite_all(sp->fd[M2_SPOOL_CACHE], p, n, at);
}

int m2_spool_cache_get(const m2_spool *sp, int64_t at, void *p, size_t n)
{
    return get_bytes(sp, M2_SPOOL_CACHE, p, n, at);
}

/* One unlinked file per column (the raw columns, the extra features, the session offsets), so that an
 * instrument's rows, which arrive in pieces, lie contiguous in each. */
int m2_spool_open(m2_spool *sp, const char *path, int n)
{
    memset(sp, 0, sizeof *sp);
    for (int f = 0; f < M2_SPOOL_FILES; f++) sp->fd[f] = -1;
    char tmp[4200];
    for (int f = 0; f < M2_SPOOL_FILES; f++) {
        snprintf(tmp, sizeof tmp, "%s.spool.XXXXXX", path);
        sp->fd[f] = mkstemp(tmp);
        if (sp->fd[f] < 0)
            return m2_fail(M2_EFAIL, "universe (%s): cannot create the spool file: %s", tmp, strerror(errno));
        unlink(tmp); /* anonymous from here on: freed by the kernel whatever happens */
    }
    sp->inst = calloc((size_t)n, sizeof *sp->inst);
    return sp->inst ? M2_OK : m2_fail(M2_EFAIL, "universe (%d instruments): out of memory", n);
}

void m2_spool_close(m2_spool *sp)
{
    for (int f = 0; f < M2_SPOOL_FILES; f++)
        if (sp->fd[f] >= 0) close(sp->fd[f]);
    free(sp->inst);
    free(sp->parts);
}

/* One part per (instrument, UTC day) with rows: rows are in time order, so a day's rows are consecutive; a day
 * continued by the next piece extends its part. */
static int add_days(m2_spool *sp, int k, const m2_dataset *ev, int64_t ts_at)
{
    for (int64_t i = 0; i < ev->n_rows;) {
        int64_t d = day_of(ev->ts_ns[i]), j = i;
        while (j < ev->n_rows && day_of(ev->ts_ns[j]) == d) j++;
        m2_day_part *last = sp->n_parts ? &sp->parts[sp->n_parts - 1] : NULL;
        if (last && last->inst == k && last->day == d && last->at + 8 * last->rows == ts_at + 8 * i) {
            last->rows += j - i;
            i = j;
            continue;
        }
        if (sp->n_parts == sp->cap_parts) {
            int64_t c = sp->cap_parts ? 2 * sp->cap_parts : 1024;
            m2_day_part *p = realloc(sp->parts, sizeof *p * (size_t)c);
            if (!p) return m2_fail(M2_EFAIL, "universe: out of memory for the day index");
            sp->parts = p;
            sp->cap_parts = c;
        }
        sp->parts[sp->n_parts++] = (m2_day_part){d, j - i, ts_at + 8 * i, k};
        i = j;
    }
    return M2_OK;
}

/* A piece of instrument k's events (m2_universe_emit): its rows after the earlier pieces', its sessions after
 * theirs. The first piece names the instrument; the last one's tick size counts. */
int m2_spool_piece(void *ctx, const m2_dataset *ev)
{
    m2_spool *sp = ((m2_spool_sink *)ctx)->sp;
    m2_spooled *s = &sp->inst[((m2_spool_sink *)ctx)->k];
    if (s->rows == 0 && s->sessions == 0) {
        s->first = sp->end[0] / 8;
        s->extra_at = sp->end[N_COLUMNS];
        s->sessions_at = sp->end[N_COLUMNS + 1];
        s->n_extra = ev->n_extra;
        snprintf(s->name, sizeof s->name, "%s", ev->instrument);
        snprintf(s->source, sizeof s->source, "%s", ev->source);
    } else if (ev->n_extra != s->n_extra) {
        return m2_fail(M2_EFAIL, "universe (instrument %s): pieces with %d and %d depth features", s->name, s->n_extra,
                       ev->n_extra);
    }
    s->tick = ev->tick_size; /* the last piece's: a source inferring it from all rows knows it at the end */
    int rc = add_days(sp, ((m2_spool_sink *)ctx)->k, ev, sp->end[0]);
    for (int c = 0; rc == M2_OK && c < N_COLUMNS; c++)
        rc = put_bytes(sp, c, *slot(ev, c), columns[c].size * (size_t)ev->n_rows);
    if (rc == M2_OK && ev->n_extra)
        rc = put_bytes(sp, N_COLUMNS, ev->extra, sizeof(float) * (size_t)(ev->n_rows * ev->n_extra));
    for (int64_t j = 0; rc == M2_OK && j < ev->n_sessions; j++) {
        int64_t row = s->rows + ev->sessions[j];
        rc = put_bytes(sp, N_COLUMNS + 1, &row, sizeof row);
    }
    s->rows += ev->n_rows;
    s->sessions += ev->n_sessions;
    return rc;
}

int m2_spool_rows(const m2_spool *sp, int k, int64_t lo, int64_t hi, m2_dataset *blk)
{
    const m2_spooled *s = &sp->inst[k];
    int rc = M2_OK;
    for (int c = 0; rc == M2_OK && c < N_COLUMNS; c++)
        rc = get_bytes(sp, c, *slot(blk, c), columns[c].size * (size_t)(hi - lo),
                       (int64_t)columns[c].size * (s->first + lo));
    size_t w = sizeof(float) * (size_t)s->n_extra;
    if (rc == M2_OK && w)
        rc = get_bytes(sp, N_COLUMNS, blk->extra, w * (size_t)(hi - lo), s->extra_at + (int64_t)w * lo);
    return rc;
}

int m2_spool_sessions(const m2_spool *sp, int k, int64_t **sessions)
{
    const m2_spooled *s = &sp->inst[k];
    size_t n = sizeof(int64_t) * (size_t)s->sessions;
    if (!(*sessions = malloc(n + sizeof(int64_t))))
        return m2_fail(M2_EFAIL, "universe (instrument %s): out of memory", s->name);
    (*sessions)[s->sessions] = s->rows;
    return get_bytes(sp, N_COLUMNS + 1, *sessions, n, s->sessions_at);
}

int m2_spool_count_before(const m2_spool *sp, int64_t at, int64_t n, int64_t t, int64_t *count)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, v;
        if (get_bytes(sp, 0, &v, sizeof v, at + 8 * mid)) return M2_EFAIL;
        if (v < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    *count = lo;
    return M2_OK;
}

/* ---- the calendar cuts, from the day counts ------------------------------------------------------- */

static int cmp_part(const void *a, const void *b)
{
    const m2_day_part *x = a, *y = b;
    return (x->day > y->day) - (x->day < y->day);
}

/* The time of the pooled row of rank r inside the day made of parts [a, b) (each part in time order): the least
 * time t with more than r of the day's rows at or before it, by bisection on t, counting with binary searches in
 * the spool, so no day is held in memory. */
static int time_in_day(const m2_spool *sp, int64_t a, int64_t b, int64_t r, int64_t *t)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t p = a; p < b; p++) {
        int64_t first, last;
        if (get_bytes(sp, 0, &first, 8, sp->parts[p].at) ||
            get_bytes(sp, 0, &last, 8, sp->parts[p].at + 8 * (sp->parts[p].rows - 1)))
            return M2_EFAIL;
        lo = first < lo ? first : lo;
        hi = last > hi ? last : hi;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, n = 0, c; /* rows with time <= mid are those before mid + 1 */
        for (int64_t p = a; p < b; p++, n += c)
            if (m2_spool_count_before(sp, sp->parts[p].at, sp->parts[p].rows, mid + 1, &c)) return M2_EFAIL;
        if (n > r)
            hi = mid;
        else
            lo = mid + 1;
    }
    *t = lo;
    return M2_OK;
}

/* The cut for pooled row rank r: the UTC midnight before or after that row's time, whichever leaves a row count
 * closer to r, when that moves the cut by at most `tol` rows (a cut in the overnight gap splits no session); else
 * the time of row r itself. */
static int place_cut(const m2_spool *sp, int64_t N, int64_t r, double tol, int64_t *cut)
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

static int universe_cuts(m2_spool *sp, int64_t N, const double f[3], int64_t cut_ns[2])
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

/* Rows of each instrument in each split: `count` [n][3]. */
static int split_counts(const m2_spool *sp, int n, const int64_t cut_ns[2], int64_t (*count)[3])
{
    for (int i = 0; i < n; i++) {
        const m2_spooled *s = &sp->inst[i];
        int64_t c1, c2;
        if (m2_spool_count_before(sp, 8 * s->first, s->rows, cut_ns[0], &c1) ||
            m2_spool_count_before(sp, 8 * s->first, s->rows, cut_ns[1], &c2))
            return M2_EFAIL;
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

/* What the file is, besides the rows: its version and any extra content (m2_universe_write_one). */
typedef struct {
    int version;
    int (*extra)(int64_t h5file, void *ctx);
    void *extra_ctx;
} file_kind;

static int write_pass(const m2_spool *sp, int n, const int64_t (*count)[3], const m2_feature_opts *o, const char *path,
                      const file_kind *kind, m2_dataset *meta)
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
    if (rc == M2_OK)
        rc = m2_dataset_writer_open(&dw, path, meta->n_rows, meta->n_features, meta->n_targets, kind->version);
    for (int i = 0; rc == M2_OK && i < n; i++) {
        m2_put_target t = {dw, at, l, meta, n, NULL, NULL, i};
        rc = m2_universe_put_instrument(sp, i, count[i], o, &t);
    }
    for (int k = 0; k < 3; k++) meta->split[k][1] = at[k];
    if (rc == M2_OK) rc = join_sessions(meta, l);
    if (kind->version == 1) { /* one instrument split by rows: no /universe (FORMATS.md "Tick dataset") */
        free(meta->session_inst);
        meta->session_inst = NULL;
    }
    for (int k = 0; k < 3; k++) {
        free(l[k].row);
        free(l[k].inst);
    }
    if (rc == M2_OK) return m2_dataset_writer_finish_with(dw, meta, kind->extra, kind->extra_ctx);
    m2_dataset_writer_abort(dw);
    return rc;
}

/* The row-fraction cut of one instrument (m2_features_split's rule on its session index): count[3] rows. */
static int row_cuts(const m2_spool *sp, const double f[3], int64_t *count)
{
    m2_dataset idx;
    memset(&idx, 0, sizeof idx);
    idx.n_rows = sp->inst[0].rows;
    idx.n_sessions = sp->inst[0].sessions;
    int rc = m2_spool_sessions(sp, 0, &idx.sessions);
    if (rc == M2_OK) rc = m2_features_split(&idx, f);
    for (int k = 0; rc == M2_OK && k < 3; k++) count[k] = idx.split[k][1] - idx.split[k][0];
    free(idx.sessions);
    return rc;
}

/* Both writers: version 1 cuts one instrument at row fractions, a universe at the calendar cuts. */
static int write_file(const char *path, int n, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                      const char *source, const file_kind *kind, m2_dataset *meta)
{
    memset(meta, 0, sizeof *meta);
    m2_spool sp;
    int rc = m2_spool_open(&sp, path, n);
    int64_t N = 0, (*count)[3] = NULL;
    for (int k = 0; rc == M2_OK && k < n; k++) {
        m2_spool_sink to = {&sp, k};
        rc = get(ctx, k, m2_spool_piece, &to);
        N += sp.inst[k].rows;
    }
    if (rc == M2_OK && !(count = calloc((size_t)n, sizeof *count)))
        rc = m2_fail(M2_EFAIL, "universe (%d instruments): out of memory", n);
    if (kind->version == 1) {
        meta->cut_ns[0] = meta->cut_ns[1] = INT64_MIN; /* as the reader reports a file split by rows */
        if (rc == M2_OK) rc = row_cuts(&sp, o->split, count[0]);
    } else {
        if (rc == M2_OK) rc = universe_cuts(&sp, N, o->split, meta->cut_ns);
        if (rc == M2_OK) rc = split_counts(&sp, n, meta->cut_ns, count);
    }
    snprintf(meta->source, sizeof meta->source, "%s", source ? source : sp.inst[0].source);
    if (rc == M2_OK) rc = write_pass(&sp, n, (const int64_t(*)[3])count, o, path, kind, meta);
    free(count);
    m2_spool_close(&sp);
    if (rc) m2_dataset_free(meta);
    return rc;
}

int m2_universe_write(const char *path, int n, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                      const char *source, m2_dataset *meta)
{
    const file_kind universe = {M2_TICKS_VERSION, NULL, NULL};
    return write_file(path, n, get, ctx, o, source, &universe, meta);
}

int m2_universe_write_one(const char *path, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                          int (*extra)(int64_t h5file, void *ctx), void *extra_ctx, m2_dataset *meta)
{
    const file_kind one = {1, extra, extra_ctx};
    return write_file(path, 1, get, ctx, o, NULL, &one, meta);
}
