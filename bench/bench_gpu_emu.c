/* Predicted GPU step time from counts (no GPU needed): the CUDA backend's real kernels run on the counting build
 * of the CPU emulation (tests/gpu/emu/emu_counters.h), the counts go through the three-roof model (gpu_roof.h)
 * with the SASS table of tools/sass_report.py, for the H100 SXM and the H200.
 *   bench_gpu_emu [--config configs/8gpu.ini] [--sass bench/sass_sm90.tsv] [--compare OTHER.tsv] [--seq T]
 *                 [--ranks R] [--top K] [--tsv PREDICTED.tsv]
 * Counted at the config's head shape: a training micro-batch (forward + backward) and the evaluation forward at
 * 1 and 2 layers, each at (B, T) = (1, T), (2, T), (1, 2T) (T default 256, a multiple of the chunk size), and the
 * ZeRO-1 update (sum of squares, scale, AdamW) on a shard of n/R parameters. Extrapolated per kernel (extrapolate
 * below) to micro_batch sequences of seq_len ticks and the config's layers, times the accumulation steps
 * (global_batch / (micro_batch x R)); the per-token counts at the three corners are printed.
 * Prints per kernel the counts and the predicted H200 time, then per GPU the step time, tokens/s and the MFU
 * bound (model FLOPs per token of core/flops.h over the bf16 dense peak), and the evaluation forward; with
 * --compare, the H200 bound with another SASS table too (the same counts: e.g. the kernels before a change);
 * with --tsv, every kernel's H200 prediction as a table (bench/predicted_h200.tsv, which tests/gpu/check.sh prints
 * beside the measured times). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/layout.h"
#include "base/rng.h"
#include "core/flops.h"
#include "core/model.h"
#include "cuda_workspace.h"
#include "emu_counters.h"
#include "gpu_roof.h"
#include "ops_cuda.h"
#include "run/config_file.h"

enum { MAXREC = 256 };

typedef struct {
    m2emu_kernel_count r[MAXREC];
    int n;
    size_t peak_bytes;
    size_t act_per_token; /* activation bytes per token and layer kept for the backward (training model) */
} counts;

typedef struct {
    const char *config, *sass, *compare, *tsv;
    int seq, ranks, top;
} options;

static int parse(int argc, char **argv, options *o)
{
    static char cfg[1024], sass[1024];
    const char *src = getenv("MAMBA2_SRC");
    snprintf(cfg, sizeof cfg, "%s/configs/8gpu.ini", src ? src : ".");
    snprintf(sass, sizeof sass, "%s/bench/sass_sm90.tsv", src ? src : ".");
    *o = (options){cfg, sass, NULL, NULL, 256, 8, 25};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return m2_fail(M2_EUSAGE, "bench_gpu_emu (%s): missing value", a);
        if (!strcmp(a, "--config"))
            o->config = v;
        else if (!strcmp(a, "--sass"))
            o->sass = v;
        else if (!strcmp(a, "--tsv"))
            o->tsv = v;
        else if (!strcmp(a, "--compare"))
            o->compare = v;
        else if (!strcmp(a, "--seq"))
            o->seq = atoi(v);
        else if (!strcmp(a, "--ranks"))
            o->ranks = atoi(v);
        else if (!strcmp(a, "--top"))
            o->top = atoi(v);
        else
            return m2_fail(M2_EUSAGE, "bench_gpu_emu (%s): unknown option", a);
    }
    if (o->seq < 1 || o->ranks < 1 || o->top < 0)
        return m2_fail(M2_EUSAGE, "bench_gpu_emu: --seq >= 1, --ranks >= 1, --top >= 0");
    return M2_OK;
}

static void take(counts *c)
{
    c->n = m2emu_counters_get(c->r, MAXREC);
    if (c->n > MAXREC) c->n = MAXREC;
    c->peak_bytes = m2emu_device_peak_bytes();
}

static float *dev_random(const m2_ops *g, size_t n, uint64_t stream)
{
    float *h = malloc(n * sizeof *h), *d = g->alloc(g, n * sizeof *h);
    if (h && d) {
        const uint64_t key = m2_rng_key(5, M2_RNG_TEST, stream, 0);
        for (size_t i = 0; i < n; i++) h[i] = (float)(2 * m2_rng_u01(key, i) - 1);
        g->to_device(g, d, h, n * sizeof *h);
    }
    free(h);
    return d;
}

