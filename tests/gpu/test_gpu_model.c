/* The whole model on the GPU against the CPU: the same graph (model.c) created once per backend with
 * m2_model_create_with_ops, the same parameters (m2_params_init, then every tensor moved off its init value by the
 * model tests' fixture), the same micro-batch; predictions, the loss, its count, every parameter gradient and the
 * input gradient compared. T is not a multiple of Q, G is 1 and 2. Then the GPU run is repeated: bitwise-identical
 * gradients (deterministic reductions). Without a GPU: one SKIP line, exit 0.
 *
 * Tolerances (relative, norm-wise per tensor, with a floor of 1e-3 of the whole gradient's norm so that a tensor
 * whose gradient is nearly zero is judged on the scale of the others):
 * - GEMMs in fp32: the two backends differ only in summation order: predictions and loss 1e-4, gradients 1e-3;
 * - GEMMs in bf16 (the product's default): each GEMM's output carries a relative error of about 3e-3 (0.8 * 2^-8,
 *   test_gpu_ops.c), and a two-layer model chains about a dozen of them forward and as many backward:
 *   predictions and loss 3e-2, gradients 8e-2. The SSD's per-chunk products follow the same switch (bf16 tensor
 *   cores, test_gpu_ssd.c: ~0.8u each, like a GEMM) and sit in parallel branches of that chain, so they add
 *   little: measured on the emulation, predictions 6.1e-3 -> 6.4e-3, worst tensor 1.3e-2 -> 1.5e-2. At bf16
 *   precision the kept activations zxbcdt and y are stored in bf16 too (core/ops.h m2_act_type): one more rounding
 *   of at most 2^-9 relative per element (round to nearest) on two values per layer that the chain already rounds
 *   to bf16 as GEMM operands, so of the same order as one more GEMM per layer; measured: predictions 6.4e-3 ->
 *   7.3e-3, worst tensor 1.5e-2 -> 2.0e-2, inside the same tolerances (margin about 4). The backward's GEMM
 *   operands around the projections in bf16 too (dzx, u, o, a copy of dh: the values the bf16 GEMM rounded them to
 *   anyway) and d(o), a GEMM output, rounded once more: measured (emulation, this case) gradients 7.10e-3 -> 7.15e-3,
 *   worst tensor 1.74e-2 -> 1.77e-2, input gradient 1.29e-2 -> 1.28e-2, predictions unchanged (7.24e-3); the same
 *   tolerances. The SSD backward's dx, dB, dC in bf16 too (one rounding at their stores, the conv backward's input):
 *   gradients 7.15e-3 -> 7.20e-3, worst tensor (in_proj weight) 1.77e-2 -> 1.80e-2, input gradient 1.28e-2 ->
 *   1.30e-2, predictions and loss unchanged; the same tolerances. d(u) = dzx W_in, the rmsnorm backward's input, in
 *   bf16 too (a GEMM output rounded once, as upstream's autocast does): gradients 7.14e-3 -> 7.22e-3, worst tensor
 *   (x_proj weight) 1.85e-2 unchanged, input gradient 1.29e-2 -> 1.34e-2, predictions and loss unchanged; the same
 *   tolerances. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "gpu_util.h"
#include "core/model_fixture.h"

static m2_dims dims(int G, int Q)
{
    m2_dims d = {.F = 5, .O = 3, .D = 32, .L = 2, .E = 2, .P = 16, .N = 16, .G = G, .K = 4, .Q = Q};
    assert_int_equal(m2_dims_derive(&d), 0);
    return d;
}

typedef struct {
    double sse;
    int64_t count;
    float *pred, *grads, *dX;
} run_out;

static run_out gpu_run(const m2_fixture *f, m2_model *gm)
{
    const m2_ops *g = m2_gpu_ops();
    const m2_dims *d = &f->lay.d;
    const size_t n = f->lay.n_params, nx = (size_t)f->B * f->T * d->F, ny = (size_t)f->B * f->T * d->O;
    float *params = m2_dev_from(g, f->params, n), *X = m2_dev_from(g, f->X, nx), *Y = m2_dev_from(g, f->Y, ny);
    float *grads = g->alloc(g, n * sizeof(float)), *pred = g->alloc(g, ny * sizeof(float));
    assert_true(grads && pred);
    g->memset0(g, grads, n * sizeof(float));
    run_out r;
    assert_int_equal(
        m2_model_forward_backward(gm, params, grads, X, Y, f->B, f->T, f->burn_in, &r.sse, &r.count, pred, NULL, NULL),
        0);
    r.pred = m2_host_from(g, pred, ny);
    r.grads = m2_host_from(g, grads, n);
    r.dX = m2_host_from(g, m2_model_input_grad(gm), nx);
    void *bufs[] = {params, X, Y, grads, pred};
    for (int i = 0; i < 5; i++) g->free(g, bufs[i]);
    return r;
}

static void run_out_free(run_out *r)
{
    free(r->pred);
    free(r->grads);
    free(r->dX);
}

static double norm(const float *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

/* Per tensor: ||got - ref|| <= tol * max(||ref||, 1e-3 ||ref_all||). */
static void expect_grads(const m2_layout *lay, const float *got, const float *ref, double tol)
{
    const double all = norm(ref, lay->n_params);
    double worst = 0;
    const char *worst_name = "";
    for (int t = 0; t < lay->n_tensors; t++) {
        const m2_tensor *ts = &lay->tensors[t];
        double num = 0;
        for (size_t i = ts->offset; i < ts->offset + ts->numel; i++) {
            double e = (double)got[i] - ref[i];
            num += e * e;
        }
        double den = norm(ref + ts->offset, ts->numel);
        if (den < 1e-3 * all) den = 1e-3 * all;
        double e = sqrt(num) / den;
        if (!(e <= worst)) {
            worst = e;
            worst_name = ts->name;
        }
        if (!(e <= tol)) fail_msg("gradient of %s: relative error %.3e above %.1e", ts->name, e, tol);
    }
    printf("  %-44s worst tensor %s: rel err %.3e  (tol %.1e)\n", "gradients", worst_name, worst, tol);
    m2_expect_close("gradients (all)", got, ref, lay->n_params, tol);
}

