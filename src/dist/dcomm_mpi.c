/* Host-staged MPI collectives on backend buffers (dcomm.h). Each call is complete when it returns (the staging
 * copies synchronise with the backend anyway), so wait has nothing left to do. */
#include "dist/dcomm.h"

#include "core/error.h"

#include <limits.h>
#include <stdlib.h>

typedef struct {
    m2_dcomm base; /* first: the table is the object */
    const m2_dist *pg;
    const m2_ops *ops;
    float *host;   /* staging: world * count elements, grown on demand */
    size_t cap;
} mpi_comm;

static int stage(mpi_comm *c, size_t n)
{
    if (n <= c->cap) return M2_OK;
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

static int mpi_reduce_scatter(m2_dcomm *base, const float *send, float *recv, size_t count)
{
    mpi_comm *c = (mpi_comm *)base;
    const m2_dist *pg = c->pg;
    const size_t total = (size_t)pg->world * count;
    if (pg->world == 1) { /* the sum over one rank: a copy, and no MPI */
        c->ops->copy(c->ops, recv, send, count * sizeof *recv);
        return M2_OK;
    }
    int err = check_count(c, count, "gradient reduce-scatter");
    if (!err) err = stage(c, total + count); /* [send: total][result: count] */
    if (err) return err;
    float *result = c->host + total;
    c->ops->to_host(c->ops, c->host, send, total * sizeof *send);
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(c->host, result, (int)count, MPI_FLOAT, MPI_SUM, pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Ireduce_scatter_block");
    if ((err = m2_dist_wait(pg, 1, &req, "gradient reduce-scatter"))) return err;
    c->ops->to_device(c->ops, recv, result, count * sizeof *recv);
    return M2_OK;
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

static int mpi_wait(m2_dcomm *base, const char *what) { return M2_OK; }

static void mpi_free(m2_dcomm *base)
{
    mpi_comm *c = (mpi_comm *)base;
    if (!c) return;
    free(c->host);
    free(c);
}

int m2_dcomm_mpi_create(m2_dcomm **out, const m2_dist *pg, const m2_ops *ops)
{
    *out = NULL;
    mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return m2_fail(M2_EFAIL, "collectives (rank %d): out of memory", pg->rank);
    c->base = (m2_dcomm){.name = "mpi", .reduce_scatter = mpi_reduce_scatter, .all_gather = mpi_all_gather,
                         .wait = mpi_wait, .free = mpi_free};
    c->pg = pg;
    c->ops = ops;
    *out = &c->base;
    return M2_OK;
}
