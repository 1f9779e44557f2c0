/* Per-tick element-wise kernels of the streaming engine: norms, conv + SiLU, the SSM update, the gated norm
 * (docs/MODEL.md §2, §4). Everything here works on one stream's vectors; the engine (stream.c) loops over streams.
 * Loops are written so GCC vectorises them without -ffast-math: reductions go through 16 partial sums
 * (element-wise, so no reassociation is needed), exp is m2_expf. Where measured to help, AVX-512 intrinsics
 * take over: the norms' reductions, SiLU, and the SSM update (whose accumulators must stay in registers). */
#include "stream/engine.h"

#include <math.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Sum of squares. It sits on the critical path of every norm (a handful of vectors, then rsqrt), so the
 * reduction is a tree: with AVX-512, two accumulators, a masked tail and a log-depth horizontal sum (the
 * portable loop's 16 partial sums are added one after another, ~50 cycles of latency per norm). */
static float sumsq(const float *restrict v, int n)
{
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 2 * M2S_VEC <= n; i += 2 * M2S_VEC) {
        __m512 x0 = _mm512_loadu_ps(v + i), x1 = _mm512_loadu_ps(v + i + M2S_VEC);
        a0 = _mm512_fmadd_ps(x0, x0, a0);
        a1 = _mm512_fmadd_ps(x1, x1, a1);
    }
    for (; i < n; i += M2S_VEC) {
        __mmask16 m = n - i >= M2S_VEC ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, v + i);
        a0 = _mm512_fmadd_ps(x, x, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#else
    float part[M2S_VEC] = {0};
    int i = 0;
    for (; i + M2S_VEC <= n; i += M2S_VEC)
        for (int j = 0; j < M2S_VEC; j++) part[j] += v[i + j] * v[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += v[i] * v[i];
    for (int j = 0; j < M2S_VEC; j++) s += part[j];
    return s;
#endif
}

#if defined(__AVX512F__)
/* e^x for x clamped to [-100, 80], with AVX-512's own exponent instructions: n = round(x / ln 2) (roundscale),
 * r = x - n ln 2 in two steps, e^r by the same degree-6 polynomial as m2_expf, then scalef multiplies by 2^n:
 * about 13 vector ops instead of m2_expf's 18. The clamp keeps r exact and 1 + e^x finite with a normal
 * reciprocal (silu512); only silu uses it, where v e^v beyond those bounds is below 1e-33 either way. */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(80.0f)), _mm512_set1_ps(-100.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* v / (1 + e^-v), the division as a 14-bit reciprocal refined by one Newton step (~1 ulp; vdivps is the
 * slowest instruction of the loop). */
static inline __m512 silu512(__m512 v)
{
    __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    __m512 q = _mm512_rcp14_ps(d);
    q = _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.0f)));
    return _mm512_mul_ps(v, q);
}
#endif

/* out[i] = silu(v[i]) * (mul ? mul[i] : 1); out may be v or mul. */
static void silu_apply(float *out, const float *v, const float *mul, int n)
{
#if defined(__AVX512F__)
    for (int i = 0; i < n; i += M2S_VEC) {
        __mmask16 m = n - i >= M2S_VEC ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 s = silu512(_mm512_maskz_loadu_ps(m, v + i));
        if (mul) s = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, mul + i));
        _mm512_mask_storeu_ps(out + i, m, s);
    }
#else
    for (int i = 0; i < n; i++) out[i] = m2_siluf(v[i]) * (mul ? mul[i] : 1.0f);
#endif
}

void m2s_rmsnorm(const float *restrict h, const float *restrict w, int n, float *restrict u)
{
    float r = 1.0f / sqrtf(sumsq(h, n) / (float)n + (float)M2_NORM_EPS);
    for (int i = 0; i < n; i++) u[i] = h[i] * r * w[i];
}

