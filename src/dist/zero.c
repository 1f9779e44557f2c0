#include "dist/zero.h"

#include "base/error.h"
#include "dist/grad_ranges.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct m2_zero {
    const m2_dist *pg;
    const m2_ops *ops;
    m2_dcomm *comm;
    size_t n, shard, padded;
    size_t begin, end;      /* this rank's real range */
    float *grad, *m, *v;    /* [shard] each, backend memory; index 0 = padded position rank*shard */
    unsigned char *mask;    /* [shard], backend memory */
    m2_grad_ranges started; /* the ranges whose reduction this step has started */
    int64_t step;
    m2_zero_timing timing;
    /* the bucket callback's state for one backward (m2_zero_bucket_hook) */
    const m2_layout *lay;
    const float *grads;
    int bucket_err;
};

void m2_zero_shard(const m2_zero *z, int rank, size_t *begin, size_t *end)
{
    size_t b = (size_t)rank * z->shard, e = b + z->shard;
    *begin = b < z->n ? b : z->n;
    *end = e < z->n ? e : z->n;
}

size_t m2_zero_padded_len(const m2_zero *z) { return z->padded; }
size_t m2_zero_shard_len(const m2_zero *z) { return z->shard; }
size_t m2_zero_state_bytes(const m2_zero *z) { return 3 * z->shard * sizeof(float); }
int64_t m2_zero_optim_step(const m2_zero *z) { return z->step; }
const char *m2_zero_comm_name(const m2_zero *z) { return z->comm->name; }
const float *m2_zero_shard_grad(const m2_zero *z) { return z->grad; }
m2_zero_timing m2_zero_last_timing(const m2_zero *z) { return z->timing; }

void m2_zero_moments(const m2_zero *z, const float **m, const float **v)
{
    *m = z->m;
    *v = z->v;
}

void m2_zero_free(m2_zero *z)
{
    if (!z) return;
    const m2_ops *o = z->ops;
    o->free(o, z->grad);
    o->free(o, z->m);
    o->free(o, z->v);
    o->free(o, z->mask);
    if (z->comm) z->comm->free(z->comm);
    m2_grad_ranges_free(&z->started);
    free(z);
}

int m2_zero_create(m2_zero **out, const m2_dist *pg, const m2_ops *ops, m2_dcomm *comm, size_t n_params,
                   const unsigned char *decay_mask)
{
    *out = NULL;
    if (n_params == 0 || n_params > INT_MAX) {
        comm->free(comm);
        return m2_fail(M2_EUSAGE, "ZeRO-1 (rank %d): %zu parameters; must be 1..%d", pg->rank, n_params, INT_MAX);
    }
    m2_zero *z = calloc(1, sizeof *z);
    if (!z) {
        comm->free(comm);
        return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory", pg->rank);
    }
    z->pg = pg;
    z->ops = ops;
    z->comm = comm;
    const size_t R = (size_t)pg->world;
    z->n = n_params;
    const size_t shard = ((n_params + R - 1) / R + M2_ZERO_ALIGN - 1) / M2_ZERO_ALIGN * M2_ZERO_ALIGN;
    z->shard = shard;
    z->padded = shard * R;
    m2_zero_shard(z, pg->rank, &z->begin, &z->end);
    m2_grad_ranges_init(&z->started, n_params, pg->rank);
    if (shard > INT_MAX) {
        m2_zero_free(z);
        return m2_fail(M2_EUSAGE, "ZeRO-1 (rank %d): a shard of %zu is over MPI's count limit", pg->rank, shard);
    }
    const size_t bytes = shard * sizeof(float);
    z->grad = ops->alloc(ops, bytes);
    z->m = ops->alloc(ops, bytes);
    z->v = ops->alloc(ops, bytes);
    z->mask = ops->alloc(ops, shard);
    if (!z->grad || !z->m || !z->v || !z->mask) {
        m2_zero_free(z);
        return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of %s memory for a shard of %zu", pg->rank, ops->name, shard);
    }
    ops->memset0(ops, z->grad, bytes);
    ops->memset0(ops, z->m, bytes);
    ops->memset0(ops, z->v, bytes);
    ops->memset0(ops, z->mask, z->shard);
    if (decay_mask && z->end > z->begin) ops->to_device(ops, z->mask, decay_mask + z->begin, z->end - z->begin);
    *out = z;
    return M2_OK;
}

int m2_zero_create_host(m2_zero **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask)
{
    *out = NULL;
    m2_dcomm *comm;
    int err = m2_dcomm_mpi_create(&comm, pg, m2_ops_cpu());
    return err ? err : m2_zero_create(out, pg, m2_ops_cpu(), comm, n_params, decay_mask);
}

int m2_zero_bucket_ready(m2_zero *z, const float *grads, size_t begin, size_t end)
{
    int err = m2_grad_ranges_add(&z->started, begin, end);
    return err ? err : z->comm->reduce_range(z->comm, grads, z->grad, z->shard, begin, end);
}

/* model.h's on_ready: the bucket's range of the flat buffer to the step. The first error is kept and later buckets
 * are ignored (the trainer checks m2_zero_bucket_error after the backward). */
static void on_bucket(int bucket, void *user)
{
    m2_zero *z = user;
    if (z->bucket_err) return;
    size_t begin, end;
    m2_layout_bucket(z->lay, bucket, &begin, &end);
    if (end > begin) z->bucket_err = m2_zero_bucket_ready(z, z->grads, begin, end);
}

