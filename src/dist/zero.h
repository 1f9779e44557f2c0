/* ZeRO-1: the data-parallel optimiser step (docs/ARCHITECTURE.md "The data-parallel step"), one implementation for
 * every backend. Parameters and gradients live in the memory of an ops table (core/ops.h: host memory for the CPU
 * ops, a GPU's memory for CUDA); the collectives are a dcomm table (dist/dcomm.h: MPI, directly on host memory or
 * through host staging buffers for a device; NCCL on GPUs, kernels/). The CPU step is this step with the CPU ops and
 * the MPI collectives (m2_zero_create_host).
 *
 * Shards: the flat buffer of n parameters is cut into R contiguous shards of S elements each, S = ceil(n / R) rounded
 * up to a multiple of 64 (any n, any R). Rank r owns [r*S, (r+1)*S) of the PADDED buffer (length R*S); the real
 * parameters it updates are that range clipped to n, possibly empty when n < R*64. The trainer allocates params and
 * grads with m2_zero_padded_len() floats and keeps the tail [n, R*S) zero, so the parameter all-gather is one
 * in-place all-gather. Each rank holds Adam m and v, the reduced gradient and the decay mask for its shard only, in
 * the backend's memory.
 *
 * One step, as the trainer drives it:
 *   1. during the last micro-batch's backward, m2_zero_bucket_ready for each bucket as soon as it is complete
 *      (m2_zero_bucket_hook adapts it to the model's on_ready): the bucket's reduction to the ranks that own its
 *      parts starts at once (on a GPU: queued on NCCL's stream behind the kernels that wrote it, so it runs while the
 *      backward goes on; on the CPU: a non-blocking MPI_Ireduce_scatter, progressed by later MPI calls);
 *   2. m2_zero_step: the gaps no bucket covered (all of [0, n) when none was reported), then one wait
 *      (grad_ranges.h); this rank's shard sum of squares (ops->sumsq, fp64, fixed order) and the local loss sums,
 *      all-reduced on the host in one MPI call in rank order, so every rank gets the same bits;
 *   3. loss = sse / count, norm = sqrt(sum of squares) / count; skip everywhere when not finite or count is 0;
 *      otherwise scale the shard by 1/count and the clip factor (ops->scale) and AdamW on it (ops->adamw);
 *   4. an in-place all-gather of the parameters.
 * All ranks must report the same buckets in the same order (collectives match by order). Grads must not change
 * between bucket_ready and the end of m2_zero_step. With R = 1 the same code runs: the collectives become copies.
 *
 * Determinism: for a fixed rank count and bucket list the reductions are a fixed schedule; after every step all ranks
 * hold bitwise-identical parameters (each shard is copied from its one owner). The MPI collectives issue the same
 * calls whether the buffers are host memory or staged from a device, so the CPU step and a device step with MPI
 * compute the same bits at any rank count (tests/dist/test_zero_staged.c).
 *
 * Checkpoints: the moments are gathered unsharded (n floats each) into rank 0's host memory, so a checkpoint saved
 * at any rank count loads at any other. Errors follow base/error.h. */
#ifndef MAMBA2_ZERO_H
#define MAMBA2_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "base/layout.h"
#include "core/model.h"
#include "core/ops.h"
#include "dist/dcomm.h"
#include "dist/dist.h"

#define M2_ZERO_ALIGN 64

/* AdamW constants of docs/MODEL.md "Optimiser". */
#define M2_ADAM_BETA1 0.9f
#define M2_ADAM_BETA2 0.95f
#define M2_ADAM_EPS   1e-8f

typedef struct m2_zero m2_zero;

/* ops: the backend of params and grads; comm: its collectives, owned by z from here on (freed with it, also when
 * create fails). decay_mask: n_params host bytes, 1 where weight decay applies (m2_layout_decay_mask; NULL: no decay
 * anywhere); this rank's shard is copied to the backend. n_params must be 1..INT_MAX (MPI counts are int). Not
 * collective (every rank computes the same shards). pg and ops must outlive z. */