/* One counted pass at L layers and T ticks: a training micro-batch (train = 1) or the evaluation forward. */
static int count_pass(const m2_config *cfg0, int L, int B, int T, int train, counts *out)
{
    m2_config cfg = *cfg0;
    cfg.model.n_layers = L;
    m2_dims d;
    m2_layout lay;
    int rc = m2_dims_init(&d, &cfg, 32, 4);
    if (rc || (rc = m2_layout_init(&lay, &d))) return rc;
    const m2_ops *g = m2_ops_cuda();
    /* every pass starts without the op workspace an earlier (larger) pass left: the counted peak is then this
     * pass's own, and linear in its tokens (a workspace kept from the corners before made the extrapolated peak
     * smaller than the activations it holds, BENCHMARKS.md) */
    m2_ops_cuda_release_workspace();
    const size_t n = lay.n_params;
    float *params = dev_random(g, n, 3), *grads = g->alloc(g, n * sizeof(float));
    const size_t ntok = (size_t)B * T;
    float *X = dev_random(g, ntok * d.F, 1), *Y = dev_random(g, ntok * d.O, 2);
    float *pred = g->alloc(g, ntok * d.O * sizeof(float));
    m2_model *model = NULL;
    if (!params || !grads || !X || !Y || !pred) rc = m2_fail(M2_EFAIL, "bench_gpu_emu: out of memory");
    m2emu_counters_reset();
    if (!rc && train) rc = m2_model_create_with_ops(&model, &lay, B, T, g);
    if (!rc && !train) rc = m2_model_create_inference(&model, &lay, B, T, g);
    double sse = 0;
    int64_t cnt = 0;
    if (!rc) g->memset0(g, grads, n * sizeof(float));
    m2emu_counters_reset(); /* the pass only (peak memory from here includes the model's buffers) */
    if (!rc && train) rc = m2_model_forward_backward(model, params, grads, X, Y, B, T, 0, &sse, &cnt, NULL, NULL, NULL);
    if (!rc && !train) rc = m2_model_forward(model, params, X, B, T, pred);
    g->sync(g);
    take(out);
    out->act_per_token = model && train ? m2_model_activation_bytes_per_token(model) : 0;
    m2_model_free(model);
    float *bufs[] = {params, grads, X, Y, pred};
    for (int i = 0; i < 5; i++) g->free(g, bufs[i]);
    m2_layout_free(&lay);
    return rc;
}

/* The ZeRO-1 update of one rank: sum of squares, scale and AdamW over a shard of `shard` parameters. */
static int count_update(size_t shard, counts *out)
{
    const m2_ops *g = m2_ops_cuda();
    float *p = dev_random(g, shard, 4), *gr = dev_random(g, shard, 5), *m = g->alloc(g, shard * 4),
          *v = g->alloc(g, shard * 4);
    unsigned char *mask = g->alloc(g, shard);
    if (!p || !gr || !m || !v || !mask) return m2_fail(M2_EFAIL, "bench_gpu_emu: out of memory");
    g->memset0(g, m, shard * 4);
    g->memset0(g, v, shard * 4);
    g->memset0(g, mask, shard);
    m2emu_counters_reset();
    (void)g->sumsq(g, gr, shard);
    g->scale(g, gr, shard, 0.5);
    g->adamw(g, p, gr, m, v, mask, shard, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1);
    g->sync(g);
    take(out);
    void *bufs[] = {p, gr, m, v, mask};
    for (int i = 0; i < 5; i++) g->free(g, bufs[i]);
    return M2_OK;
}

static const m2emu_kernel_count *lookup(const counts *c, const m2emu_kernel_count *r)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->r[i].name, r->name) && !strcmp(c->r[i].key, r->key)) return &c->r[i];
    return NULL;
}

enum { NFIELDS = (sizeof(m2emu_kernel_count) - offsetof(m2emu_kernel_count, launches)) / sizeof(double) };

/* Per layer count l, a count is w + B (u + v T) over B sequences of T ticks: w what a call does once (launches,
 * weight reads), u + v T what each sequence adds (the SSD's chunk-state stages are affine in T). Three corners
 * c[l][0] = (1, T), c[l][1] = (2, T), c[l][2] = (1, 2T) give w, u, v; layers add linearly:
 * c(L) = c(1) + (L - 1)(c(2) - c(1)). Per record (one missing from a corner counts 0 there), times `times`.
 * Launches are per call whatever B and T are, except stages that need a second chunk (the chunk states): they are
 * taken from the (1, 2T) corner, where every stage runs (T a multiple of the chunk size). */
