/* Shared by the model tests: a tiny model with every parameter moved off its init value (so that, e.g., a
 * transposed norm weight or a dropped bias shows up in a gradient), seeded inputs and targets, and the loss
 * computed on the host from predictions (for finite differences). */
#ifndef MAMBA2_TEST_MODEL_FIXTURE_H
#define MAMBA2_TEST_MODEL_FIXTURE_H

#include <stdint.h>

#include "base/layout.h"
#include "core/model.h"
#include "core/real.h"

typedef struct {
    m2_layout lay;
    m2_model *model;
    int B, T, burn_in;
    m2_real *params, *grads, *X, *Y, *pred;
} m2_fixture;

/* Dims of the tiny test model (F=3, O=2, D=8, L=2, E=2, P=4, N=4, K=4) with the given G and Q. */
m2_dims m2_fixture_dims(int G, int Q);
/* Layout, model (B x T), params (m2_params_init(seed) then perturbed), X ~ U(-1,1), Y ~ U(-1,1). */
void m2_fixture_init(m2_fixture *f, const m2_dims *d, int B, int T, int burn_in, uint64_t seed);
void m2_fixture_free(m2_fixture *f);
/* Sum of squared errors of pred against Y over t >= burn_in and finite targets (the model's loss). */
double m2_fixture_sse(const m2_fixture *f, const m2_real *pred);
/* sse of a forward pass with the fixture's params and X. */
double m2_fixture_loss(m2_fixture *f);
/* Zeroes grads and runs forward_backward; returns sse. */
double m2_fixture_backward(m2_fixture *f);

#endif