int m2_zero_create(m2_zero **out, const m2_dist *pg, const m2_ops *ops, m2_dcomm *comm, size_t n_params,
                   const unsigned char *decay_mask);
/* The CPU step: the CPU ops and MPI on host memory. */
int m2_zero_create_host(m2_zero **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask);
void m2_zero_free(m2_zero *z);

const char *m2_zero_comm_name(const m2_zero *z); /* the collectives: "mpi" or "nccl" */
size_t m2_zero_padded_len(const m2_zero *z);     /* R * S: floats to allocate for params and grads */
size_t m2_zero_shard_len(const m2_zero *z);      /* S: a multiple of 64 */
/* The real parameters rank owns: [begin, end) = [rank*S, (rank+1)*S) clipped to [0, n); may be empty. */
void m2_zero_shard(const m2_zero *z, int rank, size_t *begin, size_t *end);
/* Bytes of optimiser state this rank holds: m, v and the reduced gradient, S floats each. */
size_t m2_zero_state_bytes(const m2_zero *z);
/* Completed AdamW updates (skipped steps do not count); the bias correction uses step + 1. */
int64_t m2_zero_optim_step(const m2_zero *z);

/* Starts the reduction of grads[begin, end) (a complete bucket, 0 <= begin < end <= n, disjoint from every bucket
 * already started this step: grad_ranges.h checks). */
int m2_zero_bucket_ready(m2_zero *z, const float *grads, size_t begin, size_t end);

/* What to pass to the LAST micro-batch's m2_model_forward_backward as on_ready/user for the gradients in grads
 * (lay: their layout, whose buckets the backward reports): each bucket's reduction starts when it is complete.
 * After the backward, m2_zero_bucket_error says whether a bucket failed (its message in m2_last_error). */
void m2_zero_bucket_hook(m2_zero *z, const m2_layout *lay, const float *grads, m2_bucket_ready_fn *on_ready,
                         void **user);
int m2_zero_bucket_error(const m2_zero *z);

/* The data-parallel step (collective). local_sse/local_count: this rank's sum of squared errors and number of
 * terms over its micro-batches. lr, wd: this step's learning rate and weight decay; grad_clip <= 0: no clipping.
 * Outputs (identical on every rank): loss = global sse / global count, grad_norm = global norm of the gradient of
 * that loss before clipping, skipped = 1 when the loss or norm is not finite or the count is 0 (then params, m and
 * v are unchanged everywhere). params and grads: padded backend buffers with a zero tail; grads are left as they are. */
int m2_zero_step(m2_zero *z, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
                 float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped);

/* The first part of m2_zero_step, for tests and benchmarks: finishes every reduction (issuing the uncovered
 * ranges); afterwards m2_zero_shard_grad() holds this rank's S summed (unscaled) gradients (backend memory), index 0
 * being padded position rank*S. */
int m2_zero_reduce(m2_zero *z, const float *grads);
const float *m2_zero_shard_grad(const m2_zero *z);
/* This rank's Adam moments (S floats each, backend memory, index 0 = padded position rank*S). */
void m2_zero_moments(const m2_zero *z, const float **m, const float **v);

/* Collective. Rank 0 receives the unsharded moments (n host floats each; ignored elsewhere, may be NULL). */
int m2_zero_gather_moments(const m2_zero *z, float *m_full, float *v_full);
/* Collective. Each rank takes its shard of rank 0's unsharded host moments (others may pass NULL) and the step:
 * a checkpoint saved at any R resumes at any other R. */
int m2_zero_load_moments(m2_zero *z, const float *m_full, const float *v_full, int64_t optim_step);

/* Host wall-clock seconds of the last m2_zero_step's phases: waiting for the reductions (after the backward ended),
 * the scalar all-reduce, scale + AdamW (queued work only, on an asynchronous backend), the parameter all-gather. */
typedef struct {
    double reduce_wait_s, allreduce_s, adam_s, allgather_s;
} m2_zero_timing;
m2_zero_timing m2_zero_last_timing(const m2_zero *z);

#endif
