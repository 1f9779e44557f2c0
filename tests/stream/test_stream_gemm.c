/* The streaming GEMV/GEMM (m2s_gemm) of every CPU level this machine supports, and of the AVX-512-BF16 variant
 * where the CPU has it, against an fp64 sum of the same products: fp32 weights times x, or (bf16 mode, docs/MODEL.md
 * "bf16 weights") bf16 weights times x rounded to bf16. Shapes reach every panel width, column block and stream
 * tile, odd K (the bf16 k-pair padding) and strided rows; half the calls fold column scales into the packed matrix
 * and scale each stream's output (the engine's norms, stream.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/rng.h"
#include "stream/engine.h"

static float bf16_value(float f) { return m2_bf16_float((uint16_t)m2_bf16_bits(f)); }

/* The larger of two errors, where a NaN (an output the kernel never wrote: y starts as NaN) counts as the larger
 * (fmax would drop it). */
static double worse(double a, double b) { return isnan(a) ? a : (isnan(b) || b > a ? b : a); }

static double g_last[16 * 352]; /* the outputs of the last call (the first 16 streams' rows of 352) */

/* Largest error of gemm over the bound, for W [M,K] and n streams; exits the test on a bad padding row. */
static double worst_ratio(m2s_gemm_fn gemm, int M, int K, int n, int bf16, uint64_t seed)
{
    m2s_mat m;
    size_t elems = 0;
    m2s_mat_plan(&m, M, K, bf16, &elems);
    void *mats = m2s_alloc_pages(elems * (bf16 ? 2 : 4));
    const int ldx = K + 3, ldy = (M + 15) / 16 * 16 + 16, Kp = K + 1;
    float *W = malloc((size_t)M * K * sizeof *W), *x = malloc((size_t)n * ldx * sizeof *x);
    float *y = malloc((size_t)n * ldy * sizeof *y), *xq = malloc(m2s_xq_floats(n, Kp) * sizeof *xq);
    uint64_t key = m2_rng_key(seed, (uint64_t)M, (uint64_t)K, (uint64_t)n);
    for (size_t i = 0; i < (size_t)M * K; i++) W[i] = (float)(m2_rng_u01(key, i) * 2 - 1);
    for (size_t i = 0; i < (size_t)n * ldx; i++) x[i] = (float)(m2_rng_u01(key, (1u << 30) + i) * 4 - 2);
    for (size_t i = 0; i < (size_t)n * ldy; i++) y[i] = NAN;
    /* With odd n, column scales and output scales: powers of two, so that they round nothing (bf16 included) and the
     * bound below holds as it is. */
    const int scaled = n % 2;
    float *col = malloc((size_t)K * sizeof *col), *out = malloc((size_t)n * sizeof *out);
    for (int k = 0; k < K; k++) col[k] = ldexpf(1.0f, k % 3 - 1);
    for (int i = 0; i < n; i++) out[i] = ldexpf(1.0f, 1 - i % 4);
    m2s_mat_pack(&m, W, scaled ? col : NULL, mats, bf16);
    gemm(&m, mats, bf16, n, x, ldx, scaled ? out : NULL, y, ldy, xq);
    /* Every product of the bf16 mode is exact in fp32 (8-bit significands), fp32 products are rounded once;
     * any order of the K additions then errs by at most gamma_{K+1} = (K+1) u / (1 - (K+1) u) of sum |w x|
     * (u = 2^-24; Higham, Accuracy and Stability, §3.1). vdpbf16ps also flushes denormal inputs and outputs,
     * which the random values here (|w x| >= 2^-30 or zero-padded) never produce. */
    const double u = ldexp(1.0, -24), gamma = (K + 1) * u / (1 - (K + 1) * u);
    double worst = 0;
    for (int s = 0; s < n; s++)
        for (int j = 0; j < ldy - 16; j++) {
            const float got = y[(size_t)s * ldy + j];
            if (s < 16 && j < 352) g_last[s * 352 + j] = got;
            if (j >= M) {
                assert_true(got == 0.0f); /* padding rows receive 0 */
                continue;
            }
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double w = W[(size_t)j * K + k] * (scaled ? col[k] : 1.0f), xv = x[(size_t)s * ldx + k];
                if (bf16) w = bf16_value((float)w), xv = bf16_value((float)xv);
                ref += w * xv;
                mag += fabs(w * xv);
            }
            if (scaled) ref *= out[s], mag *= out[s];
            worst = worse(worst, fabs(got - ref) / (gamma * mag + 1e-30));
        }
    free(W);
    free(x);
    free(y);
    free(xq);
    free(mats);
    free(col);
    free(out);
    return worst;
}

