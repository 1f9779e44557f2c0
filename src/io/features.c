/* Features, targets, time splits and train-only z-scoring (see features.h). */
#include "io/features.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "base/error.h"

const char *const m2_feature_name[M2_N_FEATURES] = {
    "mid_ret_bp", "spread_ticks", "queue_imb", "ofi", "trade_signed_log1p", "log1p_dt_s", "tod_sin", "tod_cos",
};

void m2_feature_opts_defaults(m2_feature_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_horizons = 3;
    o->horizons[0] = 10;
    o->horizons[1] = 50;
    o->horizons[2] = 100;
    o->split[0] = 0.8;
    o->split[1] = 0.1;
    o->split[2] = 0.1;
    o->clip = 5.0f;
}

/* Splits "a,b,c" (blanks after a comma allowed) into doubles, each parsed strictly (base/cli.h); returns the count or
 * -1 on a malformed list. */
static int parse_list(const char *text, double *out, int cap)
{
    int n = 0;
    for (const char *p = text;; n++) {
        while (*p == ' ') p++;
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && p[len - 1] == ' ') len--;
        char item[64];
        if (n == cap || len >= sizeof item) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (m2_parse_f64("list item", item, -DBL_MAX, DBL_MAX, 0, &out[n])) return -1;
        if (!comma) return n + 1;
        p = comma + 1;
    }
}

int m2_parse_horizons(const char *text, const char *what, m2_feature_opts *o)
{
    double v[M2_MAX_TARGETS];
    int n = parse_list(text, v, M2_MAX_TARGETS);
    if (n < 1)
        return m2_fail(M2_EUSAGE, "%s (%s): expected 1 to %d comma-separated positive integers", what, text,
                       M2_MAX_TARGETS);
    for (int i = 0; i < n; i++) {
        if (v[i] < 1 || v[i] > 1e9 || v[i] != floor(v[i]))
            return m2_fail(M2_EUSAGE, "%s (%s): horizon %g is not a positive integer", what, text, v[i]);
        for (int j = 0; j < i; j++)
            if (v[j] == v[i]) return m2_fail(M2_EUSAGE, "%s (%s): horizon %g repeated", what, text, v[i]);
        o->horizons[i] = (int32_t)v[i];
    }
    o->n_horizons = n;
    return M2_OK;
}

int m2_parse_split(const char *text, const char *what, m2_feature_opts *o)
{
    double v[3];
    if (parse_list(text, v, 3) != 3)
        return m2_fail(M2_EUSAGE, "%s (%s): expected three fractions train,val,test", what, text);
    if (v[0] <= 0 || v[1] < 0 || v[2] < 0 || fabs(v[0] + v[1] + v[2] - 1) > 1e-6)
        return m2_fail(M2_EUSAGE, "%s (%s): fractions must be >= 0 (train > 0) and sum to 1", what, text);
    memcpy(o->split, v, sizeof v);
    return M2_OK;
}

/* ---- splits --------------------------------------------------------------------------------------- */

/* Inserts a session boundary at row r (r strictly inside a session). */
static int insert_boundary(m2_dataset *ds, int64_t r)
{
    int64_t *s = realloc(ds->sessions, (size_t)(ds->n_sessions + 2) * sizeof *s);
    if (!s) return m2_fail(M2_EFAIL, "split: out of memory");
    ds->sessions = s;
    int64_t i = ds->n_sessions;
    while (s[i] > r) {
        s[i + 1] = s[i];
        i--;
    }
    s[i + 1] = r;
    ds->n_sessions++;
    return M2_OK;
}

/* Places one cut: snaps to the nearest session boundary within `tol` rows, else splits the session. */
static int place_cut(m2_dataset *ds, int64_t target, double tol, int64_t *cut)
{
    if (target <= 0 || target >= ds->n_rows) {
        *cut = target <= 0 ? 0 : ds->n_rows;
        return M2_OK;
    }
    int64_t best = -1;
    for (int64_t i = 1; i < ds->n_sessions; i++) {
        int64_t b = ds->sessions[i];
        if (best < 0 || llabs(b - target) < llabs(best - target)) best = b;
    }
    if (best >= 0 && (double)llabs(best - target) <= tol) {
        *cut = best;
        return M2_OK;
    }
    *cut = target;
    for (int64_t i = 0; i <= ds->n_sessions; i++)
        if (ds->sessions[i] == target) return M2_OK;
    return insert_boundary(ds, target);
}

