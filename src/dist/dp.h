/* The data-parallel optimiser step the trainer drives: one interface over the two ZeRO-1 implementations, so the
 * training loop is written once.
 *   host:   zero.h, on host buffers through MPI (the CPU backend);
 *   device: zero_dev.h, on backend buffers (a GPU's memory) through device collectives (dcomm.h: NCCL, or MPI
 *           through host staging).
 * Both start each gradient bucket's reduction as soon as the backward has completed it, so communication overlaps
 * the rest of the backward.
 * params and grads are buffers of the backend the step was made for (host memory for the host step), padded to
 * m2_dp_padded_len() floats with a zero tail. */
#ifndef MAMBA2_DP_H
#define MAMBA2_DP_H

#include <stddef.h>
#include <stdint.h>

#include "base/layout.h"
#include "core/model.h"
#include "core/ops.h"
#include "dist/dcomm.h"
#include "dist/dist.h"

typedef struct m2_dp m2_dp;

int m2_dp_create_host(m2_dp **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask);
/* comm is owned by the step from here on (freed with it, also when create fails). */
int m2_dp_create_device(m2_dp **out, const m2_dist *pg, const m2_ops *ops, m2_dcomm *comm, size_t n_params,
                        const unsigned char *decay_mask);
void m2_dp_free(m2_dp *dp);

const char *m2_dp_name(const m2_dp *dp); /* "mpi" (host), or the device collectives' name ("nccl", "mpi") */
size_t m2_dp_padded_len(const m2_dp *dp);
void m2_dp_shard(const m2_dp *dp, int rank, size_t *begin, size_t *end);
size_t m2_dp_state_bytes(const m2_dp *dp);
int64_t m2_dp_optim_step(const m2_dp *dp);

/* What to pass to the LAST micro-batch's m2_model_forward_backward as on_ready/user for the gradients in grads
 * (lay: their layout, whose buckets the backward reports): each bucket's reduction starts when it is complete.
 * After the backward, m2_dp_bucket_error says whether a bucket failed (its message in m2_last_error). */
void m2_dp_bucket_hook(m2_dp *dp, const m2_layout *lay, const float *grads, m2_bucket_ready_fn *on_ready,
                       void **user);
int m2_dp_bucket_error(const m2_dp *dp);

/* The step (collective): see m2_zero_step. */
int m2_dp_step(m2_dp *dp, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
               float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped);

/* Collective: unsharded moments to / from rank 0's host memory (checkpoints; see m2_zero_gather_moments). */
int m2_dp_gather_moments(const m2_dp *dp, float *m_full, float *v_full);
int m2_dp_load_moments(m2_dp *dp, const float *m_full, const float *v_full, int64_t optim_step);

#endif
