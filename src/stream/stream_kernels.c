/* Per-tick element-wise kernels of the streaming engine: the norms' scales (their weights are folded into the
 * matrices, docs/MODEL.md §7), conv + SiLU, the SSM update, the gated norm's gate (§2), and the floor's read loop;
 * compiled once per instruction-set level (cmake/isa.cmake), the level's table at the end. Everything here works on
 * one stream's vectors; the engine (stream.c) loops over streams. Loops are written so GCC vectorises them without
 * -ffast-math: reductions go through 16 partial sums (element-wise, so no reassociation is needed), exp is m2_expf.
 * Where measured to help, vector intrinsics (stream_simd.h, AVX-512 or AVX2) take over: the norms' reductions,
 * SiLU, and the SSM update (whose accumulators must stay in registers). */
#include "stream/stream_simd.h"

#include <math.h>

#if M2S_SIMD
/* The first n values at p as one hardware vector (lanes from n on 0), and the store of its first n lanes: a
 * plain load or store for whole vectors, masked only in a tail. AMD's masked store (vmaskmovps) is microcoded,
 * many times a plain store's cost on Zen 3, so the loops over whole vectors must not pay it. */
static inline m2v v_load_n(const float *p, int n) { return n >= M2S_VW ? v_load(p) : v_maskload(v_mask(n), p); }
static inline void v_store_n(float *p, m2v v, int n)
{
    if (n >= M2S_VW)
        v_store(p, v);
    else
        v_maskstore(p, v_mask(n), v);
}
#endif

/* Sum of squares. It sits on the critical path of every norm (a handful of vectors, then rsqrt), so the
 * reduction is a tree: with vectors, two accumulators, a masked tail and a log-depth horizontal sum (the
 * portable loop's 16 partial sums are added one after another, ~50 cycles of latency per norm). */
