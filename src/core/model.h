/* The Mamba-2 model graph (MODEL.md §2), written once against the ops interface (core/ops.h):
 * forward over a micro-batch [B,T,F], and forward+backward that accumulates d(SSE)/dparams into a
 * gradient buffer of the flat layout. Parameters and gradients are owned by the caller (the trainer keeps
 * them in flat buffers shared with the optimizer and the collectives); the model owns only its activation
 * workspace, sized for micro-batches up to max_B x max_T. */
#ifndef MAMBA2_MODEL_H
#define MAMBA2_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/layout.h"
#include "core/real.h"

typedef struct m2_model m2_model;

/* Called during the backward as soon as a gradient bucket (m2_layout_bucket) is complete, in bucket order
 * 0, 1, ..., L+1; lets the data-parallel step start that bucket's reduce-scatter while the backward goes on. */
typedef void (*m2_bucket_ready_fn)(int bucket, void *user);

int m2_model_create(m2_model **out, const m2_layout *lay, int max_B, int max_T);
void m2_model_free(m2_model *m);

/* Activation bytes per token per layer saved for the backward (printed at start by the trainer). */
size_t m2_model_activation_bytes_per_token(const m2_model *m);

/* pred [B,T,O] = model(X [B,T,F]). */
int m2_model_forward(m2_model *m, const m2_real *params, const m2_real *X, int B, int T, m2_real *pred);

/* Forward and backward for the loss of MODEL.md §6 before normalisation: returns in *sse the sum of squared
 * errors over positions t >= burn_in and targets that are finite, in *count how many terms, and ADDS
 * d(sse)/dparams into grads (the caller divides by the global count after the reduction, so the result is
 * the same whatever the rank count). pred (optional, may be NULL) receives the predictions.
 * on_ready (may be NULL) is called per bucket as its gradients are complete. */
int m2_model_forward_backward(m2_model *m, const m2_real *params, m2_real *grads, const m2_real *X,
                              const m2_real *Y, int B, int T, int burn_in, double *sse, int64_t *count,
                              m2_real *pred, m2_bucket_ready_fn on_ready, void *user);

#endif