void m2s_conv_silu(const float *restrict wT, const float *restrict b, float *restrict ring, int pos, int K, int C,
                   int ldc, const float *restrict xnew, float *restrict out)
{
    /* Taps in time order, oldest first, as in the window formula: b + sum_k w[k] x_{t-K+1+k}. */
    if (K <= 4) {
        /* One pass over the channels with three history taps. When K < 4 the unused taps take weight row 3,
         * which is zero then (packed that way), and read any valid row. */
        const float *src[3], *w[3];
        for (int k = 0; k < 3; k++) {
            src[k] = k < K - 1 ? ring + (size_t)((pos + k) % (K - 1)) * ldc : xnew;
            w[k] = wT + (size_t)(k < K - 1 ? k : 3) * ldc;
        }
        const float *wl = wT + (size_t)(K - 1) * ldc;
        for (int c = 0; c < C; c++)
            out[c] = b[c] + w[0][c] * src[0][c] + w[1][c] * src[1][c] + w[2][c] * src[2][c] + wl[c] * xnew[c];
    } else {
        for (int c = 0; c < C; c++) out[c] = b[c];
        for (int k = 0; k < K - 1; k++) {
            const float *src = ring + (size_t)((pos + k) % (K - 1)) * ldc;
            const float *wk = wT + (size_t)k * ldc;
            for (int c = 0; c < C; c++) out[c] += wk[c] * src[c];
        }
        const float *wl = wT + (size_t)(K - 1) * ldc;
        for (int c = 0; c < C; c++) out[c] += wl[c] * xnew[c];
    }
    silu_apply(out, out, NULL, C);
    if (K > 1) memcpy(ring + (size_t)pos * ldc, xnew, (size_t)C * sizeof *xnew);
}

/* One head: S [N][P] <- a S + dt x B^T, y [P] = S C + Dh x. Portable version. */
static void ssm_head(float *restrict S, const float *restrict B, const float *restrict C, const float *restrict x,
                     float dt, float a, float Dh, int N, int P, int ldp, float *restrict y)
{
    for (int p = 0; p < P; p++) y[p] = 0.0f;
    for (int n = 0; n < N; n++) {
        float *s = S + (size_t)n * ldp;
        const float bn = dt * B[n], cn = C[n];
        for (int p = 0; p < P; p++) {
            float v = a * s[p] + x[p] * bn;
            s[p] = v;
            y[p] += v * cn;
        }
    }
    for (int p = 0; p < P; p++) y[p] += Dh * x[p];
}

#if defined(__AVX512F__)
/* The same for P <= 64 in NVP = ceil(P / 16) vectors, every head of the layer in one call (NVP is a constant per
 * instance): the y accumulators stay in registers, in two sets (even and odd n) so that two FMA chains per
 * vector are in flight, and dt x and the D x term are folded in. State rows are whole vectors (ldp = 16 NVP):
 * x is loaded masked, so the padding lanes of dt x are 0 and the state's padding stays 0; only y is stored
 * masked. */