static float sumsq(const float *restrict v, int n)
{
#if M2S_SIMD
    m2v a0 = v_zero(), a1 = v_zero();
    int i = 0;
    for (; i + 2 * M2S_VW <= n; i += 2 * M2S_VW) {
        m2v x0 = v_load(v + i), x1 = v_load(v + i + M2S_VW);
        a0 = v_fma(x0, x0, a0);
        a1 = v_fma(x1, x1, a1);
    }
    for (; i < n; i += M2S_VW) {
        m2v x = v_load_n(v + i, n - i);
        a0 = v_fma(x, x, a0);
    }
    return v_hsum(v_add(a0, a1));
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

/* out[i] = silu(v[i]) * (mul ? mul[i] : 1); out may be v or mul. */
static void silu_apply(float *out, const float *v, const float *mul, int n)
{
#if M2S_SIMD
    for (int i = 0; i < n; i += M2S_VW) {
        m2v s = v_silu(v_load_n(v + i, n - i));
        if (mul) s = v_mul(s, v_load_n(mul + i, n - i));
        v_store_n(out + i, s, n - i);
    }
#else
    for (int i = 0; i < n; i++) out[i] = m2_siluf(v[i]) * (mul ? mul[i] : 1.0f);
#endif
}

float m2s_rms_scale(const float *h, int n) { return 1.0f / sqrtf(sumsq(h, n) / (float)n + (float)M2_NORM_EPS); }

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
#if M2S_SIMD
        /* The taps, SiLU and the ring update in one pass over the channels, each vector stored once. The
         * oldest row (src[0] when K = 4) is overwritten only after its vector was read. */
        float *oldest = K > 1 ? ring + (size_t)pos * ldc : NULL;
        for (int c = 0; c < C; c += M2S_VW) {
            const int r = C - c;
            const m2v xn = v_load_n(xnew + c, r);
            m2v acc = v_fma(v_load_n(w[0] + c, r), v_load_n(src[0] + c, r), v_load_n(b + c, r));
            acc = v_fma(v_load_n(w[1] + c, r), v_load_n(src[1] + c, r), acc);
            acc = v_fma(v_load_n(w[2] + c, r), v_load_n(src[2] + c, r), acc);
            acc = v_fma(v_load_n(wl + c, r), xn, acc);
            v_store_n(out + c, v_silu(acc), r);
            if (oldest) v_store_n(oldest + c, xn, r);
        }
        return;
#else
        for (int c = 0; c < C; c++)
            out[c] = b[c] + w[0][c] * src[0][c] + w[1][c] * src[1][c] + w[2][c] * src[2][c] + wl[c] * xnew[c];
#endif
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

#if M2S_SIMD
/* Column blocks of the SSM update: at most 4 hardware vectors (AVX-512: 64 columns, AVX2: 32). */
enum { SSM_NH = 4 };

/* One head: S [N][P] <- a S + dt x B^T, y [P] = S C + Dh x, for NH <= SSM_NH hardware vectors of its P columns (NH
 * is a constant per instance). Each state element is loaded, updated, stored and multiplied into y once, 3
 * vector FP operations; the y accumulators, dt x and the broadcasts stay in registers. A y chain adds one FMA
 * per row, 4 cycles of latency: where a row has fewer than 4 vectors of work (NH <= 2) or registers are plenty
 * (AVX-512: 32), even and odd rows go to two accumulator sets so that the chain does not bound the loop; AVX2
 * at NH > 2 takes one row per step with one set (4 dt x, 4 y, a, b, c and the temporaries in its 16 registers:
 * two rows of two sets spilled). State rows are whole vectors: x is loaded masked (rem valid lanes from x on),
 * so the padding lanes of dt x are 0 and the state's padding stays 0; y is stored masked in its tail only.
 * pf != 0: each 64-byte line of the rows is also prefetched into L2 at that byte offset (the next stream). */
static inline __attribute__((always_inline)) void ssm_cols(float *Sh, int ldp, const float *B, const float *C,
                                                           const float *x, int rem, float dt, float a, float Dh, int N,
                                                           float *y, ptrdiff_t pf, const int NH)
{
    const int split = M2S_VW == 16 || NH <= 2;
    m2v av = v_set1(a), dxv[SSM_NH], y0[SSM_NH], y1[SSM_NH];
    for (int v = 0; v < NH; v++) {
        m2v xv = v_load_n(x + M2S_VW * v, rem - M2S_VW * v);
        dxv[v] = v_mul(v_set1(dt), xv);
        y0[v] = v_mul(v_set1(Dh), xv);
        y1[v] = v_zero();
    }
    int n = 0;
    if (split)
        for (; n + 2 <= N; n += 2) {
            m2v b0 = v_set1(B[n]), c0 = v_set1(C[n]), b1 = v_set1(B[n + 1]), c1 = v_set1(C[n + 1]);
            float *s0 = Sh + (size_t)n * ldp, *s1 = s0 + ldp;
            for (int v = 0; v < NH; v++) {
                if (pf && (M2S_VW * v) % 16 == 0) {
                    _mm_prefetch((const char *)(s0 + M2S_VW * v) + pf, _MM_HINT_T1);
                    _mm_prefetch((const char *)(s1 + M2S_VW * v) + pf, _MM_HINT_T1);
                }
                m2v t0 = v_fma(dxv[v], b0, v_mul(av, v_load(s0 + M2S_VW * v)));
                m2v t1 = v_fma(dxv[v], b1, v_mul(av, v_load(s1 + M2S_VW * v)));
                v_store(s0 + M2S_VW * v, t0);
                v_store(s1 + M2S_VW * v, t1);
                y0[v] = v_fma(t0, c0, y0[v]);
                y1[v] = v_fma(t1, c1, y1[v]);
            }
        }
    for (; n < N; n++) {
        m2v b0 = v_set1(B[n]), c0 = v_set1(C[n]);
        float *s0 = Sh + (size_t)n * ldp;
        for (int v = 0; v < NH; v++) {
            if (pf && (M2S_VW * v) % 16 == 0) _mm_prefetch((const char *)(s0 + M2S_VW * v) + pf, _MM_HINT_T1);
            m2v t0 = v_fma(dxv[v], b0, v_mul(av, v_load(s0 + M2S_VW * v)));
            v_store(s0 + M2S_VW * v, t0);
            y0[v] = v_fma(t0, c0, y0[v]);
        }
    }
    for (int v = 0; v < NH; v++) v_store_n(y + M2S_VW * v, split ? v_add(y0[v], y1[v]) : y0[v], rem - M2S_VW * v);
}

/* Every head of the layer: the P columns in blocks of at most SSM_NH hardware vectors. A second block re-reads
 * only B and C (from L1); each state element is still read and written once. */
static void ssm_heads_simd(const m2_dims *d, float *S, const float *xbc, const float *dt, const float *decay,
                           const float *Dskip, float *y, ptrdiff_t pf)
{
    const int P = d->P, N = d->N, GN = d->G * d->N, heads_per_group = d->H / d->G;
    const int ldp = (P + M2S_VEC - 1) / M2S_VEC * M2S_VEC, nh = ldp / M2S_VW;
    for (int h = 0; h < d->H; h++) {
        const int g = h / heads_per_group;
        const float *x = xbc + (size_t)h * P, *B = xbc + d->Di + (size_t)g * N, *C = xbc + d->Di + GN + (size_t)g * N;
        float *Sh = S + (size_t)h * N * ldp, *yh = y + (size_t)h * P;
        for (int v0 = 0; v0 < nh; v0 += SSM_NH) {
            const int c0 = M2S_VW * v0, rem = P - c0;
/* with and without the prefetches, so that the loop of the instance without has none */
#define COLS(NH, PF) ssm_cols(Sh + c0, ldp, B, C, x + c0, rem, dt[h], decay[h], Dskip[h], N, yh + c0, PF ? pf : 0, NH)
            switch ((nh - v0 < SSM_NH ? nh - v0 : SSM_NH) * 2 + (pf != 0)) {
            case 2: COLS(1, 0); break;
            case 3: COLS(1, 1); break;
            case 4: COLS(2, 0); break;
            case 5: COLS(2, 1); break;
            case 6: COLS(3, 0); break;
            case 7: COLS(3, 1); break;
            case 8: COLS(4, 0); break;
            default: COLS(4, 1); break;
            }
#undef COLS
        }
    }
}
#else
/* One head: S [N][P] <- a S + dt x B^T, y [P] = S C + Dh x. Portable version (the scalar level). */
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
#endif

#if M2S_SIMD
/* Lower bound of the exponents below: e^-87 is still a normal float, so no denormal reaches the state (a decay) or
 * the series (e^-|v|), as in m2_expf (base/vmath.h); v_exp's own bound is -100 on AVX-512. */
#define DT_EXP_LO (-87.0f)

/* a / b, correctly rounded (v_recip's estimate would add ~2 ulp to the softplus) */
#if M2_ISA_LEVEL == 2
static inline m2v v_div(m2v a, m2v b) { return _mm512_div_ps(a, b); }
#else
static inline m2v v_div(m2v a, m2v b) { return _mm256_div_ps(a, b); }
#endif

/* softplus(v) = max(v, 0) + log1p(t), t = e^-|v| in (0, 1], with log1p(t) = 2 atanh(s), s = t / (2 + t) in (0, 1/3]:
 * the atanh series to s^13 (its next term is below 1e-8 of the sum) needs no logarithm, so no exponent bits and
 * no second division. */
static inline m2v v_softplus(m2v v)
{
    const m2v t = v_exp(v_max(v_min(v, v_sub(v_zero(), v)), v_set1(DT_EXP_LO)));
    const m2v sv = v_div(t, v_add(v_set1(2.0f), t)), z = v_mul(sv, sv);
    m2v p = v_set1(1.0f / 13);
    p = v_fma(p, z, v_set1(1.0f / 11));
    p = v_fma(p, z, v_set1(1.0f / 9));
    p = v_fma(p, z, v_set1(1.0f / 7));
    p = v_fma(p, z, v_set1(1.0f / 5));
    p = v_fma(p, z, v_set1(1.0f / 3));
    p = v_fma(p, z, v_set1(1.0f));
    return v_fma(v_add(sv, sv), p, v_max(v, v_zero()));
}
#endif

void m2s_dt_decay(const float *A, const float *dt_bias, int H, int n, const float *dt_raw, int ld, float *restrict dt,
                  float *restrict decay)
{
    /* Gathered densely first (n H values, then zeros up to whole vectors), so that one flat loop does every
     * stream's heads: its exp/log/division chains are independent, which the core overlaps, where one stream's
     * few heads at a time were one dependent chain per layer (docs/MODEL.md §2 step 4). */
    const int nh = n * H, nhp = (nh + M2S_VEC - 1) / M2S_VEC * M2S_VEC;
#if M2S_SIMD
    if (n == 1) {
        /* One stream (the latency path): its H values are already dense, so they are read straight from the row.
         * The masked loads give the padding lanes 0 (and A 0), the values the gathered path below gives them: the
         * same results, without the gather's scalar stores, which the vector loads would wait for (a store is not
         * forwarded into a wider load) on the tick's critical path. Measured on one Zen 4 core, the call alone
         * at latency.ini's H = 2: 52 -> 21 ns (BENCHMARKS.md, issue 14, 2026-12-03). */
        for (int j = 0; j < nhp; j += M2S_VW) {
            const m2v sp = v_softplus(v_add(v_load_n(dt_raw + j, H - j), v_load_n(dt_bias + j, H - j)));
            v_store(dt + j, sp);
            v_store(decay + j, v_exp(v_max(v_mul(sp, v_load_n(A + j, H - j)), v_set1(DT_EXP_LO))));
        }
        return;
    }
#endif
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) dt[i * H + h] = dt_raw[(size_t)i * ld + h] + dt_bias[h];
    for (int j = nh; j < nhp; j++) dt[j] = 0.0f;
#if M2S_SIMD
    /* With vectors, A gathered the same way and both functions in one pass: for one stream these few vectors are
     * one latency chain on the tick's critical path (the SSM waits for it), shorter without a logarithm and
     * without the round trips through memory between the loops below. */
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) decay[i * H + h] = A[h];
    for (int j = nh; j < nhp; j++) decay[j] = 0.0f;
    for (int j = 0; j < nhp; j += M2S_VW) {
        const m2v sp = v_softplus(v_load(dt + j));
        v_store(dt + j, sp);
        v_store(decay + j, v_exp(v_max(v_mul(sp, v_load(decay + j)), v_set1(DT_EXP_LO))));
    }
