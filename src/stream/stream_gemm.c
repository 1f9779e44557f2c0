/* The GEMV/GEMM of the streaming engine over packed panels (layout: stream/engine.h, stream_pack.c), compiled
 * once per instruction-set level (cmake/isa.cmake) and chosen at open (base/cpu.h).
 *
 * With AVX-512 or AVX2 the kernel is written against stream_simd.h, because the accumulators must stay in
 * registers across the k loop. Measured with AVX-512 (one Zen 4 core, bench-style min-of-blocks): the GEMV of a
 * whole model runs at 1.00-1.06x the time of a plain read of its weight bytes (fp32); the
 * batched GEMM at 109-116 GFLOP/s for 64 streams, about the core's FMA peak (OpenBLAS sgemm: 88-93 GFLOP/s at
 * the same shapes). AVX2 has 16 registers of 8 lanes instead of 32 of 16, so its tiles are smaller (below).
 * The plain C loops (the scalar level), auto-vectorised by GCC 12 at -O3 for baseline x86-64 (SSE2), are for
 * CPUs without AVX2; bf16 there is no faster than fp32 (the decoding costs what the halved bytes save). */
#include "stream/stream_simd.h"

#include <string.h>

#ifndef M2_ISA_BF16DOT
#define M2_ISA_BF16DOT 0 /* 1 in the avx512bf16 object only (cmake/isa.cmake) */
#endif

/* The bf16 weight mode (docs/MODEL.md, "bf16 weights"): every level rounds the GEMV's input x to bf16 once
 * (round_rows) and sums the exact products of bf16 pairs in fp32, the pair's second product first, as
 * vdpbf16ps does; the panels hold k-pairs (stream_pack.c), so one 32-bit word is W[j][2q] (low half) and
 * W[j][2q+1] (high half). With AVX-512-BF16 (M2_ISA_BF16DOT) one vdpbf16ps does a word's two products; the
 * other levels widen each half by a shift or an and and do two FMAs. */

/* n rows of K values (stride ldx) into rows of Kp (K rounded up to even, the padding 0): bf16 bits with
 * the dot instruction, else their fp32 values, each pair's two swapped where swap is 1 (widened_gemm_panel). */
static void round_rows(const float *x, int ldx, int n, int K, int Kp, int swap, void *xq)
{
    for (int s = 0; s < n; s++) {
        const float *xs = x + (size_t)s * ldx;
#if M2_ISA_BF16DOT
        /* vcvtne2ps2bf16: the same rounding (nearest even, NaN quieted), but a denormal input becomes a zero,
         * which vdpbf16ps would take it for anyway (denormal inputs treated as zero) */
        uint16_t *q = (uint16_t *)xq + (size_t)s * Kp;
        for (int k = 0; k < Kp; k += 2 * M2S_VW) {
            const m2v lo = v_maskload(v_mask(K - k), xs + k), hi = v_maskload(v_mask(K - k - M2S_VW), xs + k + M2S_VW);
            const int left = Kp - k;
            const __mmask32 m = left >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << left) - 1);
            _mm512_mask_storeu_epi16(q + k, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
        (void)swap;
#else
        float *q = (float *)xq + (size_t)s * Kp;
        for (int k = 0; k < K; k++) {
            uint32_t b = m2_bf16_bits(xs[k]) << 16;
            memcpy(q + k, &b, sizeof b);
        }
        if (Kp > K) q[K] = 0.0f;
        /* a second pass, not q[k ^ swap] above: that index keeps GCC from vectorising the rounding (measured: 8 us
         * more per 64-stream pass of latency.ini) */
        if (swap)
            for (int k = 0; k < Kp; k += 2) {
                const float t = q[k];
                q[k] = q[k + 1];
                q[k + 1] = t;
            }
#endif
    }
}

#if M2S_SIMD

enum { MAX_ACC = 24 }; /* accumulator registers of the largest tile (AVX-512: 6 streams x 4 vectors) */

/* One row of a panel into one accumulator set a[s NH + h] (NH = NV M2S_VR hardware vectors per stream). A row
 * is 4 w bytes either way: fp32, one k (w floats); bf16, one k-pair (w words). x: fp32 values (fp32 weights, or
 * bf16-rounded on the widening levels) or bf16 bits (the dot level), rows ldx elements apart. */
