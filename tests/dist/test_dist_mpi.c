/* The process group and ZeRO-1 on R real MPI ranks (registered at R = 2, 3 and 4).
 *
 * Every rank can regenerate every rank's gradients (a pure function of (rank, step, index)), so each rank also
 * computes the unsharded reference in-process: sum the R gradients, scale, clip, AdamW over the whole buffer (R = 1
 * with no communication at all). The sharded path must match it, and all ranks must hold bitwise-identical
 * parameters after every step. Conditions are checked with M2_ASSERT_ALL (mpi_check.h) so a failure on one rank
 * fails the test on every rank instead of hanging the others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/adamw.h"
#include "base/error.h"
#include "base/rng.h"
#include "dist/zero.h"
#include "mpi_check.h"

static m2_dist pg;

/* ---- process group ----------------------------------------------------------------------------------------- */

static void test_group_identity(void **state)
{
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    M2_ASSERT_ALL(pg.rank == rank && pg.world == world);
    /* mpirun puts every rank on this one machine: local = global. */
    M2_ASSERT_ALL(pg.local_size == world && pg.local_rank == rank && pg.device == rank);
    M2_ASSERT_ALL(pg.host[0] != '\0');
}

static void test_host_collectives(void **state)
{
    const int R = pg.world;
    double x[2] = {pg.rank + 0.1, 1e16 * (pg.rank % 2 ? -1 : 1)};
    M2_ASSERT_ALL(m2_dist_allreduce_sum_f64(&pg, x, 2) == M2_OK);
    double expect0 = 0.0, expect1 = 0.0; /* the rank-order sum, evaluated the same way */
    for (int r = 0; r < R; r++) expect0 += r + 0.1, expect1 += 1e16 * (r % 2 ? -1 : 1);
    M2_ASSERT_ALL(x[0] == expect0 && x[1] == expect1);
    M2_ASSERT_ALL(m2_test_same_everywhere(m2_test_hash(x, sizeof x)));

    int64_t k[2] = {pg.rank + 1, -(int64_t)pg.rank};
    M2_ASSERT_ALL(m2_dist_allreduce_sum_i64(&pg, k, 2) == M2_OK);
    M2_ASSERT_ALL(k[0] == (int64_t)R * (R + 1) / 2 && k[1] == -(int64_t)R * (R - 1) / 2);
    int64_t mx = pg.rank == R - 1 ? 5 : 0;
    M2_ASSERT_ALL(m2_dist_allreduce_max_i64(&pg, &mx, 1) == M2_OK && mx == 5);

    char text[24] = {0};
    if (pg.rank == R - 1) snprintf(text, sizeof text, "from %d", R - 1);
    M2_ASSERT_ALL(m2_dist_bcast(&pg, text, sizeof text, R - 1) == M2_OK);
    char expect[24];
    snprintf(expect, sizeof expect, "from %d", R - 1);
    M2_ASSERT_ALL(strcmp(text, expect) == 0);

    int mine = 100 + pg.rank, *all = calloc((size_t)R, sizeof *all);
    M2_ASSERT_ALL(m2_dist_gather(&pg, &mine, sizeof mine, all) == M2_OK);
    int ok = 1;
    for (int r = 0; pg.rank == 0 && r < R; r++) ok &= all[r] == 100 + r;
    M2_ASSERT_ALL(ok);
    free(all);
    M2_ASSERT_ALL(m2_dist_barrier(&pg) == M2_OK);
}

static void test_rank_table(void **state)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = m2_dist_print_table(&pg, f);
    fclose(f);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    /* rank 0: a header and one row per rank; the others print nothing */
    M2_ASSERT_ALL(rc == M2_OK && lines == (pg.rank == 0 ? pg.world + 1 : 0));
    char last[32];
    snprintf(last, sizeof last, "cuda:%d", pg.world - 1);
    M2_ASSERT_ALL(pg.rank != 0 || (strstr(text, pg.host) && strstr(text, last)));
    free(text);
}

/* ---- ZeRO-1 ------------------------------------------------------------------------------------------------ */

enum { EXACT, NOISY };

