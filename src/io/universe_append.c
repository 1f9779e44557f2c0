/* Universe append (universe_append.h). Contiguous X and y (which ranks map) cannot grow in place in HDF5, and an
 * instrument's test rows must stay together for the sampler, so the file is rewritten under a temporary name
 * and renamed over the old one: old rows are copied as bytes, only the new days are parsed and computed. */
#include "io/universe_append.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "io/features.h"
#include "io/h5util.h"
#include "io/universe.h"
#include "io/universe_spool.h"

typedef struct {
    int inst;         /* instrument index in the universe */
    int first, count; /* its files in the list */
} group;

static void iso(int64_t ns, char *buf, size_t cap)
{
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The list's instruments, each found in the universe. */
static int find_groups(const m2_dataset *old, const m2_file_list *list, const char *path, group *g, int *n)
{
    *n = 0;
    for (int i = 0; i < list->n; i++) {
        if (i > 0 && strcmp(list->instrument[i], list->instrument[i - 1]) == 0) {
            g[*n - 1].count++;
            continue;
        }
        int k = m2_dataset_find_instrument(old, list->instrument[i]);
        if (k < 0)
            return m2_fail(M2_EUSAGE,
                           "append (%s): instrument %s is not in the universe (appending adds days to its "
                           "instruments, whose statistics are frozen)",
                           list->path[i], list->instrument[i]);
        g[(*n)++] = (group){k, i, 1};
    }
    return M2_OK;
}

/* The time of instrument k's last row in the file (its last session's end). */
static int last_time(hid_t f, const m2_dataset *old, int k, int64_t *ts)
{
    *ts = INT64_MIN;
    for (int64_t s = old->n_sessions - 1; s >= 0; s--)
        if (old->session_inst[s] == k) {
            m2_h5_rows r;
            if (m2_h5_rows_open(f, "/raw/ts_ns", M2_H5_I64, &r)) return M2_EFAIL;
            int rc = m2_h5_rows_read(&r, old->sessions[s + 1] - 1, 1, ts);
            m2_h5_rows_close(&r);
            return rc;
        }
    return M2_OK;
}

/* The new days must follow the instrument's rows and the second cut: checked on the first piece's first row. */
typedef struct {
    m2_spool_sink to;
    const m2_dataset *old;
    const char *file, *name;
    int64_t last;
    int seen;
} checked_sink;

static int check_start(const checked_sink *c, int64_t first)
{
    char a[32], b[32];
    iso(first, a, sizeof a);
    if (first <= c->last) {
        iso(c->last, b, sizeof b);
        return m2_fail(M2_EUSAGE,
                       "append (%s): instrument %s already has rows up to %s, the new rows start at %s (is this day "
                       "already in the file?)",
                       c->file, c->name, b, a);
    }
    if (first < c->old->cut_ns[1]) {
        iso(c->old->cut_ns[1], b, sizeof b);
        return m2_fail(M2_EUSAGE, "append (%s): the new rows start at %s, before the universe's test cut %s", c->file,
                       a, b);
    }
    return M2_OK;
}

static int checked_piece(void *ctx, const m2_dataset *piece)
{
    checked_sink *c = ctx;
    if (!c->seen && piece->n_rows > 0) {
        c->seen = 1;
        if (check_start(c, piece->ts_ns[0])) return M2_EUSAGE;
    }
    return m2_spool_piece(&c->to, piece);
}

/* The new days of group g (spool instrument g), read file by file in pieces of rows (bounded memory) with the
 * instrument's frozen tick size, so the spread feature keeps its unit. */
static int import_group(const m2_dataset *old, const m2_file_list *list, const m2_import_opts *o, const group *g,
                        int gi, int64_t last, m2_spool *sp, m2_import_report *rep)
{
    m2_import_opts one = *o;
    one.instrument = old->inst_name[g->inst];
    one.tick_size = old->inst_tick[g->inst];
    checked_sink c = {{sp, gi}, old, list->path[g->first], one.instrument, last, 0};
    m2_import_report r;
    int rc = m2_import_events_pieces((const char *const *)list->path + g->first, g->count, &one, checked_piece, &c, &r);
    rep->lines += r.lines;
    rep->rows += r.rows;
    rep->bad += r.bad;
    for (int i = 0; i < r.n_listed && rep->n_listed < M2_IMPORT_LISTED; i++, rep->n_listed++) {
        rep->bad_line[rep->n_listed] = r.bad_line[i];
        memcpy(rep->bad_why[rep->n_listed], r.bad_why[i], sizeof r.bad_why[i]);
    }
    if (rc == M2_OK && M2_N_FEATURES + sp->inst[gi].n_extra != old->n_features)
        rc = m2_fail(M2_EUSAGE, "append (%s): the new rows have %d features, the universe %d", c.file,
                     M2_N_FEATURES + sp->inst[gi].n_extra, old->n_features);
    return rc;
}

typedef struct {
    const char *path;
    const m2_dataset *old;
    const m2_feature_opts *feat; /* the universe's clip */
    const group *g;
    int n_groups;
    const m2_spool *sp; /* group gi's new rows are spool instrument gi */
    m2_dataset_writer *dw;
    m2_session_list idx;
} job;

/* Instrument k's test rows: the old ones copied, then its new days, computed in blocks from the spool and
 * normalised with its frozen statistics. */
static int write_test(job *j, int k, int64_t *s, int64_t *at)
{
    const m2_dataset *old = j->old;
    int64_t s0 = *s;
    while (*s < old->n_sessions && old->session_inst[*s] == k) (*s)++;
    int64_t b = s0 < *s ? old->sessions[s0] : 0, e = s0 < *s ? old->sessions[*s] : 0;
    int rc = m2_dataset_writer_copy(j->dw, *at, j->path, old, b, e);
    for (int64_t q = s0; rc == M2_OK && q < *s; q++) rc = m2_session_list_add(&j->idx, *at + old->sessions[q] - b, k);
    *at += e - b;
    for (int gi = 0; rc == M2_OK && gi < j->n_groups; gi++) {
        if (j->g[gi].inst != k) continue;
        int64_t count[3] = {0, 0, j->sp->inst[gi].rows}, where[3] = {0, 0, *at};
        m2_session_list none[2] = {{0}}, l[3] = {none[0], none[1], j->idx};
        m2_put_target t = {
            j->dw, where, l, NULL, 0, old->inst_mean + k * M2_MAX_FEATURES, old->inst_std + k * M2_MAX_FEATURES, k};
        rc = m2_universe_put_instrument(j->sp, gi, count, j->feat, &t);
        j->idx = l[2];
        *at = where[2];
    }
    return rc;
}

/* The new file: train and val copied, then instrument by instrument its test rows and new days. */
static int write_all(job *j, int64_t new_rows)
{
    const m2_dataset *old = j->old;
    int64_t tb = old->split[M2_SPLIT_TEST][0], at = tb, s = 0;
    int rc = m2_dataset_writer_open(&j->dw, j->path, old->n_rows + new_rows, old->n_features, old->n_targets,
                                    M2_TICKS_VERSION);
    if (rc == M2_OK) rc = m2_dataset_writer_copy(j->dw, 0, j->path, old, 0, tb);
    for (; rc == M2_OK && s < old->n_sessions && old->sessions[s] < tb; s++)
        rc = m2_session_list_add(&j->idx, old->sessions[s], old->session_inst[s]);
    for (int k = 0; rc == M2_OK && k < old->n_instruments; k++) rc = write_test(j, k, &s, &at);
    if (rc == M2_OK && s != old->n_sessions)
        rc = m2_fail(M2_EFAIL, "append (%s): the test split is not ordered by instrument", j->path);
    return rc;
}

/* The new index over the old statistics: meta takes old's universe arrays. */
static int take_index(m2_dataset *old, m2_session_list *idx, int64_t new_rows, m2_dataset *meta)
{
    *meta = *old;
    meta->X = meta->y = NULL;
    meta->map = NULL;
    meta->map_len = 0;
    meta->n_rows = old->n_rows + new_rows;
    meta->n_sessions = idx->n;
    meta->sessions = realloc(idx->row, sizeof(int64_t) * (size_t)(idx->n + 1));
    if (!meta->sessions) {
        memset(meta, 0, sizeof *meta);
        return m2_fail(M2_EFAIL, "append: out of memory for the index");
    }
    meta->sessions[idx->n] = meta->n_rows;
    meta->session_inst = idx->inst;
    meta->split[M2_SPLIT_TEST][1] = meta->n_rows;
    idx->row = NULL;
    idx->inst = NULL;
    old->inst_name = NULL; /* now meta's */
    old->inst_mean = old->inst_std = old->inst_tick = NULL;
    return M2_OK;
}

static int check_universe_file(const m2_dataset *old, const char *path)
{
    if (old->cut_ns[0] == INT64_MIN)
        return m2_fail(M2_EUSAGE,
                       "append (%s): a one-instrument file split by rows has no calendar cuts: import it "
                       "as a universe (a folder or several files) to append to it",
                       path);
    if (old->cut_ns[1] == INT64_MAX)
        return m2_fail(M2_EUSAGE, "append (%s): the universe has no test period (split test fraction 0)", path);
    return M2_OK;
}

int m2_universe_append(const char *path, const m2_file_list *list, const m2_import_opts *o, m2_dataset *meta,
                       m2_import_report *rep)
{
    memset(rep, 0, sizeof *rep);
    memset(meta, 0, sizeof *meta);
    m2_dataset old;
    if (m2_dataset_read(path, &old, 0)) return M2_EFAIL;
    group *g = calloc((size_t)list->n, sizeof *g);
    int n_groups = 0, rc = g ? check_universe_file(&old, path) : m2_fail(M2_EFAIL, "append: out of memory");
    if (rc == M2_OK) rc = find_groups(&old, list, path, g, &n_groups);
    /* pass 1: every new day parsed and checked, spooled in pieces (memory: a piece of rows, not the new days) */
    m2_spool sp;
    int spooled = rc == M2_OK && (rc = m2_spool_open(&sp, path, n_groups ? n_groups : 1)) == M2_OK;
    int64_t new_rows = 0;
    hid_t f = rc == M2_OK ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
    if (rc == M2_OK && f < 0) rc = m2_h5_fail(M2_EFAIL, "append", path, "cannot open");
    for (int i = 0; rc == M2_OK && i < n_groups; i++) {
        int64_t last;
        rc = last_time(f, &old, g[i].inst, &last);
        if (rc == M2_OK) rc = import_group(&old, list, o, &g[i], i, last, &sp, rep);
        if (rc == M2_OK) new_rows += sp.inst[i].rows;
    }
    if (f >= 0) H5Fclose(f);
    m2_feature_opts feat = o->feat;
    feat.clip = old.clip;
    if (rc == M2_OK && feat.n_horizons != old.n_targets)
        rc = m2_fail(M2_EUSAGE, "append: %d horizons given, the universe has %d targets", feat.n_horizons,
                     old.n_targets);
    job j = {path, &old, &feat, g, n_groups, &sp, NULL, {0}};
    if (rc == M2_OK) rc = write_all(&j, new_rows);
    if (rc == M2_OK) rc = take_index(&old, &j.idx, new_rows, meta);
    if (rc == M2_OK) {
        rc = m2_dataset_writer_finish(j.dw, meta);
        j.dw = NULL;
    }
    m2_dataset_writer_abort(j.dw);
    free(j.idx.row);
    free(j.idx.inst);
    if (spooled) m2_spool_close(&sp);
    free(g);
    m2_dataset_free(&old);
    if (rc) m2_dataset_free(meta);
    return rc;
}
