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

/* The new days of group g as events, checked to follow the instrument's rows and the second cut. */
static int import_group(const m2_dataset *old, const m2_file_list *list, const m2_import_opts *o, const group *g,
                        int64_t last, m2_dataset *ev, m2_import_report *rep)
{
    m2_import_opts one = *o;
    one.instrument = old->inst_name[g->inst];
    one.tick_size = old->inst_tick[g->inst]; /* frozen with the statistics: the spread feature keeps its unit */
    m2_import_report r;
    int rc = m2_import_events_files((const char *const *)list->path + g->first, g->count, &one, ev, &r);
    rep->lines += r.lines;
    rep->rows += r.rows;
    rep->bad += r.bad;
    if (rc) return rc;
    char a[32], b[32];
    iso(ev->ts_ns[0], a, sizeof a);
    if (ev->ts_ns[0] <= last) {
        iso(last, b, sizeof b);
        rc = m2_fail(M2_EUSAGE,
                     "append (%s): instrument %s already has rows up to %s, the new rows start at %s (is this day "
                     "already in the file?)",
                     list->path[g->first], one.instrument, b, a);
    } else if (ev->ts_ns[0] < old->cut_ns[1]) {
        iso(old->cut_ns[1], b, sizeof b);
        rc = m2_fail(M2_EUSAGE, "append (%s): the new rows start at %s, before the universe's test cut %s",
                     list->path[g->first], a, b);
    }
    if (rc) m2_dataset_free(ev);
    return rc;
}

/* Features of the new rows, all in the test split, normalised with the instrument's frozen statistics. */
static int build_new(const m2_dataset *old, int k, const m2_import_opts *o, m2_dataset *ev)
{
    if (m2_features_split_at(ev, 0, 0) || m2_features_compute(ev, &o->feat)) return M2_EFAIL;
    if (ev->n_features != old->n_features || ev->n_targets != old->n_targets)
        return m2_fail(M2_EUSAGE, "append: the new rows have %d features and %d targets, the universe %d and %d",
                       ev->n_features, ev->n_targets, old->n_features, old->n_targets);
    m2_features_apply(ev, old->inst_mean + k * M2_MAX_FEATURES, old->inst_std + k * M2_MAX_FEATURES, old->clip);
    return M2_OK;
}

typedef struct {
    const char *path;
    const m2_dataset *old;
    const m2_file_list *list;
    const m2_import_opts *o;
    const group *g;
    int n_groups;
    m2_dataset_writer *dw;
    m2_session_list idx;
} job;

/* Instrument k's test rows: the old ones copied, then its new days. */
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
        m2_dataset ev;
        m2_import_report r = {0};
        rc = import_group(old, j->list, j->o, &j->g[gi], INT64_MIN, &ev, &r);
        if (rc == M2_OK) rc = build_new(old, k, j->o, &ev);
        if (rc == M2_OK) rc = m2_dataset_writer_put(j->dw, *at, &ev, 0, ev.n_rows);
        for (int64_t q = 0; rc == M2_OK && q < ev.n_sessions; q++)
            rc = m2_session_list_add(&j->idx, *at + ev.sessions[q], k);
        if (rc == M2_OK) *at += ev.n_rows;
        m2_dataset_free(&ev);
    }
    return rc;
}

/* The new file: train and val copied, then instrument by instrument its test rows and new days. */
static int write_all(job *j, int64_t new_rows)
{
    const m2_dataset *old = j->old;
    int64_t tb = old->split[M2_SPLIT_TEST][0], at = tb, s = 0;
    int rc = m2_dataset_writer_open(&j->dw, j->path, old->n_rows + new_rows, old->n_features, old->n_targets);
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
    /* pass 1: every new day parsed and checked, only its row count kept (memory stays one instrument's days) */
    int64_t new_rows = 0;
    hid_t f = rc == M2_OK ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
    if (rc == M2_OK && f < 0) rc = m2_h5_fail(M2_EFAIL, "append", path, "cannot open");
    for (int i = 0; rc == M2_OK && i < n_groups; i++) {
        int64_t last;
        m2_dataset ev;
        rc = last_time(f, &old, g[i].inst, &last);
        if (rc == M2_OK) rc = import_group(&old, list, o, &g[i], last, &ev, rep);
        if (rc == M2_OK) new_rows += ev.n_rows;
        if (rc == M2_OK) m2_dataset_free(&ev);
    }
    if (f >= 0) H5Fclose(f);
    job j = {path, &old, list, o, g, n_groups, NULL, {0}};
    if (rc == M2_OK) rc = write_all(&j, new_rows);
    if (rc == M2_OK) rc = take_index(&old, &j.idx, new_rows, meta);
    if (rc == M2_OK) {
        rc = m2_dataset_writer_finish(j.dw, meta);
        j.dw = NULL;
    }
    m2_dataset_writer_abort(j.dw);
    free(j.idx.row);
    free(j.idx.inst);
    free(g);
    m2_dataset_free(&old);
    if (rc) m2_dataset_free(meta);
    return rc;
}
