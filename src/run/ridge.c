#include "run/ridge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int m2_cholesky_solve(double *A, double *b, int n)
{
    /* A = L Lᵀ with L stored in the lower triangle of A */
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (int k = 0; k < j; k++) d -= A[j * n + k] * A[j * n + k];
        if (!(d > 0)) return m2_fail(M2_EFAIL, "cholesky: matrix is not positive definite (pivot %d = %g)", j, d);
        double l = sqrt(d);
        A[j * n + j] = l;
        for (int i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++) s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / l;
        }
    }
    for (int i = 0; i < n; i++) { /* L z = b */
        double s = b[i];
        for (int k = 0; k < i; k++) s -= A[i * n + k] * b[k];
        b[i] = s / A[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) { /* Lᵀ w = z */
        double s = b[i];
        for (int k = i + 1; k < n; k++) s -= A[k * n + i] * b[k];
        b[i] = s / A[i * n + i];
    }
    return M2_OK;
}

static int row_is_finite(const float *x, int F)
{
    for (int j = 0; j < F; j++)
        if (!isfinite(x[j])) return 0;
    return 1;
}

/* Accumulates the upper triangle of X̃ᵀX̃ and X̃ᵀy over the usable rows of horizon o; returns their count. */
static int64_t accumulate(const float *X, const float *y, int64_t n_rows, int F, int O, int o, double *A, double *b)
{
    int n1 = F + 1;
    double xt[n1];
    int64_t n = 0;
    memset(A, 0, sizeof(double) * (size_t)n1 * (size_t)n1);
    memset(b, 0, sizeof(double) * (size_t)n1);
    for (int64_t r = 0; r < n_rows; r++) {
        float t = y[r * O + o];
        const float *x = X + r * F;
        if (!isfinite(t) || !row_is_finite(x, F)) continue;
        for (int j = 0; j < F; j++) xt[j] = x[j];
        xt[F] = 1.0;
        for (int i = 0; i < n1; i++) {
            for (int j = i; j < n1; j++) A[i * n1 + j] += xt[i] * xt[j];
            b[i] += xt[i] * t;
        }
        n++;
    }
    for (int i = 0; i < n1; i++) /* mirror into the lower triangle, which the Cholesky reads */
        for (int j = 0; j < i; j++) A[i * n1 + j] = A[j * n1 + i];
    return n;
}

int m2_ridge_fit(m2_ridge *r, const float *X, const float *y, int64_t n_rows, int F, int O, double lambda)
{
    int n1 = F + 1;
    memset(r, 0, sizeof *r);
    r->F = F;
    r->O = O;
    r->lambda = lambda;
    r->w = calloc((size_t)O * (size_t)n1, sizeof *r->w);
    r->n_fit = calloc((size_t)O, sizeof *r->n_fit);
    double *A = malloc(sizeof(double) * (size_t)n1 * (size_t)n1);
    int rc = (r->w && r->n_fit && A) ? M2_OK : m2_fail(M2_EFAIL, "ridge: out of memory");
    for (int o = 0; o < O && rc == M2_OK; o++) {
        double *w = r->w + (size_t)o * (size_t)n1;
        int64_t n = accumulate(X, y, n_rows, F, O, o, A, w);
        r->n_fit[o] = n;
        if (n == 0) {
            rc = m2_fail(M2_EFAIL, "ridge (horizon %d): no train row has a finite target", o);
            break;
        }
        for (int j = 0; j < F; j++) A[j * n1 + j] += lambda * (double)n;
        if (m2_cholesky_solve(A, w, n1) != M2_OK)
            rc = m2_fail(M2_EFAIL, "ridge (horizon %d): normal equations not positive definite over %lld rows", o,
                         (long long)n);
    }
    free(A);
    if (rc != M2_OK) m2_ridge_free(r);
    return rc;
}

double m2_ridge_predict_one(const m2_ridge *r, const float *x, int o)
{
    const double *w = r->w + (size_t)o * (size_t)(r->F + 1);
    double s = w[r->F];
    for (int j = 0; j < r->F; j++) s += w[j] * x[j];
    return s;
}

void m2_ridge_predict(const m2_ridge *r, const float *X, int64_t n_rows, float *pred)
{
    for (int64_t i = 0; i < n_rows; i++)
        for (int o = 0; o < r->O; o++) pred[i * r->O + o] = (float)m2_ridge_predict_one(r, X + i * r->F, o);
}

void m2_ridge_free(m2_ridge *r)
{
    free(r->w);
    free(r->n_fit);
    r->w = NULL;
    r->n_fit = NULL;
}
