/* The vector primitives of the streaming kernels for the level this object is compiled for (cmake/isa.cmake):
 * AVX-512 (16 fp32 lanes, M2S_VW = 16) or AVX2 + FMA (8 lanes). The kernels are written once against these;
 * a logical vector of the packed layout (M2S_VEC = 16 lanes, engine.h) is M2S_VR = 16 / M2S_VW hardware
 * vectors. Without either (the scalar level) M2S_SIMD is 0 and the kernels use their portable C loops.
 * Masks select the first n lanes of a hardware vector (n may be >= M2S_VW: all lanes). */
#ifndef MAMBA2_STREAM_SIMD_H
#define MAMBA2_STREAM_SIMD_H

#include "stream/engine.h"

#if M2_ISA_LEVEL == 2 /* AVX-512 */
#include <immintrin.h>
#define M2S_SIMD 1
#define M2S_VW   16
typedef __m512 m2v;
typedef __m512i m2vi;
typedef __mmask16 m2vm;
static inline m2v v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, m2v v) { _mm512_storeu_ps(p, v); }
static inline m2v v_set1(float x) { return _mm512_set1_ps(x); }
static inline m2v v_zero(void) { return _mm512_setzero_ps(); }
static inline m2v v_add(m2v a, m2v b) { return _mm512_add_ps(a, b); }
static inline m2v v_sub(m2v a, m2v b) { return _mm512_sub_ps(a, b); }
static inline m2v v_mul(m2v a, m2v b) { return _mm512_mul_ps(a, b); }
static inline m2v v_min(m2v a, m2v b) { return _mm512_min_ps(a, b); }
static inline m2v v_max(m2v a, m2v b) { return _mm512_max_ps(a, b); }
static inline m2v v_fma(m2v a, m2v b, m2v c) { return _mm512_fmadd_ps(a, b, c); }
static inline m2vm v_mask(int n) { return n >= M2S_VW ? (m2vm)0xFFFF : (m2vm)((1u << (n > 0 ? n : 0)) - 1); }
static inline m2v v_maskload(m2vm m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
static inline void v_maskstore(float *p, m2vm m, m2v v) { _mm512_mask_storeu_ps(p, m, v); }
static inline float v_hsum(m2v v) { return _mm512_reduce_add_ps(v); }
/* bf16 (layout: engine.h): 16 32-bit words whose low halves are k-row 2q's lanes, high halves k-row 2q+1's */
/* The empty asm makes the loaded words opaque, so GCC keeps one load in a register for both halves instead of
 * folding the load into the shift and again into the and (two loads of the same 64 bytes). Measured on one
 * core, min of blocks: the bf16 GEMV 5-14% faster (BENCHMARKS.md, issue 14). AVX2 (below) has it too, for its
 * GEMV's word-at-a-time order (stream_gemm.c, step). */
static inline m2vi v_loadi(const void *p)
{
    m2vi w = _mm512_loadu_si512(p);
    __asm__("" : "+v"(w));
    return w;
}
/* a plain load, which GCC may fold into the and, for loops with no register to spare for the word */
static inline m2vi v_loadi_fold(const void *p) { return _mm512_loadu_si512(p); }
static inline m2v v_bf16_lo(m2vi w) { return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)); }
static inline m2v v_bf16_hi(m2vi w)
{
    return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));
}
/* v_exp (below): e^x for x clamped to [M2S_EXP_LO, 80]: n = round(x / ln 2), r = x - n ln 2 in two steps, e^r
 * by the same degree-6 polynomial as m2_expf, times 2^n, here with AVX-512's own instructions (roundscale,
 * scalef): about 13 vector ops instead of m2_expf's 18. The clamp keeps r exact and 1 + e^x finite with a
 * normal reciprocal (v_silu); only SiLU uses it, where v e^v beyond those bounds is below 1e-33 either way. */
#define M2S_EXP_LO (-100.0f)
static inline m2v v_round(m2v x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline m2v v_pow2n(m2v p, m2v n) { return _mm512_scalef_ps(p, n); }
/* 1/d as a 14-bit estimate refined by one Newton step (~1 ulp; vdivps is the slowest instruction of the loop) */
static inline m2v v_recip(m2v d)
{
    m2v q = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.0f)));
}

#elif M2_ISA_LEVEL == 1 /* AVX2 + FMA */
#include <immintrin.h>
#define M2S_SIMD   1
#define M2S_VW     8
typedef __m256 m2v;
typedef __m256i m2vi;
typedef __m256i m2vm;
static inline m2v v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, m2v v) { _mm256_storeu_ps(p, v); }
static inline m2v v_set1(float x) { return _mm256_set1_ps(x); }
static inline m2v v_zero(void) { return _mm256_setzero_ps(); }
static inline m2v v_add(m2v a, m2v b) { return _mm256_add_ps(a, b); }
static inline m2v v_sub(m2v a, m2v b) { return _mm256_sub_ps(a, b); }
static inline m2v v_mul(m2v a, m2v b) { return _mm256_mul_ps(a, b); }
static inline m2v v_min(m2v a, m2v b) { return _mm256_min_ps(a, b); }
static inline m2v v_max(m2v a, m2v b) { return _mm256_max_ps(a, b); }
static inline m2v v_fma(m2v a, m2v b, m2v c) { return _mm256_fmadd_ps(a, b, c); }
static inline m2vm v_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline m2v v_maskload(m2vm m, const float *p) { return _mm256_maskload_ps(p, m); }
static inline void v_maskstore(float *p, m2vm m, m2v v) { _mm256_maskstore_ps(p, m, v); }
static inline float v_hsum(m2v v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline m2vi v_loadi(const void *p)
{
    m2vi w = _mm256_loadu_si256((const __m256i *)p);
    __asm__("" : "+x"(w));
    return w;
}
static inline m2vi v_loadi_fold(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline m2v v_bf16_lo(m2vi w) { return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)); }
static inline m2v v_bf16_hi(m2vi w)
{
    return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xFFFF0000u)));
}
/* e^x as above, but 2^n is built in the exponent field, which needs n >= -126: the clamp's low end is -87
 * (1 + e^-87 is 1 in fp32, as 1 + e^-100 is, so SiLU gets the same values). */
#define M2S_EXP_LO (-87.0f)
static inline m2v v_round(m2v x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline m2v v_pow2n(m2v p, m2v n)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
/* 1/d as a 12-bit estimate refined by one Newton step (~2 ulp) */
static inline m2v v_recip(m2v d)
{
    m2v q = _mm256_rcp_ps(d);
    return _mm256_mul_ps(q, _mm256_fnmadd_ps(d, q, _mm256_set1_ps(2.0f)));
}

#else
#define M2S_SIMD 0
#endif

#if M2S_SIMD
#define M2S_VR (M2S_VEC / M2S_VW) /* hardware vectors per logical vector of the packed layout */

/* e^x (see M2S_EXP_LO above) */
static inline m2v v_exp(m2v x)
{
    x = v_max(v_min(x, v_set1(80.0f)), v_set1(M2S_EXP_LO));
    m2v n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    m2v r = v_fma(n, v_set1(-0.693359375f), x);
    r = v_fma(n, v_set1(2.12194440e-4f), r);
    m2v p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
    return v_pow2n(p, n);
}

/* v / (1 + e^-v) */
static inline m2v v_silu(m2v v) { return v_mul(v, v_recip(v_add(v_set1(1.0f), v_exp(v_sub(v_zero(), v))))); }
#endif

#endif
