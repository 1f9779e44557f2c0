/* TEST-ONLY: the emulation of <mma.h> and <cuda_bf16.h> (mma.h, cuda_bf16.h here) is what the emulated SSD tests
 * (test_cuda_emu_ssd, _model, _train) run the tensor-core path on, so it is checked on its own:
 * - the conversions round as the GPU's do: __float2bfloat16 to nearest even, __float_to_tf32 to nearest with ties
 *   away from zero (exact bit patterns at ties, NaN, overflow);
 * - a block of 8 warps, each multiplying its own 16x32 by 32x16 product with bf16 (m16n16k16) and tf32 (m16n16k8)
 *   fragments, gives exactly the fp32 sum, in k order, of the rounded operands (products of bf16 or tf32 values
 *   are exact in fp32), for row- and column-major operands, and nothing past the 16x16 outputs is written;
 * - what faults on a GPU aborts with a message: a fragment pointer not 32-byte aligned, ldm not a multiple of 8
 *   (bf16) or 4 (float) elements. Each such case runs in a child process that must die of SIGABRT with the
 *   message on its stderr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace wmma = nvcuda::wmma;

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t bf16_bits(float f) { return __float2bfloat16(f).m2emu_bits; }

static void test_bf16_rounding(void **state)
{
    assert_int_equal(bf16_bits(1.0f), 0x3f80);
    assert_int_equal(bf16_bits(1.0f + 0x1p-8f), 0x3f80);               /* tie: to the even 1.0 */
    assert_int_equal(bf16_bits(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);     /* tie: to the even 1 + 2^-6 */
    assert_int_equal(bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);    /* above the tie: up */
    assert_int_equal(bf16_bits(-(1.0f + 0x1p-8f + 0x1p-20f)), 0xbf81); /* sign-symmetric */
    assert_int_equal(bf16_bits(from_bits(0x7f7fffffu)), 0x7f80);       /* FLT_MAX overflows to inf */
    assert_int_equal(bf16_bits(from_bits(0xff800000u)), 0xff80);       /* -inf stays */
    const uint16_t nan = bf16_bits(from_bits(0x7f800001u));            /* a NaN whose payload is in the low bits */
    assert_true((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
    assert_true(__bfloat162float(__float2bfloat16(3.140625f)) == 3.140625f); /* exact in bf16: unchanged */
}

static void test_tf32_rounding(void **state)
{
    assert_true(wmma::__float_to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f); /* tie: away from zero */
    assert_true(wmma::__float_to_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
    assert_true(wmma::__float_to_tf32(1.0f + 0x1p-12f) == 1.0f); /* below the tie: down */
    assert_true(bits(wmma::__float_to_tf32(from_bits(0x7f800000u))) == 0x7f800000u);
}

/* ---- the products ---- */
enum { WARPS = 8, KTOT = 32, LD16 = 40, LDF = 36, LDC = 20 };

struct operands { /* per warp w: A_w [16 x KTOT], B_w [KTOT x 16], in both memory layouts */
    alignas(32) __nv_bfloat16 a16[WARPS][16 * LD16], b16[WARPS][16 * LD16];
    alignas(32) float af[WARPS][KTOT * LDF], bf[WARPS][KTOT * LDF];
    alignas(32) float out16[WARPS][16 * LDC], outf[WARPS][16 * LDC];
    alignas(32) float c0[16 * LDC]; /* the accumulators' start: c0[i][j] = init(i, j), row-major */
    float a[WARPS][16][KTOT], b[WARPS][KTOT][16];
};

static float value_of(int w, int i, int k, int which)
{
    /* distinct, non-representable values of both signs */
    return (float)sin(1.0 + w * 7.1 + i * 1.37 + k * 0.73 + which * 11.0) * (1.0f + 0.3f * (float)((i + k) % 5));
}

/* the accumulators' start (exact in fp32) */
static float init(int i, int j) { return 0.25f * (float)(i - 2 * j); }

/* A row-major for bf16 and column-major for tf32, B the other way: both load paths are exercised. The bf16 product
 * starts from accumulators loaded from memory row-major, the tf32 one from their transpose loaded column-major. */
static void product_kernel(operands *o)
{
    const int warp = threadIdx.x / 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c16;
    wmma::load_matrix_sync(c16, o->c0, LDC, wmma::mem_row_major);
    for (int k0 = 0; k0 < KTOT; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, o->a16[warp] + k0, LD16);
        wmma::load_matrix_sync(fb, o->b16[warp] + k0, LD16);
        wmma::mma_sync(c16, fa, fb, c16);
    }
    wmma::store_matrix_sync(o->out16[warp], c16, LDC, wmma::mem_row_major);

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> cf;
    wmma::load_matrix_sync(cf, o->c0, LDC, wmma::mem_col_major); /* (i, j) from c0[j][i] */
    for (int k0 = 0; k0 < KTOT; k0 += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, o->af[warp] + k0 * LDF, LDF);
        wmma::load_matrix_sync(fb, o->bf[warp] + k0 * LDF, LDF);
        wmma::mma_sync(cf, fa, fb, cf);
    }
    wmma::store_matrix_sync(o->outf[warp], cf, LDC, wmma::mem_col_major);
}

static void test_products_exact(void **state)
{
    static operands o;
    memset(&o, 0, sizeof o);
    for (int w = 0; w < WARPS; w++)
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < KTOT; k++) {
                o.a[w][i][k] = value_of(w, i, k, 0);
                o.b[w][k][i] = value_of(w, i, k, 1);
                o.a16[w][i * LD16 + k] = __float2bfloat16(o.a[w][i][k]);    /* row-major A */
                o.b16[w][i * LD16 + k] = __float2bfloat16(o.b[w][k][i]);    /* column-major B: (k, j) at j*ld + k */
                o.af[w][k * LDF + i] = wmma::__float_to_tf32(o.a[w][i][k]); /* column-major A: (i, k) at k*ld + i */
                o.bf[w][k * LDF + i] = o.b[w][k][i]; /* unconverted: the load keeps the tf32 bits (truncates) */
            }
    for (int w = 0; w < WARPS; w++)
        for (int i = 0; i < 16 * LDC; i++) o.out16[w][i] = o.outf[w][i] = -7.0f;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) o.c0[i * LDC + j] = init(i, j);
    m2emu::launch(dim3(1), dim3(WARPS * 32))("product_kernel", [](auto &&...a) { product_kernel(a...); })(&o);

    int checked = 0;
    for (int w = 0; w < WARPS; w++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                float r16 = init(i, j), rf = init(j, i);
                for (int k = 0; k < KTOT; k++) {
                    r16 = fmaf(__bfloat162float(__float2bfloat16(o.a[w][i][k])),
                               __bfloat162float(__float2bfloat16(o.b[w][k][j])), r16);
                    rf = fmaf(wmma::__float_to_tf32(o.a[w][i][k]), from_bits(bits(o.b[w][k][j]) & ~0x1fffu), rf);
                }
                assert_true(o.out16[w][i * LDC + j] == r16);
                assert_true(o.outf[w][j * LDC + i] == rf); /* stored column-major */
                checked++;
            }
    for (int w = 0; w < WARPS; w++) /* the padding of the outputs is not written */
        for (int i = 0; i < 16; i++)
            for (int j = 16; j < LDC; j++)
                assert_true(o.out16[w][i * LDC + j] == -7.0f && o.outf[w][i * LDC + j] == -7.0f);
    assert_int_equal(checked, WARPS * 256);
}

