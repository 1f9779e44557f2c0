/* Universe builder (universe.h). The pooled quantile needs every event time once; the instruments are then
 * built one at a time and copied into place, split by split. */
#include "io/universe.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define DAY_NS 86400000000000LL

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

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

/* The cut for pooled row rank r of the sorted times: the UTC midnight before or after ts[r], whichever leaves a
 * row count closer to r, when that moves the cut by at most `tol` rows (a cut in the overnight gap splits no
 * session); else the time of row r itself. */
static int64_t place_cut(const int64_t *ts, int64_t N, int64_t r, double tol)
{
    if (r >= N) return INT64_MAX;
    int64_t lo = (ts[r] >= 0 ? ts[r] / DAY_NS : -((-ts[r] + DAY_NS - 1) / DAY_NS)) * DAY_NS, hi = lo + DAY_NS;
    int64_t rl = lower_bound(ts, N, lo), rh = lower_bound(ts, N, hi);
    int64_t best = r - rl <= rh - r ? lo : hi, moved = r - rl <= rh - r ? r - rl : rh - r;
    return (double)moved <= tol ? best : ts[r];
}

int m2_universe_cuts(const m2_dataset *events, int n, const double f[3], int64_t cut_ns[2])
{
    int64_t N = 0;
    for (int i = 0; i < n; i++) N += events[i].n_rows;
    if (N < 1) return m2_fail(M2_EFAIL, "universe: no events");
    int64_t *ts = malloc(sizeof *ts * (size_t)N);
    if (!ts) return m2_fail(M2_EFAIL, "universe (%lld rows): out of memory for the pooled times", (long long)N);
    for (int i = 0, at = 0; i < n; at += (int)events[i].n_rows, i++)
        memcpy(ts + at, events[i].ts_ns, sizeof *ts * (size_t)events[i].n_rows);
    qsort(ts, (size_t)N, sizeof *ts, cmp_i64);
    double nr = (double)N, q[2] = {f[0], f[0] + f[1]};
    double tol[2] = {0.25 * nr * (f[0] < f[1] ? f[0] : f[1]), 0.25 * nr * (f[1] < f[2] ? f[1] : f[2])};
    for (int k = 0; k < 2; k++) cut_ns[k] = place_cut(ts, N, (int64_t)(nr * q[k] + 0.5), tol[k]);
    free(ts);
    return M2_OK;
}

/* One instrument: common cuts, features, targets, its own train statistics. */
static int build_one(m2_dataset *ds, const m2_feature_opts *o, const int64_t cut_ns[2])
{
    int64_t c1 = lower_bound(ds->ts_ns, ds->n_rows, cut_ns[0]), c2 = lower_bound(ds->ts_ns, ds->n_rows, cut_ns[1]);
    if (c1 == 0)
        return m2_fail(M2_EFAIL,
                       "universe (instrument %s): no rows before the train cut: its events all lie in the "
                       "val or test period of the universe",
                       ds->instrument);
    if (m2_features_split_at(ds, c1, c2) || m2_features_compute(ds, o) || m2_features_normalise(ds, o->clip))
        return M2_EFAIL;
    return M2_OK;
}

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

static int alloc_out(m2_dataset *out, const m2_dataset *in, int n, int64_t rows, int64_t sessions)
{
    out->n_rows = rows;
    out->n_sessions = sessions;
    out->n_features = in[0].n_features;
    out->n_targets = in[0].n_targets;
    out->X = malloc(sizeof(float) * (size_t)rows * (size_t)out->n_features);
    out->y = malloc(sizeof(float) * (size_t)rows * (size_t)out->n_targets);
    out->sessions = malloc(sizeof(int64_t) * (size_t)(sessions + 1));
    int ok = out->X && out->y && out->sessions;
    for (int c = 0; c < N_COLUMNS; c++) ok = ok && (*slot(out, c) = malloc(columns[c].size * (size_t)rows)) != NULL;
    if (!ok) return m2_fail(M2_EFAIL, "universe (%lld rows): out of memory", (long long)rows);
    return m2_dataset_alloc_universe(out, n);
}

