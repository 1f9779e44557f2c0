/* The emulation's per-kernel counters (tests/gpu/emu/emu_counters.h) on kernels whose counts are known in closed
 * form, run through the CUDA ops on the counting build of the emulation (mamba2_cuda_emu_count):
 * - add (y += x over n floats): one launch of ceil(n/256)... blocks; reads 2n floats, writes n, every one once,
 *   3n accesses; no FLOPs on the tensor cores;
 * - a plain GEMM C[m,n] = A[m,k] B[k,n] (cuBLAS, bf16 compute): 2mnk bf16 tensor FLOPs, reads (mk + kn) floats,
 *   writes mn, with beta = 1 reads C too;
 * - the SSD's first stages at one chunk (T = Q = 64, N = 32, G = 1): the cumsums and decay tables (one launch) read
 *   dt (T*H floats) and A (H) and write acs, eA, wR and dtc (4 H*Q floats); C B^T is one 64x64 tile per chunk
 *   with k = N = 32: 2*64*64*32 bf16 FLOPs, reads the B and C columns (2*T*N floats, distinct), writes the 64x64 CB.
 * - bf16 storage: the conv forward's input read at 2 bytes per element, a bf16 GEMM's operands and output too; the
 *   backward's activation outputs (conv and dt input gradients, the gated norm's dy, dz and output, the rmsnorm
 *   backward's output and dx copy, the SSD's dx, dB, dC) written at 2 bytes per element, their fp32 partial sums
 *   unchanged, and the conv backward's d(out) (the SSD's dx, dB, dC) and the rmsnorm backward's dy (d(u)) read at 2;
 * - the conv backward's walks over 4 column-sum blocks of rows: the window, the K-1 rows past a walk and the
 *   weights loaded once per walk, each thread's weight and bias partials stored as 16-byte vectors;
 * - the SSD's chunk-start states S, bf16 at bf16 precision (kernels/ssd_cuda.cuh, ssd_states_type): the state
 *   passing (forward, and the backward's recomputation) writes 2 bytes less per state element than at fp32
 *   precision, and the reverse state passing reads 2 bytes less per element;
 * - a model's forward: the residual add made by the out_proj GEMM (beta = 1), each rmsnorm_fwd reading h once;
 * - what the backward reads from the forward instead of recomputing it: the SSD's C B^T and decay tables (the saved
 *   buffer, kernels/ssd_cuda.cuh) and the model's dt and A (model.c): a training step launches each of their
 *   kernels once per layer, in the forward;
 * - the model's launches per layer (the difference between a two-layer and a one-layer model, forward and
 *   forward+backward, B = 2, T = 32, Q = 16): 11 forward, 21 backward, with no kernel of its own for A = -exp(A_log)
 *   or its gradient (dt_fwd's and dt_bwd's), no recomputation of dt, C B^T or the decay tables (kept from the
 *   forward), one column-sum final pass per layer backward for the four weight gradients formed as column sums
 *   (ops.h grad_batch), no clearing of dA (the SSD backward writes it: src/core/ssd.h) and the SSD's cumsums and
 *   decay tables in one launch; before these: 13 and 30;
 * Counts are exact integers (sums of small integers in double), so the comparisons are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/layout.h"
#include "core/model.h"
#include "core/model_fixture.h"
#include "emu_counters.h"
#include "gpu_util.h"

enum { MAXREC = 64 };

/* the record named `name`, exactly or (exact 0) by the start of its name; fails the test when there is none */
static m2emu_kernel_count find_record(const char *name, int exact)
{
    m2emu_kernel_count r[MAXREC];
    const int n = m2emu_counters_get(r, MAXREC);
    for (int i = 0; i < n && i < MAXREC; i++)
        if (exact ? !strcmp(r[i].name, name) : !strncmp(r[i].name, name, strlen(name))) return r[i];
    fail_msg("no launch named %s among %d", name, n);
    m2emu_kernel_count none;
    memset(&none, 0, sizeof none);
    return none;
}
static m2emu_kernel_count find(const char *name) { return find_record(name, 0); }

/* the records whose name starts with `name` (one per kernel key: a template's instances), summed */
static m2emu_kernel_count sum_records(const char *name)
{
    m2emu_kernel_count r[MAXREC], s;
    memset(&s, 0, sizeof s);
    const int n = m2emu_counters_get(r, MAXREC);
    for (int i = 0; i < n && i < MAXREC; i++)
        if (!strncmp(r[i].name, name, strlen(name))) {
            s.launches += r[i].launches;
            s.read_distinct += r[i].read_distinct;
            s.write_distinct += r[i].write_distinct;
        }
    return s;
}

static void test_counts_bytes(void **state)
{
    (void)state;
    assert_int_equal(m2emu_counts_bytes(), 1);
}

