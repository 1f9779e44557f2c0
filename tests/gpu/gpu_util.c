#include "gpu_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"

int m2_gpu_skip(void)
{
    char why[512];
    if (m2_cuda_available(why, sizeof why) > 0) return 0;
    printf("SKIP: no CUDA GPU (%s)\n", why);
    return 1;
}

const m2_ops *m2_gpu_ops(void)
{
    const m2_ops *g = m2_ops_cuda();
    if (!g) fail_msg("CUDA backend: %s", m2_last_error());
    return g;
}

float *m2_host_uniform(size_t n, float lo, float hi, uint64_t seed, uint64_t stream)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    uint64_t key = m2_rng_key(seed, M2_RNG_TEST, stream, 0);
    for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)m2_rng_u01(key, i);
    return p;
}

float *m2_host_fill(size_t n, float v)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

float *m2_dev_from(const m2_ops *g, const float *host, size_t n)
{
    float *d = g->alloc(g, (n ? n : 1) * sizeof *d);
    assert_non_null(d);
    g->to_device(g, d, host, n * sizeof *d);
    return d;
}

float *m2_host_from(const m2_ops *g, const float *dev, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    assert_non_null(h);
    g->to_host(g, h, dev, n * sizeof *h);
    return h;
}

double m2_rel_err(const float *a, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (num == 0) return 0;
    return den > 0 ? sqrt(num / den) : INFINITY;
}

double m2_max_abs_err(const float *a, const float *ref, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

void m2_expect_close(const char *what, const float *got, const float *ref, size_t n, double tol)
{
    double e = m2_rel_err(got, ref, n);
    printf("  %-44s rel err %.3e  max abs %.3e  (tol %.1e)\n", what, e, m2_max_abs_err(got, ref, n), tol);
    fflush(stdout);
    if (!(e <= tol)) fail_msg("%s: relative error %.3e above %.1e", what, e, tol);
}

void m2_expect_close_scalar(const char *what, double got, double ref, double tol)
{
    double e = got == ref ? 0.0 : fabs(got - ref) / (fabs(ref) > 0 ? fabs(ref) : 1.0);
    printf("  %-44s %.9g vs %.9g  rel err %.3e  (tol %.1e)\n", what, got, ref, e, tol);
    fflush(stdout);
    if (!(e <= tol)) fail_msg("%s: %.9g vs %.9g, relative error %.3e above %.1e", what, got, ref, e, tol);
}

m2_pair m2_pair_of(const m2_ops *g, float *host, size_t n)
{
    m2_pair p = {host, m2_dev_from(g, host, n), n};
    return p;
}

m2_pair m2_pair_uniform(const m2_ops *g, size_t n, float lo, float hi, uint64_t seed, uint64_t stream)
{
    return m2_pair_of(g, m2_host_uniform(n, lo, hi, seed, stream), n);
}

m2_pair m2_pair_fill(const m2_ops *g, size_t n, float v) { return m2_pair_of(g, m2_host_fill(n, v), n); }

void m2_pair_expect(const m2_ops *g, const char *what, m2_pair p, double tol)
{
    float *got = m2_host_from(g, p.d, p.n);
    m2_expect_close(what, got, p.h, p.n, tol);
    free(got);
}

void m2_pair_free(const m2_ops *g, m2_pair *p)
{
    free(p->h);
    g->free(g, p->d);
    p->h = p->d = NULL;
}