/* Rank r's gradient at step s. EXACT: multiples of 2^-9 below 2 in magnitude, so any sum of a few is exact in fp32
 * and every summation order gives the same bits. NOISY: a shared base of magnitude >= 0.5 plus per-rank noise, so
 * the rank sum never cancels (relative rounding error of any order <= (R-1)*2^-24*sum|g|/|sum g| <= 3(R-1)*2^-24);
 * scaled by step so clipping binds on some steps and not others. */
static float grad_value(int kind, int r, int s, size_t i)
{
    if (kind == EXACT) {
        uint64_t u = m2_rng_u64(m2_rng_key(11, M2_RNG_TEST, (uint64_t)s, (uint64_t)r), i);
        return (float)((int)(u % 1023) - 511) * 0x1p-9f;
    }
    double base = m2_rng_u01(m2_rng_key(12, M2_RNG_TEST, (uint64_t)s, 99), i);
    double noise = m2_rng_u01(m2_rng_key(12, M2_RNG_TEST, (uint64_t)s, (uint64_t)r), i);
    double sign = (i % 2) ? -1.0 : 1.0;
    return (float)(sign * (0.5 + base + 0.25 * noise) * (1.0 + 2.0 * s));
}

static void fill_rank_grads(float *g, size_t n, int kind, int r, int s)
{
    for (size_t i = 0; i < n; i++) g[i] = grad_value(kind, r, s, i);
}

/* The unsharded reference: one process, the whole buffer, no MPI. */
typedef struct {
    size_t n;
    float *params, *m, *v, *g, *gsum;
    int64_t step;
} reference;

static void reference_init(reference *ref, size_t n, const float *params)
{
    ref->n = n;
    ref->params = malloc(n * sizeof(float));
    memcpy(ref->params, params, n * sizeof(float));
    ref->m = calloc(n, sizeof(float));
    ref->v = calloc(n, sizeof(float));
    ref->g = malloc(n * sizeof(float));
    ref->gsum = malloc(n * sizeof(float));
    ref->step = 0;
}

static void reference_free(reference *ref)
{
    free(ref->params), free(ref->m), free(ref->v), free(ref->g), free(ref->gsum);
}

/* Leaves the clipped, scaled gradient in ref->gsum; returns the global norm before clipping. */
static double reference_step(reference *ref, int kind, int s, int R, int64_t count, const unsigned char *mask, float lr,
                             float wd, float clip)
{
    memset(ref->gsum, 0, ref->n * sizeof(float));
    for (int r = 0; r < R; r++) {
        fill_rank_grads(ref->g, ref->n, kind, r, s);
        for (size_t i = 0; i < ref->n; i++) ref->gsum[i] += ref->g[i];
    }
    double sumsq = 0.0;
    for (size_t i = 0; i < ref->n; i++) sumsq += (double)ref->gsum[i] * ref->gsum[i];
    const double inv = 1.0 / (double)count, norm = sqrt(sumsq) * inv;
    const double factor = inv * (clip > 0 && norm > clip ? clip / norm : 1.0);
    for (size_t i = 0; i < ref->n; i++) ref->gsum[i] = (float)((double)ref->gsum[i] * factor);
    ref->step++;
    m2_adamw(ref->params, ref->gsum, ref->m, ref->v, mask, ref->n, lr, M2_ADAM_BETA1, M2_ADAM_BETA2, M2_ADAM_EPS, wd,
             ref->step);
    return norm;
}

static unsigned char *test_mask(size_t n)
{
    unsigned char *mask = malloc(n);
    for (size_t i = 0; i < n; i++) mask[i] = i % 3 == 0; /* decay on every third element: offsets matter */
    return mask;
}

static float *test_params(size_t padded, size_t n)
{
    float *p = calloc(padded, sizeof *p); /* the padded tail stays zero */
    uint64_t key = m2_rng_key(13, M2_RNG_TEST, 0, 0);
    for (size_t i = 0; i < n; i++) p[i] = (float)(2.0 * m2_rng_u01(key, i) - 1.0);
    return p;
}

