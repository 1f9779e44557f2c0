#include "run/metrics.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"

typedef struct {
    double v;
    int64_t i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    double x = ((const keyed *)a)->v, y = ((const keyed *)b)->v;
    return (x > y) - (x < y);
}

int m2_average_ranks(const double *v, int64_t n, double *rank)
{
    keyed *k = malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return m2_fail(M2_EFAIL, "metrics: cannot allocate rank scratch for %lld rows", (long long)n);
    for (int64_t i = 0; i < n; i++) k[i] = (keyed){v[i], i};
    qsort(k, (size_t)n, sizeof *k, cmp_keyed);
    for (int64_t a = 0; a < n;) {
        int64_t b = a + 1;
        while (b < n && k[b].v == k[a].v) b++;
        /* sorted positions a..b-1 hold ranks a+1..b; each tie gets their mean */
        double r = 0.5 * (double)(a + 1 + b);
        for (int64_t j = a; j < b; j++) rank[k[j].i] = r;
        a = b;
    }
    free(k);
    return M2_OK;
}

/* Pearson correlation in two passes (means first), so large offsets do not cancel; 0 when a side is constant. */
static double pearson(const double *a, const double *b, int64_t n)
{
    double ma = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= (double)n;
    mb /= (double)n;
    double sab = 0, saa = 0, sbb = 0;
    for (int64_t i = 0; i < n; i++) {
        double da = a[i] - ma, db = b[i] - mb;
        sab += da * db;
        saa += da * da;
        sbb += db * db;
    }
    if (saa == 0 || sbb == 0) return 0.0;
    return sab / sqrt(saa * sbb);
}

static int sign_of(double x) { return (x > 0) - (x < 0); }

/* Fills the metrics from the kept rows p[0..n), y[0..n) (n > 0). */
static int metrics_of_kept(double *p, double *y, int64_t n, int all_pred_finite, m2_metrics *m)
{
    double sse = 0, syy = 0, my = 0;
    int64_t hit = 0;
    m->n_dir = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = p[i] - y[i];
        sse += e * e;
        syy += y[i] * y[i];
        my += y[i];
        if (y[i] != 0) {
            m->n_dir++;
            hit += sign_of(p[i]) == sign_of(y[i]);
        }
    }
    my /= (double)n;
    double sst = 0;
    for (int64_t i = 0; i < n; i++) sst += (y[i] - my) * (y[i] - my);
    m->mse = sse / (double)n;
    m->mse_zero = syy / (double)n;
    m->r2 = sst > 0 ? 1.0 - sse / sst : NAN;
    m->dir_acc = m->n_dir > 0 ? (double)hit / (double)m->n_dir : NAN;
    if (!all_pred_finite) {
        m->mse = m->r2 = m->ic = m->rank_ic = m->dir_acc = NAN;
        return M2_OK;
    }
    m->ic = pearson(p, y, n);
    double *rp = malloc((size_t)n * sizeof *rp), *ry = malloc((size_t)n * sizeof *ry);
    int rc = (rp && ry) ? M2_OK : m2_fail(M2_EFAIL, "metrics: cannot allocate ranks for %lld rows", (long long)n);
    if (rc == M2_OK) rc = m2_average_ranks(p, n, rp);
    if (rc == M2_OK) rc = m2_average_ranks(y, n, ry);
    if (rc == M2_OK) m->rank_ic = pearson(rp, ry, n);
    free(rp);
    free(ry);
    return rc;
}

int m2_metrics_compute(const float *pred, const float *target, int64_t M, int ld, int col, m2_metrics *out)
{
    *out = (m2_metrics){
        .n = 0, .n_dir = 0, .mse = NAN, .mse_zero = NAN, .r2 = NAN, .ic = NAN, .rank_ic = NAN, .dir_acc = NAN};
    int64_t n = 0;
    for (int64_t i = 0; i < M; i++) n += isfinite(target[i * ld + col]) != 0;
    out->n = n;
    if (n == 0) return M2_OK;
    double *p = malloc((size_t)n * sizeof *p), *y = malloc((size_t)n * sizeof *y);
    if (!p || !y) {
        free(p);
        free(y);
        return m2_fail(M2_EFAIL, "metrics: cannot allocate %lld rows", (long long)n);
    }
    int all_finite = 1;
    int64_t k = 0;
    for (int64_t i = 0; i < M; i++) {
        float t = target[i * ld + col];
        if (!isfinite(t)) continue;
        p[k] = pred[i * ld + col];
        y[k] = t;
        all_finite &= isfinite(p[k]) != 0;
        k++;
    }
    int rc = metrics_of_kept(p, y, n, all_finite, out);
    free(p);
    free(y);
    return rc;
}