static double affine3(const double v3[3], int T, double B, double Tq)
{
    const double v = (v3[2] - v3[0]) / T, per_seq = v3[1] - v3[0], u = per_seq - v * T, w = v3[0] - per_seq;
    return w + B * (u + v * Tq);
}

static void extrapolate(const counts *c[2][3], int T, int L, double B, double Tq, double times, counts *out)
{
    out->n = 0;
    const counts *ref = c[1][2];
    for (int i = 0; i < ref->n && out->n < MAXREC; i++) {
        const double *f[2][3];
        for (int l = 0; l < 2; l++)
            for (int k = 0; k < 3; k++) {
                const m2emu_kernel_count *r = lookup(c[l][k], &ref->r[i]);
                f[l][k] = r ? &r->launches : NULL;
            }
        m2emu_kernel_count *o = &out->r[out->n++];
        *o = ref->r[i];
        double *fo = &o->launches;
        for (int j = 0; j < (int)NFIELDS; j++) {
            double v[2][3];
            for (int l = 0; l < 2; l++)
                for (int k = 0; k < 3; k++) v[l][k] = f[l][k] ? f[l][k][j] : 0;
            const int launches = j == 0;
            const double one = launches ? v[0][2] : affine3(v[0], T, B, Tq);
            const double two = launches ? v[1][2] : affine3(v[1], T, B, Tq);
            fo[j] = times * (one + (L - 1) * (two - one));
        }
    }
}

static void add_counts(counts *acc, const counts *c, double times)
{
    for (int i = 0; i < c->n; i++) {
        m2emu_kernel_count *o = (m2emu_kernel_count *)lookup(acc, &c->r[i]);
        if (!o && acc->n < MAXREC) {
            o = &acc->r[acc->n++];
            *o = c->r[i];
            double *f = &o->launches;
            for (int k = 0; k < (int)NFIELDS; k++) f[k] = 0;
        }
        if (!o) continue;
        double *f = &o->launches;
        const double *s = &c->r[i].launches;
        for (int k = 0; k < (int)NFIELDS; k++) f[k] += times * s[k];
    }
}

typedef struct {
    double t, bytes, flops;
} total;

static total predict_all(const m2_gpu_roof *gpu, const counts *c, const m2_sass_table *sass)
{
    total s = {0, 0, 0};
    for (int i = 0; i < c->n; i++) {
        const m2emu_kernel_count *r = &c->r[i];
        const m2_roof_time p = m2_roof_predict(gpu, r, m2_sass_find(sass, r->key, "bf16"));
        s.t += p.total;
        s.bytes += r->read_distinct + r->write_distinct;
        s.flops += r->flops_bf16 + r->flops_tf32 + r->flops_fp32_cuda;
    }
    return s;
}

static int by_time_desc(const void *a, const void *b)
{
    const double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x < y) - (x > y);
}

static void print_kernels(const m2_gpu_roof *gpu, const counts *c, const m2_sass_table *sass, int top)
{
    double(*order)[2] = malloc((size_t)c->n * sizeof *order);
    if (!order) return;
    for (int i = 0; i < c->n; i++) {
        order[i][0] = m2_roof_predict(gpu, &c->r[i], m2_sass_find(sass, c->r[i].key, "bf16")).total;
        order[i][1] = i;
    }
    qsort(order, (size_t)c->n, sizeof *order, by_time_desc);
    printf("  %-40s %8s %10s %10s %9s %8s %9s %6s %8s\n", "kernel (per training step, one GPU)", "launches", "MB read",
           "MB write", "GFLOP tc", "ins/HMMA", "H200 ms", "share", "bound");
    double tot = 0;
    for (int i = 0; i < c->n; i++) tot += order[i][0];
    for (int i = 0; i < c->n && i < top; i++) {
        const m2emu_kernel_count *r = &c->r[(int)order[i][1]];
        const m2_sass_row *s = m2_sass_find(sass, r->key, "bf16");
        const m2_roof_time p = m2_roof_predict(gpu, r, s);
        char per[16] = "-";
        if (s && s->per_hmma > 0) snprintf(per, sizeof per, "%.0f", s->per_hmma);
        printf("  %-40.40s %8.0f %10.1f %10.1f %9.1f %8s %9.3f %5.1f%% %8s\n", r->name, r->launches,
               r->read_distinct / 1e6, r->write_distinct / 1e6, (r->flops_bf16 + r->flops_tf32) / 1e9, per,
               1e3 * p.total, tot > 0 ? 100 * p.total / tot : 0, p.bound);
    }
    free(order);
}