/* Starts buckets cut at `cuts` (ascending boundaries inside (0, n)) in a given order, leaving some as gaps. */
static void start_buckets(m2_zero *z, const float *grads, size_t n, int order)
{
    const size_t cuts[] = {0, n / 7, n / 7 + 1, n / 3, n / 2, (2 * n) / 3, n - 1, n};
    const int nb = (int)(sizeof cuts / sizeof *cuts) - 1;
    for (int k = 0; k < nb; k++) {
        int b = k;
        if (order == 1)
            b = nb - 1 - k; /* backward order: the tail first */
        else if (order == 2)
            b = (3 * k + 2) % nb; /* a shuffle (3 is coprime with 7) */
        else if (order == 3 && k % 2)
            continue; /* every other bucket left to m2_zero_step as a gap */
        if (cuts[b + 1] > cuts[b]) M2_ASSERT_ALL(m2_zero_bucket_ready(z, grads, cuts[b], cuts[b + 1]) == M2_OK);
    }
}

/* Runs `steps` ZeRO-1 steps against the reference and checks params, moments, loss and norm after each. */
static void run_against_reference(size_t n, int kind, float clip, int bucket_order, double tol, int steps)
{
    const int R = pg.world;
    unsigned char *mask = test_mask(n);
    m2_zero *z = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&z, &pg, n, mask) == M2_OK);
    const size_t P = m2_zero_padded_len(z);
    size_t b, e;
    m2_zero_shard(z, pg.rank, &b, &e);
    float *params = test_params(P, n), *grads = calloc(P, sizeof(float));
    reference ref;
    reference_init(&ref, n, params);
    const float lr = 1e-2f, wd = 0.1f;

    for (int s = 0; s < steps; s++) {
        fill_rank_grads(grads, n, kind, pg.rank, s);
        const double sse = 0.5 + pg.rank + s;
        const int64_t count = 100 + 10 * pg.rank;
        if (bucket_order >= 0) start_buckets(z, grads, n, bucket_order);
        double loss, norm;
        int skipped;
        M2_ASSERT_ALL(m2_zero_step(z, params, grads, sse, count, lr, wd, clip, &loss, &norm, &skipped) == M2_OK);

        double gsse = 0.0;
        int64_t gcount = 0;
        for (int r = 0; r < R; r++) gsse += 0.5 + r + s, gcount += 100 + 10 * r;
        const double ref_norm = reference_step(&ref, kind, s, R, gcount, mask, lr, wd, clip);

        M2_ASSERT_ALL(!skipped && loss == gsse / (double)gcount);
        /* The norm: shard sums of squares in double, added in rank order, vs one sequential double sum; the fp32
         * gradient sums may differ by the rounding bound above, so relative 1e-6 (>> 3(R-1)*2^-24 ~ 5e-7). */
        M2_ASSERT_ALL(fabs(norm - ref_norm) <= 1e-6 * ref_norm);
        M2_ASSERT_ALL(m2_test_same_everywhere(m2_test_hash(params, P * sizeof(float))));
        M2_ASSERT_ALL(m2_zero_optim_step(z) == s + 1);

        double worst_p = 0.0, worst_g = 0.0, worst_mv = 0.0;
        for (size_t i = 0; i < n; i++) worst_p = fmax(worst_p, fabs((double)params[i] - ref.params[i]));
        const float *g = m2_zero_shard_grad(z), *m, *v;
        m2_zero_moments(z, &m, &v);
        for (size_t i = b; i < e; i++) {
            worst_g = fmax(worst_g, fabs((double)g[i - b] - ref.gsum[i]) / (fabs(ref.gsum[i]) + 1e-30));
            worst_mv = fmax(worst_mv, fabs((double)m[i - b] - ref.m[i]) / (fabs(ref.m[i]) + 1e-30));
            worst_mv = fmax(worst_mv, fabs((double)v[i - b] - ref.v[i]) / (ref.v[i] + 1e-30));
        }
        int tail_zero = 1;
        for (size_t i = n; i < P; i++) tail_zero &= params[i] == 0.0f;
        if (kind == EXACT) {
            M2_ASSERT_ALL(worst_p == 0.0 && worst_g == 0.0 && worst_mv == 0.0);
        } else {
            /* The scaled, clipped shard gradient: the fp32 sum-order bound 3(R-1)*2^-24 <= 5.4e-7 plus one rounding
             * of the scaling (6e-8), so 1e-6 relative; m and v are averages of those gradients (and their squares:
             * twice the relative error) with no cancellation (fixed sign per element), so 3e-6. */
            M2_ASSERT_ALL(worst_g <= 1e-6);
            M2_ASSERT_ALL(worst_mv <= 3e-6);
            M2_ASSERT_ALL(worst_p <= tol);
        }
        M2_ASSERT_ALL(tail_zero);
    }
    reference_free(&ref);
    free(params), free(grads), free(mask);
    m2_zero_free(z);
}

