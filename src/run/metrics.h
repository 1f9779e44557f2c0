/* Evaluation metrics of one prediction column against its target column (docs/CLI.md mamba2_eval), in double.
 *
 * Rows whose target is not finite (NaN where a horizon crosses a session end) are left out of everything.
 * Definitions over the n remaining rows (p = prediction, y = target):
 *   mse       = Σ (p − y)² / n
 *   mse_zero  = Σ y² / n                                   (the zero predictor: "no move")
 *   r2        = 1 − Σ (p − y)² / Σ (y − ȳ)²               (coefficient of determination; NaN when Σ (y − ȳ)² = 0)
 *   ic        = Pearson correlation of p and y
 *   rank_ic   = Spearman correlation: Pearson of the ranks, ties get the average of the ranks they span
 *   dir_acc   = fraction of rows with y ≠ 0 where sign(p) = sign(y) (p = 0 counts as a miss), over n_dir rows
 * Defined edge cases: n = 0 → every metric NaN; a constant p or a constant y → ic = rank_ic = 0 (a constant
 * carries no ranking information); n_dir = 0 → dir_acc NaN; any non-finite prediction on a kept row → every
 * prediction-dependent metric NaN (a diverged model must not look good). */
#ifndef MAMBA2_METRICS_H
#define MAMBA2_METRICS_H

#include <stdint.h>

typedef struct {
    int64_t n;     /* rows with a finite target */
    int64_t n_dir; /* of those, rows with a nonzero target */
    double mse, mse_zero, r2, ic, rank_ic, dir_acc;
} m2_metrics;

/* Metrics of column `col` of pred [M, ld] against target [M, ld] (row-major, ld = number of horizons).
 * M2_OK, or M2_EFAIL when the rank scratch cannot be allocated. */
int m2_metrics_compute(const float *pred, const float *target, int64_t M, int ld, int col, m2_metrics *out);

/* Spearman correlation helper, exposed for tests: writes into rank[i] the average rank (1-based) of v[i]. */
int m2_average_ranks(const double *v, int64_t n, double *rank);

#endif
