/* The ZeRO-1 step (dist/zero.h) with its collectives staged through host buffers, as on a device (a copy of the CPU
 * ops table marked as device memory, so dcomm_mpi.c takes the staging path), against the CPU step (MPI on the
 * buffers themselves), at the rank count it is started with (registered at 1 to 4):
 *   - step after step on the same per-rank gradients (a pure function of rank, step and index) the same loss, norm,
 *     skip decision and bitwise-identical parameters, through a clipped step, an unclipped one, a non-finite one
 *     (skipped everywhere) and a zero-count one; every other step reports buckets during a "backward" (ranges off
 *     the shard boundaries, from the end of the buffer, leaving gaps the step fills), the others none;
 *   - the same unsharded moments on rank 0, and moments loaded into one continue the same way in the other;
 *   - the staged step really copied through the host (counted), the direct one never did;
 *   - the CPU's sumsq and scale ops compute the arithmetic zero.h states;
 *   - a bucket that overlaps one started earlier is refused with one line.
 * Bitwise equality holds at any rank count: both issue the same MPI reduce-scatters with the same counts in the same
 * order (dist/dcomm.h). Checks go through M2_ASSERT_ALL (tests/dist/mpi_check.h) so that no rank is left waiting in
 * a collective. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"
#include "base/error.h"
#include "core/ops.h"
#include "base/rng.h"
#include "dist/zero.h"

static m2_dist pg;

static void test_ops_arithmetic(void **state)
{
    const m2_ops *o = m2_ops_cpu();
    float x[5] = {1.5f, -2.25f, 3e-3f, 0.0f, 7.0f};
    double want = 0.0;
    for (int i = 0; i < 5; i++) want += (double)x[i] * (double)x[i];
    M2_ASSERT_ALL(o->sumsq(o, x, 5) == want && o->sumsq(o, x, 0) == 0.0);
    const double f = 1.0 / 3.0;
    float y[5];
    for (int i = 0; i < 5; i++) y[i] = (float)((double)x[i] * f);
    o->scale(o, x, 5, f);
    M2_ASSERT_ALL(memcmp(x, y, sizeof x) == 0);
}

enum { N = 5000, STEPS = 6 };

/* This rank's gradient at step s (padded to len, zero tail). Step 3 carries a NaN (skipped everywhere); step 1 is
 * large (clipped), step 4 small (not clipped). */
static void gradient(float *g, size_t len, int s)
{
    const double amp = s == 1 ? 1e3 : s == 4 ? 1e-4 : 1.0;
    uint64_t key = m2_rng_key(42, M2_RNG_TEST, (uint64_t)(s * 131 + pg.rank), 0);
    memset(g, 0, len * sizeof *g);
    for (size_t i = 0; i < N; i++) g[i] = (float)(amp * (2 * m2_rng_u01(key, i) - 1));
    if (s == 3 && pg.rank == pg.world - 1) g[N / 2] = NAN;
}

typedef struct {
    m2_zero *h;
    m2_zero *d;
    float *ph, *pd, *g; /* params of each, the shared gradient input */
    unsigned char mask[N];
    size_t len;
} pair;

/* The CPU ops as if their memory were a device's: every collective goes through host staging, counted. */
static m2_ops staged_ops;
static long staged_copies;

static void counting_to_host(const m2_ops *o, void *dst, const void *src, size_t bytes)
{
    staged_copies++;
    m2_ops_cpu()->to_host(m2_ops_cpu(), dst, src, bytes);
}

static const m2_ops *staged(void)
{
    staged_ops = *m2_ops_cpu();
    staged_ops.name = "cpu-as-device";
    staged_ops.host_memory = 0;
    staged_ops.to_host = counting_to_host;
    return &staged_ops;
}

static void pair_init(pair *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < N; i++) p->mask[i] = (unsigned char)(i % 3 != 0);
    m2_dcomm *c = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&p->h, &pg, N, p->mask) == M2_OK);
    M2_ASSERT_ALL(m2_dcomm_mpi_create(&c, &pg, staged()) == M2_OK);
    M2_ASSERT_ALL(m2_zero_create(&p->d, &pg, &staged_ops, c, N, p->mask) == M2_OK);
    p->len = m2_zero_padded_len(p->h);
    p->ph = calloc(p->len, sizeof(float));
    p->pd = calloc(p->len, sizeof(float));
    p->g = calloc(p->len, sizeof(float));
    M2_ASSERT_ALL(p->ph && p->pd && p->g);
    uint64_t key = m2_rng_key(7, M2_RNG_TEST, 999, 0); /* the same on every rank */
    for (size_t i = 0; i < N; i++) p->ph[i] = p->pd[i] = (float)(m2_rng_u01(key, i) - 0.5);
}

static void pair_free(pair *p)
{
    m2_zero_free(p->h);
    m2_zero_free(p->d);
    free(p->ph);
    free(p->pd);
    free(p->g);
}

/* Buckets of an odd step, as a backward reports them: from the end of the buffer, [N/3, N/2) left as a gap. */
static void report_buckets(pair *p, int s)
{
    const size_t cuts[] = {0, 17, N / 3, N / 2, N / 2 + 1, N - 7, N};
    for (int k = (int)(sizeof cuts / sizeof cuts[0]) - 2; s % 2 == 1 && k >= 0; k--) {
        if (cuts[k] == N / 3) continue;
        M2_ASSERT_ALL(m2_zero_bucket_ready(p->h, p->g, cuts[k], cuts[k + 1]) == M2_OK);
        M2_ASSERT_ALL(m2_zero_bucket_ready(p->d, p->g, cuts[k], cuts[k + 1]) == M2_OK);
    }
}