/* Exactly representable gradients: every summation order gives the same bits, no clipping, so sharded AdamW must
 * equal unsharded AdamW bitwise (AdamW is elementwise; the shard offset changes nothing). n prime, buckets that cut
 * across shard boundaries, in backward order. */
static void test_adam_on_shards_is_exact(void **state) { run_against_reference(1009, EXACT, 0.0f, 1, 0.0, 4); }

/* Non-representable gradients with clipping that binds: parameters within tol of the reference after 5 steps.
 * Per step, the summed gradient differs by <= 3(R-1)*2^-24 relative (no cancellation, see grad_value); Adam's update
 * lr*m/sqrt(v) changes by at most ~2x that relative error times lr = 1e-2, i.e. ~2e-8; rounding the parameter
 * (|p| < 2) adds <= 1.2e-7. 5 steps: <= 7e-7, so tol = 1e-6. A wrong shard offset, mask
 * or scaling moves parameters by ~lr = 1e-2. */
static void test_adam_on_shards_clipped(void **state) { run_against_reference(4099, NOISY, 1.0f, -1, 1e-6, 5); }

/* A buffer smaller than R*64 (ranks with empty shards) still steps, through the same path. */
static void test_tiny_buffer(void **state) { run_against_reference(37, EXACT, 0.0f, 2, 0.0, 3); }

/* Bucketed non-blocking reduce-scatter, in any bucket order and with gaps, equals MPI_Allreduce of the gradients.
 * Both are sums of the same R fp32 values in some order; each is within (R-1)*2^-24*sum|g| of the exact sum, so
 * they differ by at most 2(R-1)*2^-24*sum_r|g_r| per element. */
static void test_buckets_equal_allreduce(void **state)
{
    const int R = pg.world;
    const size_t n = 5003;
    m2_zero *z = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&z, &pg, n, NULL) == M2_OK);
    const size_t P = m2_zero_padded_len(z);
    size_t b, e;
    m2_zero_shard(z, pg.rank, &b, &e);
    float *grads = calloc(P, sizeof(float)), *sum = calloc(n, sizeof(float)), *abs_sum = calloc(n, sizeof(float));
    float *tmp = malloc(n * sizeof(float));
    for (int order = 0; order < 5; order++) {
        /* order 4: no buckets at all (one reduce-scatter of the whole buffer) */
        const int s = 100 + order;
        for (size_t i = 0; i < n; i++) grads[i] = (float)(2.0 * m2_rng_u01(m2_rng_key(5, 9, s, pg.rank), i) - 1.0);
        MPI_Allreduce(grads, sum, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        memset(abs_sum, 0, n * sizeof(float));
        for (int r = 0; r < R; r++)
            for (size_t i = 0; i < n; i++)
                abs_sum[i] += fabsf((float)(2.0 * m2_rng_u01(m2_rng_key(5, 9, s, r), i) - 1.0));
        memcpy(tmp, grads, n * sizeof(float));
        if (order < 4) start_buckets(z, grads, n, order);
        M2_ASSERT_ALL(m2_zero_reduce(z, grads) == M2_OK);
        const float *g = m2_zero_shard_grad(z);
        int bad = 0;
        for (size_t i = b; i < e; i++)
            bad += fabsf(g[i - b] - sum[i]) > 2.0f * (R - 1) * FLT_EPSILON / 2 * abs_sum[i] * 1.0001f;
        M2_ASSERT_ALL(bad == 0);
        M2_ASSERT_ALL(memcmp(tmp, grads, n * sizeof(float)) == 0); /* the caller's gradients are left alone */
    }
    free(grads), free(sum), free(abs_sum), free(tmp);
    m2_zero_free(z);
}