static void test_add(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const size_t n = 1000;
    float *h = m2_host_fill(n, 1.0f);
    float *x = m2_dev_from(g, h, n), *y = m2_dev_from(g, h, n);
    m2emu_counters_reset();
    g->add(g, y, x, n);
    const m2emu_kernel_count c = find("add");
    printf("  add: %.0f launches, read %.0f B (%.0f distinct), wrote %.0f B (%.0f distinct), %.0f accesses\n",
           c.launches, c.read_bytes, c.read_distinct, c.write_bytes, c.write_distinct, c.accesses);
    assert_true(c.launches == 1);
    assert_true(c.read_bytes == 2.0 * n * 4 && c.read_distinct == 2.0 * n * 4);
    assert_true(c.write_bytes == n * 4.0 && c.write_distinct == n * 4.0);
    assert_true(c.accesses == 3.0 * n);
    assert_true(c.flops_bf16 == 0 && c.flops_tf32 == 0);
    g->free(g, x);
    g->free(g, y);
    free(h);
}

/* A kernel with 16-byte accesses: the gated norm forward at 4 channels per thread counts one access per 4 floats
 * (one LDG.128/STG.128 on the GPU), rows x (2 loads for the sum of squares, kept in registers, + the weight's load
 * and a store for the output) x n/4. */
static void test_vector_accesses(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const int rows = 8, n = 64;
    float *h = m2_host_uniform((size_t)rows * n, -1, 1, 7, 1);
    float *y = m2_dev_from(g, h, (size_t)rows * n), *z = m2_dev_from(g, h, (size_t)rows * n), *w = m2_dev_from(g, h, n);
    float *out = g->alloc(g, (size_t)rows * n * sizeof(float));
    m2emu_counters_reset();
    g->gated_norm_fwd(g, y, z, n, M2_ACT_REAL, w, rows, n, 1, out, M2_ACT_REAL);
    const m2emu_kernel_count c = find("gated_norm_fwd");
    printf("  gated_norm_fwd: %.0f accesses, read %.0f B (%.0f distinct), wrote %.0f B\n", c.accesses, c.read_bytes,
           c.read_distinct, c.write_bytes);
    assert_true(c.accesses == (double)rows * 4 * (n / 4));
    assert_true(c.read_bytes == 4.0 * rows * n * 3 && c.read_distinct == 4.0 * (2.0 * rows * n + n));
    assert_true(c.write_bytes == 4.0 * rows * n && c.write_distinct == 4.0 * rows * n);
    float *bufs[] = {y, z, w, out};
    for (int i = 0; i < 4; i++) g->free(g, bufs[i]);
    free(h);
}

/* The conv backward's walks (kernels/conv_cuda.cu, CONV_WALK_MAX): at bf16, one sequence of 65536 rows of 8
 * channels (2 threads of 4) is 1024 column-sum blocks of 64 rows, walked 4 at a time by 256 blocks (the grid's
 * floor, CONV_MIN_CTAS). Per thread and walk: the weights twice and the bias (36 scalar loads of 4 bytes), the
 * window before the walk (3 rows, none at the sequence start), the input and d(out) of its 256 rows and of the 3
 * past them (none past the last walk), 256 din stores and per column-sum block one 16-byte store of each channel's
 * 4 weight partials and one of the 4 biases'. Blocks of one column-sum block each, with 20 scalar partial stores,
 * took 526318 accesses and read 2539376 B (the same count with 1024 walks of 64 rows); walks of 4 take 426478 and
 * 2207600 B. */
static void test_conv_bwd_walks(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const int T = 65536, C = 8, K = 4, nw = 256, W = 256;
    const size_t n = (size_t)T * C;
    float *h = m2_host_uniform(n, -1, 1, 7, 1), *w = m2_dev_from(g, h, (size_t)C * K), *b = m2_dev_from(g, h, C);
    float *dw = m2_dev_from(g, h, (size_t)C * K), *db = m2_dev_from(g, h, C), *f = m2_dev_from(g, h, n);
    void *in = g->alloc(g, n * 2), *dout = g->alloc(g, n * 2), *din = g->alloc(g, n * 2);
    g->to_act(g, f, n, in, M2_ACT_BF16);
    g->to_act(g, f, n, dout, M2_ACT_BF16);
    m2emu_counters_reset();
    g->conv_silu_bwd(g, dout, in, C, M2_ACT_BF16, w, b, 1, T, C, K, din, C, dw, db);
    const m2emu_kernel_count c = find_record("conv_silu_bwd", 1);
    const double acc = 2.0 * (nw * (36.0 + W + 4 * 5 + 2.0 * W) + (nw - 1) * (3 + 2 * 3)),
                 rd = 2.0 * (nw * (36 * 4.0 + W * 16.0) + (nw - 1) * (3 * 8 + 3 * 16.0));
    printf("  conv_silu_bwd: %.0f blocks, %.0f accesses (%.0f), read %.0f B (%.0f)\n", c.blocks, c.accesses, acc,
           c.read_bytes, rd);
    assert_true(c.launches == 1 && c.blocks == nw);
    assert_true(c.accesses == acc);
    assert_true(c.read_bytes == rd);
    void *bufs[] = {w, b, dw, db, f, in, dout, din};
    for (int i = 0; i < 8; i++) g->free(g, bufs[i]);
    free(h);
}

