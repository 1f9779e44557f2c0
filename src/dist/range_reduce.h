/* Non-blocking MPI reductions of ranges of a padded gradient buffer onto ZeRO-1 shards (grad_ranges.h): for each
 * range, one MPI_Ireduce_scatter whose per-rank counts are the range's parts inside each rank's shard. The host
 * step (zero.c) runs it on its gradients, the host-staged device collectives (dcomm_mpi.c) on their staging
 * buffer: the same calls, so the two compute the same bits. Errors follow base/error.h. */
#ifndef MAMBA2_RANGE_REDUCE_H
#define MAMBA2_RANGE_REDUCE_H

#include <stddef.h>

#include "dist/dist.h"
#include "dist/grad_ranges.h"

typedef struct {
    int **counts;      /* per range in flight: per-rank receive counts (MPI reads them until it is done) */
    MPI_Request *reqs; /* parallel to counts */
    m2_range *mine;    /* parallel: this rank's part of each range (padded-buffer positions) */
    int n, cap;
} m2_range_reduces;

/* Starts the sum over pg's ranks of send[begin, end); rank r receives the part inside [r*shard, (r+1)*shard) at
 * shard_grad[part begin - r*shard]. send and shard_grad must stay valid, and send unchanged, until the wait.
 * Progresses the reductions already in flight (MPI advances them only inside its calls). */
int m2_range_reduce_start(m2_range_reduces *q, const m2_dist *pg, const float *send, float *shard_grad, size_t shard,
                          size_t begin, size_t end);
/* Waits for every reduction in flight (under the group's watchdog; `what` names it in an error). They stay listed
 * (q->mine[0 .. q->n): where each landed) until m2_range_reduce_clear. */
int m2_range_reduce_wait(m2_range_reduces *q, const m2_dist *pg, const char *what);
/* Forgets the listed reductions: finished ones, or after an error (the job is ending). */
void m2_range_reduce_clear(m2_range_reduces *q);
void m2_range_reduce_free(m2_range_reduces *q);

#endif
