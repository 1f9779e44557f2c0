/* Significance of an information coefficient (docs/MODEL.md §11 "Significance"): the Pearson IC of a prediction
 * column against its target with a standard error that accounts for overlapping forward-return windows, and the
 * paired difference of two predictors' ICs on the same rows.
 *
 * Method: delta method with a heteroskedasticity- and autocorrelation-consistent (HAC) long-run variance. With a
 * and y standardised over the n rows used, ρ̂ = mean(a·y) and ρ̂ − ρ ≈ mean(ψ) with the influence function
 * ψ_t = a_t·y_t − ρ̂/2 · (a_t² + y_t²). Var(ρ̂) ≈ LRV(ψ) / n, LRV = γ_0 + 2 Σ_{k=1..L} w_k γ_k.
 * Targets at horizon H overlap by H − k rows at lag k, so under "no relation" the products are correlated up to
 * lag H − 1 and not beyond, whatever the predictor's own persistence: the truncated (Hansen–Hodrick) kernel,
 * w_k = 1 for k < H, is unbiased for that structure, where Bartlett weights (Newey–West, lag H) multiply
 * autocovariances that already fall as 1 − k/H by 1 − k/(H+1) and give about 2/3 of the variance for a
 * persistent predictor. tests/run/test_significance.c checks the standard error against simulations.
 * When the truncated sum is not positive (possible in small samples) the Bartlett estimate with lag 2H is used.
 * Rows are taken in order; rows whose target or either prediction is not finite are left out. */
#ifndef MAMBA2_SIGNIFICANCE_H
#define MAMBA2_SIGNIFICANCE_H

#include <stdint.h>

typedef struct {
    int64_t n;        /* rows used */
    double ic, se, t; /* IC, its standard error, ic / se */
} m2_ic_stat;

typedef struct {
    m2_ic_stat a, b;              /* each predictor on the common rows */
    double diff, diff_se, diff_t; /* a − b, its standard error (paired: the HAC of ψ_a − ψ_b), diff / diff_se */
} m2_ic_pair;

/* Column col of a and b [M, ld] (b may be NULL: then only pair->a is filled) against y [M, ld]; lag = the
 * horizon in rows. M2_EFAIL on out of memory. Fewer than 3 rows or a constant column: NaN statistics. */
int m2_ic_significance(const float *a, const float *b, const float *y, int64_t M, int ld, int col, int horizon,
                       m2_ic_pair *out);

/* The HAC long-run variance of x [n] (mean removed inside) with the kernel described above; exposed for tests. */
double m2_hac_lrv(const double *x, int64_t n, int horizon);

#endif