/* A split asked for (fraction > 0) that gets no rows is an error naming it and what it would get. */
static int empty_split(const m2_dataset *ds, const double f[3])
{
    static const char *const name[3] = {"train", "val", "test"};
    for (int k = 0; k < 3; k++)
        if (f[k] > 0 && ds->split[k][1] == ds->split[k][0])
            return m2_fail(
                M2_EUSAGE, "--split (%g,%g,%g): the %s split would get 0 of %lld rows (%g x %lld = %.3g); %s", f[0],
                f[1], f[2], name[k], (long long)ds->n_rows, f[k], (long long)ds->n_rows, f[k] * (double)ds->n_rows,
                k ? "give it a larger fraction or 0" : "give it a larger fraction");
    return M2_OK;
}

int m2_features_split(m2_dataset *ds, const double f[3])
{
    double n = (double)ds->n_rows;
    int64_t t1 = (int64_t)llround(n * f[0]), t2 = (int64_t)llround(n * (f[0] + f[1]));
    double rows[3] = {n * f[0], n * f[1], n * f[2]};
    int64_t c1, c2;
    if (place_cut(ds, t1, 0.25 * fmin(rows[0], rows[1]), &c1) || place_cut(ds, t2, 0.25 * fmin(rows[1], rows[2]), &c2))
        return M2_EFAIL;
    if (c2 < c1) c2 = c1;
    int64_t cuts[4] = {0, c1, c2, ds->n_rows};
    for (int k = 0; k < 3; k++) {
        ds->split[k][0] = cuts[k];
        ds->split[k][1] = cuts[k + 1];
    }
    return empty_split(ds, f);
}

void m2_depth_imbalance(const double *book, int k, float *x)
{
    double sb = 0, sa = 0;
    for (int l = 0; l < k; l++) {
        double a = book[4 * l + 1], b = book[4 * l + 3];
        x[l] = a + b > 0 ? (float)((b - a) / (b + a)) : 0.0f;
        sb += b;
        sa += a;
    }
    x[k] = sa + sb > 0 ? (float)((sb - sa) / (sb + sa)) : 0.0f;
}

int m2_features_split_at(m2_dataset *ds, int64_t c1, int64_t c2)
{
    int64_t cuts[4] = {0, c1, c2, ds->n_rows};
    for (int k = 1; k <= 2; k++) {
        int inside = cuts[k] > 0 && cuts[k] < ds->n_rows;
        for (int64_t i = 0; inside && i <= ds->n_sessions; i++) inside = ds->sessions[i] != cuts[k];
        if (inside && insert_boundary(ds, cuts[k])) return M2_EFAIL;
    }
    for (int k = 0; k < 3; k++) {
        ds->split[k][0] = cuts[k];
        ds->split[k][1] = cuts[k + 1];
    }
    return M2_OK;
}

/* ---- features and targets ------------------------------------------------------------------------- */

static double mid_of(const m2_dataset *ds, int64_t i) { return 0.5 * (ds->bid_px[i] + ds->ask_px[i]); }

static double mid(const m2_event *e) { return 0.5 * (e->bid_px + e->ask_px); }

static double slog1p(double v) { return v < 0 ? -log1p(-v) : log1p(v); }

/* Cont, Kukanov & Stoikov (2014): the net order flow at the best quotes between two events. */
static double ofi(const m2_event *c, const m2_event *p)
{
    double e = 0;
    if (c->bid_px >= p->bid_px) e += c->bid_sz;
    if (c->bid_px <= p->bid_px) e -= p->bid_sz;
    if (c->ask_px <= p->ask_px) e -= c->ask_sz;
    if (c->ask_px >= p->ask_px) e += p->ask_sz;
    return e;
}

void m2_event_features(const m2_event *cur, const m2_event *prev, double tick_size, float *x)
{
    const double day_ns = 86400e9, two_pi = 6.283185307179586;
    double bs = cur->bid_sz, as = cur->ask_sz;
    double tsz = isfinite(cur->trade_sz) ? cur->trade_sz : 0;
    double tod = (double)(((cur->ts_ns % (int64_t)day_ns) + (int64_t)day_ns) % (int64_t)day_ns) / day_ns;
    x[M2_FEAT_MID_RET] = !prev ? 0.0f : (float)(1e4 * log(mid(cur) / mid(prev)));
    x[M2_FEAT_SPREAD] = (float)((cur->ask_px - cur->bid_px) / tick_size);
    x[M2_FEAT_QUEUE_IMB] = bs + as > 0 ? (float)((bs - as) / (bs + as)) : 0.0f;
    x[M2_FEAT_OFI] = !prev ? 0.0f : (float)slog1p(ofi(cur, prev));
    x[M2_FEAT_TRADE] = (float)(cur->side * log1p(tsz > 0 ? tsz : 0));
    x[M2_FEAT_DT] = !prev ? 0.0f : (float)log1p((double)(cur->ts_ns - prev->ts_ns) * 1e-9);
    x[M2_FEAT_TOD_SIN] = (float)sin(two_pi * tod);
    x[M2_FEAT_TOD_COS] = (float)cos(two_pi * tod);
}

