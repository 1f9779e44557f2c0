/* Test-only oracle of the SSD: the sequential recurrence of docs/MODEL.md §2 step 5 in fp64, forward and its exact
 * backward by reverse mode through the recurrence (all states kept). Independent of src/core/ssd*.c; only the
 * shape struct (and its layouts, ssd.h) is shared, Q is ignored.
 *   S_t = exp(dt_t A_h) S_{t-1} + dt_t x_t B_tᵀ,  S_{-1} = 0,   y_t = S_t C_t + D_h x_t   (per b, h; g = h/(H/G))
 * Magnitude mode (magnitude != 0) evaluates the same sums with every factor replaced by its absolute value
 * (|x|, |B|, |C|, |D|, |dy|, and |A| where A multiplies rather than decays): the result bounds the sum of
 * absolute values of the terms that make up each output, the natural scale for a rounding-error tolerance. */
#ifndef MAMBA2_TEST_SSD_ORACLE_H
#define MAMBA2_TEST_SSD_ORACLE_H

#include "core/ssd.h"

typedef struct {
    const double *x;  /* [B,T,H*P] stride ld_x */
    const double *dt; /* [B,T,H] */
    const double *A;  /* [H] */
    const double *Bm; /* [B,T,G*N] stride ld_bc */
    const double *Cm; /* [B,T,G*N] stride ld_bc */
    const double *D;  /* [H] */
} ssd_oracle_in;

typedef struct {
    double *dx;  /* stride ld_x, only the H*P columns are written */
    double *ddt; /* [B,T,H] */
    double *dA;  /* [H] */
    double *dBm; /* stride ld_bc, only the G*N columns are written */
    double *dCm;
    double *dD; /* [H] */
} ssd_oracle_grad;

/* y [B,T,H*P] contiguous. */
void ssd_oracle_forward(const m2_ssd_shape *s, const ssd_oracle_in *in, double *y, int magnitude);

/* Gradients of sum(dy ∘ y) (dy [B,T,H*P] contiguous); every output is overwritten. Returns 0, or -1 when out
 * of memory (it keeps T states of P×N per (b, h)). */
int ssd_oracle_backward(const m2_ssd_shape *s, const ssd_oracle_in *in, const double *dy, const ssd_oracle_grad *gr,
                        int magnitude);

#endif
