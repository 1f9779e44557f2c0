#include "dist/zero.h"

#include "core/adamw.h"
#include "base/error.h"
#include "dist/grad_ranges.h"
#include "dist/range_reduce.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


struct m2_zero {
    const m2_dist *pg;
    size_t n, shard, padded;
    size_t begin, end;            /* this rank's real range */
    unsigned char *mask;          /* [shard], index 0 = rank*shard */
    float *m, *v, *grad;          /* [shard] each */
    int64_t step;
    m2_grad_ranges started;       /* the ranges whose reduce-scatter this step has started, in start order */
    m2_range_reduces in_flight;   /* their reduce-scatters */
    int *shard_counts, *shard_displs; /* [R]: real elements per rank and their offsets (gatherv/scatterv) */
    m2_zero_timing timing;
};

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

void m2_zero_shard(const m2_zero *z, int rank, size_t *begin, size_t *end)
{
    size_t b = (size_t)rank * z->shard, e = b + z->shard;
    *begin = b < z->n ? b : z->n;
    *end = e < z->n ? e : z->n;
}

int m2_zero_create(m2_zero **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask)
{
    *out = NULL;
    if (n_params == 0 || n_params > INT_MAX)
        return m2_fail(M2_EUSAGE, "ZeRO-1 (rank %d): %zu parameters; must be 1..%d", pg->rank, n_params, INT_MAX);
    const size_t R = (size_t)pg->world;
    const size_t shard = round_up((n_params + R - 1) / R, M2_ZERO_ALIGN);
    if (shard > INT_MAX)
        return m2_fail(M2_EUSAGE, "ZeRO-1 (rank %d): %zu parameters over %zu ranks is over MPI's count limit",
                       pg->rank, n_params, R);
    m2_zero *z = calloc(1, sizeof *z);
    if (!z) return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory", pg->rank);
    z->pg = pg;
    z->n = n_params;
    z->shard = shard;
    z->padded = shard * R;
    m2_zero_shard(z, pg->rank, &z->begin, &z->end);
    z->mask = calloc(shard, 1);
    z->m = calloc(shard, sizeof *z->m);
    z->v = calloc(shard, sizeof *z->v);
    z->grad = calloc(shard, sizeof *z->grad);
    z->shard_counts = calloc(R, sizeof *z->shard_counts);
    z->shard_displs = calloc(R, sizeof *z->shard_displs);
    m2_grad_ranges_init(&z->started, n_params, pg->rank);
    if (!z->mask || !z->m || !z->v || !z->grad || !z->shard_counts || !z->shard_displs) {
        m2_zero_free(z);
        return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory for a shard of %zu", pg->rank, shard);
    }
    if (decay_mask) memcpy(z->mask, decay_mask + z->begin, z->end - z->begin);
    for (int r = 0; r < pg->world; r++) {
        size_t b, e;
        m2_zero_shard(z, r, &b, &e);
        z->shard_counts[r] = (int)(e - b);
        z->shard_displs[r] = (int)b; /* b <= n <= INT_MAX */
    }
    *out = z;
    return M2_OK;
}

static void clear_buckets(m2_zero *z)
{
    m2_range_reduce_clear(&z->in_flight);
    m2_grad_ranges_clear(&z->started);
}

void m2_zero_free(m2_zero *z)
{
    if (!z) return;
    clear_buckets(z); /* callers free only after a completed step, so nothing is in flight */
    m2_grad_ranges_free(&z->started);
    m2_range_reduce_free(&z->in_flight);
    free(z->mask);
    free(z->m);
    free(z->v);
    free(z->grad);
    free(z->shard_counts);
    free(z->shard_displs);
    free(z);
}

size_t m2_zero_padded_len(const m2_zero *z) { return z->padded; }
size_t m2_zero_shard_len(const m2_zero *z) { return z->shard; }
size_t m2_zero_state_bytes(const m2_zero *z) { return 3 * z->shard * sizeof(float); }
int64_t m2_zero_optim_step(const m2_zero *z) { return z->step; }
const float *m2_zero_shard_grad(const m2_zero *z) { return z->grad; }
m2_zero_timing m2_zero_last_timing(const m2_zero *z) { return z->timing; }

void m2_zero_moments(const m2_zero *z, const float **m, const float **v)
{
    *m = z->m;
    *v = z->v;
}

/* The reduce-scatter of [begin, end) (already recorded in z->started) onto the shard gradient. */
static int start_reduce_scatter(m2_zero *z, const float *grads, size_t begin, size_t end)
{
    return m2_range_reduce_start(&z->in_flight, z->pg, grads, z->grad, z->shard, begin, end);
}

int m2_zero_bucket_ready(m2_zero *z, const float *grads, size_t begin, size_t end)
{
    int err = m2_grad_ranges_add(&z->started, begin, end);
    return err ? err : start_reduce_scatter(z, grads, begin, end);
}

/* Starts a reduce-scatter for every gap of [0, n) that no bucket covered, in ascending order. */
static int start_gaps(m2_zero *z, const float *grads)
{
    m2_range *gaps;
    int n_gaps;
    int err = m2_grad_ranges_gaps(&z->started, &gaps, &n_gaps);
    for (int i = 0; i < n_gaps && !err; i++) err = start_reduce_scatter(z, grads, gaps[i].begin, gaps[i].end);
    free(gaps);
    return err;
}