static void compare(int G, int Q, int B, int T, m2_cuda_gemm_precision prec, double tol_pred, double tol_grad)
{
    m2_dims d = dims(G, Q);
    m2_fixture f;
    m2_fixture_init(&f, &d, B, T, 4, 1234 + (uint64_t)G);
    m2_model_keep_input_grad(f.model, 1);
    const double sse_cpu = m2_fixture_backward(&f);
    printf(" model G=%d Q=%d B=%d T=%d, GEMMs %s: cpu sse %.9g\n", G, Q, B, T,
           prec == M2_CUDA_GEMM_BF16 ? "bf16" : "fp32", sse_cpu);

    m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(prec);
    m2_model *gm = NULL;
    assert_int_equal(m2_model_create_with_ops(&gm, &f.lay, B, T, m2_gpu_ops()), 0);
    m2_model_keep_input_grad(gm, 1);
    run_out r = gpu_run(&f, gm);
    const size_t ny = (size_t)B * T * d.O, nx = (size_t)B * T * d.F;
    int64_t count_cpu = 0;
    for (size_t i = 0; i < ny; i++) count_cpu += (int)((i / d.O) % T) >= f.burn_in && isfinite(f.Y[i]);
    assert_int_equal(r.count, count_cpu);
    m2_expect_close_scalar("loss (sse)", r.sse, sse_cpu, tol_pred);
    m2_expect_close("predictions", r.pred, f.pred, ny, tol_pred);
    expect_grads(&f.lay, r.grads, f.grads, tol_grad);
    m2_expect_close("input gradient", r.dX, m2_model_input_grad(f.model), nx, tol_grad);

    run_out again = gpu_run(&f, gm);
    assert_memory_equal(again.grads, r.grads, f.lay.n_params * sizeof(float));
    assert_true(again.sse == r.sse);
    printf("  repeated on the GPU: bitwise-identical loss and gradients\n");
    run_out_free(&again);
    run_out_free(&r);
    m2_model_free(gm);
    m2_ops_cuda_set_gemm_precision(old);
    m2_fixture_free(&f);
}

/* At bf16 precision the CUDA backend keeps zxbcdt and y in bf16 (core/ops.h m2_act_type): 2 bytes per element of
 * each fewer per token than at fp32 precision, everything else the same. */
static void test_bf16_storage(void **state)
{
    m2_dims d = dims(2, 16);
    m2_fixture f;
    m2_fixture_init(&f, &d, 2, 45, 4, 99);
    size_t bytes[2];
    const m2_cuda_gemm_precision precs[2] = {M2_CUDA_GEMM_FP32, M2_CUDA_GEMM_BF16};
    m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(precs[0]);
    for (int i = 0; i < 2; i++) {
        m2_ops_cuda_set_gemm_precision(precs[i]);
        m2_model *gm = NULL;
        assert_int_equal(m2_model_create_with_ops(&gm, &f.lay, 2, 45, m2_gpu_ops()), 0);
        bytes[i] = m2_model_activation_bytes_per_token(gm);
        m2_model_free(gm);
    }
    m2_ops_cuda_set_gemm_precision(old);
    printf("  kept activations per token: fp32 %zu B, bf16 %zu B (Win %d + Di %d)\n", bytes[0], bytes[1], f.lay.d.Win,
           f.lay.d.Di);
    assert_true(bytes[0] - bytes[1] == 2 * (size_t)(f.lay.d.Win + f.lay.d.Di));
    m2_fixture_free(&f);
}

static void test_fp32_g1(void **state) { compare(1, 16, 2, 45, M2_CUDA_GEMM_FP32, 1e-4, 1e-3); }
static void test_fp32_g2(void **state) { compare(2, 16, 2, 45, M2_CUDA_GEMM_FP32, 1e-4, 1e-3); }
static void test_bf16_g2(void **state) { compare(2, 16, 3, 70, M2_CUDA_GEMM_BF16, 3e-2, 8e-2); }

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_storage),
        cmocka_unit_test(test_fp32_g1),
        cmocka_unit_test(test_fp32_g2),
        cmocka_unit_test(test_bf16_g2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
