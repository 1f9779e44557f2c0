/* Collectives on backend buffers (the memory of an ops table, core/ops.h) for the ZeRO-1 step (zero.h). Two
 * implementations behind one table:
 *   - MPI (dcomm_mpi.c): on host memory (the CPU ops) MPI's non-blocking collectives work on the buffers
 *     themselves; on a device the buffers are copied to host staging buffers first and back afterwards (Debian's
 *     Open MPI is not CUDA-aware, so device memory never goes to MPI directly): dist.backend = mpi on a GPU, and
 *     what the tests drive on the CUDA emulation. Both issue the same MPI calls in the same order, so they compute
 *     the same bits at any rank count. Under the group's watchdog; with one rank no MPI call (copies).
 *   - NCCL (kernels/dcomm_nccl.c, dist.backend = nccl or auto on a GPU): queued on NCCL's own stream after the
 *     compute stream's work, so a bucket's reduction runs while the backward goes on; finished by NCCL's watchdog.
 * Buffers hold fp32 elements; counts are elements. Errors follow base/error.h. */
#ifndef MAMBA2_DCOMM_H
#define MAMBA2_DCOMM_H

#include <stddef.h>

#include "core/ops.h"
#include "dist/dist.h"

typedef struct m2_dcomm m2_dcomm;

struct m2_dcomm {
    const char *name; /* "nccl", "mpi" (host-staged) */
    /* Start a collective after all the work the ops have queued so far. Its result is ready for later ops and for
     * the host once wait has returned M2_OK.
     * reduce_range: one range [begin, end) of a padded gradient buffer cut in ZeRO-1 shards of `shard` elements
     *   (zero.h): rank r receives the sum over ranks of the part of grads[begin, end) inside its shard
     *   [r*shard, (r+1)*shard), written at shard_grad[part begin - r*shard]; the rest of shard_grad is left alone.
     *   Several ranges may be in flight before one wait (the buckets of one backward): they are disjoint, started
     *   in the same order on every rank, and grads and shard_grad are the same buffers for all of them.
     * all_gather: recv (world * send_count) receives every rank's send in rank order; in place when
     *   send == recv + rank * send_count. */
    int (*reduce_range)(m2_dcomm *c, const float *grads, float *shard_grad, size_t shard, size_t begin, size_t end);
    int (*all_gather)(m2_dcomm *c, const float *send, float *recv, size_t send_count);
    int (*wait)(m2_dcomm *c, const char *what); /* `what` names the step in a watchdog error */
    void (*free)(m2_dcomm *c);
};

/* The MPI collectives over pg on ops' buffers (staged through the host unless ops->host_memory). pg and ops must
 * outlive c. */
int m2_dcomm_mpi_create(m2_dcomm **out, const m2_dist *pg, const m2_ops *ops);

#endif
