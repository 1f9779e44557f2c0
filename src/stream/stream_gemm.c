/* The GEMV/GEMM of the streaming engine over packed panels (layout: stream/engine.h, stream_pack.c), compiled
 * once per instruction-set level (cmake/isa.cmake) and chosen at open (base/cpu.h).
 *
 * With AVX-512 or AVX2 the kernel is written against stream_simd.h, because the accumulators must stay in
 * registers across the k loop. Measured with AVX-512 (one Zen 4 core, bench-style min-of-blocks): the GEMV of a
 * whole model runs at 1.00-1.06x the time of a plain read of its weight bytes (fp32), 1.2-1.3x (bf16); the
 * batched GEMM at 109-116 GFLOP/s for 64 streams, about the core's FMA peak (OpenBLAS sgemm: 88-93 GFLOP/s at
 * the same shapes). AVX2 has 16 registers of 8 lanes instead of 32 of 16, so its tiles are smaller (below).
 * The plain C loops (the scalar level), auto-vectorised by GCC 12 at -O3 for baseline x86-64 (SSE2), are for
 * CPUs without AVX2; bf16 there is no faster than fp32 (the decoding costs what the halved bytes save). */
#include "stream/stream_simd.h"

#include <string.h>

#if M2S_SIMD

enum { MAX_ACC = 24 }; /* accumulator registers of the largest tile (AVX-512: 6 streams x 4 vectors) */

/* The NV logical vectors of one k-row (at element `at`) as NV * M2S_VR fp32 hardware vectors, wv[v VR + r] =
 * lanes [r VW, (r+1) VW) of vector v. bf16 pairs (layout: stream_pack.c): the low halves of the 32-bit words
 * are vector v, the high halves vector v+1; a bf16 is the top half of an fp32. */
static inline __attribute__((always_inline)) void load_row(const void *P, size_t at, m2v *wv, const int NV,
                                                           const int BF)
{
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
#pragma GCC unroll 2
        for (int r = 0; r < M2S_VR; r++) {
            const size_t e = at + (size_t)M2S_VEC * v;
            if (!BF) {
                wv[v * M2S_VR + r] = v_load((const float *)P + e + M2S_VW * r);
            } else if (v % 2 == 0 && v + 1 < NV) {
                m2vi raw = v_loadi((const uint16_t *)P + e + 2 * M2S_VW * r);
                wv[v * M2S_VR + r] = v_bf16_lo(raw);
                wv[(v + 1) * M2S_VR + r] = v_bf16_hi(raw);
            } else if (v % 2 == 0) {
                wv[v * M2S_VR + r] = v_bf16_plain((const uint16_t *)P + e + M2S_VW * r);
            }
        }
    }
}

/* y[s][16v + lane] = sum_k P[k][16v + lane] x[s][k] for NS streams and NV vectors of a panel whose k-rows
 * are w elements apart. U independent accumulator sets over interleaved k (summed at the end) keep at least
 * 8 FMA chains in flight when NS * NV is small. All bounds are compile-time constants at every call site,
 * so the loops unroll and acc lives in registers. */
