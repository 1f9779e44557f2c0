/* ZeRO-1 on backend buffers (a GPU's memory): the data-parallel step of zero.h when parameters and gradients live in
 * the memory of an ops table (core/ops.h) and the collectives are device collectives (dcomm.h: NCCL, or MPI through
 * host staging). Same shards (the rule of zero.h: S = ceil(n / R) rounded up to 64, rank r owns [r*S, (r+1)*S) of
 * the padded buffer, the real part clipped to n), same step, same checkpoint form:
 *   1. during the last micro-batch's backward, m2_zero_dev_bucket_ready for each bucket as soon as it is complete
 *      (dp.h's m2_dp_bucket_hook adapts it to the model's on_ready): the bucket's reduction to the ranks that own
 *      its parts starts at once (on a GPU: queued on NCCL's stream behind the kernels that wrote it, so it runs
 *      while the backward goes on); at the step, the gaps no bucket covered, then one wait (grad_ranges.h);
 *   2. this rank's shard sum of squares (ops->sumsq, fp64, fixed order) and the local loss sums, all-reduced on the
 *      host in one MPI call (m2_dist_allreduce_sum_f64: rank order, so every rank gets the same bits);
 *   3. loss = sse / count, norm = sqrt(sum of squares) / count; skip everywhere when not finite; otherwise scale
 *      the shard by 1/count and the clip factor (ops->scale) and AdamW on the shard (ops->adamw);
 *   4. an in-place all-gather of the parameters.
 * Adam moments and the decay mask of the shard stay in backend memory; checkpoints gather the moments to rank 0's
 * host memory unsharded (n floats each), and a checkpoint saved at any rank count, by either ZeRO implementation,
 * loads at any other.
 *
 * With the CPU ops and the host-staged MPI collectives this computes bit for bit what zero.h computes, at any rank
 * count, when both see the same buckets: the same MPI calls in the same order (the tests hold it to that). */
#ifndef MAMBA2_ZERO_DEV_H
#define MAMBA2_ZERO_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "core/ops.h"
#include "dist/dcomm.h"
#include "dist/dist.h"

typedef struct m2_zero_dev m2_zero_dev;

/* ops: the backend of params and grads; comm: its collectives, owned by z from here on (freed with it, also when
 * create fails). decay_mask: n_params host bytes (NULL: no decay anywhere); this rank's shard is copied to the
 * backend. n_params must be 1..INT_MAX. Not collective. pg, ops must outlive z. */
int m2_zero_dev_create(m2_zero_dev **out, const m2_dist *pg, const m2_ops *ops, m2_dcomm *comm, size_t n_params,
                       const unsigned char *decay_mask);
void m2_zero_dev_free(m2_zero_dev *z);

size_t m2_zero_dev_padded_len(const m2_zero_dev *z); /* R * S: floats to allocate for params and grads */
size_t m2_zero_dev_shard_len(const m2_zero_dev *z);  /* S */
void m2_zero_dev_shard(const m2_zero_dev *z, int rank, size_t *begin, size_t *end);
size_t m2_zero_dev_state_bytes(const m2_zero_dev *z); /* m, v and the reduced gradient: S floats each */
int64_t m2_zero_dev_optim_step(const m2_zero_dev *z);

/* Starts the reduction of grads[begin, end) (a complete bucket; see m2_zero_bucket_ready). Grads must not change
 * until m2_zero_dev_step has returned. */
int m2_zero_dev_bucket_ready(m2_zero_dev *z, const float *grads, size_t begin, size_t end);

/* The step (collective), as m2_zero_step: params and grads are padded backend buffers whose tail [n, R*S) is zero;
 * grads are left as they are. */
int m2_zero_dev_step(m2_zero_dev *z, float *params, const float *grads, double local_sse, int64_t local_count,
                     float lr, float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped);

/* Collective. Rank 0 receives the unsharded moments (n host floats each; ignored elsewhere, may be NULL). */
int m2_zero_dev_gather_moments(const m2_zero_dev *z, float *m_full, float *v_full);
/* Collective. Each rank takes its shard of rank 0's unsharded host moments (others may pass NULL) and the step. */
int m2_zero_dev_load_moments(m2_zero_dev *z, const float *m_full, const float *v_full, int64_t optim_step);

#endif
