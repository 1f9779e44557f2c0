/* GPU training throughput of the model graph on the CUDA backend, one GPU:
 *   bench_gpu [--config configs/8gpu.ini] [--batch B] [--seq T] [--layers L] [--iters N] [--warmup W]
 *             [--precision bf16|tf32|fp32] [--features F] [--targets O]
 * The model shape comes from the config's [model] section (8gpu.ini: D=768, E=2, P=64, N=128, G=1, K=4, Q=256,
 * 24 layers); B and T default to its micro_batch and seq_len (16 x 2048). Reported:
 *   - tokens/s of a training micro-step (forward + backward into the gradient buffer, loss included), median of
 *     N timed steps after W warm-up steps;
 *   - MFU: model FLOPs per token x tokens/s over the bf16 dense peak of the GPU found (core/flops.h, shared with
 *     the trainer's metrics: the FLOP count and the table of peaks by GPU name; other GPUs: not reported);
 *   - per-kernel time (m2_model_set_timing: a sync around every op, so one separate step, and the shares are what
 *     matters);
 *   - device memory per token (everything the run took on the device: parameters, gradients, moments, inputs,
 *     activations, workspaces; over B x T) and the activation bytes per token and layer kept for the backward;
 *   - AdamW over the whole flat buffer;
 *   - evaluation (mamba2_eval's path): the forward of an inference model (m2_model_create_inference) over one
 *     sequence of B x T ticks, tokens/s and its device memory per token.
 * Without a GPU it prints one SKIP line and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run/config_file.h"
#include "base/error.h"
#include "core/flops.h"
#include "base/layout.h"
#include "core/model.h"
#include "base/rng.h"
#include "ops_cuda.h"

typedef struct {
    const char *config;
    int batch, seq, layers, iters, warmup, features, targets;
    m2_cuda_gemm_precision prec;
} options;

static int parse(int argc, char **argv, options *o)
{
    static char default_config[1024];
    const char *src = getenv("MAMBA2_SRC");
    snprintf(default_config, sizeof default_config, "%s/configs/8gpu.ini", src ? src : ".");
    *o = (options){default_config, 0, 0, 0, 5, 2, 32, 4, M2_CUDA_GEMM_BF16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return m2_fail(M2_EUSAGE, "bench_gpu (%s): missing value", a);
        i++;
        if (!strcmp(a, "--config"))
            o->config = v;
        else if (!strcmp(a, "--batch"))
            o->batch = atoi(v);
        else if (!strcmp(a, "--seq"))
            o->seq = atoi(v);
        else if (!strcmp(a, "--layers"))
            o->layers = atoi(v);
        else if (!strcmp(a, "--iters"))
            o->iters = atoi(v);
        else if (!strcmp(a, "--warmup"))
            o->warmup = atoi(v);
        else if (!strcmp(a, "--features"))
            o->features = atoi(v);
        else if (!strcmp(a, "--targets"))
            o->targets = atoi(v);
        else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "bf16"))
                o->prec = M2_CUDA_GEMM_BF16;
            else if (!strcmp(v, "tf32"))
                o->prec = M2_CUDA_GEMM_TF32;
            else if (!strcmp(v, "fp32"))
                o->prec = M2_CUDA_GEMM_FP32;
            else
                return m2_fail(M2_EUSAGE, "bench_gpu (--precision %s): bf16, tf32 or fp32", v);
        } else
            return m2_fail(M2_EUSAGE, "bench_gpu (%s): unknown option", a);
    }
    if (o->iters < 1 || o->warmup < 0 || o->features < 1 || o->targets < 1)
        return m2_fail(M2_EUSAGE, "bench_gpu: --iters >= 1, --warmup >= 0, --features/--targets >= 1");
    return M2_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fill_random(const m2_ops *g, float *dev, size_t n, uint64_t stream)
{
    float *h = malloc(n * sizeof *h);
    if (!h) return m2_fail(M2_EFAIL, "bench_gpu: out of host memory");
    uint64_t key = m2_rng_key(5, M2_RNG_TEST, stream, 0);
    for (size_t i = 0; i < n; i++) h[i] = (float)(2 * m2_rng_u01(key, i) - 1);
    g->to_device(g, dev, h, n * sizeof *h);
    free(h);
    return M2_OK;
}

/* Evaluation: one sequence of T ticks through an inference model (one layer's activations), median of 3. */
static int eval_forward(const m2_ops *g, const m2_layout *lay, const float *params, const float *X, int T)
{
    m2_cuda_device_info info;
    int rc = m2_ops_cuda_device_info(&info);
    if (rc) return rc;
    const size_t free0 = info.free_bytes;
    m2_model *model = NULL;
    float *pred = g->alloc(g, (size_t)T * lay->d.O * sizeof(float));
    if (!pred) return m2_fail(M2_EFAIL, "bench_gpu: out of device memory");
    if ((rc = m2_model_create_inference(&model, lay, 1, T, g))) return rc;
    if ((rc = m2_ops_cuda_device_info(&info))) return rc;
    const size_t used = free0 > info.free_bytes ? free0 - info.free_bytes : 0;
    double secs[4];
    for (int it = 0; it < 4 && !rc; it++) { /* the first is a warm-up */
        g->sync(g);
        const double t0 = now_s();
        rc = m2_model_forward(model, params, X, 1, T, pred);
        g->sync(g);
        secs[it] = now_s() - t0;
    }
    if (!rc) {
        qsort(secs + 1, 3, sizeof(double), cmp_double);
        printf("  evaluation (inference model, one sequence of %d ticks): %.2f ms, %.0f ticks/s, %.1f KiB device "
               "memory per tick\n",
               T, 1e3 * secs[2], T / secs[2], (double)used / T / 1024);
    }
    m2_model_free(model);
    g->free(g, pred);
    return rc;
}

