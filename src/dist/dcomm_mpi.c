/* MPI collectives on backend buffers (dcomm.h). On host memory (ops->host_memory: the CPU ops) MPI works on the
 * buffers themselves; on a device, reduce_range copies the range to a host staging buffer first and wait copies
 * this rank's parts back. Either way reduce_range starts one MPI_Ireduce_scatter with the per-rank counts of the
 * range's shard parts (range_reduce.h), so both compute the same bits. all_gather completes before it returns. */
#include "dist/dcomm.h"

#include "base/error.h"
#include "dist/grad_ranges.h"
#include "dist/range_reduce.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    m2_dcomm base; /* first: the table is the object */
    const m2_dist *pg;
    const m2_ops *ops;
    float *host; /* staging: the padded buffer (world * shard), then the shard's result (shard), grown on demand */
    size_t cap;
    m2_range_reduces in_flight; /* into the staged shard result */
    float *shard_grad;          /* where the parts in flight go when they are done */
    size_t shard;
} mpi_comm;

/* Grows the staging buffer; never while ranges are in flight (MPI writes into it). */
static int stage(mpi_comm *c, size_t n)
{
    if (n <= c->cap) return M2_OK;
    if (c->in_flight.n)
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
    int err = check_count(c, shard, "gradient reduce-scatter");
    if (err) return err;
    c->shard_grad = shard_grad;
    c->shard = shard;
    if (c->ops->host_memory) /* straight from the gradients into the shard */
        return m2_range_reduce_start(&c->in_flight, pg, grads, shard_grad, shard, begin, end);
    const size_t padded = (size_t)pg->world * shard;
    if ((err = stage(c, padded + shard))) return err; /* [the padded buffer][this rank's shard] */
    c->ops->to_host(c->ops, c->host + begin, grads + begin, (end - begin) * sizeof *grads);
    return m2_range_reduce_start(&c->in_flight, pg, c->host, c->host + padded, shard, begin, end);
}

/* Finishes the reductions in flight and copies this rank's parts of each to the backend's shard gradient. */
static int mpi_wait(m2_dcomm *base, const char *what)
{
    mpi_comm *c = (mpi_comm *)base;
    m2_range_reduces *q = &c->in_flight;
    int err = m2_range_reduce_wait(q, c->pg, what);
    if (c->ops->host_memory) { /* the results are in place */
        m2_range_reduce_clear(q);
        return err;
    }
    const size_t mine0 = (size_t)c->pg->rank * c->shard;
    const float *result = c->host + (size_t)c->pg->world * c->shard;
    for (int i = 0; i < q->n && !err; i++) {
        const m2_range m = q->mine[i];
        if (m.end > m.begin)
            c->ops->to_device(c->ops, c->shard_grad + (m.begin - mine0), result + (m.begin - mine0),
                              (m.end - m.begin) * sizeof(float));
    }
    m2_range_reduce_clear(q);
    return err;
}

/* buf [world * count]: rank r's part at buf + r * count goes to every rank (under the group's watchdog). */
static int all_gather_in_place(const m2_dist *pg, float *buf, size_t count)
{
    MPI_Request req;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)count, MPI_FLOAT, pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Iallgather");
    return m2_dist_wait(pg, 1, &req, "parameter all-gather");
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
    if (err) return err;
    if (c->ops->host_memory) { /* in place in recv */
        if (send != recv + (size_t)pg->rank * count)
            memcpy(recv + (size_t)pg->rank * count, send, count * sizeof *recv);
        return all_gather_in_place(pg, recv, count);
    }
    if ((err = stage(c, total))) return err;
    c->ops->to_host(c->ops, c->host + (size_t)pg->rank * count, send, count * sizeof *send);
    if ((err = all_gather_in_place(pg, c->host, count))) return err;
    c->ops->to_device(c->ops, recv, c->host, total * sizeof *recv);
    return M2_OK;
}

static void mpi_free(m2_dcomm *base)
{
    mpi_comm *c = (mpi_comm *)base;
    if (!c) return;
    m2_range_reduce_free(&c->in_flight); /* only after a completed step or a failed one (the job then ends) */
    free(c->host);
    free(c);
}

int m2_dcomm_mpi_create(m2_dcomm **out, const m2_dist *pg, const m2_ops *ops)
{
    *out = NULL;
    mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory", pg->rank);
    c->base = (m2_dcomm){.name = "mpi",
                         .reduce_range = mpi_reduce_range,
                         .all_gather = mpi_all_gather,
                         .wait = mpi_wait,
                         .free = mpi_free};
    c->pg = pg;
    c->ops = ops;
    *out = &c->base;
    return M2_OK;
}