static void check_fn(m2s_gemm_fn gemm, const char *name, int bf16)
{
    /* M: 1 vector, 3 (odd), 6, 8 (one full panel), 9 (panels of 5 and 4) and 21 vectors (three of 7): every
     * GEMV block width; K odd and even, 301 a long k loop; n: the GEMV, then stream tiles of 2, 4 + 3, 6 + 6,
     * 5 + 4 + 4 and, from 16 streams (AVX2's bf16 GEMM from a widened column block), 5 + 5 + 5 + 4 */
    static const int Ms[] = {16, 40, 96, 128, 130, 330}, Ks[] = {1, 8, 33, 64, 127, 301}, ns[] = {1, 2, 7, 12, 13, 19};
    double worst = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++)
            for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
                worst = worse(worst, worst_ratio(gemm, Ms[a], Ks[b], ns[c], bf16, 5));
    printf("  %-12s %s: largest error %.3f of the summation-order bound\n", name, bf16 ? "bf16" : "fp32", worst);
    assert_true(worst <= 1.0);
}

static void test_levels(void **state)
{
    const int top = (int)m2_cpu_active(); /* up to MAMBA2_CPU where that caps it */
    for (int level = 0; level <= top; level++)
        for (int bf16 = 0; bf16 <= 1; bf16++)
            check_fn(m2s_kernels_for((m2_cpu_level)level)->gemm, m2_cpu_name((m2_cpu_level)level), bf16);
    m2_cpu_set_cap(M2_CPU_AVX512);
    if (m2_cpu_bf16_dot()) {
        for (int bf16 = 0; bf16 <= 1; bf16++) check_fn(m2s_gemm_avx512bf16, "avx512+bf16", bf16);
        /* vdpbf16ps against the widening avx512 path: the same products added in the same order, so the same
         * values (no input here is subnormal, which vdpbf16ps would flush). The engine relies on it: one stream
         * takes the dot, batches may take the widening kernel (stream.c, choose_batch_gemm), and a stream's
         * outputs must not depend on which. Measured equal on Zen 4 and Emerald Rapids. */
        static double a[16 * 352];
        int differ = 0;
        for (int n = 1; n <= 13; n += 12) {
            worst_ratio(m2s_kernels_for(M2_CPU_AVX512)->gemm, 330, 127, n, 1, 7);
            memcpy(a, g_last, sizeof a);
            worst_ratio(m2s_gemm_avx512bf16, 330, 127, n, 1, 7);
            for (int i = 0; i < n * 352; i++) differ += i % 352 < 330 && a[i] != g_last[i];
        }
        printf("  avx512+bf16 vs avx512 (bf16, 330 x 127, 1 and 13 streams): %d outputs differ\n", differ);
        assert_int_equal(differ, 0);
    } else
        printf("  the vdpbf16ps variant is not run (level below avx512, or no AVX-512-BF16)\n");
    m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
}

/* From 16 streams AVX2 runs bf16 from a widened column block in another loop (stream_gemm.c); it adds the same
 * products in the same order, so each stream's outputs are bitwise those of a call with fewer streams. */
static void test_batched_bf16_same_sums(void **state)
{
    enum { M = 130, K = 127, N = 19, FEW = 13, LDY = 144 };
    m2s_mat m;
    size_t elems = 0;
    m2s_mat_plan(&m, M, K, 1, &elems);
    void *mats = m2s_alloc_pages(elems * 2);
    float *W = malloc((size_t)M * K * sizeof *W), *x = malloc((size_t)N * K * sizeof *x);
    float *many = malloc((size_t)N * LDY * sizeof *many), *few = malloc((size_t)FEW * LDY * sizeof *few);
    float *xq = malloc(m2s_xq_floats(N, K + 1) * sizeof *xq);
    const uint64_t key = m2_rng_key(11, M, K, N);
    for (size_t i = 0; i < (size_t)M * K; i++) W[i] = (float)(m2_rng_u01(key, i) * 2 - 1);
    for (size_t i = 0; i < (size_t)N * K; i++) x[i] = (float)(m2_rng_u01(key, (1u << 30) + i) * 4 - 2);
    m2s_mat_pack(&m, W, NULL, mats, 1);
    for (int level = 0; level <= (int)m2_cpu_active(); level++) {
        const m2s_gemm_fn gemm = m2s_kernels_for((m2_cpu_level)level)->gemm;
        gemm(&m, mats, 1, N, x, K, NULL, many, LDY, xq);
        gemm(&m, mats, 1, FEW, x, K, NULL, few, LDY, xq);
        int differ = 0;
        for (int s = 0; s < FEW; s++)
            for (int j = 0; j < M; j++) differ += many[s * LDY + j] != few[s * LDY + j];
        printf("  %-12s bf16, %d vs %d streams: %d outputs differ\n", m2_cpu_name((m2_cpu_level)level), N, FEW, differ);
        assert_int_equal(differ, 0);
    }
    free(W);
    free(x);
    free(many);
    free(few);
    free(xq);
    free(mats);
}

/* The bf16 dot instructions are chosen only at the avx512 level and can be turned off. */
static void test_bf16_dot_choice(void **state)
{
    m2_cpu_set_cap(M2_CPU_AVX2);
    assert_false(m2_cpu_bf16_dot());
    m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
    const int has = m2_cpu_bf16_dot();
    m2_cpu_set_bf16_dot(0);
    assert_false(m2_cpu_bf16_dot());
    m2_cpu_set_bf16_dot(1);
    assert_int_equal(m2_cpu_bf16_dot(), has);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_batched_bf16_same_sums),
        cmocka_unit_test(test_bf16_dot_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