static void test_gemm(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const int m = 48, n = 40, k = 24;
    float *h = m2_host_fill((size_t)m * k + (size_t)k * n + (size_t)m * n, 0.5f);
    float *A = m2_dev_from(g, h, (size_t)m * k), *B = m2_dev_from(g, h, (size_t)k * n),
          *C = m2_dev_from(g, h, (size_t)m * n);
    m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_BF16);
    m2emu_counters_reset();
    g->gemm(g, 0, 0, m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
    m2emu_kernel_count c = find("cublasGemmEx");
    assert_true(c.launches == 1);
    assert_true(c.flops_bf16 == 2.0 * m * n * k && c.flops_tf32 == 0 && c.flops_fp32_cuda == 0);
    assert_true(c.read_distinct == 4.0 * ((double)m * k + (double)k * n) && c.write_distinct == 4.0 * m * n);
    m2emu_counters_reset();
    g->gemm(g, 0, 0, m, n, k, 1.0f, A, k, B, n, 1.0f, C, n); /* beta = 1: C is read too */
    c = find("cublasGemmEx");
    assert_true(c.read_distinct == 4.0 * ((double)m * k + (double)k * n + (double)m * n));
    m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_FP32);
    m2emu_counters_reset();
    g->gemm(g, 0, 0, m, n, k, 1.0f, A, k, B, n, 0.0f, C, n);
    c = find("cublasGemmEx");
    assert_true(c.flops_fp32_cuda == 2.0 * m * n * k && c.flops_bf16 == 0);
    m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_BF16);
    g->free(g, A);
    g->free(g, B);
    g->free(g, C);
    free(h);
}

/* The stored activations really are bf16 (core/ops.h m2_act_type): the conv forward reads its input xBC from a bf16
 * slice of zxbcdt at 2 bytes per element instead of 4 (the weights, bias and fp32 output unchanged), and the in_proj
 * GEMM on bf16 operands and output counts 2 bytes per element of A, B and C. */
static void test_bf16_storage(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const int B = 2, T = 64, C = 64, K = 4, ld = 96, m = 24, n = 40, k = 16;
    const size_t nin = (size_t)B * T * ld;
    float *h = m2_host_uniform(nin, -1, 1, 5, 1);
    float *in = m2_dev_from(g, h, nin), *w = m2_dev_from(g, h, (size_t)C * K), *b = m2_dev_from(g, h, C);
    float *out = g->alloc(g, (size_t)B * T * C * sizeof(float));
    void *in16 = g->alloc(g, nin * 2), *C16 = g->alloc(g, (size_t)m * n * 2);
    g->to_act(g, in, nin, in16, M2_ACT_BF16);
    double rd[2];
    for (int t = 0; t < 2; t++) {
        m2emu_counters_reset();
        g->conv_silu_fwd(g, t ? in16 : (const void *)in, ld, t ? M2_ACT_BF16 : M2_ACT_REAL, w, b, B, T, C, K, out);
        const m2emu_kernel_count c = find("conv_silu_fwd");
        assert_true(c.write_distinct == (t ? 2.0 : 4.0) * B * T * C); /* the output in the input's type */
        rd[t] = c.read_distinct - 4.0 * C * (K + 1); /* the input's share: the weights and bias are fp32 */
    }
    printf("  conv_silu_fwd input read: fp32 %.0f B, bf16 %.0f B\n", rd[0], rd[1]);
    assert_true(rd[0] == 4.0 * B * T * C && rd[1] == 2.0 * B * T * C);
    m2emu_counters_reset();
    g->gemm_act(g, 0, 1, m, n, k, 1.0f, in16, k, in16, k, M2_ACT_BF16, 0.0f, C16, n, M2_ACT_BF16);
    const m2emu_kernel_count c = find("cublasGemmEx");
    assert_true(c.flops_bf16 == 2.0 * m * n * k);
    assert_true(c.read_distinct == 2.0 * ((double)m * k + (double)n * k) && c.write_distinct == 2.0 * m * n);
    void *bufs[] = {in, w, b, out, in16, C16};
    for (int i = 0; i < 6; i++) g->free(g, bufs[i]);
    free(h);
}

/* The backward's activation outputs in bf16 (docs/MODEL.md §8): each op run on fp32 and on bf16 buffers, the bytes
 * its main kernel writes fall by 2 per element of every activation output (the fp32 weight partials unchanged) and
 * the bytes it reads by 2 per element of every activation input. */