int m2_zero_reduce(m2_zero *z, const float *grads)
{
    int err = start_gaps(z, grads);
    double t0 = MPI_Wtime();
    if (!err) err = m2_range_reduce_wait(&z->in_flight, z->pg, "gradient reduce-scatter");
    z->timing.reduce_wait_s = MPI_Wtime() - t0;
    clear_buckets(z);
    return err;
}

static double shard_sum_of_squares(const m2_zero *z)
{
    /* Sequential in double: a fixed order, so the global norm (and the clip factor) never depends on threading. */
    const float *g = z->grad;
    double s = 0.0;
    for (size_t i = 0, k = z->end - z->begin; i < k; i++) s += (double)g[i] * (double)g[i];
    return s;
}

int m2_zero_step(m2_zero *z, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
                 float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped)
{
    const m2_dist *pg = z->pg;
    memset(&z->timing, 0, sizeof z->timing);
    int err = m2_zero_reduce(z, grads);
    if (err) return err;

    /* One all-reduce for the three scalars; the count travels as a double (exact below 2^53). */
    double t0 = MPI_Wtime();
    double s[3] = {local_sse, (double)local_count, shard_sum_of_squares(z)};
    if ((err = m2_dist_allreduce_sum_f64(pg, s, 3))) return err;
    z->timing.allreduce_s = MPI_Wtime() - t0;
    const double count = s[1], inv = 1.0 / count;
    *out_loss = s[0] / count;
    *out_grad_norm = sqrt(s[2]) * inv;
    /* Every rank sees the same three sums, so every rank takes the same branch. */
    *out_skipped = !(count > 0) || !isfinite(*out_loss) || !isfinite(*out_grad_norm);
    if (*out_skipped) return M2_OK;

    t0 = MPI_Wtime();
    double factor = inv;
    if (grad_clip > 0 && *out_grad_norm > grad_clip) factor *= grad_clip / *out_grad_norm;
    const size_t k = z->end - z->begin;
    for (size_t i = 0; i < k; i++) z->grad[i] = (float)((double)z->grad[i] * factor);
    z->step++;
    if (k) m2_adamw(params + z->begin, z->grad, z->m, z->v, z->mask, k, lr, M2_ADAM_BETA1, M2_ADAM_BETA2,
                    M2_ADAM_EPS, wd, z->step);
    z->timing.adam_s = MPI_Wtime() - t0;

    /* In place: rank r's shard is already at params + r*S; everyone receives everyone else's. */
    t0 = MPI_Wtime();
    MPI_Request req;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params, (int)z->shard, MPI_FLOAT, pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Iallgather");
    err = m2_dist_wait(pg, 1, &req, "parameter all-gather");
    z->timing.allgather_s = MPI_Wtime() - t0;
    return err;
}

int m2_zero_gather_moments(const m2_zero *z, float *m_full, float *v_full)
{
    const m2_dist *pg = z->pg;
    const int mine = z->shard_counts[pg->rank], root = pg->rank == 0;
    MPI_Request req[2];
    int rc = MPI_Igatherv(z->m, mine, MPI_FLOAT, root ? m_full : NULL, z->shard_counts, z->shard_displs, MPI_FLOAT, 0,
                          pg->comm, &req[0]);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Igatherv");
    rc = MPI_Igatherv(z->v, mine, MPI_FLOAT, root ? v_full : NULL, z->shard_counts, z->shard_displs, MPI_FLOAT, 0,
                      pg->comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        m2_dist_wait(pg, 1, &req[0], "moment gather");
        return m2_dist_check(pg, rc, "MPI_Igatherv");
    }
    return m2_dist_wait(pg, 2, req, "moment gather");
}

int m2_zero_load_moments(m2_zero *z, const float *m_full, const float *v_full, int64_t optim_step)
{
    const m2_dist *pg = z->pg;
    const int mine = z->shard_counts[pg->rank], root = pg->rank == 0;
    int err = m2_dist_bcast(pg, &optim_step, sizeof optim_step, 0);
    if (err) return err;
    MPI_Request req[2];
    int rc = MPI_Iscatterv(root ? m_full : NULL, z->shard_counts, z->shard_displs, MPI_FLOAT, z->m, mine, MPI_FLOAT, 0,
                           pg->comm, &req[0]);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Iscatterv");
    rc = MPI_Iscatterv(root ? v_full : NULL, z->shard_counts, z->shard_displs, MPI_FLOAT, z->v, mine, MPI_FLOAT, 0,
                       pg->comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        m2_dist_wait(pg, 1, &req[0], "moment scatter");
        return m2_dist_check(pg, rc, "MPI_Iscatterv");
    }
    if ((err = m2_dist_wait(pg, 2, req, "moment scatter"))) return err;
    /* The padded tail of the last shards stays zero, as after create. */
    memset(z->m + mine, 0, (z->shard - (size_t)mine) * sizeof *z->m);
    memset(z->v + mine, 0, (z->shard - (size_t)mine) * sizeof *z->v);
    z->step = optim_step;
    return M2_OK;
}
