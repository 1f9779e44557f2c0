/* Packed matrices and the GEMV/GEMM of the streaming engine (layout: stream/engine.h).
 *
 * With AVX-512 the kernel is written with intrinsics, because the accumulators must stay in registers across
 * the k loop. Measured on the build machine (one Zen 4 core, bench-style min-of-blocks): the GEMV of a whole
 * model runs at 1.00-1.06x the time of a plain read of its weight bytes (fp32), 1.2-1.3x (bf16); the batched
 * GEMM at 109-116 GFLOP/s for 64 streams, about the core's FMA peak (OpenBLAS sgemm: 88-93 GFLOP/s at the same
 * shapes). The plain C loops below (the fallback for builds without AVX-512), auto-vectorised by GCC 12 at
 * -O3 -march=native, run the fp32 GEMV 1.9-2.5x slower and the GEMM at 44-47 GFLOP/s, and bf16 there is no
 * faster than fp32 (the decoding costs what the halved bytes save): the fallback is for other CPUs. */
#include "stream/engine.h"

#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

void m2s_mat_plan(m2s_mat *m, int M, int K, size_t *cursor)
{
    int V = (M + M2S_VEC - 1) / M2S_VEC;
    m->M = M;
    m->K = K;
    m->n_panels = (V + M2S_MAX_NV - 1) / M2S_MAX_NV;
    m->nv_base = V / m->n_panels;
    m->n_extra = V % m->n_panels;
    m->offset = *cursor;
    *cursor += (size_t)V * M2S_VEC * K;
}

/* Round to nearest even; weights are finite, so no NaN case is needed. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Position of element (k, j) in a panel of nv vectors (w = 16 nv elements per k-row). fp32: row-major.
 * bf16: vectors 2q and 2q+1 are interleaved lane by lane, so one 64-byte load holds 16 lanes of both and two
 * cheap integer ops (shift, mask) turn it into two fp32 vectors; an odd last vector stays plain. */
static size_t panel_at(int k, int j, int nv, int bf16)
{
    const int w = nv * M2S_VEC, v = j / M2S_VEC, lane = j % M2S_VEC;
    if (!bf16 || (v % 2 == 0 && v + 1 == nv)) return (size_t)k * w + j;
    return (size_t)k * w + (size_t)M2S_VEC * (v - v % 2) + 2 * lane + v % 2;
}

void m2s_mat_pack(const m2s_mat *m, const float *W, void *mats, int bf16)
{
    for (int p = 0; p < m->n_panels; p++) {
        int nv, r0;
        m2s_panel(m, p, &nv, &r0);
        const int w = nv * M2S_VEC;
        size_t base = m->offset + (size_t)r0 * m->K;
        for (int k = 0; k < m->K; k++)
            for (int j = 0; j < w; j++) {
                int r = r0 + j;
                float v = r < m->M ? W[(size_t)r * m->K + k] : 0.0f;
                size_t at = base + panel_at(k, j, nv, bf16);
                if (bf16) ((uint16_t *)mats)[at] = to_bf16(v);
                else ((float *)mats)[at] = v;
            }
    }
}

#if defined(__AVX512F__)

enum { MAX_ACC = 24 };   /* accumulator registers of the largest tile (6 streams x 4 vectors) */

/* The NV weight vectors of one k-row (at element `at`) as fp32. bf16 pairs (layout: panel_at): the low
 * halves of the 32-bit words are vector v, the high halves vector v+1; a bf16 is the top half of an fp32. */
static inline __attribute__((always_inline)) void load_row(const void *P, size_t at, __m512 *wv, const int NV,
                                                           const int BF)
{
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
        if (!BF) {
            wv[v] = _mm512_loadu_ps((const float *)P + at + M2S_VEC * v);
        } else if (v % 2 == 0 && v + 1 < NV) {
            __m512i raw = _mm512_loadu_si512((const void *)((const uint16_t *)P + at + M2S_VEC * v));
            wv[v] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
            wv[v + 1] = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32((int)0xFFFF0000u)));
        } else if (v % 2 == 0) {
            __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)P + at + M2S_VEC * v));
            wv[v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
    }
}