static void test_bf16_backward(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const int rows = 128, T = 64, C = 64, K = 4, n = 64, H = 8;
    const size_t big = (size_t)rows * n * 4; /* every buffer: rows x 64 floats (C = n = 64 >= H) */
    float *h = m2_host_uniform(big, -1, 1, 7, 1);
    float *f[16]; /* fp32 inputs and outputs; 8.. the weights (read) and their gradients (ADD) */
    for (int i = 0; i < 16; i++) f[i] = m2_dev_from(g, h, big);
    void *b[6];
    for (int i = 0; i < 6; i++) {
        b[i] = g->alloc(g, big * 2);
        g->to_act(g, f[i], big, b[i], M2_ACT_BF16);
    }
    double wr[4][2], rd[4][2];
    static const char *const names[4] = {"conv_silu_bwd", "dt_bwd", "gated_norm_bwd", "rmsnorm_bwd"};
    for (int t = 0; t < 2; t++) {
        const m2_act_type at = t ? M2_ACT_BF16 : M2_ACT_REAL;
        void *a0 = t ? b[0] : (void *)f[0], *a1 = t ? b[1] : (void *)f[1], *a2 = t ? b[2] : (void *)f[2];
        void *a3 = t ? b[3] : (void *)f[3], *a4 = t ? b[4] : (void *)f[4], *a5 = t ? b[5] : (void *)f[5];
        m2emu_counters_reset();
        g->conv_silu_bwd(g, a2, a0, C, at, f[8], f[9], rows / T, T, C, K, a1, C, f[10], f[11]);
        g->dt_bwd(g, f[6], a0, H, at, f[9], f[8], f[9], rows, H, a1, f[11], f[15]);
        g->gated_norm_bwd(g, a0, a1, a2, n, at, f[12], rows, n, 2, a3, a4, n, f[13], a5);
        g->rmsnorm_bwd(g, a3, at, f[7], f[12], rows, n, f[14], f[13], a0, a1, at);
        for (int k = 0; k < 4; k++) {
            const m2emu_kernel_count c = find_record(names[k], 1);
            wr[k][t] = c.write_distinct;
            rd[k][t] = c.read_distinct;
        }
    }
    /* activation elements written / read per op: conv din / in, dout; dt ddt_raw / dt_raw; gated dy, dz, out / dout,
     * y, z; rmsnorm y, dx_act / dy (d(u), the in_proj's input gradient) */
    const double e = (double)rows * n, nw[4] = {e, (double)rows * H, 3 * e, 2 * e},
                 nr[4] = {2 * e, (double)rows * H, 3 * e, e};
    for (int k = 0; k < 4; k++) {
        printf("  %-15s wrote fp32 %.0f B, bf16 %.0f B; read fp32 %.0f B, bf16 %.0f B\n", names[k], wr[k][0], wr[k][1],
               rd[k][0], rd[k][1]);
        assert_true(wr[k][0] - wr[k][1] == 2.0 * nw[k]);
        assert_true(rd[k][0] - rd[k][1] == 2.0 * nr[k]);
    }
    for (int i = 0; i < 16; i++) g->free(g, f[i]);
    for (int i = 0; i < 6; i++) g->free(g, b[i]);
    free(h);
}

/* The SSD backward's token-row gradients in bf16 (docs/MODEL.md §8): on bf16 rows the products that write dx, dC and
 * dB write 2 bytes less per element of them than on fp32 rows (their other outputs, dx's fp32 row sums for the
 * scalars, unchanged). One chunk, x, B, C as slices of one row of 96 values, as the model lays them out. */
static void test_bf16_ssd_gradients(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const m2_ssd_shape s = {.B = 1, .T = 64, .H = 2, .P = 16, .G = 1, .N = 32, .Q = 64, .ld_x = 96, .ld_bc = 96};
    const size_t T = (size_t)s.T, H = (size_t)s.H, HP = H * s.P, GN = (size_t)s.G * s.N, nxbc = T * s.ld_x;
    float *hx = m2_host_uniform(nxbc, -1, 1, 9, 1), *hdt = m2_host_uniform(T * H, 0.01f, 0.1f, 9, 2);
    float *hA = m2_host_fill(H, -1.0f);
    float *f[3] = {m2_dev_from(g, hx, nxbc), m2_dev_from(g, hx, T * HP), g->alloc(g, nxbc * sizeof(float))};
    void *b[3]; /* bf16 copies of xbc and dy, and a bf16 dxbc */
    for (int i = 0; i < 3; i++) b[i] = g->alloc(g, nxbc * 2);
    g->to_act(g, f[0], nxbc, b[0], M2_ACT_BF16);
    g->to_act(g, f[1], T * HP, b[1], M2_ACT_BF16);
    float *dt = m2_dev_from(g, hdt, T * H), *A = m2_dev_from(g, hA, H), *D = m2_dev_from(g, hA, H);
    float *ddt = g->alloc(g, T * H * sizeof(float)), *dA = g->alloc(g, H * sizeof(float)),
          *dD = g->alloc(g, H * sizeof(float)), *y = g->alloc(g, T * HP * sizeof(float));
    float *saved = g->alloc(g, g->ssd_saved_size(g, &s) * sizeof(float));
    float *scratch = g->alloc(g, g->ssd_scratch_size(g, &s, 1) * sizeof(float));
    static const char *const names[3] = {"ssd_bwd (dx)", "ssd_bwd (dC)", "ssd_bwd (dB)"};
    double wr[3][2];
    for (int t = 0; t < 2; t++) {
        const m2_act_type at = t ? M2_ACT_BF16 : M2_ACT_REAL;
        const size_t eb = t ? 2 : 4;
        char *x = t ? b[0] : (void *)f[0], *dx = t ? b[2] : (void *)f[2];
        const void *dy = t ? b[1] : (void *)f[1];
        g->memset0(g, dD, H * sizeof(float)); /* the backward adds to dD (and writes dA) */
        g->ssd_fwd(g, &s, x, dt, A, x + HP * eb, x + (HP + GN) * eb, D, y, at, saved, scratch);
        m2emu_counters_reset();
        g->ssd_bwd(g, &s, x, dt, A, x + HP * eb, x + (HP + GN) * eb, D, dy, at, saved, dx, ddt, dA, dx + HP * eb,
                   dx + (HP + GN) * eb, dD, scratch);
        for (int k = 0; k < 3; k++) wr[k][t] = find_record(names[k], 1).write_distinct;
    }
    const double nw[3] = {(double)T * HP, (double)T * GN, (double)T * GN}; /* dx, dC, dB elements */
    for (int k = 0; k < 3; k++) {
        printf("  %-13s wrote fp32 %.0f B, bf16 %.0f B\n", names[k], wr[k][0], wr[k][1]);
        assert_true(wr[k][0] - wr[k][1] == 2.0 * nw[k]);
    }
    void *bufs[] = {f[0], f[1], f[2], b[0], b[1], b[2], dt, A, D, ddt, dA, dD, y, saved, scratch};
    for (int i = 0; i < 15; i++) g->free(g, bufs[i]);
    free(hx);
    free(hdt);
    free(hA);
}