#else
    for (int j = 0; j < nhp; j++) dt[j] = m2_softplusf(dt[j]);
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) decay[i * H + h] = dt[i * H + h] * A[h];
    for (int j = nh; j < nhp; j++) decay[j] = 0.0f;
    for (int j = 0; j < nhp; j++) decay[j] = m2_expf(decay[j]);
#endif
}

void m2s_ssm(const m2_dims *d, const float *Dskip, float *S, const float *xbc, const float *dt, const float *decay,
             float *y, const float *next)
{
#if M2S_SIMD
    ssm_heads_simd(d, S, xbc, dt, decay, Dskip, y, next ? (const char *)next - (const char *)S : 0);
#else
    (void)next;
    const int H = d->H, P = d->P, N = d->N, GN = d->G * d->N, heads_per_group = d->H / d->G;
    const int ldp = (P + M2S_VEC - 1) / M2S_VEC * M2S_VEC;
    for (int h = 0; h < H; h++) {
        const int g = h / heads_per_group;
        ssm_head(S + (size_t)h * N * ldp, xbc + d->Di + (size_t)g * N, xbc + d->Di + GN + (size_t)g * N,
                 xbc + (size_t)h * P, dt[h], decay[h], Dskip[h], N, P, ldp, y + (size_t)h * P);
    }
#endif
}

