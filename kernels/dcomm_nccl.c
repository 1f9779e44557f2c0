/* Device collectives over NCCL (backend_cuda.h): an adapter from dist/dcomm.h to nccl_comm.h. */
#include "backend_cuda.h"

#include <stdlib.h>

#include "base/error.h"
#include "nccl_comm.h"
#include "ops_cuda.h"

typedef struct {
    m2_dcomm base; /* first: the table is the object */
    m2_nccl *nccl;
} nccl_dcomm;

static m2_nccl *nccl_of(m2_dcomm *c) { return ((nccl_dcomm *)c)->nccl; }

static int nccl_reduce_range(m2_dcomm *c, const float *grads, float *shard_grad, size_t shard, size_t begin, size_t end)
{
    int rc = m2_nccl_after(nccl_of(c), m2_ops_cuda_stream()); /* after the kernels that wrote this bucket */
    return rc ? rc : m2_nccl_reduce_range(nccl_of(c), grads, shard_grad, shard, begin, end);
}

static int nccl_all_gather(m2_dcomm *c, const float *send, float *recv, size_t send_count)
{
    int rc = m2_nccl_after(nccl_of(c), m2_ops_cuda_stream()); /* after AdamW wrote this rank's shard */
    return rc ? rc : m2_nccl_all_gather(nccl_of(c), send, recv, send_count);
}

/* The host waits for the comm stream, so later work on the ops' stream sees the result. */
static int nccl_wait(m2_dcomm *c, const char *what) { return m2_nccl_wait(nccl_of(c), what); }

static void nccl_free(m2_dcomm *c)
{
    if (!c) return;
    m2_nccl_free(nccl_of(c));
    free(c);
}

int m2_dcomm_nccl_create(m2_dcomm **out, const m2_dist *pg, double timeout_s)
{
    *out = NULL;
    nccl_dcomm *c = calloc(1, sizeof *c);
    if (!c) return m2_fail(M2_EFAIL, "NCCL init (rank %d): out of memory", pg->rank);
    int rc = m2_nccl_create(&c->nccl, pg, timeout_s);
    if (rc) {
        free(c);
        return rc;
    }
    c->base = (m2_dcomm){.name = "nccl",
                         .reduce_range = nccl_reduce_range,
                         .all_gather = nccl_all_gather,
                         .wait = nccl_wait,
                         .free = nccl_free};
    *out = &c->base;
    return M2_OK;
}