/* Launches of all kernels since the last reset, and those whose name starts with `name`. */
static double launches(const char *name)
{
    static m2emu_kernel_count r[256];
    const int n = m2emu_counters_get(r, 256);
    assert_true(n <= 256);
    double t = 0;
    for (int i = 0; i < n; i++)
        if (!name || !strncmp(r[i].name, name, strlen(name))) t += r[i].launches;
    return t;
}

/* A training step of a 3-layer model on the GPU ops: dt and A (dt_fwd), C B^T and the decay tables are computed once
 * per layer,
 * by the forward; the backward reads them (kept) instead of launching their kernels again. */
static void test_backward_keeps(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    m2_dims d = {.F = 3, .O = 2, .D = 8, .L = 3, .E = 2, .P = 4, .N = 4, .G = 1, .K = 4, .Q = 16};
    assert_int_equal(m2_dims_derive(&d), 0);
    const int B = 2, T = 40;
    m2_layout lay;
    assert_int_equal(m2_layout_init(&lay, &d), 0);
    float *hp = malloc(lay.n_params * sizeof(float)), *hx = m2_host_uniform((size_t)B * T * d.F, -1, 1, 11, 1);
    float *hy = m2_host_uniform((size_t)B * T * d.O, -1, 1, 11, 2);
    assert_non_null(hp);
    m2_params_init(&lay, hp, 11);
    float *params = m2_dev_from(g, hp, lay.n_params), *grads = g->alloc(g, lay.n_params * sizeof(float));
    float *X = m2_dev_from(g, hx, (size_t)B * T * d.F), *Y = m2_dev_from(g, hy, (size_t)B * T * d.O);
    g->memset0(g, grads, lay.n_params * sizeof(float));
    m2_model *m = NULL;
    assert_int_equal(m2_model_create_with_ops(&m, &lay, B, T, g), 0);
    double sse;
    int64_t count;
    m2emu_counters_reset();
    assert_int_equal(m2_model_forward_backward(m, params, grads, X, Y, B, T, 0, &sse, &count, NULL, NULL, NULL), 0);
    static const char *const names[3] = {"dt_fwd", "ssd (C B^T)", "ssd_fwd (cumsums, decay tables)"};
    for (int k = 0; k < 3; k++) {
        printf("  %-18s %.0f launches for %d layers\n", names[k], launches(names[k]), d.L);
        assert_true(launches(names[k]) == d.L);
    }
    m2_model_free(m);
    float *bufs[] = {params, grads, X, Y};
    for (int i = 0; i < 4; i++) g->free(g, bufs[i]);
    free(hp);
    free(hx);
    free(hy);
    m2_layout_free(&lay);
}

