/* Bounded-memory quantiles (loghist.h). */
#include "base/loghist.h"

#include <math.h>
#include <string.h>

void m2_loghist_init(m2_loghist *h)
{
    memset(h, 0, sizeof *h);
    h->min = INFINITY;
    h->max = -INFINITY;
}

/* v = m 2^e with m in [0.5, 1): octave e - 1 (v in [2^(e-1), 2^e)), bucket (2m - 1) * SUB inside it. */
static int64_t bucket_of(double v)
{
    if (!(v >= 1)) return 0;
    int e;
    double m = frexp(v, &e);
    if (e > M2_LOGHIST_EXPS) return M2_LOGHIST_EXPS * M2_LOGHIST_SUB - 1;
    return (int64_t)(e - 1) * M2_LOGHIST_SUB + (int64_t)((2 * m - 1) * M2_LOGHIST_SUB);
}

static double middle_of(int64_t b)
{
    int64_t e = b / M2_LOGHIST_SUB, k = b % M2_LOGHIST_SUB;
    return ldexp(1 + (k + 0.5) / M2_LOGHIST_SUB, (int)e);
}

void m2_loghist_add(m2_loghist *h, double v)
{
    h->count[bucket_of(v)]++;
    h->n++;
    h->sum += v;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
}

double m2_loghist_quantile(const m2_loghist *h, double q)
{
    if (h->n == 0) return 0;
    int64_t r = (int64_t)(q * (double)h->n + 0.5); /* the r-th smallest, as m2_latency_summarize's nearest rank */
    if (r > 0) r--;
    if (r >= h->n - 1) return h->max; /* the ends are known exactly */
    if (r == 0) return h->min;
    int64_t b = 0;
    for (int64_t seen = 0; (seen += h->count[b]) <= r; b++) {}
    double v = middle_of(b);
    return v < h->min ? h->min : v > h->max ? h->max : v;
}
