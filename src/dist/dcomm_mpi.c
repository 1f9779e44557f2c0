/* Host-staged MPI collectives on backend buffers (dcomm.h). reduce_range copies the range to the host and starts
 * MPI_Ireduce_scatter with the per-rank counts of the range's shard parts, exactly as the host step does (zero.c);
 * wait finishes them all and copies this rank's parts back. all_gather completes before it returns. */
#include "dist/dcomm.h"

#include "core/error.h"
#include "dist/grad_ranges.h"

#include <limits.h>
#include <stdlib.h>

/* One range in flight: MPI reads counts until it is done; mine is this rank's part (padded-buffer positions). */
typedef struct {
    int *counts;
    m2_range mine;
} pending;

typedef struct {
    m2_dcomm base; /* first: the table is the object */
    const m2_dist *pg;
    const m2_ops *ops;
    float *host;   /* staging: the padded buffer (world * shard), then the shard's result (shard), grown on demand */
    size_t cap;
    pending *in_flight;
    MPI_Request *reqs; /* parallel to in_flight */
    int n_flight, flight_cap;
    float *shard_grad; /* where the parts in flight go when they are done */
    size_t shard;
} mpi_comm;

/* Grows the staging buffer; never while ranges are in flight (MPI writes into it). */
static int stage(mpi_comm *c, size_t n)
{
    if (n <= c->cap) return M2_OK;
    if (c->n_flight)
        return m2_fail(M2_EUSAGE, "collectives (rank %d): staging must grow while reductions are in flight",
                       c->pg->rank);
    float *p = realloc(c->host, n * sizeof *p);
    if (!p) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory for %zu staging floats", c->pg->rank, n);
    c->host = p;
    c->cap = n;
    return M2_OK;
}

static int check_count(const mpi_comm *c, size_t count, const char *what)
{
    if (count > INT_MAX)
        return m2_fail(M2_EUSAGE, "%s (rank %d): %zu elements per rank is over MPI's count limit", what, c->pg->rank,
                       count);
    return M2_OK;
}

static int grow_flight(mpi_comm *c)
{
    if (c->n_flight < c->flight_cap) return M2_OK;
    const int cap = c->flight_cap ? 2 * c->flight_cap : 32;
    pending *p = realloc(c->in_flight, (size_t)cap * sizeof *p);
    if (p) c->in_flight = p;
    MPI_Request *q = p ? realloc(c->reqs, (size_t)cap * sizeof *q) : NULL;
    if (q) c->reqs = q;
    if (!p || !q) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory", c->pg->rank);
    c->flight_cap = cap;
    return M2_OK;
}

static int mpi_reduce_range(m2_dcomm *base, const float *grads, float *shard_grad, size_t shard, size_t begin,
                            size_t end)
{
    mpi_comm *c = (mpi_comm *)base;
    const m2_dist *pg = c->pg;
    const size_t mine0 = (size_t)pg->rank * shard;
    const m2_range mine = m2_shard_part(shard, pg->rank, begin, end);
    if (pg->world == 1) { /* the sum over one rank: a copy, and no MPI */
        if (mine.end > mine.begin)
            c->ops->copy(c->ops, shard_grad + (mine.begin - mine0), grads + mine.begin,
                         (mine.end - mine.begin) * sizeof *grads);
        return M2_OK;
    }
    const size_t padded = (size_t)pg->world * shard;
    int err = check_count(c, shard, "gradient reduce-scatter");
    if (!err) err = stage(c, padded + shard); /* [the padded buffer][this rank's shard] */
    if (!err) err = grow_flight(c);
    if (err) return err;
    int *counts = malloc((size_t)pg->world * sizeof *counts);
    if (!counts) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory", pg->rank);
    for (int r = 0; r < pg->world; r++) {
        const m2_range part = m2_shard_part(shard, r, begin, end);
        counts[r] = (int)(part.end - part.begin);
    }
    float *result = c->host + padded;
    c->ops->to_host(c->ops, c->host + begin, grads + begin, (end - begin) * sizeof *grads);
    float *recv = mine.end > mine.begin ? result + (mine.begin - mine0) : result;
    int rc = MPI_Ireduce_scatter(c->host + begin, recv, counts, MPI_FLOAT, MPI_SUM, pg->comm, &c->reqs[c->n_flight]);
    if (rc != MPI_SUCCESS) {
        free(counts);
        return m2_dist_check(pg, rc, "MPI_Ireduce_scatter");
    }
    c->in_flight[c->n_flight++] = (pending){counts, mine};
    c->shard_grad = shard_grad;
    c->shard = shard;
    /* Non-blocking collectives only advance inside MPI calls: each new range gives the earlier ones a push. */
    int done = 0;
    return m2_dist_check(pg, MPI_Testall(c->n_flight, c->reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
}

static void forget_flight(mpi_comm *c)
{
    for (int i = 0; i < c->n_flight; i++) free(c->in_flight[i].counts);
    c->n_flight = 0;
}

static int mpi_wait(m2_dcomm *base, const char *what)
{
    mpi_comm *c = (mpi_comm *)base;
    if (!c->n_flight) return M2_OK;
    int err = m2_dist_wait(c->pg, c->n_flight, c->reqs, what);
    if (!err) {
        const size_t mine0 = (size_t)c->pg->rank * c->shard;
        const float *result = c->host + (size_t)c->pg->world * c->shard;
        for (int i = 0; i < c->n_flight; i++) {
            const m2_range m = c->in_flight[i].mine;
            if (m.end > m.begin)
                c->ops->to_device(c->ops, c->shard_grad + (m.begin - mine0), result + (m.begin - mine0),
                                  (m.end - m.begin) * sizeof(float));
        }
    }
    forget_flight(c);
    return err;
}

static int mpi_all_gather(m2_dcomm *base, const float *send, float *recv, size_t count)
{
    mpi_comm *c = (mpi_comm *)base;
    const m2_dist *pg = c->pg;
    const size_t total = (size_t)pg->world * count;
    if (pg->world == 1) {
        if (send != recv) c->ops->copy(c->ops, recv, send, count * sizeof *recv);
        return M2_OK;
    }
    int err = check_count(c, count, "parameter all-gather");
    if (!err) err = stage(c, total);
    if (err) return err;
    c->ops->to_host(c->ops, c->host + (size_t)pg->rank * count, send, count * sizeof *send);
    MPI_Request req;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->host, (int)count, MPI_FLOAT, pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Iallgather");
    if ((err = m2_dist_wait(pg, 1, &req, "parameter all-gather"))) return err;
    c->ops->to_device(c->ops, recv, c->host, total * sizeof *recv);
    return M2_OK;
}

static void mpi_free(m2_dcomm *base)
{
    mpi_comm *c = (mpi_comm *)base;
    if (!c) return;
    forget_flight(c); /* freed only after a completed step or a failed one (the job then ends) */
    free(c->in_flight);
    free(c->reqs);
    free(c->host);
    free(c);
}

int m2_dcomm_mpi_create(m2_dcomm **out, const m2_dist *pg, const m2_ops *ops)
{
    *out = NULL;
    mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory", pg->rank);
    c->base = (m2_dcomm){.name = "mpi", .reduce_range = mpi_reduce_range, .all_gather = mpi_all_gather,
                         .wait = mpi_wait, .free = mpi_free};
    c->pg = pg;
    c->ops = ops;
    *out = &c->base;
    return M2_OK;
}