static void test_ssd_first_stages(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const m2_ssd_shape s = {.B = 1, .T = 64, .H = 2, .P = 16, .G = 1, .N = 32, .Q = 64, .ld_x = 32, .ld_bc = 32};
    const size_t T = (size_t)s.T, H = (size_t)s.H;
    float *hx = m2_host_uniform(T * s.ld_x, -1, 1, 3, 1), *hbc = m2_host_uniform(T * s.ld_bc, -1, 1, 3, 2);
    float *hdt = m2_host_uniform(T * H, 0.01f, 0.1f, 3, 3), *hA = m2_host_fill(H, -1.0f);
    float *x = m2_dev_from(g, hx, T * s.ld_x), *Bm = m2_dev_from(g, hbc, T * s.ld_bc),
          *Cm = m2_dev_from(g, hbc, T * s.ld_bc), *dt = m2_dev_from(g, hdt, T * H), *A = m2_dev_from(g, hA, H),
          *D = m2_dev_from(g, hA, H);
    float *y = g->alloc(g, T * H * s.P * sizeof(float));
    float *saved = g->alloc(g, g->ssd_saved_size(g, &s) * sizeof(float));
    float *scratch = g->alloc(g, g->ssd_scratch_size(g, &s, 1) * sizeof(float));
    m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_BF16);
    m2emu_counters_reset();
    g->ssd_fwd(g, &s, x, dt, A, Bm, Cm, D, y, M2_ACT_REAL, saved, scratch);
    /* the cumsums and the three decay tables (eA, wR, dtc) in one launch, from dt and A read once */
    const m2emu_kernel_count cs = find("ssd_fwd (cumsums, decay tables)");
    assert_true(cs.launches == 1);
    assert_true(cs.read_distinct == 4.0 * (T * H + H));
    assert_true(cs.write_distinct == 4.0 * 4 * H * s.Q);
    const m2emu_kernel_count cb = find("ssd (C B^T)");
    printf("  C B^T: %.0f bf16 FLOPs, read %.0f B distinct, wrote %.0f B, key %s\n", cb.flops_bf16, cb.read_distinct,
           cb.write_distinct, cb.key);
    assert_true(cb.launches == 1);
    assert_true(cb.flops_bf16 == 2.0 * 64 * 64 * 32);
    assert_true(cb.read_distinct == 2.0 * 4 * T * s.N);
    assert_true(cb.write_distinct == 4.0 * 64 * 64); /* one diagonal tile, stored whole (ssd_cb_op, lower_tiles) */
    assert_string_equal(cb.key, "m2_tile_gemm_wmma_v4_kernel<ssd_cb_op>"); /* 16-byte loads: sizes multiples of 4 */
    float *bufs[] = {x, Bm, Cm, dt, A, D, y, saved, scratch};
    for (int i = 0; i < 9; i++) g->free(g, bufs[i]);
    free(hx);
    free(hbc);
    free(hdt);
    free(hA);
}

/* The SSD's state-shaped arrays in bf16 at bf16 precision (kernels/ssd_cuda.cuh, ssd_states_type): the same SSD (fp32
 * token rows) run at fp32 and at bf16 precision. Each launch's distinct bytes fall by 2 per element of each such
 * array it reads or writes (the rest of its traffic the same): the states product writes the chunk states st_c (c <
 * nc-1), which the state passing reads, writing every S_c; dSoff's product writes every dSoff_c, which the reverse
 * state passing reads with every S_c, writing every dSt_c, which dx's and dB's products read. */
static void test_ssd_states_bf16(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    const m2_ssd_shape s = {.B = 1, .T = 192, .H = 2, .P = 16, .G = 1, .N = 32, .Q = 64, .ld_x = 32, .ld_bc = 32};
    const size_t T = (size_t)s.T, H = (size_t)s.H, ny = T * H * s.P, nbc = T * s.ld_bc;
    const double elems = (double)s.B * (s.T / s.Q) * s.H * s.P * s.N;  /* every S_c of every (b, c, h) */
    const double chunk_states = elems / (s.T / s.Q) * (s.T / s.Q - 1); /* st_c for c < nc-1 */
    float *hx = m2_host_uniform(T * s.ld_x, -1, 1, 5, 1), *hbc = m2_host_uniform(nbc, -1, 1, 5, 2);
    float *hdt = m2_host_uniform(T * H, 0.01f, 0.1f, 5, 3), *hA = m2_host_fill(H, -1.0f);
    float *hdy = m2_host_uniform(ny, -1, 1, 5, 4);
    float *x = m2_dev_from(g, hx, T * s.ld_x), *Bm = m2_dev_from(g, hbc, nbc), *Cm = m2_dev_from(g, hbc, nbc),
          *dt = m2_dev_from(g, hdt, T * H), *A = m2_dev_from(g, hA, H), *D = m2_dev_from(g, hA, H),
          *dy = m2_dev_from(g, hdy, ny);
    float *y = g->alloc(g, ny * sizeof(float)), *dx = g->alloc(g, T * s.ld_x * sizeof(float)),
          *ddt = g->alloc(g, T * H * sizeof(float)), *dA = g->alloc(g, H * sizeof(float)),
          *dB = g->alloc(g, nbc * sizeof(float)), *dC = g->alloc(g, nbc * sizeof(float)),
          *dD = g->alloc(g, H * sizeof(float));
    g->memset0(g, dD, H * sizeof(float)); /* the backward adds to dD (and writes dA) */
    static const m2_cuda_gemm_precision precs[2] = {M2_CUDA_GEMM_FP32, M2_CUDA_GEMM_BF16};
    /* per launch, the elements it reads and writes in the states' type */
    const struct {
        const char *name;
        double reads, writes;
    } launches[] = {
        {"ssd_fwd (chunk states)", 0, chunk_states},                  /* st */
        {"ssd_fwd (state passing)", chunk_states, elems},             /* st; S */
        {"ssd_bwd (chunk states, recomputed)", 0, chunk_states},      /* st */
        {"ssd_bwd (state passing, recomputed)", chunk_states, elems}, /* st; S */
        {"ssd_bwd (dS through outputs)", 0, elems},                   /* dSoff */
        {"ssd_bwd (reverse state passing)", 2 * elems, elems},        /* S, dSoff; dSt */
        {"ssd_bwd (dx)", elems, 0},                                   /* dSt */
        {"ssd_bwd (dB)", elems, 0},                                   /* dSt */
    };
    enum { NL = sizeof launches / sizeof launches[0] };
    double wr[NL][2], rd[NL][2];
    for (int t = 0; t < 2; t++) {
        const m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(precs[t]);
        float *saved = g->alloc(g, g->ssd_saved_size(g, &s) * sizeof(float));
        float *scratch = g->alloc(g, g->ssd_scratch_size(g, &s, 1) * sizeof(float));
        m2emu_counters_reset();
        g->ssd_fwd(g, &s, x, dt, A, Bm, Cm, D, y, M2_ACT_REAL, saved, scratch);
        g->ssd_bwd(g, &s, x, dt, A, Bm, Cm, D, dy, M2_ACT_REAL, saved, dx, ddt, dA, dB, dC, dD, scratch);
        for (int k = 0; k < NL; k++) {
            const m2emu_kernel_count c = find_record(launches[k].name, 1);
            wr[k][t] = c.write_distinct;
            rd[k][t] = c.read_distinct;
        }
        m2_ops_cuda_set_gemm_precision(old);
        g->free(g, saved);
        g->free(g, scratch);
    }
    for (int k = 0; k < NL; k++) {
        printf("  %-36s wrote fp32 %.0f B, bf16 %.0f B; read fp32 %.0f B, bf16 %.0f B\n", launches[k].name, wr[k][0],
               wr[k][1], rd[k][0], rd[k][1]);
        assert_true(wr[k][0] - wr[k][1] == 2.0 * launches[k].writes);
        assert_true(rd[k][0] - rd[k][1] == 2.0 * launches[k].reads);
    }
    float *bufs[] = {x, Bm, Cm, dt, A, D, dy, y, dx, ddt, dA, dB, dC, dD};
    for (int i = 0; i < 14; i++) g->free(g, bufs[i]);
    free(hx);
    free(hbc);
    free(hdt);
    free(hA);
    free(hdy);
}