/* ---- faults ---- */
static void misaligned_load(void)
{
    alignas(32) static __nv_bfloat16 buf[16 * 64];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, buf + 8, 32); /* 16 bytes off */
}
static void bad_ldm_bf16(void)
{
    alignas(32) static __nv_bfloat16 buf[16 * 64];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::load_matrix_sync(fb, buf, 20); /* 40 bytes: a multiple of 4 elements, not of 8 */
}
static void bad_ldm_store(void)
{
    alignas(32) static float buf[16 * 64];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    wmma::store_matrix_sync(buf, c, 18, wmma::mem_row_major);
}
static void misaligned_store(void)
{
    alignas(32) static float buf[16 * 64 + 8];
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
    wmma::fill_fragment(c, 0.0f);
    wmma::store_matrix_sync(buf + 4, c, 16, wmma::mem_row_major);
}

/* Runs fn in a kernel of one warp in a child process; it must abort with `message` on stderr. */
static void expect_abort(void (*fn)(void), const char *message)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        m2emu::launch(dim3(1), dim3(32))("fn", [fn]() { fn(); })();
        _exit(0); /* not reached when the emulation catches the fault */
    }
    close(fds[1]);
    char err[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof err - 1 && (r = read(fds[0], err + n, sizeof err - 1 - n)) > 0) n += (size_t)r;
    err[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    printf("  child: %s", err);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    assert_non_null(strstr(err, message));
}

static void test_faults_abort(void **state)
{
    expect_abort(misaligned_load, "load_matrix_sync: pointer not 32-byte (256-bit) aligned");
    expect_abort(bad_ldm_bf16, "load_matrix_sync: ldm not a multiple of 8 elements (16-bit type)");
    expect_abort(bad_ldm_store, "store_matrix_sync: ldm not a multiple of 4 elements (32-bit type)");
    expect_abort(misaligned_store, "store_matrix_sync: pointer not 32-byte (256-bit) aligned");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_tf32_rounding),
        cmocka_unit_test(test_products_exact),
        cmocka_unit_test(test_faults_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