/* A NaN or Inf in one rank's gradient (or a NaN loss on one rank): every rank reports a skip, parameters and moments
 * stay bitwise unchanged, the optimiser step does not advance; the next finite step updates normally. */
static void test_nonfinite_skips_everywhere(void **state)
{
    const size_t n = 2048 + 17;
    m2_zero *z = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&z, &pg, n, NULL) == M2_OK);
    const size_t P = m2_zero_padded_len(z), S = m2_zero_shard_len(z);
    float *params = test_params(P, n), *grads = calloc(P, sizeof(float));
    float *m_before = malloc(S * sizeof(float)), *v_before = malloc(S * sizeof(float));
    const float *m, *v;
    double loss, norm;
    int skipped;
    fill_rank_grads(grads, n, NOISY, pg.rank, 0);
    M2_ASSERT_ALL(m2_zero_step(z, params, grads, 1.0, 10, 1e-2f, 0.1f, 1.0f, &loss, &norm, &skipped) == M2_OK);
    M2_ASSERT_ALL(!skipped);

    const float poison[] = {NAN, INFINITY, 0.0f};
    for (int k = 0; k < 3; k++) {
        fill_rank_grads(grads, n, NOISY, pg.rank, 1);
        /* the last rank poisons an element that rank 0 owns, so the bad value has to travel */
        if (pg.rank == pg.world - 1 && k < 2) grads[3] = poison[k];
        double sse = (pg.rank == pg.world - 1 && k == 2) ? NAN : 1.0;
        const uint64_t before = m2_test_hash(params, P * sizeof(float));
        m2_zero_moments(z, &m, &v);
        memcpy(m_before, m, S * sizeof(float));
        memcpy(v_before, v, S * sizeof(float));
        M2_ASSERT_ALL(m2_zero_step(z, params, grads, sse, 10, 1e-2f, 0.1f, 1.0f, &loss, &norm, &skipped) == M2_OK);
        M2_ASSERT_ALL(skipped == 1);
        M2_ASSERT_ALL(k == 2 ? isnan(loss) : !isfinite(norm));
        M2_ASSERT_ALL(m2_test_hash(params, P * sizeof(float)) == before);
        M2_ASSERT_ALL(memcmp(m, m_before, S * sizeof(float)) == 0 && memcmp(v, v_before, S * sizeof(float)) == 0);
        M2_ASSERT_ALL(m2_zero_optim_step(z) == 1);
    }
    /* zero terms in the whole batch: nothing to average, so no update either */
    M2_ASSERT_ALL(m2_zero_step(z, params, grads, 0.0, 0, 1e-2f, 0.1f, 1.0f, &loss, &norm, &skipped) == M2_OK);
    M2_ASSERT_ALL(skipped == 1 && m2_zero_optim_step(z) == 1);

    fill_rank_grads(grads, n, NOISY, pg.rank, 2);
    const uint64_t before = m2_test_hash(params, P * sizeof(float));
    M2_ASSERT_ALL(m2_zero_step(z, params, grads, 1.0, 10, 1e-2f, 0.1f, 1.0f, &loss, &norm, &skipped) == M2_OK);
    M2_ASSERT_ALL(!skipped && m2_zero_optim_step(z) == 2 && m2_test_hash(params, P * sizeof(float)) != before);
    M2_ASSERT_ALL(m2_test_same_everywhere(m2_test_hash(params, P * sizeof(float))));
    free(params), free(grads), free(m_before), free(v_before);
    m2_zero_free(z);
}

/* Moments gathered at R (unsharded, on rank 0) and loaded into a group of about R/2 ranks (R = 4 -> 2, 3 -> 2 and 1,
 * 2 -> 1): every rank of the new group holds exactly the full moments' values of its new shard, zero padding, the
 * optimiser step; and gathering again gives back the same full moments. */