/* The residual add made by the out_proj GEMM (beta = 1 onto h_{l+1}'s slot holding h_l, model.c layer_forward): the
 * forward of an L-layer model over R rows at bf16 precision, a training model's and an inference model's. Each of
 * the L + 1 rmsnorm_fwd launches (the layers' and norm_f) reads its input h once (4 B per element) and its weight; a
 * layer's writes u (bf16, 2 B) and, in the training model (h_{l+1} a slot of its own, kept for the backward), the
 * copy of h_l into h_{l+1}'s slot (4 B); in the inference model h is one slot, updated in place: no copy. norm_f
 * writes u in fp32. The GEMMs read the out_proj's C, h_l, 4 B per element, besides their operands. Before (the add
 * made by the next norm, which read h_l and h_{l+1} and wrote h_{l+1} back) the norms read 4 B more per element in
 * all but layer 0's, and the inference model's wrote 4 B more in all but layer 0's; the GEMMs read no C. */
static void test_residual_in_gemm(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    m2_dims d = {.F = 5, .O = 3, .D = 32, .L = 3, .E = 2, .P = 16, .N = 16, .G = 1, .K = 4, .Q = 16};
    assert_int_equal(m2_dims_derive(&d), 0);
    const int B = 2, T = 32;
    m2_layout lay;
    assert_int_equal(m2_layout_init(&lay, &d), 0);
    float *hp = m2_host_fill(lay.n_params, 0.0f), *hx = m2_host_uniform((size_t)B * T * d.F, -1, 1, 11, 1);
    m2_params_init(&lay, hp, 11);
    float *params = m2_dev_from(g, hp, lay.n_params), *X = m2_dev_from(g, hx, (size_t)B * T * d.F);
    float *pred = g->alloc(g, (size_t)B * T * d.O * sizeof(float));
    const m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_BF16);
    const double R = (double)B * T, L = d.L, D = d.D, F = d.F, O = d.O, Di = d.Di, Win = d.Win, hD = R * D;
    /* embed (fp32), per layer the in_proj (bf16 operands and output) and the out_proj (bf16 operands, fp32 C read
     * and written), the head (fp32) */
    const double gemm_read = 4 * (R * F + D * F) + L * (2 * (R * D + Win * D) + 2 * (R * Di + D * Di) + 4 * hD) +
                             4 * (R * D + O * D),
                 gemm_write = 4 * hD + L * (2 * R * Win + 4 * hD) + 4 * R * O;
    for (int inference = 0; inference < 2; inference++) {
        m2_model *m = NULL;
        assert_int_equal(inference ? m2_model_create_inference(&m, &lay, B, T, g)
                                   : m2_model_create_with_ops(&m, &lay, B, T, g),
                         M2_OK);
        m2emu_counters_reset();
        assert_int_equal(m2_model_forward(m, params, X, B, T, pred), M2_OK);
        const m2emu_kernel_count n = sum_records("rmsnorm_fwd"), gm = sum_records("cublasGemmEx");
        printf("  %s forward, L = %d, %.0f rows x %d: rmsnorm_fwd read %.0f B, wrote %.0f B; GEMMs read %.0f B, "
               "wrote %.0f B\n",
               inference ? "inference" : "training", d.L, R, d.D, n.read_distinct, n.write_distinct, gm.read_distinct,
               gm.write_distinct);
        assert_true(n.launches == L + 1);
        assert_true(n.read_distinct == (L + 1) * (4 * hD + 4 * D));
        assert_true(n.write_distinct == L * (2 * hD + (inference ? 0 : 4 * hD)) + 4 * hD);
        assert_true(gm.read_distinct == gemm_read && gm.write_distinct == gemm_write);
        m2_model_free(m);
    }
    m2_ops_cuda_set_gemm_precision(old);
    g->free(g, params);
    g->free(g, X);
    g->free(g, pred);
    free(hp);
    free(hx);
    m2_layout_free(&lay);
}