static inline __attribute__((always_inline)) void step(const void *P, int w, int k, const void *x, int ldx, m2v *a,
                                                       const int NS, const int NV, const int BF)
{
    const int NH = NV * M2S_VR;
    if (!BF) {
        m2v wv[M2S_MAX_NV * M2S_VR];
        const float *row = (const float *)P + (size_t)k * w;
#pragma GCC unroll 16
        for (int h = 0; h < NH; h++) wv[h] = v_load(row + M2S_VW * h);
#pragma GCC unroll 8
        for (int s = 0; s < NS; s++) {
            m2v xb = v_set1(((const float *)x)[(size_t)s * ldx + k]);
#pragma GCC unroll 16
            for (int h = 0; h < NH; h++) a[s * NH + h] = v_fma(wv[h], xb, a[s * NH + h]);
        }
        return;
    }
    const uint16_t *row = (const uint16_t *)P + (size_t)2 * k * w;
#if M2_ISA_BF16DOT
    m2vi wr[M2S_MAX_NV];
#pragma GCC unroll 8
    for (int h = 0; h < NH; h++) wr[h] = _mm512_loadu_si512(row + 2 * M2S_VW * h);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
        uint32_t pair;
        memcpy(&pair, (const uint16_t *)x + (size_t)s * ldx + 2 * k, sizeof pair);
        const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)pair);
#pragma GCC unroll 8
        for (int h = 0; h < NH; h++) a[s * NH + h] = _mm512_dpbf16_ps(a[s * NH + h], (__m512bh)wr[h], xb);
    }
#else
    if (NS == 1 && M2S_VW == 8) {
        /* The AVX2 GEMV: each word loaded once, widened and used at once, so 8 accumulators, the word, its
         * halves, the two broadcasts and the mask fit in 16 ymm registers (the loop below holds all of a row's
         * widened vectors, and GCC then loads every word twice). */
        const m2v x1 = v_set1(((const float *)x)[2 * k + 1]), x0 = v_set1(((const float *)x)[2 * k]);
#pragma GCC unroll 16
        for (int h = 0; h < NH; h++) {
            const m2vi raw = v_loadi(row + 2 * M2S_VW * h);
            a[h] = v_fma(v_bf16_hi(raw), x1, a[h]);
            a[h] = v_fma(v_bf16_lo(raw), x0, a[h]);
        }
        return;
    }
#pragma GCC unroll 2
    for (int half = 1; half >= 0; half--) {
        m2v wv[M2S_MAX_NV * M2S_VR];
#pragma GCC unroll 16
        for (int h = 0; h < NH; h++) {
            /* AVX2's tiles of more than 8 accumulators have no register for the word (measured: 6% slower
             * at 64 streams with v_loadi; 10-20% faster with it at 8, in tiles of 4 streams) */
            const void *p = row + 2 * M2S_VW * h;
            const m2vi raw = M2S_VW == 8 && NS * NH > 8 ? v_loadi_fold(p) : v_loadi(p);
            wv[h] = half ? v_bf16_hi(raw) : v_bf16_lo(raw);
        }
#pragma GCC unroll 8
        for (int s = 0; s < NS; s++) {
            m2v xb = v_set1(((const float *)x)[(size_t)s * ldx + 2 * k + half]);
#pragma GCC unroll 16
            for (int h = 0; h < NH; h++) a[s * NH + h] = v_fma(wv[h], xb, a[s * NH + h]);
        }
    }
#endif
}

/* y[s][16v + lane] = sum over the panel's R rows (step) for NS streams and NV vectors of a panel whose rows
 * are 4 w bytes apart. U independent accumulator sets over interleaved rows (summed at the end) keep at least
 * 8 FMA chains in flight when NS * NV is small. All bounds are compile-time constants at every call site,
 * so the loops unroll and acc lives in registers. */
static inline __attribute__((always_inline)) void tile(const void *P, int w, int R, const void *x, int ldx, float *y,
                                                       int ldy, const int NS, const int NV, const int U, const int BF)
{
    /* A fixed-size array (a VLA would live on the stack): only the first U NS NV VR entries are used, all with
     * constant indices once the loops are unrolled, so GCC keeps them in registers. */
    m2v acc[MAX_ACC];
    const int NH = NV * M2S_VR; /* hardware vectors per stream */
#pragma GCC unroll 32
    for (int i = 0; i < U * NS * NH; i++) acc[i] = v_zero();
    int k = 0;
    for (; k + U <= R; k += U) {
#pragma GCC unroll 4
        for (int u = 0; u < U; u++) step(P, w, k + u, x, ldx, acc + u * NS * NH, NS, NV, BF);
    }
    for (; k < R; k++) step(P, w, k, x, ldx, acc, NS, NV, BF);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
#pragma GCC unroll 16
        for (int h = 0; h < NH; h++) {
            m2v t = acc[s * NH + h];
#pragma GCC unroll 4
            for (int u = 1; u < U; u++) t = v_add(t, acc[(u * NS + s) * NH + h]);
            v_store(y + (size_t)s * ldy + M2S_VW * h, t);
        }
    }
}

