#include "ref_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void rmsnorm(const double *v, const float *w, int n, double *out)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += v[i] * v[i];
    double r = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) out[i] = v[i] * r * w[i];
}

/* out [M] = W [M,K] v [K] */
static void matvec(const float *W, int M, int K, const double *v, double *out)
{
    for (int m = 0; m < M; m++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)W[(size_t)m * K + k] * v[k];
        out[m] = s;
    }
}

static double silu(double v) { return v / (1.0 + exp(-v)); }
static double softplus(double v) { return v > 20.0 ? v : log1p(exp(v)); }

void ref_session(const m2_layout *lay, const float *params, const float *X, int T, double *pred)
{
    const m2_dims *d = &lay->d;
    const int D = d->D, Di = d->Di, H = d->H, P = d->P, N = d->N, G = d->G, K = d->K, Cc = d->Cc, GN = G * N;
    double *hist = calloc((size_t)d->L * K * Cc, sizeof *hist); /* [L][K][Cc], row K-1 is the newest */
    double *S = calloc((size_t)d->L * H * P * N, sizeof *S);    /* [L][H][P][N] */
    double *h = malloc(D * sizeof *h), *u = malloc(D * sizeof *u), *zx = malloc(d->Win * sizeof *zx);
    double *xbc = malloc(Cc * sizeof *xbc), *y = malloc(Di * sizeof *y), *out = malloc(D * sizeof *out);
    double *f = malloc(d->F * sizeof *f);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < d->F; i++) f[i] = X[(size_t)t * d->F + i];
        matvec(params + lay->embed_w, D, d->F, f, h);
        for (int i = 0; i < D; i++) h[i] += params[lay->embed_b + i];
        for (int l = 0; l < d->L; l++) {
            const float *pl = params + m2_layer_base(lay, l);
            const m2_layer_offsets *o = &lay->layer;
            double *hl = hist + (size_t)l * K * Cc, *Sl = S + (size_t)l * H * P * N;
            rmsnorm(h, pl + o->norm_w, D, u);
            matvec(pl + o->W_in, d->Win, D, u, zx);
            memmove(hl, hl + Cc, (size_t)(K - 1) * Cc * sizeof *hl);
            memcpy(hl + (size_t)(K - 1) * Cc, zx + Di, Cc * sizeof *hl);
            for (int c = 0; c < Cc; c++) {
                double a = pl[o->conv_b + c];
                for (int k = 0; k < K; k++) a += (double)pl[o->conv_w + (size_t)c * K + k] * hl[(size_t)k * Cc + c];
                xbc[c] = silu(a);
            }
            const double *x = xbc, *B = xbc + Di, *C = xbc + Di + GN, *dt_raw = zx + 2 * Di + 2 * GN;
            for (int hh = 0; hh < H; hh++) {
                int g = hh / (H / G);
                double dt = softplus(dt_raw[hh] + pl[o->dt_bias + hh]);
                double decay = exp(dt * -exp((double)pl[o->A_log + hh]));
                for (int p = 0; p < P; p++) {
                    double *s = Sl + ((size_t)hh * P + p) * N, acc = 0;
                    for (int n = 0; n < N; n++) {
                        s[n] = decay * s[n] + dt * x[hh * P + p] * B[g * N + n];
                        acc += s[n] * C[g * N + n];
                    }
                    y[hh * P + p] = acc + pl[o->Dskip + hh] * x[hh * P + p];
                }
            }
            const int gs = Di / G;
            for (int g = 0; g < G; g++) {
                double ss = 0;
                for (int i = g * gs; i < (g + 1) * gs; i++) {
                    y[i] *= silu(zx[i]);
                    ss += y[i] * y[i];
                }
                double r = 1.0 / sqrt(ss / gs + 1e-5);
                for (int i = g * gs; i < (g + 1) * gs; i++) y[i] *= r * pl[o->gnorm_w + i];
            }
            matvec(pl + o->W_out, D, Di, y, out);
            for (int i = 0; i < D; i++) h[i] += out[i];
        }
        rmsnorm(h, params + lay->normf_w, D, u);
        matvec(params + lay->head_w, d->O, D, u, pred + (size_t)t * d->O);
        for (int i = 0; i < d->O; i++) pred[(size_t)t * d->O + i] += params[lay->head_b + i];
    }
    free(hist);
    free(S);
    free(h);
    free(u);
    free(zx);
    free(xbc);
    free(y);
    free(out);
    free(f);
}
