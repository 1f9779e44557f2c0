/* Benchmark: forward+backward of the docs/MODEL.md §1 default model (D=128, L=4, E=2, P=32, N=64, G=1, K=4, Q=64;
 * F=8, O=3) on a micro-batch of 8 windows of T=512 ticks, on the CPU backend.
 *
 *   bench_model [threads [iterations]]     threads: default all cores
 *
 * Prints ticks/s, achieved GFLOP/s, the ratio to an OpenBLAS sgemm peak measured in the same run with the
 * same thread count (a 2048^3 sgemm, best of 3), and where the time goes per op kind (forward, backward).
 *
 * FLOP count ("model FLOPs", the work the model needs, not what the implementation recomputes):
 *   - matmuls: 6 x (matmul parameters) per token, the usual 2 (forward) + 4 (backward: input and weight
 *     gradients); matmul parameters = F*D (embed) + L*(Win*D + D*Di) (in_proj+x_proj+dt_proj, out_proj)
 *     + D*O (head). (The embed's input gradient is not computed in training; counting it changes < 0.1%.)
 *   - the SSD: per layer, the GEMM FLOPs of its forward and backward as the chunked algorithm executes them
 *     (m2_ssd_flops, defined in ssd.c: C.B^T, the intra-chunk product, chunk states, inter-chunk outputs and
 *     their gradients).
 *   Elementwise work (norms, conv, gates, decays) is not counted: it is memory-bound and small in FLOPs. */
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "core/blas_core.h"
#include "core/model.h"
#include "core/ops.h"
#include "base/rng.h"
#include "core/ssd.h"
#include "bench_batch.h"

enum { BATCH = 8, SEQ = 512, PEAK_N = 2048 };

/* CPU seconds of the whole process (all threads). On a shared machine the wall clock of a 2-thread run
 * counts the time other processes hold our cores; CPU time counts only our own work (run with
 * OMP_WAIT_POLICY=passive so that threads waiting at a barrier sleep instead of spinning). */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Best GFLOP/s of a large sgemm by the wall clock; *per_cpu_s receives GFLOP per CPU-second of that run. */
static double sgemm_peak(int threads, double *per_cpu_s)
{
    const size_t n = PEAK_N;
    *per_cpu_s = 0;
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    if (!a || !b || !c) return 0;
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (float)(i % 7) * 0.01f;
        b[i] = (float)(i % 5) * 0.02f;
    }
    openblas_set_num_threads(threads);
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < 4; r++) { /* the first is a warm-up */
        double t0 = omp_get_wtime(), c0 = cpu_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1, a, (int)n, b, (int)n, 0, c,
                    (int)n);
        double t = omp_get_wtime() - t0, ct = cpu_seconds() - c0;
        if (r > 0 && t < best) best = t;
        if (r > 0 && ct < best_cpu) best_cpu = ct;
    }
    *per_cpu_s = 2.0 * n * n * n / best_cpu / 1e9;
    m2_ops_cpu_set_threads(threads); /* back to the CPU ops' own setting (single-threaded BLAS) */
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * n / best / 1e9;
}

/* GEMM FLOPs of the SSD's forward and backward in all layers (m2_ssd_flops). */
static double ssd_flops(const m2_dims *d, int B, int T)
{
    m2_ssd_shape s = {
        .B = B, .T = T, .H = d->H, .P = d->P, .G = d->G, .N = d->N, .Q = d->Q, .ld_x = d->Cc, .ld_bc = d->Cc};
    double sf, sb;
    m2_ssd_flops(&s, &sf, &sb);
    return d->L * (sf + sb);
}

/* The model FLOPs of one forward+backward (the header comment defines them). */
static double model_flops(const m2_dims *d, int B, int T)
{
    double matmul_params = (double)d->F * d->D + (double)d->L * ((double)d->Win * d->D + (double)d->D * d->Di) +
                           (double)d->D * d->O;
    return 6.0 * matmul_params * B * T + ssd_flops(d, B, T);
}