/* One step of each on the gradient in p->g; everything they report and hold must be identical. */
static void compare_step(pair *p, int s, int64_t count)
{
    const double sse = 10.0 + s + pg.rank;
    double lh, nh, ld, nd;
    int kh, kd;
    const float lr = 1e-2f * (float)(s + 1), wd = 0.1f, clip = 1.0f;
    M2_ASSERT_ALL(m2_zero_step(p->h, p->ph, p->g, sse, count, lr, wd, clip, &lh, &nh, &kh) == M2_OK);
    M2_ASSERT_ALL(m2_zero_step(p->d, p->pd, p->g, sse, count, lr, wd, clip, &ld, &nd, &kd) == M2_OK);
    M2_ASSERT_ALL(kh == kd && (kh || (lh == ld && nh == nd)));
    M2_ASSERT_ALL(memcmp(p->ph, p->pd, p->len * sizeof(float)) == 0);
    M2_ASSERT_ALL(m2_zero_optim_step(p->h) == m2_zero_optim_step(p->d));
    M2_ASSERT_ALL(m2_test_same_everywhere(m2_test_hash(p->pd, p->len * sizeof(float))));
    if (s == 1) M2_ASSERT_ALL(!kd && nd > clip); /* the clip was exercised */
    if (s == 4) M2_ASSERT_ALL(!kd && nd < clip);
    if (s == 3 || count == 0) M2_ASSERT_ALL(kd);
}

static void step_both(pair *p, int s, int64_t count)
{
    gradient(p->g, p->len, s);
    report_buckets(p, s);
    compare_step(p, s, count);
}

static void expect_same_moments(pair *p)
{
    float *mh = calloc(N, sizeof(float)), *vh = calloc(N, sizeof(float));
    float *md = calloc(N, sizeof(float)), *vd = calloc(N, sizeof(float));
    M2_ASSERT_ALL(mh && vh && md && vd);
    M2_ASSERT_ALL(m2_zero_gather_moments(p->h, mh, vh) == M2_OK);
    M2_ASSERT_ALL(m2_zero_gather_moments(p->d, md, vd) == M2_OK);
    int nonzero = 0;
    for (size_t i = 0; i < N; i++) nonzero += mh[i] != 0.0f;
    M2_ASSERT_ALL(pg.rank != 0 || (memcmp(mh, md, N * sizeof(float)) == 0 && memcmp(vh, vd, N * sizeof(float)) == 0 &&
                                   nonzero > N / 2));
    free(mh);
    free(vh);
    free(md);
    free(vd);
}

static void test_steps_match(void **state)
{
    pair p;
    pair_init(&p);
    staged_copies = 0;
    for (int s = 0; s < STEPS; s++) step_both(&p, s, s == 5 ? 0 : 1000 * pg.world);
    /* with several ranks the staged step copied every bucket and every all-gather through the host */
    M2_ASSERT_ALL(pg.world == 1 || staged_copies >= STEPS);
    expect_same_moments(&p);
    pair_free(&p);
}

static void test_bucket_misuse(void **state)
{
    pair p;
    pair_init(&p);
    gradient(p.g, p.len, 0);
    M2_ASSERT_ALL(m2_zero_bucket_ready(p.d, p.g, 100, 200) == M2_OK);
    M2_ASSERT_ALL(m2_zero_bucket_ready(p.d, p.g, 150, 300) == M2_EUSAGE &&
                  strstr(m2_last_error(), "overlaps [100, 200)"));
    M2_ASSERT_ALL(m2_zero_bucket_ready(p.d, p.g, 10, N + 1) == M2_EUSAGE);
    /* the good bucket and the gaps complete: the step runs as if no bucket had been reported */
    M2_ASSERT_ALL(m2_zero_bucket_ready(p.h, p.g, 100, 200) == M2_OK);
    compare_step(&p, 0, 1000);
    pair_free(&p);
}

/* Moments and step saved by the CPU step, loaded into a fresh staged step (and the other way round): the next
 * steps match again. This is resume across the two paths. */
static void test_moments_cross_load(void **state)
{
    pair a;
    pair_init(&a);
    for (int s = 0; s < 3; s++) step_both(&a, s, 1000);
    float *m = calloc(N, sizeof(float)), *v = calloc(N, sizeof(float));
    M2_ASSERT_ALL(m && v);
    M2_ASSERT_ALL(m2_zero_gather_moments(a.h, m, v) == M2_OK);
    const int64_t optim = m2_zero_optim_step(a.h);

    pair b;
    pair_init(&b);
    memcpy(b.ph, a.ph, a.len * sizeof(float));
    memcpy(b.pd, a.pd, a.len * sizeof(float));
    M2_ASSERT_ALL(m2_zero_load_moments(b.h, m, v, optim) == M2_OK);
    M2_ASSERT_ALL(m2_zero_load_moments(b.d, m, v, optim) == M2_OK);
    for (int s = 3; s < STEPS; s++) {
        step_both(&a, s, 1000);
        step_both(&b, s, 1000);
    }
    M2_ASSERT_ALL(memcmp(a.pd, b.pd, a.len * sizeof(float)) == 0);
    expect_same_moments(&b);
    free(m);
    free(v);
    pair_free(&a);
    pair_free(&b);
}

int main(int argc, char **argv)
{
    if (m2_dist_init(&argc, &argv, &pg) != M2_OK) return m2_report("test_zero_staged", M2_EFAIL);
    pg.timeout_s = 60;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_arithmetic),
        cmocka_unit_test(test_steps_match),
        cmocka_unit_test(test_moments_cross_load),
        cmocka_unit_test(test_bucket_misuse),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    m2_dist_finalize(&pg);
    return rc;
}
