/* The linear baseline of mamba2_eval: ridge regression of each target on the CURRENT tick's features plus an
 * intercept, fitted on the train split (one independent fit per horizon, because the rows with a NaN target
 * differ per horizon).
 *
 * Per horizon o, over the n_o train rows whose target is finite (and whose features are finite), with
 * x̃ = [x, 1]:  minimise Σ (x̃ᵀw − y)² + λ n_o ‖w[0..F)‖²   (the intercept is not penalised).
 * The (F+1)×(F+1) normal equations (X̃ᵀX̃ + λ n_o diag(1,…,1,0)) w = X̃ᵀy are accumulated and solved by
 * Cholesky, all in double.
 *
 * λ: the features are z-scored on the train split, so X̃ᵀX̃ / n_o is close to the correlation matrix (unit
 * diagonal). M2_RIDGE_LAMBDA = 1e-3 adds 0.1% to that diagonal: it shrinks the weights by about 0.1% (far below
 * the sampling noise of any fit on thousands of rows), yet keeps the system positive definite when a feature is
 * constant or two features are collinear (a constant feature is otherwise exactly collinear with the
 * intercept). Scaling by n_o makes the choice independent of the split's size. */
#ifndef MAMBA2_RIDGE_H
#define MAMBA2_RIDGE_H

#include <stdint.h>

#define M2_RIDGE_LAMBDA 1e-3

typedef struct {
    int F, O;
    double lambda;
    double *w;      /* [O, F+1]: per horizon F feature weights, then the intercept */
    int64_t *n_fit; /* [O] rows used per horizon */
} m2_ridge;

/* Fits on rows [0, n_rows) of X [n_rows, F] and y [n_rows, O] (row-major). A horizon with no finite target
 * or a system that is not positive definite: M2_EFAIL with a message naming the horizon. */
int m2_ridge_fit(m2_ridge *r, const float *X, const float *y, int64_t n_rows, int F, int O, double lambda);

/* pred[i*O + o] for the rows X [n_rows, F]; computed in double, stored as float. */
void m2_ridge_predict(const m2_ridge *r, const float *X, int64_t n_rows, float *pred);

/* Prediction for one row x [F] and horizon o. */
double m2_ridge_predict_one(const m2_ridge *r, const float *x, int o);

void m2_ridge_free(m2_ridge *r);

/* Solves A w = b for a symmetric positive definite A [n, n] (row-major, overwritten by its Cholesky factor);
 * b is overwritten by w. M2_EFAIL when A is not positive definite. Exposed for tests. */
int m2_cholesky_solve(double *A, double *b, int n);

#endif