static inline __attribute__((always_inline)) void ssm_heads_avx(const m2_dims *d, float *S, const float *xbc,
                                                                const float *dt, const float *decay,
                                                                const float *Dskip, float *y, const int NVP)
{
    const int P = d->P, N = d->N, GN = d->G * d->N, heads_per_group = d->H / d->G, ldp = NVP * M2S_VEC;
    __mmask16 mk[NVP];
    for (int v = 0; v < NVP; v++)
        mk[v] = v < NVP - 1 || P % M2S_VEC == 0 ? (__mmask16)0xFFFF : (__mmask16)((1u << (P % M2S_VEC)) - 1);
    for (int h = 0; h < d->H; h++) {
        const int g = h / heads_per_group;
        const float *x = xbc + (size_t)h * P, *B = xbc + d->Di + (size_t)g * N, *C = xbc + d->Di + GN + (size_t)g * N;
        float *Sh = S + (size_t)h * N * ldp;
        __m512 av = _mm512_set1_ps(decay[h]), dtv = _mm512_set1_ps(dt[h]), xv[NVP], dxv[NVP], y0[NVP], y1[NVP];
        for (int v = 0; v < NVP; v++) {
            xv[v] = _mm512_maskz_loadu_ps(mk[v], x + M2S_VEC * v);
            dxv[v] = _mm512_mul_ps(dtv, xv[v]);
            y0[v] = _mm512_mul_ps(_mm512_set1_ps(Dskip[h]), xv[v]);
            y1[v] = _mm512_setzero_ps();
        }
        int n = 0;
        for (; n + 2 <= N; n += 2) {
            __m512 b0 = _mm512_set1_ps(B[n]), c0 = _mm512_set1_ps(C[n]);
            __m512 b1 = _mm512_set1_ps(B[n + 1]), c1 = _mm512_set1_ps(C[n + 1]);
            float *s0 = Sh + (size_t)n * ldp, *s1 = s0 + ldp;
            for (int v = 0; v < NVP; v++) {
                __m512 t0 = _mm512_fmadd_ps(dxv[v], b0, _mm512_mul_ps(av, _mm512_loadu_ps(s0 + M2S_VEC * v)));
                __m512 t1 = _mm512_fmadd_ps(dxv[v], b1, _mm512_mul_ps(av, _mm512_loadu_ps(s1 + M2S_VEC * v)));
                _mm512_storeu_ps(s0 + M2S_VEC * v, t0);
                _mm512_storeu_ps(s1 + M2S_VEC * v, t1);
                y0[v] = _mm512_fmadd_ps(t0, c0, y0[v]);
                y1[v] = _mm512_fmadd_ps(t1, c1, y1[v]);
            }
        }
        for (; n < N; n++) {
            __m512 b0 = _mm512_set1_ps(B[n]), c0 = _mm512_set1_ps(C[n]);
            float *s0 = Sh + (size_t)n * ldp;
            for (int v = 0; v < NVP; v++) {
                __m512 t0 = _mm512_fmadd_ps(dxv[v], b0, _mm512_mul_ps(av, _mm512_loadu_ps(s0 + M2S_VEC * v)));
                _mm512_storeu_ps(s0 + M2S_VEC * v, t0);
                y0[v] = _mm512_fmadd_ps(t0, c0, y0[v]);
            }
        }
        for (int v = 0; v < NVP; v++)
            _mm512_mask_storeu_ps(y + (size_t)h * P + M2S_VEC * v, mk[v], _mm512_add_ps(y0[v], y1[v]));
    }
}
#endif

void m2s_ssm(const m2_dims *d, const float *A, const float *dt_bias, const float *Dskip, float *S, const float *xbc,
             const float *dt_raw, float *y, float *scratch)
{
    const int H = d->H, P = d->P, N = d->N, GN = d->G * d->N, heads_per_group = d->H / d->G;
    /* All heads at once, over a whole number of vectors so that the loop vectorises without a scalar tail:
     * lanes past H read padding (dt_bias and A are zero-padded, dt_raw has slack) and are never used. */
    const int Hp = (H + M2S_VEC - 1) / M2S_VEC * M2S_VEC;
    float *restrict dt = scratch, *restrict decay = scratch + Hp;
    for (int h = 0; h < Hp; h++) {
        dt[h] = m2_softplusf(dt_raw[h] + dt_bias[h]);
        decay[h] = m2_expf(dt[h] * A[h]);
    }
#if defined(__AVX512F__)
    switch ((P + M2S_VEC - 1) / M2S_VEC) {
    case 1: ssm_heads_avx(d, S, xbc, dt, decay, Dskip, y, 1); return;
    case 2: ssm_heads_avx(d, S, xbc, dt, decay, Dskip, y, 2); return;
    case 3: ssm_heads_avx(d, S, xbc, dt, decay, Dskip, y, 3); return;
    case 4: ssm_heads_avx(d, S, xbc, dt, decay, Dskip, y, 4); return;
    }
#endif
    const int ldp = (P + M2S_VEC - 1) / M2S_VEC * M2S_VEC;
    for (int h = 0; h < H; h++) {
        const int g = h / heads_per_group;
        ssm_head(S + (size_t)h * N * ldp, xbc + d->Di + (size_t)g * N, xbc + d->Di + GN + (size_t)g * N,
                 xbc + (size_t)h * P, dt[h], decay[h], Dskip[h], N, P, ldp, y + (size_t)h * P);
    }
}

void m2s_gated_norm(float *y, const float *restrict z, const float *restrict w, int Di, int G)
{
    const int gs = Di / G;
    silu_apply(y, z, y, Di);
    for (int g = 0; g < G; g++) {
        float *yg = y + (size_t)g * gs;
        const float *wg = w + (size_t)g * gs;
        float r = 1.0f / sqrtf(sumsq(yg, gs) / (float)gs + (float)M2_NORM_EPS);
        for (int i = 0; i < gs; i++) yg[i] = yg[i] * r * wg[i];
    }
}
