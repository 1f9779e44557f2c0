/* The Mamba-2 model graph (docs/MODEL.md §2), written once against the ops interface (core/ops.h):
 * forward over a micro-batch [B,T,F], and forward+backward that accumulates d(SSE)/dparams into a
 * gradient buffer of the flat layout. Parameters and gradients are owned by the caller (the trainer keeps
 * them in flat buffers shared with the optimizer and the collectives); the model owns only its activation
 * workspace, sized for micro-batches up to max_B x max_T. */
#ifndef MAMBA2_MODEL_H
#define MAMBA2_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/layout.h"
#include "core/ops.h"
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

/* Forward and backward for the loss of docs/MODEL.md §4 before normalisation: returns in *sse the sum of squared
 * errors over positions t >= burn_in and targets that are finite, in *count how many terms, and ADDS
 * d(sse)/dparams into grads (the caller divides by the global count after the reduction, so the result is
 * the same whatever the rank count). pred (optional, may be NULL) receives the predictions.
 * on_ready (may be NULL) is called per bucket as its gradients are complete. */
int m2_model_forward_backward(m2_model *m, const m2_real *params, m2_real *grads, const m2_real *X, const m2_real *Y,
                              int B, int T, int burn_in, double *sse, int64_t *count, m2_real *pred,
                              m2_bucket_ready_fn on_ready, void *user);

/* ---- backends, inference models, input gradients, per-op timing ---------------------------------------- */

/* As m2_model_create, on the given backend: params, grads, X, Y and pred passed to the model are then that
 * backend's memory (m2_model_create uses m2_ops_cpu()). The ops table must outlive the model. */
int m2_model_create_with_ops(m2_model **out, const m2_layout *lay, int max_B, int max_T, const m2_ops *ops);

/* As m2_model_create_with_ops, for m2_model_forward only (evaluation): it keeps one layer's activations instead of
 * every layer's for a backward (about L times less memory for them, so a device takes L times longer sequences);
 * m2_model_forward gives the same bits as on a training model. m2_model_forward_backward fails (M2_EUSAGE). */
int m2_model_create_inference(m2_model **out, const m2_layout *lay, int max_B, int max_T, const m2_ops *ops);

/* When on, m2_model_forward_backward also computes d(sse)/dX [B,T,F], readable with m2_model_input_grad
 * until the next call (backend memory). Off by default: the trainer does not need it. */
void m2_model_keep_input_grad(m2_model *m, int on);
const m2_real *m2_model_input_grad(const m2_model *m);

/* Per-op timing: the model wraps each ops call in a clock. M2_TIMING_WALL: the wall clock, with a backend
 * sync on each side (honest for an asynchronous backend too; it slows a GPU down, so for benchmarks only).
 * M2_TIMING_THREAD_CPU: the calling thread's CPU time, which on a shared machine counts only this
 * thread's own work; meaningful where the ops run on the calling thread (the CPU backend's lanes). */
enum { M2_TIMING_OFF = 0, M2_TIMING_WALL = 1, M2_TIMING_THREAD_CPU = 2 };
enum {
    M2_OPK_GEMM,  /* all GEMMs (embed, in_proj, out_proj, head and their gradients) */
    M2_OPK_NORM,  /* RMSNorm */
    M2_OPK_CONV,  /* conv1d + SiLU */
    M2_OPK_DT,    /* softplus dt, A = -exp(A_log) */
    M2_OPK_SSD,   /* chunked SSD */
    M2_OPK_GNORM, /* gated RMSNorm */
    M2_OPK_LOSS,  /* MSE loss */
    M2_OPK_OTHER, /* bias, residual add, memsets */
    M2_OPK_N
};
const char *m2_op_kind_name(int kind);
/* mode != M2_TIMING_OFF zeroes the counters and starts timing with that clock; M2_TIMING_OFF stops. */
void m2_model_set_timing(m2_model *m, int mode);
/* Seconds spent per op kind since timing started, in the forward (backward = 0) or the backward (1; this
 * includes the forward values the backward recomputes), as seen by lane 0 (the lanes do the same kind of
 * work side by side; without lanes, the only thread). */
void m2_model_op_seconds(const m2_model *m, int backward, double secs[M2_OPK_N]);

#endif