/* Copies the rows of split k of instrument i to row `at` of out and appends its session parts. */
static void place(m2_dataset *out, const m2_dataset *in, int i, int k, int64_t *at, int64_t *ns)
{
    const int F = out->n_features, O = out->n_targets;
    int64_t b = in->split[k][0], e = in->split[k][1];
    memcpy(out->X + *at * F, in->X + b * F, sizeof(float) * (size_t)(e - b) * (size_t)F);
    memcpy(out->y + *at * O, in->y + b * O, sizeof(float) * (size_t)(e - b) * (size_t)O);
    for (int c = 0; c < N_COLUMNS; c++)
        memcpy((char *)*slot(out, c) + (size_t)*at * columns[c].size,
               (char *)*slot(in, c) + (size_t)b * columns[c].size, columns[c].size * (size_t)(e - b));
    for (int64_t s = 0; s < in->n_sessions; s++) {
        int64_t sb, se;
        m2_dataset_session_part(in, k, s, &sb, &se);
        if (sb < se) {
            out->session_inst[*ns] = i;
            out->sessions[(*ns)++] = *at + (sb - b);
        }
    }
    *at += e - b;
}

static void describe(m2_dataset *out, const m2_dataset *in, int n, const int64_t cut_ns[2])
{
    const int F = out->n_features;
    memcpy(out->feature_names, in[0].feature_names, sizeof out->feature_names);
    memcpy(out->horizons, in[0].horizons, sizeof out->horizons);
    out->clip = in[0].clip;
    for (int i = 0; i < n; i++) {
        snprintf(out->inst_name[i], sizeof out->inst_name[i], "%s", in[i].instrument);
        memcpy(out->inst_mean + i * M2_MAX_FEATURES, in[i].mean, sizeof(double) * (size_t)F);
        memcpy(out->inst_std + i * M2_MAX_FEATURES, in[i].std, sizeof(double) * (size_t)F);
        out->inst_tick[i] = in[i].tick_size;
    }
    /* Stored rows are already z-scored per instrument: the root statistics are the identity, and a universe of
     * one keeps its instrument's (as a file of version 1 has them). */
    for (int j = 0; j < F; j++) {
        out->mean[j] = n == 1 ? in[0].mean[j] : 0.0;
        out->std[j] = n == 1 ? in[0].std[j] : 1.0;
    }
    snprintf(out->instrument, sizeof out->instrument, "%s", n == 1 ? in[0].instrument : "universe");
    memcpy(out->source, in[0].source, sizeof out->source); /* the caller may say more */
    out->tick_size = in[0].tick_size;
    memcpy(out->cut_ns, cut_ns, sizeof out->cut_ns);
}

int m2_universe_build(m2_dataset *events, int n, const m2_feature_opts *o, m2_dataset *out)
{
    memset(out, 0, sizeof *out);
    int64_t cut_ns[2] = {0, 0}, rows = 0, sessions = 0;
    int rc = m2_universe_cuts(events, n, o->split, cut_ns);
    for (int i = 0; rc == M2_OK && i < n; i++) {
        rc = build_one(&events[i], o, cut_ns);
        rows += events[i].n_rows;
        sessions += events[i].n_sessions;
    }
    if (rc == M2_OK) rc = alloc_out(out, events, n, rows, sessions);
    int64_t at = 0, ns = 0;
    for (int k = 0; rc == M2_OK && k < 3; k++) {
        out->split[k][0] = at;
        for (int i = 0; i < n; i++) place(out, &events[i], i, k, &at, &ns);
        out->split[k][1] = at;
    }
    if (rc == M2_OK) {
        out->n_sessions = ns;
        out->sessions[ns] = rows;
        describe(out, events, n, cut_ns);
        rc = m2_dataset_check(out, "universe");
    }
    for (int i = 0; i < n; i++) m2_dataset_free(&events[i]);
    if (rc) m2_dataset_free(out);
    return rc;
}
