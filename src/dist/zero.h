/* ZeRO-1: Adam moments sharded over the ranks (DESIGN.md "Flat buffers and the data-parallel step").
 *
 * The flat buffer of n parameters is cut into R contiguous shards of S elements each, S = ceil(n / R) rounded up to
 * a multiple of 64 (any n, any R). Rank r owns [r*S, (r+1)*S) of the PADDED buffer (length R*S); the real
 * parameters it updates are that range clipped to n, possibly empty when n < R*64. The trainer allocates params and
 * grads with m2_zero_padded_len() floats and keeps the tail [n, R*S) zero, so the parameter all-gather is one
 * in-place MPI_Allgather. Each rank holds Adam m and v (and the reduced gradient) for its shard only.
 *
 * One step, as the trainer drives it:
 *   during the last micro-batch's backward: m2_zero_bucket_ready(z, grads, begin, end) for each bucket as soon as it
 *       is complete (dp.h's m2_dp_bucket_hook adapts it to m2_model_forward_backward); this starts a non-blocking
 *       reduce-scatter of that range and progresses earlier ones, overlapping communication with the backward;
 *   then m2_zero_step(...): starts whatever part of [0, n) no bucket covered (all of it when bucket_ready was never
 *       called), waits, all-reduces (sse, count, shard sum of squares) in one collective, scales by 1/global count,
 *       clips by the global norm, skips the update on every rank if the norm or loss is not finite, else AdamW on the
 *       shard and an all-gather of the parameters.
 * All ranks must report the same buckets in the same order (collectives match by order); the backward's bucket
 * order is the same on every rank. Grads must not be modified between bucket_ready and the end of m2_zero_step.
 * With R = 1 the same code runs: the collectives become copies.
 *
 * Determinism: MPI's reduce-scatter for a fixed rank count and bucket list is a fixed schedule; the scalars are
 * summed in rank order (m2_dist_allreduce_sum_f64). After every step all ranks hold bitwise-identical parameters
 * (each shard is copied from its one owner). */
#ifndef MAMBA2_ZERO_H
#define MAMBA2_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "dist/dist.h"

#define M2_ZERO_ALIGN 64

/* AdamW constants of MODEL.md §6. */
#define M2_ADAM_BETA1 0.9f
#define M2_ADAM_BETA2 0.95f
#define M2_ADAM_EPS 1e-8f

typedef struct m2_zero m2_zero;

/* decay_mask: n_params bytes, 1 where weight decay applies (m2_layout_decay_mask); NULL = no decay anywhere.
 * It is copied (this rank's shard only). n_params must be 1..INT_MAX (MPI counts are int). The group must outlive
 * z. Not collective (every rank computes the same shards). */
int m2_zero_create(m2_zero **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask);
void m2_zero_free(m2_zero *z);

size_t m2_zero_padded_len(const m2_zero *z);  /* R * S: floats to allocate for params and grads */
size_t m2_zero_shard_len(const m2_zero *z);   /* S: a multiple of 64 */
/* The real parameters rank owns: [begin, end) = [rank*S, (rank+1)*S) clipped to [0, n); may be empty. */
void m2_zero_shard(const m2_zero *z, int rank, size_t *begin, size_t *end);
/* Bytes of optimiser state this rank holds: m, v and the reduced gradient, S floats each. */
size_t m2_zero_state_bytes(const m2_zero *z);
/* Completed AdamW updates (skipped steps do not count); the bias correction uses step + 1. */
int64_t m2_zero_optim_step(const m2_zero *z);

/* Starts the reduce-scatter of grads[begin, end) (a complete bucket, 0 <= begin < end <= n, disjoint from every
 * bucket already started this step: grad_ranges.h checks) and progresses those in flight. */
int m2_zero_bucket_ready(m2_zero *z, const float *grads, size_t begin, size_t end);


/* The data-parallel step (collective). local_sse/local_count: this rank's sum of squared errors and number of
 * terms over its micro-batches. lr, wd: this step's learning rate and weight decay; grad_clip <= 0: no clipping.
 * Outputs (identical on every rank): loss = global sse / global count, grad_norm = global norm of the gradient of
 * that loss before clipping, skipped = 1 when the loss or norm is not finite or the count is 0 (then params, m and
 * v are unchanged everywhere). */
int m2_zero_step(m2_zero *z, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
                 float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped);

/* The parts of m2_zero_step, for tests and benchmarks: m2_zero_reduce finishes every reduce-scatter (issuing the
 * uncovered ranges); afterwards m2_zero_shard_grad() holds this rank's S summed (unscaled) gradients, index 0 being
 * padded position rank*S. m2_zero_step calls m2_zero_reduce itself. */
int m2_zero_reduce(m2_zero *z, const float *grads);
const float *m2_zero_shard_grad(const m2_zero *z);

/* This rank's Adam moments (S floats each, index 0 = padded position rank*S). */
void m2_zero_moments(const m2_zero *z, const float **m, const float **v);

/* Collective. Rank 0 receives the full, unsharded moments (n floats each) for a checkpoint; m_full and v_full are
 * ignored on other ranks (may be NULL). */
int m2_zero_gather_moments(const m2_zero *z, float *m_full, float *v_full);
/* Collective. Each rank takes its shard of rank 0's full moments (other ranks may pass NULL) and the optimiser step:
 * a checkpoint saved at any R resumes at any other R. */
int m2_zero_load_moments(m2_zero *z, const float *m_full, const float *v_full, int64_t optim_step);

/* Seconds spent in the last m2_zero_step: waiting for the reduce-scatters (after the backward ended), the scalar
 * all-reduce, AdamW, and the parameter all-gather. */
typedef struct {
    double reduce_wait_s, allreduce_s, adam_s, allgather_s;
} m2_zero_timing;
m2_zero_timing m2_zero_last_timing(const m2_zero *z);

#endif