#define TILE_CASE(NS, NV, U)                             \
    case (NS)*16 + (NV):                                 \
        if (bf16)                                        \
            tile(P, w, R, x, ldx, y, ldy, NS, NV, U, 1); \
        else                                             \
            tile(P, w, R, x, ldx, y, ldy, NS, NV, U, 0); \
        break

#if M2S_VW == 16
/* AVX-512. GEMV: one tile over the whole panel of nv <= 8 vectors (8 accumulators at most, U sets of them; at least
 * 8 chains, and two sets from 7 vectors on: vdpbf16ps has 8 cycles' latency on Intel's Emerald Rapids, where one set
 * of 7 left the bf16 GEMV 3% slower (BENCHMARKS.md, "Intel Emerald Rapids"); fp32 and the widening path measured
 * the same either way). There a bf16 GEMV is bound by issue slots, not by the weights' bytes: vdpbf16ps, or a
 * shift, an and and two FMAs, take four of the two 512-bit ports' slots per 64-byte word line, ~2.2 cycles
 * against the ~1.5 the line takes to arrive from L2, where an fp32 line takes one FMA (BENCHMARKS.md, "Emerald
 * Rapids, continued").
 * GEMM: tiles of up to 6 streams x 4 vectors (24 accumulators + 4 weight vectors + 1 broadcast <= 32
 * registers): each weight vector loaded serves 6 FMAs, each 4-vector column block (R rows of 64 floats or
 * 64 bf16) is reused from L1 by every stream tile. */
enum { GEMV_NV = 8, GEMV_NV_BF16 = 8, TILE_NS = 6, TILE_NV = 4 };
static void gemv_block(const void *P, int w, int R, const void *x, float *y, int nv, int bf16)
{
    const int ldx = 0, ldy = 0;
    switch (16 + nv) {
        TILE_CASE(1, 1, 4);
        TILE_CASE(1, 2, 4);
        TILE_CASE(1, 3, 3);
        TILE_CASE(1, 4, 2);
        TILE_CASE(1, 5, 2);
        TILE_CASE(1, 6, 2);
        TILE_CASE(1, 7, 2);
        TILE_CASE(1, 8, 2);
    }
}
#define TILES(NS)        \
    TILE_CASE(NS, 1, 1); \
    TILE_CASE(NS, 2, 1); \
    TILE_CASE(NS, 3, 1); \
    TILE_CASE(NS, 4, 1)
#else
/* AVX2 (16 registers of 8 lanes). GEMV, fp32: one pass over a panel of up to 7 vectors (14 accumulators and
 * one broadcast; each weight vector is an FMA's memory operand), so the panel is read in address order; a panel
 * of 8 as two column blocks of 4 (rows 512 bytes apart, two sequential streams the prefetcher follows).
 * bf16: column blocks of up to 4 vectors (8 accumulators, the loaded words, their two halves, the two
 * broadcasts and the mask). GEMM: tiles of up to 6 streams x 1 vector (12 accumulators + 2 weight registers +
 * 1 broadcast), fp32 and bf16 alike. */
enum { GEMV_NV = 7, GEMV_NV_BF16 = 4, TILE_NS = 6, TILE_NV = 1 };
static void gemv_block(const void *P, int w, int R, const void *x, float *y, int nv, int bf16)
{
    const int ldx = 0, ldy = 0;
    switch (16 + nv) {
        TILE_CASE(1, 1, 4);
        TILE_CASE(1, 2, 2);
        TILE_CASE(1, 3, 1);
        TILE_CASE(1, 4, 1);
    case 16 + 5: tile(P, w, R, x, ldx, y, ldy, 1, 5, 1, 0); break;
    case 16 + 6: tile(P, w, R, x, ldx, y, ldy, 1, 6, 1, 0); break;
    case 16 + 7: tile(P, w, R, x, ldx, y, ldy, 1, 7, 1, 0); break;
    }
}
#define TILES(NS) TILE_CASE(NS, 1, 1)
#endif