/* y[s][16v + lane] = sum_k P[k][16v + lane] x[s][k] for NS streams and NV vectors of a panel whose k-rows
 * are w elements apart. U independent accumulator sets over interleaved k (summed at the end) keep at least
 * 8 FMA chains in flight when NS * NV is small. All bounds are compile-time constants at every call site,
 * so the loops unroll and acc lives in registers. */
static inline __attribute__((always_inline)) void tile(const void *P, int w, int K, const float *x, int ldx,
                                                       float *y, int ldy, const int NS, const int NV, const int U,
                                                       const int BF)
{
    /* A fixed-size array (a VLA would live on the stack): only the first U NS NV entries are used, all with
     * constant indices once the loops are unrolled, so GCC keeps them in registers. */
    __m512 acc[MAX_ACC];
#define ACC(u, s, v) acc[((u) * NS + (s)) * NV + (v)]
#pragma GCC unroll 32
    for (int i = 0; i < U * NS * NV; i++) acc[i] = _mm512_setzero_ps();
    int k = 0;
    for (; k + U <= K; k += U) {
#pragma GCC unroll 4
        for (int u = 0; u < U; u++) {
            __m512 wv[M2S_MAX_NV];
            load_row(P, (size_t)(k + u) * w, wv, NV, BF);
#pragma GCC unroll 8
            for (int s = 0; s < NS; s++) {
                __m512 xb = _mm512_set1_ps(x[(size_t)s * ldx + k + u]);
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) ACC(u, s, v) = _mm512_fmadd_ps(wv[v], xb, ACC(u, s, v));
            }
        }
    }
    for (; k < K; k++) {
        __m512 wv[M2S_MAX_NV];
        load_row(P, (size_t)k * w, wv, NV, BF);
#pragma GCC unroll 8
        for (int s = 0; s < NS; s++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)s * ldx + k]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) ACC(0, s, v) = _mm512_fmadd_ps(wv[v], xb, ACC(0, s, v));
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            __m512 t = ACC(0, s, v);
#pragma GCC unroll 4
            for (int u = 1; u < U; u++) t = _mm512_add_ps(t, ACC(u, s, v));
            _mm512_storeu_ps(y + (size_t)s * ldy + M2S_VEC * v, t);
        }
    }
#undef ACC
}

/* One stream, a whole panel of nv vectors: the latency path. */
static void gemv_panel(const void *P, int nv, int K, const float *x, float *y, int bf16)
{
    const int w = nv * M2S_VEC;
#define GEMV(NV, U)                                                                                                    \
    case NV:                                                                                                           \
        if (bf16) tile(P, w, K, x, 0, y, 0, 1, NV, U, 1);                                                              \
        else tile(P, w, K, x, 0, y, 0, 1, NV, U, 0);                                                                   \
        break
    switch (nv) {
        GEMV(1, 4); GEMV(2, 4); GEMV(3, 3); GEMV(4, 2); GEMV(5, 2); GEMV(6, 2); GEMV(7, 1); GEMV(8, 1);
    }
#undef GEMV
}

/* Tiles of up to 6 streams x 4 vectors (24 accumulators + 4 weight vectors + 1 broadcast <= 32 registers):
 * each weight vector loaded serves 6 FMAs, each 4-vector column block (K x 64 floats) is reused from L1 by
 * every stream tile. */
enum { TILE_NS = 6, TILE_NV = 4 };

static void gemm_block(const void *P, int w, int K, const float *x, int ldx, float *y, int ldy, int ns, int nv,
                       int bf16)
{
#define T(NS, NV)                                                                                                      \
    case NS * 8 + NV:                                                                                                  \
        if (bf16) tile(P, w, K, x, ldx, y, ldy, NS, NV, 1, 1);                                                         \
        else tile(P, w, K, x, ldx, y, ldy, NS, NV, 1, 0);                                                              \
        break
#define T4(NS) T(NS, 1); T(NS, 2); T(NS, 3); T(NS, 4)
    switch (ns * 8 + nv) {
        T4(1); T4(2); T4(3); T4(4); T4(5); T4(6);
    }
#undef T4
#undef T
}