static m2_event event_at(const m2_dataset *ds, int64_t i)
{
    m2_event e = {.ts_ns = ds->ts_ns[i],
                  .bid_px = ds->bid_px[i],
                  .ask_px = ds->ask_px[i],
                  .bid_sz = ds->bid_sz[i],
                  .ask_sz = ds->ask_sz[i],
                  .trade_sz = ds->trade_sz[i],
                  .side = ds->side[i]};
    return e;
}

static void row_features(const m2_dataset *ds, int64_t i, int first, float *x)
{
    const m2_event cur = event_at(ds, i), prev = first ? cur : event_at(ds, i - 1);
    m2_event_features(&cur, first ? NULL : &prev, ds->tick_size, x);
}

int m2_features_compute(m2_dataset *ds, const m2_feature_opts *o)
{
    const int D = M2_N_FEATURES, F = D + ds->n_extra, O = o->n_horizons;
    if (!(ds->tick_size > 0)) return m2_fail(M2_EUSAGE, "tick size (%g): must be > 0", ds->tick_size);
    free(ds->X);
    free(ds->y);
    ds->X = malloc((size_t)ds->n_rows * F * sizeof *ds->X);
    ds->y = malloc((size_t)ds->n_rows * O * sizeof *ds->y);
    if (!ds->X || !ds->y) return m2_fail(M2_EFAIL, "features: out of memory for %lld rows", (long long)ds->n_rows);
    ds->n_features = F;
    ds->n_targets = O;
    for (int j = 0; j < D; j++) snprintf(ds->feature_names[j], sizeof ds->feature_names[j], "%s", m2_feature_name[j]);
    for (int l = 0; l < ds->n_extra; l++) /* depth levels 1..k, then all k together */
        if (l + 1 < ds->n_extra)
            snprintf(ds->feature_names[D + l], sizeof ds->feature_names[0], "depth_imb_%d", l + 1);
        else
            snprintf(ds->feature_names[D + l], sizeof ds->feature_names[0], "depth_imb_cum");
    memcpy(ds->horizons, o->horizons, (size_t)O * sizeof *o->horizons);
    for (int64_t s = 0; s < ds->n_sessions; s++) {
        int64_t b = ds->sessions[s], e = ds->sessions[s + 1];
        for (int64_t i = b; i < e; i++) {
            row_features(ds, i, i == b, ds->X + i * F);
            if (ds->n_extra)
                memcpy(ds->X + i * F + D, ds->extra + i * ds->n_extra, sizeof(float) * (size_t)ds->n_extra);
            double m0 = mid_of(ds, i);
            for (int k = 0; k < O; k++) {
                int64_t j = i + o->horizons[k];
                ds->y[i * O + k] = j < e ? (float)(1e4 * log(mid_of(ds, j) / m0)) : NAN;
            }
        }
    }
    return M2_OK;
}

int m2_features_normalise(m2_dataset *ds, float clip)
{
    const int F = ds->n_features;
    int64_t b = ds->split[M2_SPLIT_TRAIN][0], e = ds->split[M2_SPLIT_TRAIN][1];
    if (e <= b) return m2_fail(M2_EFAIL, "normalise: the train split is empty");
    for (int j = 0; j < F; j++) {
        /* Two passes in double: exact enough for millions of rows without a compensated sum. */
        double sum = 0, ss = 0;
        for (int64_t i = b; i < e; i++) sum += ds->X[i * F + j];
        double mean = sum / (double)(e - b);
        for (int64_t i = b; i < e; i++) {
            double d = ds->X[i * F + j] - mean;
            ss += d * d;
        }
        double sd = sqrt(ss / (double)(e - b));
        ds->mean[j] = mean;
        ds->std[j] = sd > 1e-9 * fmax(1.0, fabs(mean)) ? sd : 1.0;
    }
    m2_features_apply(ds, ds->mean, ds->std, clip);
    return M2_OK;
}

void m2_features_apply(m2_dataset *ds, const double *mean, const double *std, float clip)
{
    const int F = ds->n_features;
    if (mean != ds->mean) memcpy(ds->mean, mean, sizeof(double) * (size_t)F);
    if (std != ds->std) memcpy(ds->std, std, sizeof(double) * (size_t)F);
    for (int64_t i = 0; i < ds->n_rows; i++)
        for (int j = 0; j < F; j++) {
            double z = (ds->X[i * F + j] - ds->mean[j]) / ds->std[j];
            ds->X[i * F + j] = (float)(z > clip ? clip : z < -clip ? -clip : z);
        }
    ds->clip = clip;
}

int m2_features_build(m2_dataset *ds, const m2_feature_opts *o)
{
    if (m2_features_split(ds, o->split) || m2_features_compute(ds, o) || m2_features_normalise(ds, o->clip))
        return M2_EFAIL;
    return m2_dataset_check(ds, "features");
}