static void gemm_block(const void *P, int w, int R, const void *x, int ldx, float *y, int ldy, int ns, int nv, int bf16)
{
    switch (ns * 16 + nv) {
        TILES(1);
        TILES(2);
        TILES(3);
        TILES(4);
        TILES(5);
        TILES(6);
    }
}
#undef TILES
#undef TILE_CASE

/* Part i of n split into `parts` near-equal parts, the larger ones first. */
static inline int part_size(int n, int parts, int i) { return n / parts + (i < n % parts); }

/* A column block v0 starts 64 v0 bytes into each row (16 fp32, or 16 words of bf16 pairs, per vector). */
static void gemv_panel(const void *P, int nv, int R, const void *x, float *y, int bf16)
{
    const int w = nv * M2S_VEC;
    const int widest = bf16 ? GEMV_NV_BF16 : GEMV_NV;
    const int blocks = (nv + widest - 1) / widest;
    for (int b = 0, v0 = 0; b < blocks; b++) {
        /* the widest blocks first; fp32 balances them (8 = 4 + 4, not 7 + 1) */
        int nvb = bf16 ? (nv - v0 < widest ? nv - v0 : widest) : part_size(nv, blocks, b);
        gemv_block((const char *)P + (size_t)v0 * 64, w, R, x, y + v0 * M2S_VEC, nvb, bf16);
        v0 += nvb;
    }
}

static void gemm_panel(const void *P, int nv, int R, int n, const void *x, int ldx, float *y, int ldy, int bf16)
{
    const int w = nv * M2S_VEC;
    const size_t xsz = M2_ISA_BF16DOT && bf16 ? 2 : 4; /* bytes of one x element */
    for (int v0 = 0; v0 < nv; v0 += TILE_NV) {
        int nvb = nv - v0 < TILE_NV ? nv - v0 : TILE_NV;
        const void *Pv = (const char *)P + (size_t)v0 * 64;
        /* stream tiles of near-equal size (8 = 4 + 4, not 6 + 2: a tile of 2 streams has too few accumulators to
         * keep both FMA pipes busy) */
        const int tiles = (n + TILE_NS - 1) / TILE_NS;
        for (int t = 0, s0 = 0; t < tiles; t++) {
            const int nsb = part_size(n, tiles, t);
            gemm_block(Pv, w, R, (const char *)x + (size_t)s0 * ldx * xsz, ldx, y + (size_t)s0 * ldy + v0 * M2S_VEC,
                       ldy, nsb, nvb, bf16);
            s0 += nsb;
        }
    }
}

#if M2S_VW == 8 && !M2_ISA_BF16DOT
/* AVX2, bf16, from WIDEN_STREAMS streams: the tiles of gemm_panel have no register left for a loaded word and
 * would load and widen it again in each of their n / 6 stream tiles (and twice per tile, once per half). Here
 * each column block is widened once into fp32 k-rows (buf, 64 bytes a row, in L1 or L2) in the order the bf16
 * mode sums a pair, its second product first: buf row 2q is the high halves (k = 2q + 1), row 2q + 1 the low
 * halves (k = 2q); the inputs come pair-swapped to match (round_rows), and the fp32 tiles (one accumulator
 * chain per output, k in buf order) then add the same products in the same order as the word-by-word path.
 * Measured on Zen 3 (bench_stream --gemm, latency.ini, 64 streams): 61 -> 47 us; fp32 43 us. Below 16 streams
 * the widening costs more than the reloads it saves. */
enum { WIDEN_STREAMS = 16 };
static void widened_gemm_panel(const void *P, int nv, int R, int n, const float *x, int ldx, float *y, int ldy,
                               float *buf)
{
    const int w = nv * M2S_VEC;
    const int tiles = (n + TILE_NS - 1) / TILE_NS;
    for (int v0 = 0; v0 < nv; v0++) {
        const uint16_t *Pv = (const uint16_t *)P + (size_t)v0 * 2 * M2S_VEC;
        for (int q = 0; q < R; q++) {
            const uint16_t *row = Pv + (size_t)2 * q * w;
#pragma GCC unroll 2
            for (int h = 0; h < M2S_VR; h++) {
                const m2vi raw = v_loadi(row + 2 * M2S_VW * h);
                v_store(buf + (size_t)2 * q * M2S_VEC + M2S_VW * h, v_bf16_hi(raw));
                v_store(buf + (size_t)(2 * q + 1) * M2S_VEC + M2S_VW * h, v_bf16_lo(raw));
            }
        }
        for (int t = 0, s0 = 0; t < tiles; t++) {
            const int nsb = part_size(n, tiles, t);
            gemm_block(buf, M2S_VEC, 2 * R, x + (size_t)s0 * ldx, ldx, y + (size_t)s0 * ldy + v0 * M2S_VEC, ldy, nsb, 1,
                       0);
            s0 += nsb;
        }
    }
}
#endif

