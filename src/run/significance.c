#include "run/significance.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"

static double autocov(const double *x, int64_t n, int64_t k)
{
    double s = 0;
    for (int64_t t = k; t < n; t++) s += x[t] * x[t - k];
    return s / (double)n;
}

static double bartlett(const double *x, int64_t n, int64_t lag)
{
    double v = autocov(x, n, 0);
    for (int64_t k = 1; k <= lag && k < n; k++) v += 2.0 * (1.0 - (double)k / (double)(lag + 1)) * autocov(x, n, k);
    return v;
}

double m2_hac_lrv(const double *x, int64_t n, int horizon)
{
    double *c = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!c) return NAN;
    double mean = 0;
    for (int64_t t = 0; t < n; t++) mean += x[t];
    mean /= (double)(n > 0 ? n : 1);
    for (int64_t t = 0; t < n; t++) c[t] = x[t] - mean;
    double v = autocov(c, n, 0);
    for (int64_t k = 1; k < horizon && k < n; k++) v += 2.0 * autocov(c, n, k);
    if (!(v > 0)) v = bartlett(c, n, 2 * (int64_t)horizon);
    free(c);
    return v;
}

/* z-scores of column col of p over the kept rows (population moments); 0 when the column is constant. */
static void standardise(const float *p, int ld, int col, const int64_t *keep, int64_t n, double *z)
{
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) m += p[keep[i] * ld + col];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = p[keep[i] * ld + col] - m;
        s += d * d;
    }
    s = sqrt(s / (double)n);
    for (int64_t i = 0; i < n; i++) z[i] = s > 0 ? (p[keep[i] * ld + col] - m) / s : 0;
}

/* IC of z-scored a against z-scored y, and its influence function into psi. */
static double influence(const double *za, const double *zy, int64_t n, double *psi)
{
    double r = 0;
    for (int64_t i = 0; i < n; i++) r += za[i] * zy[i];
    r /= (double)n;
    for (int64_t i = 0; i < n; i++) psi[i] = za[i] * zy[i] - 0.5 * r * (za[i] * za[i] + zy[i] * zy[i]);
    return r;
}

static void stat_from(m2_ic_stat *s, double ic, const double *psi, int64_t n, int horizon)
{
    s->n = n;
    s->ic = ic;
    s->se = sqrt(m2_hac_lrv(psi, n, horizon) / (double)n);
    s->t = s->se > 0 ? ic / s->se : NAN;
}

static int64_t kept_rows(const float *a, const float *b, const float *y, int64_t M, int ld, int col, int64_t *keep)
{
    int64_t n = 0;
    for (int64_t i = 0; i < M; i++) {
        size_t j = (size_t)i * ld + col;
        if (isfinite(y[j]) && isfinite(a[j]) && (!b || isfinite(b[j]))) keep[n++] = i;
    }
    return n;
}

int m2_ic_significance(const float *a, const float *b, const float *y, int64_t M, int ld, int col, int horizon,
                       m2_ic_pair *out)
{
    const m2_ic_stat none = {0, NAN, NAN, NAN};
    *out = (m2_ic_pair){none, none, NAN, NAN, NAN};
    int64_t *keep = malloc(sizeof(int64_t) * (size_t)(M > 0 ? M : 1));
    double *buf = malloc(sizeof(double) * 5 * (size_t)(M > 0 ? M : 1));
    if (!keep || !buf) {
        free(keep);
        free(buf);
        return m2_fail(M2_EFAIL, "significance: out of memory for %lld rows", (long long)M);
    }
    int64_t n = kept_rows(a, b, y, M, ld, col, keep);
    out->a.n = out->b.n = n;
    double *zy = buf, *za = buf + M, *zb = buf + 2 * M, *pa = buf + 3 * M, *pb = buf + 4 * M;
    if (n >= 3) {
        standardise(y, ld, col, keep, n, zy);
        standardise(a, ld, col, keep, n, za);
        stat_from(&out->a, influence(za, zy, n, pa), pa, n, horizon);
        if (b) {
            standardise(b, ld, col, keep, n, zb);
            stat_from(&out->b, influence(zb, zy, n, pb), pb, n, horizon);
            for (int64_t i = 0; i < n; i++) pa[i] -= pb[i];
            out->diff = out->a.ic - out->b.ic;
            out->diff_se = sqrt(m2_hac_lrv(pa, n, horizon) / (double)n);
            out->diff_t = out->diff_se > 0 ? out->diff / out->diff_se : NAN;
        }
    }
    free(keep);
    free(buf);
    return M2_OK;
}