static inline __attribute__((always_inline)) void tile(const void *P, int w, int K, const float *x, int ldx, float *y,
                                                       int ldy, const int NS, const int NV, const int U, const int BF)
{
    /* A fixed-size array (a VLA would live on the stack): only the first U NS NV VR entries are used, all with
     * constant indices once the loops are unrolled, so GCC keeps them in registers. */
    m2v acc[MAX_ACC];
    const int NH = NV * M2S_VR; /* hardware vectors per stream */
#define ACC(u, s, h) acc[((u)*NS + (s)) * NH + (h)]
#pragma GCC unroll 32
    for (int i = 0; i < U * NS * NH; i++) acc[i] = v_zero();
    int k = 0;
    for (; k + U <= K; k += U) {
#pragma GCC unroll 4
        for (int u = 0; u < U; u++) {
            m2v wv[M2S_MAX_NV * M2S_VR];
            load_row(P, (size_t)(k + u) * w, wv, NV, BF);
#pragma GCC unroll 8
            for (int s = 0; s < NS; s++) {
                m2v xb = v_set1(x[(size_t)s * ldx + k + u]);
#pragma GCC unroll 16
                for (int h = 0; h < NH; h++) ACC(u, s, h) = v_fma(wv[h], xb, ACC(u, s, h));
            }
        }
    }
    for (; k < K; k++) {
        m2v wv[M2S_MAX_NV * M2S_VR];
        load_row(P, (size_t)k * w, wv, NV, BF);
#pragma GCC unroll 8
        for (int s = 0; s < NS; s++) {
            m2v xb = v_set1(x[(size_t)s * ldx + k]);
#pragma GCC unroll 16
            for (int h = 0; h < NH; h++) ACC(0, s, h) = v_fma(wv[h], xb, ACC(0, s, h));
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
#pragma GCC unroll 16
        for (int h = 0; h < NH; h++) {
            m2v t = ACC(0, s, h);
#pragma GCC unroll 4
            for (int u = 1; u < U; u++) t = v_add(t, ACC(u, s, h));
            v_store(y + (size_t)s * ldy + M2S_VW * h, t);
        }
    }
#undef ACC
}

#define TILE_CASE(NS, NV, U)                             \
    case (NS)*16 + (NV):                                 \
        if (bf16)                                        \
            tile(P, w, K, x, ldx, y, ldy, NS, NV, U, 1); \
        else                                             \
            tile(P, w, K, x, ldx, y, ldy, NS, NV, U, 0); \
        break

#if M2S_VW == 16
/* AVX-512. GEMV: one tile over the whole panel of nv <= 8 vectors (8 accumulators at most, U sets of them).
 * GEMM: tiles of up to 6 streams x 4 vectors (24 accumulators + 4 weight vectors + 1 broadcast <= 32
 * registers): each weight vector loaded serves 6 FMAs, each 4-vector column block (K x 64 floats) is reused
 * from L1 by every stream tile. */
enum { GEMV_NV = 8, TILE_NS = 6, TILE_NV = 4 };
static void gemv_block(const void *P, int w, int K, const float *x, float *y, int nv, int bf16)
{
    const int ldx = 0, ldy = 0;
    switch (16 + nv) {
        TILE_CASE(1, 1, 4);
        TILE_CASE(1, 2, 4);
        TILE_CASE(1, 3, 3);
        TILE_CASE(1, 4, 2);
        TILE_CASE(1, 5, 2);
        TILE_CASE(1, 6, 2);
        TILE_CASE(1, 7, 1);
        TILE_CASE(1, 8, 1);
    }
}
#define TILES(NS)        \
    TILE_CASE(NS, 1, 1); \
    TILE_CASE(NS, 2, 1); \
    TILE_CASE(NS, 3, 1); \
    TILE_CASE(NS, 4, 1)
#else
/* AVX2 (16 registers of 8 lanes). GEMV: column blocks of up to 4 vectors (8 accumulators; the block's rows are
 * 4 x 64 bytes apart, two to four sequential streams the prefetcher follows). GEMM: tiles of up to 6 streams x
 * 1 vector (12 accumulators + 2 weight registers + 1 broadcast) for fp32; bf16 decodes vector pairs, so its
 * tiles are 3 streams x 2 vectors (12 accumulators). */
enum { GEMV_NV = 4, TILE_NS = 6, TILE_NV = 2 };
static void gemv_block(const void *P, int w, int K, const float *x, float *y, int nv, int bf16)
{
    const int ldx = 0, ldy = 0;
    switch (16 + nv) {
        TILE_CASE(1, 1, 4);
        TILE_CASE(1, 2, 2);
        TILE_CASE(1, 3, 1);
        TILE_CASE(1, 4, 1);
    }
}
#define TILES(NS)        \
    TILE_CASE(NS, 1, 1); \
    TILE_CASE(NS, 2, 1)
#endif

static void gemm_block(const void *P, int w, int K, const float *x, int ldx, float *y, int ldy, int ns, int nv,
                       int bf16)
{
    switch (ns * 16 + nv) {
#if M2S_VW == 16
        TILES(1);
        TILES(2);
        TILES(3);
        TILES(4);
        TILES(5);
        TILES(6);
#else
        TILES(1);
        TILES(2);
        TILES(3);
        TILE_CASE(4, 1, 1);
        TILE_CASE(5, 1, 1);
        TILE_CASE(6, 1, 1);
#endif
    }
}
#undef TILES
#undef TILE_CASE

static void gemv_panel(const void *P, int nv, int K, const float *x, float *y, int bf16)
{
    const int w = nv * M2S_VEC;
    const size_t esz = bf16 ? 2 : 4;
    for (int v0 = 0; v0 < nv; v0 += GEMV_NV) {
        int nvb = nv - v0 < GEMV_NV ? nv - v0 : GEMV_NV;
        gemv_block((const char *)P + (size_t)v0 * M2S_VEC * esz, w, K, x, y + v0 * M2S_VEC, nvb, bf16);
    }
}

static void gemm_panel(const void *P, int nv, int K, int n, const float *x, int ldx, float *y, int ldy, int bf16)
{
    const int w = nv * M2S_VEC;
    const size_t esz = bf16 ? 2 : 4;
    /* AVX2 fp32 takes one vector per tile and 6 streams, bf16 a pair and 3 (see above) */
    const int tnv = M2S_VW == 16 ? TILE_NV : bf16 ? 2 : 1, tns = M2S_VW == 16 || !bf16 ? TILE_NS : 3;
    for (int v0 = 0; v0 < nv; v0 += tnv) {
        int nvb = nv - v0 < tnv ? nv - v0 : tnv;
        const void *Pv = (const char *)P + (size_t)v0 * M2S_VEC * esz;
        for (int s0 = 0; s0 < n; s0 += tns) {
            int nsb = n - s0 < tns ? n - s0 : tns;
            gemm_block(Pv, w, K, x + (size_t)s0 * ldx, ldx, y + (size_t)s0 * ldy + v0 * M2S_VEC, ldy, nsb, nvb, bf16);
        }
    }
}

#else /* the scalar level: portable C */

static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* k-row k of a panel as fp32: the row itself (fp32), or decoded into buf (undoing the bf16 pair interleave
 * of stream_pack.c). */
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
        if (n == 1)
            gemv_panel(P, nv, m->K, x, y + r0, bf16);
        else
            gemm_panel(P, nv, m->K, n, x, ldx, y + r0, ldy, bf16);
    }
}
