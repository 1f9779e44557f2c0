/* Sequential fp64 SSD oracle: see ssd_oracle.h. Written straight from the recurrence, one (b, h) at a time. */
#include "ssd_oracle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Element views of the strided inputs for one (b, h). mag selects |value|. */
typedef struct {
    const m2_ssd_shape *s;
    const ssd_oracle_in *in;
    int b, h, g, mag;
} view;

static double pick(double v, int mag) { return mag ? fabs(v) : v; }
static size_t tok(const view *v, int t) { return (size_t)v->b * v->s->T + t; }
static double X(const view *v, int t, int p)
{
    return pick(v->in->x[tok(v, t) * v->s->ld_x + (size_t)v->h * v->s->P + p], v->mag);
}
static double Bv(const view *v, int t, int n)
{
    return pick(v->in->Bm[tok(v, t) * v->s->ld_bc + (size_t)v->g * v->s->N + n], v->mag);
}
static double Cv(const view *v, int t, int n)
{
    return pick(v->in->Cm[tok(v, t) * v->s->ld_bc + (size_t)v->g * v->s->N + n], v->mag);
}
static double DT(const view *v, int t) { return v->in->dt[tok(v, t) * v->s->H + v->h]; }
static double decay(const view *v, int t) { return exp(DT(v, t) * v->in->A[v->h]); }

static view view_of(const m2_ssd_shape *s, const ssd_oracle_in *in, int b, int h, int mag)
{
    view v = {.s = s, .in = in, .b = b, .h = h, .g = h / (s->H / s->G), .mag = mag};
    return v;
}

/* S ← exp(dt A) S + dt x Bᵀ at tick t. */
static void step(const view *v, int t, double *S)
{
    const int P = v->s->P, N = v->s->N;
    const double dec = decay(v, t), dt = DT(v, t);
    for (int p = 0; p < P; p++)
        for (int n = 0; n < N; n++) S[p * N + n] = dec * S[p * N + n] + dt * X(v, t, p) * Bv(v, t, n);
}

void ssd_oracle_forward(const m2_ssd_shape *s, const ssd_oracle_in *in, double *y, int magnitude)
{
    const int P = s->P, N = s->N, HP = s->H * s->P;
    double *S = malloc(sizeof(double) * P * N);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            const view v = view_of(s, in, b, h, magnitude);
            const double D = pick(in->D[h], magnitude);
            memset(S, 0, sizeof(double) * P * N);
            for (int t = 0; t < s->T; t++) {
                step(&v, t, S);
                for (int p = 0; p < P; p++) {
                    double acc = D * X(&v, t, p);
                    for (int n = 0; n < N; n++) acc += S[p * N + n] * Cv(&v, t, n);
                    y[tok(&v, t) * HP + (size_t)h * P + p] = acc;
                }
            }
        }
    free(S);
}

static void zero_grads(const m2_ssd_shape *s, const ssd_oracle_grad *gr)
{
    for (size_t r = 0; r < (size_t)s->B * s->T; r++) {
        memset(gr->dx + r * s->ld_x, 0, sizeof(double) * s->H * s->P);
        memset(gr->dBm + r * s->ld_bc, 0, sizeof(double) * s->G * s->N);
        memset(gr->dCm + r * s->ld_bc, 0, sizeof(double) * s->G * s->N);
        memset(gr->ddt + r * s->H, 0, sizeof(double) * s->H);
    }
    memset(gr->dA, 0, sizeof(double) * s->H);
    memset(gr->dD, 0, sizeof(double) * s->H);
}

/* Reverse mode through the recurrence of one (b, h); states[t] = S_t. */
static void backward_bh(const view *v, const double *dy, const double *states, double *dS, const ssd_oracle_grad *gr)
{
    const m2_ssd_shape *s = v->s;
    const int P = s->P, N = s->N, HP = s->H * s->P, h = v->h;
    const double D = pick(v->in->D[h], v->mag), A = pick(v->in->A[h], v->mag);
    memset(dS, 0, sizeof(double) * P * N);
    for (int t = s->T - 1; t >= 0; t--) {
        const size_t r = tok(v, t);
        const double *St = states + (size_t)t * P * N, *Sp = t > 0 ? St - P * N : NULL;
        double *dx = gr->dx + r * s->ld_x + (size_t)h * P;
        double *dB = gr->dBm + r * s->ld_bc + (size_t)v->g * N, *dC = gr->dCm + r * s->ld_bc + (size_t)v->g * N;
        /* y_t = S_t C_t + D x_t */
        for (int p = 0; p < P; p++) {
            const double g = pick(dy[r * HP + (size_t)h * P + p], v->mag);
            dx[p] += D * g;
            gr->dD[h] += g * X(v, t, p);
            for (int n = 0; n < N; n++) {
                dS[p * N + n] += g * Cv(v, t, n);
                dC[n] += St[p * N + n] * g;
            }
        }
        /* S_t = dec S_{t-1} + dt x_t B_tᵀ */
        const double dec = decay(v, t), dt = DT(v, t);
        double q = 0, xdsb = 0;
        for (int p = 0; p < P; p++)
            for (int n = 0; n < N; n++) {
                const double d = dS[p * N + n];
                if (Sp) q += d * Sp[p * N + n];
                xdsb += X(v, t, p) * d * Bv(v, t, n);
                dx[p] += dt * d * Bv(v, t, n);
                dB[n] += dt * d * X(v, t, p);
            }
        gr->ddt[r * s->H + h] = A * dec * q + xdsb;
        gr->dA[h] += dt * dec * q;
        for (int i = 0; i < P * N; i++) dS[i] *= dec;
    }
}

int ssd_oracle_backward(const m2_ssd_shape *s, const ssd_oracle_in *in, const double *dy, const ssd_oracle_grad *gr,
                        int magnitude)
{
    const size_t pn = (size_t)s->P * s->N;
    double *states = malloc(sizeof(double) * pn * s->T), *dS = malloc(sizeof(double) * pn);
    if (!states || !dS) {
        free(states);
        free(dS);
        return -1;
    }
    zero_grads(s, gr);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            const view v = view_of(s, in, b, h, magnitude);
            memset(dS, 0, sizeof(double) * pn);
            for (int t = 0; t < s->T; t++) {
                step(&v, t, dS);
                memcpy(states + (size_t)t * pn, dS, sizeof(double) * pn);
            }
            backward_bh(&v, dy, states, dS, gr);
        }
    free(states);
    free(dS);
    return 0;
}