void m2_zero_bucket_hook(m2_zero *z, const m2_layout *lay, const float *grads, m2_bucket_ready_fn *on_ready,
                         void **user)
{
    z->lay = lay;
    z->grads = grads;
    z->bucket_err = M2_OK;
    *on_ready = on_bucket;
    *user = z;
}

int m2_zero_bucket_error(const m2_zero *z) { return z->bucket_err; }

/* Starts the gaps no bucket covered (all of [0, n) when none did), waits for every range of the step. */
int m2_zero_reduce(m2_zero *z, const float *grads)
{
    m2_range *gaps;
    int n_gaps;
    int err = m2_grad_ranges_gaps(&z->started, &gaps, &n_gaps);
    for (int i = 0; i < n_gaps && !err; i++)
        err = z->comm->reduce_range(z->comm, grads, z->grad, z->shard, gaps[i].begin, gaps[i].end);
    free(gaps);
    double t0 = MPI_Wtime();
    if (!err) err = z->comm->wait(z->comm, "gradient reduce-scatter");
    z->timing.reduce_wait_s = MPI_Wtime() - t0;
    m2_grad_ranges_clear(&z->started);
    return err;
}

int m2_zero_step(m2_zero *z, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
                 float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped)
{
    const m2_ops *o = z->ops;
    m2_dcomm *c = z->comm;
    memset(&z->timing, 0, sizeof z->timing);
    int err = m2_zero_reduce(z, grads);
    if (err) return err;

    /* One all-reduce for the three scalars; the count travels as a double (exact below 2^53). */
    double t0 = MPI_Wtime();
    const size_t k = z->end - z->begin;
    double s[3] = {local_sse, (double)local_count, o->sumsq(o, z->grad, k)};
    if ((err = m2_dist_allreduce_sum_f64(z->pg, s, 3))) return err;
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
    o->scale(o, z->grad, k, factor);
    int64_t step;
    if (__builtin_add_overflow(z->step, 1, &step)) /* the same on every rank: all fail together */
        return m2_fail(M2_EFAIL, "optimizer: step %" PRId64 " + 1 overflows int64", z->step);
    z->step = step;
    if (k)
        o->adamw(o, params + z->begin, z->grad, z->m, z->v, z->mask, k, lr, M2_ADAM_BETA1, M2_ADAM_BETA2, M2_ADAM_EPS,
                 wd, z->step);
    z->timing.adam_s = MPI_Wtime() - t0;

    /* In place: this rank's shard is already at params + rank*S. */
    t0 = MPI_Wtime();
    const int r = z->pg->rank;
    err = c->all_gather(c, params + (size_t)r * z->shard, params, z->shard);
    if (!err) err = c->wait(c, "parameter all-gather");
    z->timing.allgather_s = MPI_Wtime() - t0;
    return err;
}

/* Host staging for one moment buffer: this rank's shard, and on rank 0 the padded whole (zeroed). A rank that
 * cannot allocate ends the job: the others would wait for it in the collective. */
static void staging(const m2_zero *z, float **mine, float **all, const char *what)
{
    *mine = malloc(z->shard * sizeof **mine);
    *all = z->pg->rank == 0 ? calloc(z->padded, sizeof **all) : NULL;
    if (!*mine || (z->pg->rank == 0 && !*all)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s (rank %d): out of host memory", what, z->pg->rank);
        m2_dist_abort(z->pg, M2_EFAIL, msg);
    }
}

/* One moment buffer (backend, [shard]) to rank 0's host full[n]: copied to the host, gathered in equal shards into
 * the padded whole on rank 0. */
static int gather_one(const m2_zero *z, const float *dev, float *full)
{
    float *mine, *all;
    staging(z, &mine, &all, "moment gather");
    z->ops->to_host(z->ops, mine, dev, z->shard * sizeof *mine);
    int err = m2_dist_gather(z->pg, mine, z->shard * sizeof *mine, all);
    if (!err && all) memcpy(full, all, z->n * sizeof *full);
    free(mine);
    free(all);
    return err;
}

int m2_zero_gather_moments(const m2_zero *z, float *m_full, float *v_full)
{
    int err = gather_one(z, z->m, m_full);
    return err ? err : gather_one(z, z->v, v_full);
}

/* Rank 0's host full[n] to every rank's backend shard dev[shard] (the padded tail zero). */
static int scatter_one(m2_zero *z, const float *full, float *dev)
{
    const m2_dist *pg = z->pg;
    float *mine, *all;
    staging(z, &mine, &all, "moment scatter");
    if (all) memcpy(all, full, z->n * sizeof *all);
    MPI_Request req;
    int rc = MPI_Iscatter(all, (int)z->shard, MPI_FLOAT, mine, (int)z->shard, MPI_FLOAT, 0, pg->comm, &req);
    int err = rc != MPI_SUCCESS ? m2_dist_check(pg, rc, "MPI_Iscatter") : m2_dist_wait(pg, 1, &req, "moment scatter");
    if (!err) z->ops->to_device(z->ops, dev, mine, z->shard * sizeof *mine);
    free(mine);
    free(all);
    return err;
}

int m2_zero_load_moments(m2_zero *z, const float *m_full, const float *v_full, int64_t optim_step)
{
    int err = m2_dist_bcast(z->pg, &optim_step, sizeof optim_step, 0);
    if (!err) err = scatter_one(z, m_full, z->m);
    if (!err) err = scatter_one(z, v_full, z->v);
    if (!err) z->step = optim_step;
    return err;
}