/* One model of L layers on backend g: the launches of a forward and of a forward+backward (after one untimed
 * forward+backward, which sizes the workspaces), in total and of the column sums' final passes; the gradients of
 * the second forward+backward (host, malloc'd). */
static float *model_launches(const m2_ops *g, int L, double fwd[2], double fb[2], size_t *n_params)
{
    m2_dims d = m2_fixture_dims(1, 16);
    d.L = L;
    const int B = 2, T = 32;
    m2_fixture f;
    m2_fixture_init(&f, &d, B, T, 4, 77);
    m2_model *gm = NULL;
    assert_int_equal(m2_model_create_with_ops(&gm, &f.lay, B, T, g), 0);
    const size_t n = f.lay.n_params, nx = (size_t)B * T * d.F, ny = (size_t)B * T * d.O;
    *n_params = n;
    float *params = m2_dev_from(g, f.params, n), *X = m2_dev_from(g, f.X, nx), *Y = m2_dev_from(g, f.Y, ny);
    float *grads = g->alloc(g, n * sizeof(float)), *pred = g->alloc(g, ny * sizeof(float));
    double sse;
    int64_t count;
    for (int k = 0; k < 2; k++) {
        g->memset0(g, grads, n * sizeof(float));
        m2emu_counters_reset();
        assert_int_equal(m2_model_forward_backward(gm, params, grads, X, Y, B, T, 4, &sse, &count, pred, NULL, NULL),
                         0);
    }
    fb[0] = launches(NULL), fb[1] = launches("column sums");
    float *host = m2_host_from(g, grads, n);
    m2emu_counters_reset();
    assert_int_equal(m2_model_forward(gm, params, X, B, T, pred), 0);
    fwd[0] = launches(NULL), fwd[1] = launches("column sums");
    void *bufs[] = {params, X, Y, grads, pred};
    for (int i = 0; i < 5; i++) g->free(g, bufs[i]);
    m2_model_free(gm);
    m2_fixture_free(&f);
    return host;
}

static void test_layer_launches(void **state)
{
    (void)state;
    const m2_ops *g = m2_gpu_ops();
    double f1[2], b1[2], f2[2], b2[2];
    size_t n;
    free(model_launches(g, 1, f1, b1, &n));
    float *batched = model_launches(g, 2, f2, b2, &n);
    const double fwd = f2[0] - f1[0], bwd = b2[0] - b1[0] - fwd;
    printf("  launches per layer: forward %.0f, backward %.0f (of which column-sum finals %.0f)\n", fwd, bwd,
           b2[1] - b1[1]);
    assert_true(fwd == 11);
    assert_true(bwd == 21);
    assert_true(b2[1] - b1[1] == 1 && f2[1] == f1[1]);
    /* the same backend without grad_batch (every final pass launched by its op): the same gradients, bitwise */
    m2_ops unbatched = *g;
    unbatched.grad_batch = NULL;
    double fu[2], bu[2];
    float *single = model_launches(&unbatched, 2, fu, bu, &n);
    printf("  unbatched: %.0f launches per forward+backward, batched %.0f\n", bu[0], b2[0]);
    assert_true(bu[0] - b2[0] == 2 * 3); /* 4 finals in place of 1, per layer */
    assert_memory_equal(batched, single, n * sizeof(float));
    printf("  their gradients: bitwise equal\n");
    free(batched);
    free(single);
}

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_bytes),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_vector_accesses),
        cmocka_unit_test(test_conv_bwd_walks),
        cmocka_unit_test(test_bf16_storage),
        cmocka_unit_test(test_bf16_backward),
        cmocka_unit_test(test_bf16_ssd_gradients),
        cmocka_unit_test(test_ssd_first_stages),
        cmocka_unit_test(test_backward_keeps),
        cmocka_unit_test(test_ssd_states_bf16),
        cmocka_unit_test(test_residual_in_gemm),
        cmocka_unit_test(test_layer_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
