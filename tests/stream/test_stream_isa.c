/* The streaming kernels of every instruction-set level this machine supports (base/cpu.h) against the portable
 * (scalar) level: the same ticks through engines opened under each cap, single streams (GEMV path) and a batch
 * (GEMM tiles), fp32 and bf16 weights (at avx512 with and without the AVX-512-BF16 dot product), on shapes that
 * reach every kernel's tails and blocks. test_stream_gemm checks the GEMV/GEMM alone against fp64. */
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
#include "base/error.h"
#include "stream/engine.h"
#include "stream_fixture.h"

enum { S = 13, T = 60 }; /* 13 streams: two full 6-stream tiles and a remainder */

/* Predictions [T][S][O] of S streams stepped together (batch) or one by one, at a level (dot: with the bf16
 * dot instructions allowed). */
static float *run(const m2_layout *lay, const float *params, const float *X, int bf16, int batch, m2_cpu_level level,
                  int dot)
{
    m2_cpu_set_cap(level);
    m2_cpu_set_bf16_dot(dot);
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = S;
    opt.bf16 = bf16;
    m2_stream *s;
    assert_int_equal(m2_stream_open_params(lay, params, NULL, NULL, &opt, &s), M2_OK);
    if (bf16 && m2_cpu_bf16_dot()) /* batches may take the widening kernel where it is faster (stream.c) */
        assert_true(!strcmp(m2_stream_cpu(s), "avx512+bf16") || !strcmp(m2_stream_cpu(s), "avx512+bf16/avx512"));
    else
        assert_string_equal(m2_stream_cpu(s), m2_cpu_name(level));
    m2_cpu_set_bf16_dot(1);
    const int F = lay->d.F, O = lay->d.O;
    float *pred = malloc((size_t)T * S * O * sizeof *pred);
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * S * F;
        float *p = pred + (size_t)t * S * O;
        if (batch)
            assert_int_equal(m2_stream_step_batch(s, S, NULL, x, p), M2_OK);
        else
            for (int i = 0; i < S; i++) assert_int_equal(m2_stream_step(s, i, x + (size_t)i * F, p + (size_t)i * O), 0);
    }
    m2_stream_close(s);
    return pred;
}

static void check_shape(fixture_shape shape, const char *name)
{
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 21, 1), *X = fixture_inputs(T * S, shape.F, 8);
    const size_t n = (size_t)T * S * shape.O;
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (int batch = 0; batch <= 1; batch++) {
            float *ref = run(&lay, params, X, bf16, batch, M2_CPU_SCALAR, 1);
            double scale = 0;
            for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)ref[i]));
            /* every level up to the CPU's, or up to MAMBA2_CPU where that caps it */
            const int top = (int)m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
            for (int level = M2_CPU_AVX2; level <= top; level++)
                for (int dot = 0; dot <= (bf16 && level == M2_CPU_AVX512); dot++) {
                    float *got = run(&lay, params, X, bf16, batch, (m2_cpu_level)level, dot);
                    double err = 0;
                    for (size_t i = 0; i < n; i++) err = fmax(err, fabs((double)got[i] - ref[i]));
                    printf("  %-10s %s %s, %s%s vs scalar: max |diff| %.2e of max |pred| %.3g\n", name,
                           bf16 ? "bf16" : "fp32", batch ? "batch " : "single", m2_cpu_name((m2_cpu_level)level),
                           dot ? " (bf16 dot allowed)" : "", err, scale);
                    /* fp32: same weights, other summation orders, FMA contraction, and SiLU's reciprocal as an
                     * estimate plus a Newton step (~1-2 ulp) instead of a division: fp32 rounding through L layers
                     * and 60 recurrent ticks, measured below 1e-6 of the scale; 1e-5 catches any wrong lane, tail
                     * or block (those are O(1) of it). bf16: each GEMV agrees within its summation order
                     * (test_stream_gemm), but its input is rounded to bf16, so an fp32-ulp difference upstream
                     * can move an activation across a rounding boundary: one such term then moves by 2^-8 of
                     * itself, about 2^-8 / sqrt(K) of the output (~3e-4 for K = 128). Measured 1.7e-3 to 3.5e-3 of
                     * the scale on the CPUs tried (the default shape, a few such terms through the recurrence);
                     * 5e-3 still catches a wrong lane, tail or block. */
                    assert_true(err <= (bf16 ? 5e-3 : 1e-5) * scale);
                    free(got);
                }
            free(ref);
        }
    m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
    free(params);
    free(X);
    m2_layout_free(&lay);
}

static void test_default(void **state) { check_shape(fixture_default(), "default"); }