#if M2S_SIMD
/* y <- y silu(z) over n values, returning the sum of squares of the result: one pass, the products squared
 * while in registers (two accumulators, as in sumsq). */
static float silu_mul_sumsq(float *y, const float *z, int n)
{
    m2v a0 = v_zero(), a1 = v_zero(); /* named, not an array indexed by parity: that went through memory */
    int i = 0;
    for (; i + 2 * M2S_VW <= n; i += 2 * M2S_VW) {
        m2v t0 = v_mul(v_silu(v_load(z + i)), v_load(y + i));
        m2v t1 = v_mul(v_silu(v_load(z + i + M2S_VW)), v_load(y + i + M2S_VW));
        v_store(y + i, t0);
        v_store(y + i + M2S_VW, t1);
        a0 = v_fma(t0, t0, a0);
        a1 = v_fma(t1, t1, a1);
    }
    for (; i < n; i += M2S_VW) {
        m2v t = v_mul(v_silu(v_load_n(z + i, n - i)), v_load_n(y + i, n - i));
        v_store_n(y + i, t, n - i);
        a0 = v_fma(t, t, a0);
    }
    return v_hsum(v_add(a0, a1));
}
#endif

float m2s_gate(float *y, const float *restrict z, int Di, int G)
{
    const int gs = Di / G;
#if !M2S_SIMD
    silu_apply(y, z, y, Di);
#endif
    float r = 1.0f;
    for (int g = 0; g < G; g++) {
        float *yg = y + (size_t)g * gs;
#if M2S_SIMD
        const float ss = silu_mul_sumsq(yg, z + (size_t)g * gs, gs);
#else
        const float ss = sumsq(yg, gs);
#endif
        r = 1.0f / sqrtf(ss / (float)gs + (float)M2_NORM_EPS);
        if (G > 1)
            for (int i = 0; i < gs; i++) yg[i] *= r;
    }
    return G > 1 ? 1.0f : r;
}

/* The weight-streaming floor's read loop (stream_timing.c): n bytes (a multiple of 64) with the widest loads
 * of this level and four independent accumulators, so that both load ports stay busy; the result depends on
 * every byte so the compiler cannot drop the reads. The same width as the kernels: a floor read with narrower
 * loads than a tick's would be slower than the tick can be. */
static uint64_t read_bytes(const void *buf, size_t n)
{
    const uint64_t *p = buf;
    uint64_t acc[32] = {0};
    size_t i = 0;
    /* 256 bytes a step as 32 words: GCC turns this into four vector ORs of the level's width */
    for (; i + 32 <= n / 8; i += 32)
        for (int j = 0; j < 32; j++) acc[j] |= p[i + j];
    for (; i < n / 8; i++) acc[0] |= p[i];
    uint64_t r = 0;
    for (int j = 0; j < 32; j++) r |= acc[j];
    return r;
}

const m2s_kernels M2_ISA_FN(m2s_kernels) = {
    .level = (m2_cpu_level)M2_ISA_LEVEL,
    .gemm = m2s_gemm,
    .rms_scale = m2s_rms_scale,
    .conv_silu = m2s_conv_silu,
    .dt_decay = m2s_dt_decay,
    .ssm = m2s_ssm,
    .gate = m2s_gate,
    .read_bytes = read_bytes,
};