int main(int argc, char **argv)
{
    m2_blas_core_ensure(argv); /* the sgemm peak on the kernels the model runs (core/blas_core.h) */
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    if (threads <= 0) threads = omp_get_num_procs();
    if (iters <= 0) iters = 5;
    m2_ops_cpu_set_threads(threads);

    m2_dims d;
    m2_layout lay;
    m2_model *m;
    if (bench_default_model(BATCH, SEQ, &d, &lay, &m)) return m2_report("bench_model", M2_EFAIL);

    const size_t nx = (size_t)BATCH * SEQ * d.F, ny = (size_t)BATCH * SEQ * d.O;
    float *p32 = malloc(lay.n_params * sizeof *p32);
    m2_real *params = malloc(lay.n_params * sizeof *params), *grads = calloc(lay.n_params, sizeof *grads);
    m2_real *X = malloc(nx * sizeof *X), *Y = malloc(ny * sizeof *Y);
    if (!p32 || !params || !grads || !X || !Y) return fprintf(stderr, "bench_model: error: out of memory\n"), 1;
    m2_params_init(&lay, p32, 1);
    for (size_t i = 0; i < lay.n_params; i++) params[i] = p32[i];
    BENCH_DRAW_BATCH(1, X, nx, Y, ny);

    double peak_cpu, peak = sgemm_peak(threads, &peak_cpu);
    double sse;
    int64_t count;
    /* warm-up (first touch of the activation buffers), then the timed runs */
    m2_model_forward_backward(m, params, grads, X, Y, BATCH, SEQ, 0, &sse, &count, NULL, NULL, NULL);
    double best = 1e30, total = 0, best_cpu = 1e30;
    for (int i = 0; i < iters; i++) {
        double t0 = omp_get_wtime(), c0 = cpu_seconds();
        m2_model_forward_backward(m, params, grads, X, Y, BATCH, SEQ, 0, &sse, &count, NULL, NULL, NULL);
        double t = omp_get_wtime() - t0, ct = cpu_seconds() - c0;
        total += t;
        if (t < best) best = t;
        if (ct < best_cpu) best_cpu = ct;
    }
    /* the per-op split, from separate runs with the clocks on: each lane's CPU time (robust to other
     * processes on a shared machine); the lanes run the ops on their own threads */
    m2_model_set_timing(m, M2_TIMING_THREAD_CPU);
    double t0 = omp_get_wtime();
    for (int i = 0; i < iters; i++)
        m2_model_forward_backward(m, params, grads, X, Y, BATCH, SEQ, 0, &sse, &count, NULL, NULL, NULL);
    double timed = (omp_get_wtime() - t0) / iters;
    double fwd[M2_OPK_N], bwd[M2_OPK_N];
    m2_model_op_seconds(m, 0, fwd);
    m2_model_op_seconds(m, 1, bwd);

    const double flops = model_flops(&d, BATCH, SEQ), ticks = (double)BATCH * SEQ;
    const double gflops = flops / best / 1e9;
    printf("model: D=%d L=%d E=%d P=%d N=%d G=%d K=%d Q=%d F=%d O=%d (%zu parameters), micro-batch %d x %d ticks\n",
           d.D, d.L, d.E, d.P, d.N, d.G, d.K, d.Q, d.F, d.O, lay.n_params, BATCH, SEQ);
    printf("threads: %d, CPU kernels: %s\n", threads, m2_ops_cpu_isa());
    printf("forward+backward: best %.1f ms, mean %.1f ms over %d runs\n", best * 1e3, total / iters * 1e3, iters);
    printf("ticks/s: %.0f\n", ticks / best);
    printf("model GFLOP per micro-batch: %.3f (%.2f MFLOP per tick)\n", flops / 1e9, flops / ticks / 1e6);
    printf("achieved: %.1f GFLOP/s\n", gflops);
    char blas[160];
    m2_blas_core_describe(blas, sizeof blas);
    printf("%s sgemm peak (%d^3, %d threads): %.1f GFLOP/s\n", blas, PEAK_N, threads, peak);
    printf("ratio to peak: %.3f\n", peak > 0 ? gflops / peak : 0);
    printf("by CPU time (own work only, see cpu_seconds): %.3f CPU-s per micro-batch, %.1f GFLOP per CPU-s, "
           "sgemm %.1f GFLOP per CPU-s, ratio %.3f\n",
           best_cpu, flops / best_cpu / 1e9, peak_cpu, peak_cpu > 0 ? flops / best_cpu / 1e9 / peak_cpu : 0);
    printf("activation memory: %zu bytes per token per layer\n", m2_model_activation_bytes_per_token(m));
    printf("per op (CPU ms of lane 0 of %d, per micro-batch; the timed runs took %.1f ms wall on average):\n",
           threads < BATCH ? threads : BATCH, timed * 1e3);
    printf("  %-16s %9s %9s %9s %7s\n", "op", "forward", "backward", "total", "share");
    double sum = 0;
    for (int k = 0; k < M2_OPK_N; k++) sum += fwd[k] + bwd[k];
    for (int k = 0; k < M2_OPK_N; k++)
        printf("  %-16s %9.2f %9.2f %9.2f %6.1f%%\n", m2_op_kind_name(k), fwd[k] / iters * 1e3, bwd[k] / iters * 1e3,
               (fwd[k] + bwd[k]) / iters * 1e3, 100 * (fwd[k] + bwd[k]) / sum);

    /* what lane 0 spends outside its ops: the barriers between layers (idle while the slowest lane finishes),
     * the lanes' parameter-gradient reductions (finish_bucket in model.c) and, on a loaded machine, the time
     * other processes hold its core (so read it from a quiet run) */
    const double outside = timed - sum / iters;
    printf("  %-16s %29.2f %6.1f%% of the wall time (barriers, gradient reductions, descheduled)\n", "outside the ops",
           outside * 1e3, 100 * outside / timed);

    /* the GEMMs' and the SSD's own rates: lane 0 does 1/lanes of the work while the others do the rest */
    const double gemm_s = (fwd[M2_OPK_GEMM] + bwd[M2_OPK_GEMM]) / iters;
    const double sflops = ssd_flops(&d, BATCH, SEQ), ssd_s = (fwd[M2_OPK_SSD] + bwd[M2_OPK_SSD]) / iters;
    printf("rates (all lanes together): GEMM ops %.1f GFLOP/s, SSD %.1f GFLOP/s\n", (flops - sflops) / gemm_s / 1e9,
           sflops / ssd_s / 1e9);

    m2_model_free(m);
    m2_layout_free(&lay);
    free(p32);
    free(params);
    free(grads);
    free(X);
    free(Y);
    return 0;
}