static void test_moments_reshard(void **state)
{
    const size_t n = 3001;
    m2_zero *z = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&z, &pg, n, NULL) == M2_OK);
    const size_t P = m2_zero_padded_len(z);
    float *params = test_params(P, n), *grads = calloc(P, sizeof(float));
    double loss, norm;
    int skipped;
    for (int s = 0; s < 3; s++) {
        fill_rank_grads(grads, n, NOISY, pg.rank, s);
        M2_ASSERT_ALL(m2_zero_step(z, params, grads, 1.0, 10, 1e-2f, 0.1f, 1.0f, &loss, &norm, &skipped) == M2_OK);
    }
    float *m_full = calloc(n, sizeof(float)), *v_full = calloc(n, sizeof(float));
    M2_ASSERT_ALL(m2_zero_gather_moments(z, pg.rank == 0 ? m_full : NULL, pg.rank == 0 ? v_full : NULL) == M2_OK);
    MPI_Bcast(m_full, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD); /* so every rank can check against it */
    MPI_Bcast(v_full, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);

    /* the gather put each old shard where it belongs */
    const float *m, *v;
    size_t b, e;
    m2_zero_moments(z, &m, &v);
    m2_zero_shard(z, pg.rank, &b, &e);
    M2_ASSERT_ALL(memcmp(m, m_full + b, (e - b) * sizeof(float)) == 0 &&
                  memcmp(v, v_full + b, (e - b) * sizeof(float)) == 0);
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += m_full[i] != 0.0f && v_full[i] > 0.0f;
    M2_ASSERT_ALL(nonzero == (int)n);

    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, pg.rank % 2, pg.rank, &half);
    m2_dist sub;
    M2_ASSERT_ALL(m2_dist_from_comm(&sub, half, "test_dist_mpi") == M2_OK);
    m2_zero *y = NULL;
    M2_ASSERT_ALL(m2_zero_create_host(&y, &sub, n, NULL) == M2_OK);
    /* only the new group's rank 0 passes the full moments (world rank 0 or 1; both hold them after the bcast) */
    const int root = sub.rank == 0;
    M2_ASSERT_ALL(m2_zero_load_moments(y, root ? m_full : NULL, root ? v_full : NULL, root ? 3 : -1) == M2_OK);
    M2_ASSERT_ALL(m2_zero_optim_step(y) == 3);
    m2_zero_moments(y, &m, &v);
    m2_zero_shard(y, sub.rank, &b, &e);
    const size_t S2 = m2_zero_shard_len(y);
    int ok = memcmp(m, m_full + b, (e - b) * sizeof(float)) == 0 && memcmp(v, v_full + b, (e - b) * sizeof(float)) == 0;
    for (size_t i = e - b; i < S2; i++) ok &= m[i] == 0.0f && v[i] == 0.0f;
    M2_ASSERT_ALL(ok);

    float *m_again = calloc(n, sizeof(float)), *v_again = calloc(n, sizeof(float));
    M2_ASSERT_ALL(m2_zero_gather_moments(y, m_again, v_again) == M2_OK);
    M2_ASSERT_ALL(!root ||
                  (memcmp(m_again, m_full, n * sizeof(float)) == 0 && memcmp(v_again, v_full, n * sizeof(float)) == 0));
    m2_zero_free(y);
    m2_dist_finalize(&sub);
    MPI_Comm_free(&half);
    free(params), free(grads), free(m_full), free(v_full), free(m_again), free(v_again);
    m2_zero_free(z);
}

int main(int argc, char **argv)
{
    if (m2_dist_init(&argc, &argv, &pg)) return m2_report("test_dist_mpi", M2_EFAIL);
    pg.timeout_s = 60; /* a broken collective fails the test instead of waiting for ctest's timeout */
    /* one copy of cmocka's progress lines; failures still reach stderr from every rank */
    if (pg.rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_identity),
        cmocka_unit_test(test_host_collectives),
        cmocka_unit_test(test_rank_table),
        cmocka_unit_test(test_adam_on_shards_is_exact),
        cmocka_unit_test(test_adam_on_shards_clipped),
        cmocka_unit_test(test_tiny_buffer),
        cmocka_unit_test(test_buckets_equal_allreduce),
        cmocka_unit_test(test_nonfinite_skips_everywhere),
        cmocka_unit_test(test_moments_reshard),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    m2_dist_finalize(&pg);
    return failed;
}