/* The per-kernel predictions as a tab-separated table, written atomically. */
static int write_tsv(const char *path, const m2_gpu_roof *gpu, const counts *c, const m2_sass_table *sass)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return m2_fail(M2_EFAIL, "bench_gpu_emu (%s): cannot write", tmp);
    fprintf(f, "name\tkey\tlaunches\tread_MB\twrite_MB\ttensor_GFLOP\tpredicted_ms\tbound\n");
    for (int i = 0; i < c->n; i++) {
        const m2emu_kernel_count *r = &c->r[i];
        const m2_roof_time p = m2_roof_predict(gpu, r, m2_sass_find(sass, r->key, "bf16"));
        fprintf(f, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.3f\t%s\n", r->name, r->key, r->launches, r->read_distinct / 1e6,
                r->write_distinct / 1e6, (r->flops_bf16 + r->flops_tf32) / 1e9, 1e3 * p.total, p.bound);
    }
    const int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        remove(tmp);
        return m2_fail(M2_EFAIL, "bench_gpu_emu (%s): write failed", path);
    }
    return M2_OK;
}

static int run(const options *o)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    int rc = m2_config_load_file(&cfg, o->config);
    if (rc) return rc;
    m2_sass_table sass;
    if ((rc = m2_sass_load(&sass, o->sass))) return rc;
    if ((rc = m2_ops_cuda_init(0))) return rc;
    m2_ops_cuda_set_gemm_precision(M2_CUDA_GEMM_BF16);
    if (!m2emu_counts_bytes()) return m2_fail(M2_EFAIL, "bench_gpu_emu: not linked with the counting emulation");
    const int T = o->seq, Lfull = cfg.model.n_layers, mb = cfg.train.micro_batch;
    if (T % cfg.model.chunk_size) /* a chunk cut short is not a linear share of a full one: nothing extrapolates */
        return m2_fail(M2_EUSAGE, "bench_gpu_emu (--seq %d): a multiple of the chunk size (%d)", T,
                       cfg.model.chunk_size);
    const int accum = cfg.train.global_batch / (mb * o->ranks);
    if (accum < 1) return m2_fail(M2_EUSAGE, "bench_gpu_emu: global_batch below micro_batch x ranks");
    const double step_tokens = (double)mb * cfg.train.seq_len * accum;
    m2_dims d;
    m2_layout lay;
    if ((rc = m2_dims_init(&d, &cfg, 32, 4)) || (rc = m2_layout_init(&lay, &d))) return rc;
    const size_t nparams = lay.n_params;
    m2_layout_free(&lay);

    /* corners per layer count: (B, T) = (1, T), (2, T), (1, 2T) */
    static counts tr[2][3], ev[2][3], up, step, eval;
    const int cb[3] = {1, 2, 1}, ct[3] = {1, 1, 2};
    for (int l = 0; l < 2 && !rc; l++)
        for (int k = 0; k < 3 && !rc; k++)
            if (!(rc = count_pass(&cfg, l + 1, cb[k], ct[k] * T, 1, &tr[l][k])))
                rc = count_pass(&cfg, l + 1, cb[k], ct[k] * T, 0, &ev[l][k]);
    if (rc || (rc = count_update((nparams + o->ranks - 1) / o->ranks, &up))) return rc;
    const counts *trc[2][3] = {{&tr[0][0], &tr[0][1], &tr[0][2]}, {&tr[1][0], &tr[1][1], &tr[1][2]}};
    const counts *evc[2][3] = {{&ev[0][0], &ev[0][1], &ev[0][2]}, {&ev[1][0], &ev[1][1], &ev[1][2]}};

    printf("bench_gpu_emu: %s, D=%d E=%d P=%d N=%d G=%d Q=%d H=%d, %d layers, %zu parameters; counted on the CPU "
           "emulation (no GPU), bf16 products\n",
           o->config, d.D, d.E, d.P, d.N, d.G, d.Q, d.H, Lfull, nparams);
    /* linearity: bytes and tensor FLOPs per token at the three corners of the 1-layer model */
    printf("  counted per token, 1 layer (B sequences x T ticks):");
    for (int k = 0; k < 3; k++) {
        double by = 0, fl = 0;
        for (int i = 0; i < tr[0][k].n; i++)
            by += tr[0][k].r[i].read_distinct + tr[0][k].r[i].write_distinct,
                fl += tr[0][k].r[i].flops_bf16 + tr[0][k].r[i].flops_tf32;
        const double ntok = (double)cb[k] * ct[k] * T;
        printf(" %dx%d: %.0f B, %.0f FLOP%s", cb[k], ct[k] * T, by / ntok, fl / ntok, k < 2 ? ";" : "\n");
    }
    printf("  (bytes per token fall with more tokens per call: the weights are read once per GEMM call; each "
           "kernel is extrapolated as w + B (u + v T) from these corners)\n");
    /* the step: accumulation micro-batches of micro_batch x seq_len tokens, then the update */
    extrapolate(trc, T, Lfull, mb, cfg.train.seq_len, accum, &step);
    add_counts(&step, &up, 1.0);
    extrapolate(evc, T, Lfull, mb, cfg.train.seq_len, 1.0, &eval);
    int ngpu;
    const m2_gpu_roof *gpus = m2_gpu_roofs(&ngpu);
    printf("  training step per GPU: %d micro-batches of %d x %d = %.0f tokens, %d ranks, ZeRO-1 shard of %zu\n", accum,
           mb, cfg.train.seq_len, step_tokens, o->ranks, (nparams + o->ranks - 1) / o->ranks);
    print_kernels(&gpus[ngpu - 1], &step, &sass, o->top);
    const double fpt = m2_train_flops_per_token(&d);
    for (int k = 0; k < ngpu; k++) {
        const total s = predict_all(&gpus[k], &step, &sass), e = predict_all(&gpus[k], &eval, &sass);
        const double tps = step_tokens / s.t;
        printf("  %-8s training step: %.1f ms predicted (%.1f GB, %.1f TFLOP counted), %.0f tokens/s, MFU bound "
               "%.1f%%\n",
               gpus[k].name, 1e3 * s.t, s.bytes / 1e9, s.flops / 1e12, tps, 100 * tps * fpt / gpus[k].bf16_flops_s);
        printf("  %-8s evaluation forward (%d x %d ticks): %.1f ms predicted, %.0f ticks/s\n", gpus[k].name, mb,
               cfg.train.seq_len, 1e3 * e.t, (double)mb * cfg.train.seq_len / e.t);
    }
    /* device memory: the counted peak of the 1- and 2-layer micro-batches, extrapolated, per token */
    double pk[2][3];
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 3; k++) pk[l][k] = (double)tr[l][k].peak_bytes;
    const double m1 = affine3(pk[0], T, mb, cfg.train.seq_len), m2 = affine3(pk[1], T, mb, cfg.train.seq_len);
    const double mem = m1 + (Lfull - 1) * (m2 - m1);
    printf("  device memory of a training micro-batch of %d x %d (counted peak of the pass, extrapolated): %.2f GiB, "
           "%.1f KiB per token\n",
           mb, cfg.train.seq_len, mem / (1 << 30), mem / (mb * cfg.train.seq_len) / 1024);
    printf("  of which activations kept for the backward: %zu bytes per token per layer (%.1f KiB per token, %d "
           "layers)\n",
           tr[0][0].act_per_token, (double)tr[0][0].act_per_token * Lfull / 1024, Lfull);
    const total h200 = predict_all(&gpus[ngpu - 1], &step, &sass);
    printf("bench_gpu_emu: predicted H200 MFU bound of a training step at %s's shape: %.1f%%\n", o->config,
           100 * step_tokens / h200.t * fpt / gpus[ngpu - 1].bf16_flops_s);
    if (o->tsv && (rc = write_tsv(o->tsv, &gpus[ngpu - 1], &step, &sass))) return rc;
    if (o->compare) {
        m2_sass_table other;
        if ((rc = m2_sass_load(&other, o->compare))) return rc;
        const total c = predict_all(&gpus[ngpu - 1], &step, &other);
        printf("  with the SASS table %s: H200 training step %.1f ms, MFU bound %.1f%%\n", o->compare, 1e3 * c.t,
               100 * step_tokens / c.t * fpt / gpus[ngpu - 1].bf16_flops_s);
        m2_sass_free(&other);
    }
    m2_sass_free(&sass);
    return M2_OK;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (!rc) rc = run(&o);
    return rc ? m2_report("bench_gpu_emu", rc) : 0;
}