static void gemm_panel(const void *P, int nv, int K, int n, const float *x, int ldx, float *y, int ldy, int bf16)
{
    const int w = nv * M2S_VEC;
    const size_t esz = bf16 ? 2 : 4;
    for (int v0 = 0; v0 < nv; v0 += TILE_NV) {
        int nvb = nv - v0 < TILE_NV ? nv - v0 : TILE_NV;
        const void *Pv = (const char *)P + (size_t)v0 * M2S_VEC * esz;
        for (int s0 = 0; s0 < n; s0 += TILE_NS) {
            int nsb = n - s0 < TILE_NS ? n - s0 : TILE_NS;
            gemm_block(Pv, w, K, x + (size_t)s0 * ldx, ldx, y + (size_t)s0 * ldy + v0 * M2S_VEC, ldy, nsb, nvb,
                       bf16);
        }
    }
}

#else /* portable fallback */

static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* k-row k of a panel as fp32: the row itself (fp32), or decoded into buf (undoing the bf16 pair interleave
 * of panel_at). */
static const float *decode_row(const void *P, int k, int nv, int bf16, float *buf)
{
    const int w = nv * M2S_VEC;
    if (!bf16) return (const float *)P + (size_t)k * w;
    float *row = buf;
    const uint16_t *src = (const uint16_t *)P + (size_t)k * w;
    for (int v = 0; v < nv; v += 2) {
        const uint16_t *q = src + M2S_VEC * v;
        if (v + 1 < nv) {
            /* a pair as 16 32-bit words: low halves are vector v, high halves vector v+1 (vectorises) */
            uint32_t words[M2S_VEC], lo[M2S_VEC], hi[M2S_VEC];
            memcpy(words, q, sizeof words);
            for (int l = 0; l < M2S_VEC; l++) {
                lo[l] = words[l] << 16;
                hi[l] = words[l] & 0xFFFF0000u;
            }
            memcpy(row + M2S_VEC * v, lo, sizeof lo);
            memcpy(row + M2S_VEC * (v + 1), hi, sizeof hi);
        } else {
            for (int l = 0; l < M2S_VEC; l++) row[M2S_VEC * v + l] = bf16_to_float(q[l]);
        }
    }
    return row;
}

static void gemm_panel(const void *P, int nv, int K, int n, const float *x, int ldx, float *y, int ldy, int bf16)
{
    const int w = nv * M2S_VEC;
    float buf[M2S_MAX_NV * M2S_VEC];
    for (int s = 0; s < n; s++) memset(y + (size_t)s * ldy, 0, (size_t)w * sizeof *y);
    for (int k = 0; k < K; k++) {
        const float *restrict row = decode_row(P, k, nv, bf16, buf);
        for (int s = 0; s < n; s++) {
            float *restrict ys = y + (size_t)s * ldy;
            const float xv = x[(size_t)s * ldx + k];
            for (int j = 0; j < w; j++) ys[j] += row[j] * xv;
        }
    }
}

static void gemv_panel(const void *P, int nv, int K, const float *x, float *y, int bf16)
{
    gemm_panel(P, nv, K, 1, x, 0, y, 0, bf16);
}

#endif

void m2s_gemm(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx, float *y, int ldy)
{
    const size_t esz = bf16 ? 2 : 4;
    for (int p = 0; p < m->n_panels; p++) {
        int nv, r0;
        m2s_panel(m, p, &nv, &r0);
        const void *P = (const char *)mats + (m->offset + (size_t)r0 * m->K) * esz;
        if (n == 1) gemv_panel(P, nv, m->K, x, y + r0, bf16);
        else gemm_panel(P, nv, m->K, n, x, ldx, y + r0, ldy, bf16);
    }
}
