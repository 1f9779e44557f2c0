/* Extensions of the model API (model.h) owned by the model: choosing the backend, the input gradient (for
 * tests), and per-op timing (for the benchmark). Candidates for model.h once the trainer needs them. */
#ifndef MAMBA2_MODEL_EXT_H
#define MAMBA2_MODEL_EXT_H

#include "core/model.h"
#include "core/ops.h"

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