static void test_latency_shape(void **state)
{
    fixture_shape s = {8, 3, 64, 2, 1, 32, 16, 1, 4}; /* configs/latency.ini */
    check_shape(s, "latency");
}

/* Sizes off every vector width, odd panel counts, two groups, K = 3 (P = 20: AVX2 takes two column blocks of the
 * SSM, the second masked); P = 64 (AVX-512: one 4-vector block; AVX2: four blocks of 2)
 * with the conv's general path (K = 5). */
static void test_odd_sizes(void **state)
{
    fixture_shape odd = {5, 2, 40, 3, 3, 20, 10, 2, 3};
    check_shape(odd, "odd");
    fixture_shape k5 = {4, 2, 32, 2, 2, 64, 8, 1, 5};
    check_shape(k5, "P=64,K=5");
}

/* m2s_dt_decay at each level: a stream alone (n = 1, read straight from its row) gives bitwise the values of the
 * same stream inside a batch (n > 1, gathered densely first), padding lanes included (softplus(0), e^0); and each
 * level within 1e-6 of the scalar level (other exp and softplus evaluations, each within a few ulp). H = 5, 19:
 * tails inside one vector and across vectors at both widths. */
static void test_dt_decay(void **state)
{
    enum { NS = 3, LD = 23, MAXH = 19 };
    const int top = (int)m2_cpu_set_cap(M2_CPU_N_LEVELS - 1);
    const int Hs[2] = {5, MAXH};
    for (int ih = 0; ih < 2; ih++) {
        const int H = Hs[ih], hp = (H + M2S_VEC - 1) / M2S_VEC * M2S_VEC,
                  bp = (NS * H + M2S_VEC - 1) / M2S_VEC * M2S_VEC;
        float raw[NS * LD], A[MAXH + M2S_VEC] = {0}, bias[MAXH + M2S_VEC] = {0};
        for (int i = 0; i < NS * LD; i++) raw[i] = (float)(((i * 37) % 41) - 20) * 0.25f; /* -5 .. 5 */
        for (int h = 0; h < H; h++) {
            A[h] = -0.05f * (float)(h + 1);
            bias[h] = 0.1f * (float)(h % 7) - 0.3f;
        }
        float ref_dt[NS * MAXH], ref_dec[NS * MAXH];
        for (int level = M2_CPU_SCALAR; level <= top; level++) {
            const m2s_kernels *k = m2s_kernels_for((m2_cpu_level)level);
            float dt[NS * MAXH + M2S_VEC], dec[NS * MAXH + M2S_VEC];
            k->dt_decay(A, bias, H, NS, raw, LD, dt, dec);
            for (int i = 0; i < NS; i++) {
                float dt1[MAXH + M2S_VEC], dec1[MAXH + M2S_VEC];
                k->dt_decay(A, bias, H, 1, raw + (size_t)i * LD, LD, dt1, dec1);
                assert_memory_equal(dt1, dt + i * H, H * sizeof *dt1);
                assert_memory_equal(dec1, dec + i * H, H * sizeof *dec1);
                for (int j = H; j < hp; j++) { /* the padding of a lone stream */
                    assert_float_equal(dt1[j], dt[bp - 1], 0);
                    assert_float_equal(dec1[j], 1.0f, 0);
                }
            }
            if (level == M2_CPU_SCALAR) {
                memcpy(ref_dt, dt, sizeof ref_dt);
                memcpy(ref_dec, dec, sizeof ref_dec);
            }
            for (int j = 0; j < NS * H; j++) {
                assert_float_equal(dt[j], ref_dt[j], 1e-6 * fabsf(ref_dt[j]));
                assert_float_equal(dec[j], ref_dec[j], 1e-6 * fabsf(ref_dec[j]));
            }
        }
    }
}

/* An unknown MAMBA2_CPU is a usage error at open, naming the variable. */
static void test_bad_env(void **state)
{
    fixture_shape shape = {8, 3, 64, 2, 1, 32, 16, 1, 4};
    m2_layout lay;
    assert_int_equal(fixture_layout(&lay, shape), M2_OK);
    float *params = fixture_params(&lay, 21, 0);
    m2_stream *s = NULL;
    setenv("MAMBA2_CPU", "sse9", 1);
    assert_int_equal(m2_stream_open_params(&lay, params, NULL, NULL, NULL, &s), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "MAMBA2_CPU"));
    assert_null(s);
    unsetenv("MAMBA2_CPU");
    free(params);
    m2_layout_free(&lay);
}

int main(void)
{
    printf("CPU supports %s\n", m2_cpu_name(m2_cpu_supported()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default),  cmocka_unit_test(test_latency_shape), cmocka_unit_test(test_odd_sizes),
        cmocka_unit_test(test_dt_decay), cmocka_unit_test(test_bad_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