static int run(const options *o)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    int rc = m2_config_load_file(&cfg, o->config);
    if (rc) return rc;
    if (o->layers > 0) cfg.model.n_layers = o->layers;
    const int B = o->batch > 0 ? o->batch : cfg.train.micro_batch, T = o->seq > 0 ? o->seq : cfg.train.seq_len;
    m2_dims d;
    if ((rc = m2_dims_init(&d, &cfg, o->features, o->targets))) return rc;
    m2_layout lay;
    if ((rc = m2_layout_init(&lay, &d))) return rc;

    if ((rc = m2_ops_cuda_init(0))) return rc;
    m2_ops_cuda_set_gemm_precision(o->prec);
    const m2_ops *g = m2_ops_cuda();
    m2_cuda_device_info info;
    if ((rc = m2_ops_cuda_device_info(&info))) return rc;
    const size_t free0 = info.free_bytes;

    const size_t n = lay.n_params, ntok = (size_t)B * T;
    float *params = g->alloc(g, n * sizeof(float)), *grads = g->alloc(g, n * sizeof(float));
    float *X = g->alloc(g, ntok * d.F * sizeof(float)), *Y = g->alloc(g, ntok * d.O * sizeof(float));
    float *m = g->alloc(g, n * sizeof(float)), *v = g->alloc(g, n * sizeof(float));
    if (!params || !grads || !X || !Y || !m || !v) return m2_fail(M2_EFAIL, "bench_gpu: out of device memory");
    float *hp = malloc(n * sizeof(float));
    if (!hp) return m2_fail(M2_EFAIL, "bench_gpu: out of host memory");
    m2_params_init(&lay, hp, 1);
    g->to_device(g, params, hp, n * sizeof(float));
    free(hp);
    if ((rc = fill_random(g, X, ntok * d.F, 1)) || (rc = fill_random(g, Y, ntok * d.O, 2))) return rc;
    g->memset0(g, m, n * sizeof(float));
    g->memset0(g, v, n * sizeof(float));

    m2_model *model = NULL;
    if ((rc = m2_model_create_with_ops(&model, &lay, B, T, g))) return rc;
    printf("bench_gpu: %s (cc %d.%d, %d SMs, %.1f GiB), GEMMs: %s\n", info.name, info.cc_major, info.cc_minor,
           info.sm_count, (double)info.total_bytes / (1 << 30), m2_cuda_gemm_precision_name(o->prec));
    printf("  model: D=%d L=%d E=%d P=%d N=%d G=%d K=%d Q=%d (H=%d), F=%d O=%d, %zu parameters; micro-batch %d x %d "
           "= %zu tokens\n",
           d.D, d.L, d.E, d.P, d.N, d.G, d.K, d.Q, d.H, d.F, d.O, n, B, T, ntok);

    double *secs = malloc((size_t)o->iters * sizeof(double));
    if (!secs) return m2_fail(M2_EFAIL, "bench_gpu: out of host memory");
    double sse = 0;
    int64_t count = 0;
    for (int it = 0; it < o->warmup + o->iters; it++) {
        g->sync(g);
        const double t0 = now_s();
        g->memset0(g, grads, n * sizeof(float));
        if ((rc = m2_model_forward_backward(model, params, grads, X, Y, B, T, 0, &sse, &count, NULL, NULL, NULL)))
            return rc;
        g->sync(g);
        if (it >= o->warmup) secs[it - o->warmup] = now_s() - t0;
    }
    if ((rc = m2_ops_cuda_device_info(&info))) return rc;
    const size_t used = free0 > info.free_bytes ? free0 - info.free_bytes : 0;
    qsort(secs, (size_t)o->iters, sizeof(double), cmp_double);
    const double step = secs[o->iters / 2], tps = (double)ntok / step;
    const double fpt = m2_train_flops_per_token(&d), peak = m2_gpu_bf16_peak(info.name);

    printf("  step (fwd+bwd): median %.2f ms over %d (min %.2f, max %.2f), loss %.4f\n", 1e3 * step, o->iters,
           1e3 * secs[0], 1e3 * secs[o->iters - 1], count ? sse / (double)count : 0.0);
    printf("  throughput: %.0f tokens/s; model FLOPs %.3g per token -> %.1f TFLOP/s\n", tps, fpt, tps * fpt / 1e12);
    if (peak > 0)
        printf("  MFU: %.1f%% of the bf16 dense peak (%.0f TFLOP/s)\n", 100.0 * tps * fpt / peak, peak / 1e12);
    else
        printf("  MFU: not reported (no bf16 peak on file for this GPU)\n");
    printf("  device memory: %.2f GiB (parameters, gradients, moments, inputs, activations, workspaces) = %.1f KiB "
           "per token; activations kept for the backward %.1f KiB per token per layer\n",
           (double)used / (1 << 30), (double)used / ntok / 1024,
           (double)m2_model_activation_bytes_per_token(model) / 1024);

    /* per-kernel breakdown: one more step with a sync around every op */
    m2_model_set_timing(model, 1);
    g->memset0(g, grads, n * sizeof(float));
    if ((rc = m2_model_forward_backward(model, params, grads, X, Y, B, T, 0, &sse, &count, NULL, NULL, NULL)))
        return rc;
    m2_model_set_timing(model, 0);
    double fw[M2_OPK_N], bw[M2_OPK_N], tot = 0;
    m2_model_op_seconds(model, 0, fw);
    m2_model_op_seconds(model, 1, bw);
    for (int k = 0; k < M2_OPK_N; k++) tot += fw[k] + bw[k];
    printf("  per kernel (one step, synced per op; total %.2f ms):\n    %-16s %10s %10s %7s\n", 1e3 * tot, "op",
           "fwd ms", "bwd ms", "share");
    for (int k = 0; k < M2_OPK_N; k++)
        printf("    %-16s %10.2f %10.2f %6.1f%%\n", m2_op_kind_name(k), 1e3 * fw[k], 1e3 * bw[k],
               tot > 0 ? 100.0 * (fw[k] + bw[k]) / tot : 0.0);

    /* the optimiser over the whole flat buffer (the trainer runs it on a ZeRO shard) */
    unsigned char *mask = g->alloc(g, n);
    if (!mask) return m2_fail(M2_EFAIL, "bench_gpu: out of device memory");
    g->memset0(g, mask, n);
    g->sync(g);
    const double t0 = now_s();
    for (int i = 0; i < 10; i++) g->adamw(g, params, grads, m, v, mask, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, i + 1);
    g->sync(g);
    printf("  AdamW over %zu parameters: %.3f ms\n", n, 1e3 * (now_s() - t0) / 10);
    if ((rc = eval_forward(g, &lay, params, X, (int)ntok))) return rc;
    printf("bench_gpu: %s T=%d B=%d L=%d: %.0f tokens/s, MFU %s%.1f%%\n", info.name, T, B, d.L, tps,
           peak > 0 ? "" : "n/a ", peak > 0 ? 100.0 * tps * fpt / peak : 0.0);

    m2_model_free(model);
    void *bufs[] = {params, grads, X, Y, m, v, mask};
    for (int i = 0; i < 7; i++) g->free(g, bufs[i]);
    free(secs);
    m2_layout_free(&lay);
    return M2_OK;
}

int main(int argc, char **argv)
{
    char why[512];
    if (m2_cuda_available(why, sizeof why) == 0) {
        printf("SKIP: no CUDA GPU (%s)\n", why);
        return 0;
    }
    options o;
    int rc = parse(argc, argv, &o);
    if (!rc) rc = run(&o);
    return rc ? m2_report("bench_gpu", rc) : 0;
}