#else /* the scalar level: portable C */

/* Row r of a panel as fp32: the k-row itself (fp32), or a k-pair's two k-rows decoded into buf (the low
 * halves of its words are k-row 2r, the high halves 2r+1; vectorises). */
static const float *decode_row(const void *P, int r, int nv, int bf16, float *buf)
{
    const int w = nv * M2S_VEC;
    if (!bf16) return (const float *)P + (size_t)r * w;
    uint32_t words[M2S_MAX_NV * M2S_VEC], lo[M2S_MAX_NV * M2S_VEC], hi[M2S_MAX_NV * M2S_VEC];
    memcpy(words, (const uint16_t *)P + (size_t)2 * r * w, (size_t)w * sizeof *words);
    for (int j = 0; j < w; j++) {
        lo[j] = words[j] << 16;
        hi[j] = words[j] & 0xFFFF0000u;
    }
    memcpy(buf, lo, (size_t)w * sizeof *lo);
    memcpy(buf + w, hi, (size_t)w * sizeof *hi);
    return buf;
}

static void gemm_panel(const void *P, int nv, int R, int n, const void *xv, int ldx, float *y, int ldy, int bf16)
{
    const int w = nv * M2S_VEC;
    const float *x = xv;
    float buf[2 * M2S_MAX_NV * M2S_VEC];
    for (int s = 0; s < n; s++) memset(y + (size_t)s * ldy, 0, (size_t)w * sizeof *y);
    for (int r = 0; r < R; r++) {
        const float *restrict row = decode_row(P, r, nv, bf16, buf);
        for (int s = 0; s < n; s++) {
            float *restrict ys = y + (size_t)s * ldy;
            if (!bf16) {
                const float xk = x[(size_t)s * ldx + r];
                for (int j = 0; j < w; j++) ys[j] += row[j] * xk;
            } else {
                /* the pair's second product first, then the first (the order of vdpbf16ps); both are exact */
                const float x0 = x[(size_t)s * ldx + 2 * r], x1 = x[(size_t)s * ldx + 2 * r + 1];
                for (int j = 0; j < w; j++) ys[j] = ys[j] + row[w + j] * x1 + row[j] * x0;
            }
        }
    }
}

static void gemv_panel(const void *P, int nv, int R, const void *x, float *y, int bf16)
{
    gemm_panel(P, nv, R, 1, x, 0, y, 0, bf16);
}

#endif

void m2s_gemm(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx, const float *scale,
              float *y, int ldy, void *xq)
{
    const size_t esz = bf16 ? 2 : 4;
#if M2S_VW == 8 && !M2_ISA_BF16DOT
    const int widen = bf16 && n >= WIDEN_STREAMS;
#else
    const int widen = 0;
#endif
    const void *xin = x;
    if (bf16) {
        round_rows(x, ldx, n, m->K, m->Kp, widen, xq);
        xin = xq;
        ldx = m->Kp;
    }
    const int R = bf16 ? m->Kp / 2 : m->K; /* panel rows: k-rows, or k-pairs */
    for (int p = 0; p < m->n_panels; p++) {
        int nv, r0;
        m2s_panel(m, p, &nv, &r0);
        const void *P = (const char *)mats + (m->offset + (size_t)r0 * m->Kp) * esz;
        if (n == 1) gemv_panel(P, nv, R, xin, y + r0, bf16);
#if M2S_VW == 8 && !M2_ISA_BF16DOT
        else if (widen)
            widened_gemm_panel(P, nv, R, n, xin, ldx, y + r0, ldy, (float *)xq + (size_t)n * m->Kp);
#endif
        else
            gemm_panel(P, nv, R, n, xin, ldx, y + r0, ldy, bf16);
    }
    if (scale) /* the M outputs only: the padding rows stay 0 whatever the scale (a NaN one included) */
        for (int s = 0; s < n; s++) {
            float *restrict ys = y + (size_t)s * ldy;
            const float c = scale[s];
            for (int j = 0; j < m->M; j++) ys[j] *= c;
        }
}
