/* NCCL collectives on device buffers for the data-parallel step (docs/ARCHITECTURE.md "Flat buffers and the data-parallel
 * step"; Debian's Open MPI is not CUDA-aware, so device buffers never go through MPI). One communicator per job,
 * one GPU per rank, built over the m2_dist process group:
 *   - cudaSetDevice(device) first (device = pg->device when >= 0, else pg->local_rank);
 *   - rank 0 creates the unique id, MPI broadcasts it (m2_dist_bcast, under the group's watchdog); a group of one
 *     rank makes no MPI call at all (its m2_dist may be filled by hand, without MPI_Init);
 *   - ncclCommInitRankConfig in NON-BLOCKING mode, so that even the initialisation is polled and can time out.
 * Collectives are queued on the communicator's own stream (overlap with the compute stream; order them after
 * compute work with m2_nccl_after). m2_nccl_wait is the watchdog: it polls the stream and ncclCommGetAsyncError
 * until the work is done, and on an NCCL error or when timeout_s passes it aborts the communicator
 * (ncclCommAbort) and returns M2_EFAIL with one line naming the rank and the reason; the caller then ends the job
 * (m2_dist_abort), so no rank is left hanging in a collective.
 *
 * Errors follow base/error.h. The trainer uses it through dist/dcomm.h (kernels/dcomm_nccl.c): the ZeRO-1
 * step (dist/zero.c) reduces each gradient bucket to the ranks that own its parts as soon as the backward has
 * written it (m2_nccl_reduce_range, on the comm stream, overlapping the rest of the backward) and all-gathers the
 * parameters after AdamW. */
#ifndef MAMBA2_NCCL_COMM_H
#define MAMBA2_NCCL_COMM_H

#include <stddef.h>

#include "dist/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct m2_nccl m2_nccl;

/* Collective over pg. timeout_s <= 0 takes pg->timeout_s (and <= 0 there: wait forever). */
int m2_nccl_create(m2_nccl **out, const m2_dist *pg, double timeout_s);
/* Destroys the communicator (aborts it when it is in error); NULL is fine. */
void m2_nccl_free(m2_nccl *c);

int m2_nccl_rank(const m2_nccl *c);
int m2_nccl_world(const m2_nccl *c);
/* The communicator's stream (a cudaStream_t). */
void *m2_nccl_stream(const m2_nccl *c);

/* Later collectives wait for the work queued so far on compute_stream (a cudaStream_t, e.g. m2_ops_cuda_stream()),
 * without blocking the host: a recorded event the comm stream waits on. */
int m2_nccl_after(m2_nccl *c, void *compute_stream);

/* Queued on the comm stream, fp32, sum: the range [begin, end) of a padded buffer cut in shards of `shard`
 * elements; rank r receives the sum of the part inside [r*shard, (r+1)*shard) at shard_grad[part begin - r*shard]
 * (dist/dcomm.h's reduce_range). A bucket's range seldom falls on shard boundaries, so it is one ncclReduce per
 * owning rank (rooted there), fused by an NCCL group: a reduce-scatter with unequal parts. */
int m2_nccl_reduce_range(m2_nccl *c, const float *grads, float *shard_grad, size_t shard, size_t begin, size_t end);
/* recv (world * send_count floats) receives every rank's send in rank order; in place when
 * send == recv + rank * send_count. */
int m2_nccl_all_gather(m2_nccl *c, const float *send, float *recv, size_t send_count);
/* In place sum over the ranks (the gradient norm's sum of squares). */
int m2_nccl_all_reduce_sum(m2_nccl *c, float *buf, size_t count);

/* The watchdog: waits for everything queued on the comm stream. `what` names the step in the error. */
int m2_nccl_wait(m2_nccl *c, const char *what);

#ifdef __cplusplus
}
#endif

#endif
