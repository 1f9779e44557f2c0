/* Streaming inference benchmark: per-tick latency percentiles of one stream, the weight-streaming
 * floor measured in the same run, batched ticks/s for S = 1, 8, 64, and bf16 against fp32, for the shape of
 * configs/latency.ini and the docs/MODEL.md §1 default (F = 8, O = 3), with seeded random weights (m2_params_init).
 * One thread, pinned to one core.
 *
 *   bench_stream [--config FILE] [--ticks N] [--cpu C] [--gemm | --kernels | --breakdown]
 *
 * The floor: time to read the model's weight bytes once with wide loads (m2_stream_floor_ns), "hot" (the
 * same buffer again and again, so it sits where the weights sit when ticks come back to back: L2 for the
 * latency model, L3 for the default one on a 1 MiB-L2 core) and "cold" (from DRAM). Ratios use hot: that is
 * the like-for-like bound for back-to-back ticks; the hot floor's reads are timed in blocks alternating with the
 * ticks' (latency below), so that a change of the machine's speed during the run moves both. The floor's own p99
 * and a census of this core's stalls (gaps of >= 10 us in a loop that only reads the clock) are printed too: on a
 * virtual machine with a 250 Hz guest timer the stalls, not the engine, make the tail (BENCHMARKS.md, "Streaming
 * inference"). Sparse ticks: steps after a 64 MiB eviction ("cold steps"), and the same with m2_stream_warm run
 * between the eviction and the step (docs/ARCHITECTURE.md, "Sparse ticks"). And, fp32, what a stream's state
 * snapshot and restore and the live featuriser cost per call. */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "run/config_file.h"
#include "base/error.h"
#include "core/blas_core.h"
#include "stream/engine.h"
#include "stream/timing.h"
#include "../tests/stream/stream_fixture.h"
#include "stream_breakdown.h"

#define N_INPUTS 4096 /* distinct input rows cycled through (16 KB per feature: stays in L1/L2 like a feed) */

static void usage(void)
{
    printf("usage: bench_stream [--config FILE] [--ticks N] [--cpu C] [--gemm | --kernels | --breakdown]\n"
           "  --config FILE  latency-model config (default: configs/latency.ini next to this source)\n"
           "  --ticks N      timed single-stream ticks per measurement (default 100000)\n"
           "  --cpu C        core to pin to (default: the current one)\n"
           "  --gemm         time the model's matrices alone through the GEMV/GEMM, and exit\n"
           "  --kernels      time the element-wise kernels alone and as a layer's chain, and exit\n"
           "  --breakdown    time the tick without each of its parts (matrix products, SSM, conv, ...), and exit\n");
}

static int open_model(const m2_layout *lay, const float *params, int bf16, int max_streams, m2_stream **s)
{
    m2_stream_options o = m2_stream_defaults();
    o.bf16 = bf16;
    o.max_streams = max_streams;
    return m2_stream_open_params(lay, params, NULL, NULL, &o, s);
}

/* Latency of single-stream steps and the hot floor of their weight bytes, timed in alternating blocks (LAT_BLOCK
 * ticks, then FLOOR_BLOCK reads of a buffer of wb bytes) so that both sample the same moments of the machine: on the
 * shared virtual machines measured here the core's speed moves by up to 1.45x between minutes (BENCHMARKS.md, issue
 * 14), and a floor timed apart from the ticks made their ratio move with it. The stream is reset every 4096 ticks
 * like session boundaries would (not timed). buf holds ticks values; fbuf floor_samples(ticks). *hot: the floor
 * reads' distribution (its p50 is the hot floor). */
enum { LAT_BLOCK = 1000, FLOOR_BLOCK = 500 };
static long floor_samples(long ticks) { return (ticks + LAT_BLOCK - 1) / LAT_BLOCK * FLOOR_BLOCK; }
static int latency(m2_stream *s, const float *X, int F, long ticks, size_t wb, m2_latency *lat, m2_latency *hot,
                   double *buf, double *fbuf)
{
    float pred[64];
    for (long i = 0; i < ticks / 10 + 1000; i++) m2_stream_step(s, 0, X + (size_t)(i % N_INPUTS) * F, pred);
    long nf = 0;
    for (long i = 0; i < ticks;) {
        for (const long end = i + LAT_BLOCK < ticks ? i + LAT_BLOCK : ticks; i < end; i++) {
            const float *x = X + (size_t)(i % N_INPUTS) * F;
            double t0 = m2_now_ns();
            m2_stream_step(s, 0, x, pred);
            buf[i] = m2_now_ns() - t0;
            if (i % N_INPUTS == N_INPUTS - 1) m2_stream_reset(s, 0);
        }
        if (m2_stream_floor_times(wb, 0, FLOOR_BLOCK, fbuf + nf)) return -1;
        nf += FLOOR_BLOCK;
    }
    m2_latency_summarize(buf, (size_t)ticks, lat);
    m2_latency_summarize(fbuf, (size_t)nf, hot);
    return 0;
}

/* This thread's CPU time in ns: on a loaded machine it leaves out the time slices other processes take. */
static double thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

/* Ticks per second with S streams advanced together: 25 blocks of ~15 ms, the median block's rate (robust to the
 * time slices other processes take on a shared machine). *cpu_rate (may be NULL): the same blocks' median rate by
 * this thread's CPU time. */
static double batched_rate(const m2_layout *lay, const float *params, int bf16, int S, const float *X, double *cpu_rate)
{
    m2_stream *s;
    if (open_model(lay, params, bf16, S, &s)) return -1;
    const int F = lay->d.F;
    float *pred = malloc((size_t)S * lay->d.O * sizeof *pred);
    double rates[25], cpu_rates[25];
    long steps = 0;
    for (int i = 0; i < 50; i++) m2_stream_step_batch(s, S, NULL, X + (size_t)(i * S % N_INPUTS) * F, pred);
    for (int b = 0; b < 25; b++) {
        long n = 0;
        double t0 = m2_now_ns(), c0 = thread_cpu_ns(), t;
        while ((t = m2_now_ns() - t0) < 15e6)
            for (int i = 0; i < 8; i++, n++, steps++)
                m2_stream_step_batch(s, S, NULL, X + (size_t)(steps * S % (N_INPUTS - S)) * F, pred);
        rates[b] = (double)n * S / (t * 1e-9);
        cpu_rates[b] = (double)n * S / ((thread_cpu_ns() - c0) * 1e-9);
    }
    m2_latency med;
    m2_latency_summarize(cpu_rates, 25, &med);
    if (cpu_rate) *cpu_rate = med.p50;
    m2_latency_summarize(rates, 25, &med);
    free(pred);
    m2_stream_close(s);
    return med.p50;
}

/* Median time of a step of S streams whose weights and states were evicted first (sparse ticks in a process
 * that does other work in between): a 64 MiB buffer (twice the L3) is read before each of `steps` steps, then the
 * step's input rows and output are touched (the caller has just computed its features). With warm_ns,
 * m2_stream_warm of the S streams runs between the eviction and the step, as a trading loop calls it while waiting
 * for the tick, and *warm_ns gets its own median time. */
static double cold_step(const m2_layout *lay, const float *params, int bf16, int S, const float *X, int steps,
                        double *warm_ns)
{
    const size_t evict = (size_t)64 << 20;
    const int F = lay->d.F, O = lay->d.O;
    m2_stream *s = NULL;
    unsigned char *buf = malloc(evict);
    double *t = malloc((size_t)steps * sizeof *t), *tw = malloc((size_t)steps * sizeof *tw);
    float *pred = malloc((size_t)S * O * sizeof *pred);
    double med = -1;
    if (buf && t && tw && pred && !open_model(lay, params, bf16, S, &s)) {
        memset(buf, 1, evict);
        volatile float sink = 0;
        for (int i = 0; i < steps; i++) {
            for (size_t j = 0; j < evict; j += 64) sink += buf[j];
            const float *x = X + (size_t)(i * S % (N_INPUTS - S)) * F;
            for (int j = 0; j < S * F; j++) sink += x[j];
            memset(pred, 0, (size_t)S * O * sizeof *pred);
            double t0 = m2_now_ns();
            if (warm_ns) {
                m2_stream_warm(s, S, NULL);
                double t1 = m2_now_ns();
                tw[i] = t1 - t0;
                t0 = t1;
            }
            m2_stream_step_batch(s, S, NULL, x, pred);
            t[i] = m2_now_ns() - t0;
        }
        m2_latency lat;
        m2_latency_summarize(t, (size_t)steps, &lat);
        med = lat.p50;
        if (warm_ns) {
            m2_latency_summarize(tw, (size_t)steps, &lat);
            *warm_ns = lat.p50;
        }
    }
    m2_stream_close(s);
    free(buf);
    free(t);
    free(tw);
    free(pred);
    return med;
}

/* Max |bf16 - fp32| over sessions of synthetic ticks (a stand-in for a test split), and the scale. */
static void bf16_diff(const m2_layout *lay, const float *params, const float *X, double *max_diff, double *max_pred)
{
    m2_stream *a, *b;
    *max_diff = *max_pred = -1;
    if (open_model(lay, params, 0, 1, &a) || open_model(lay, params, 1, 1, &b)) return;
    float pa[64], pb[64];
    *max_diff = *max_pred = 0;
    for (int i = 0; i < N_INPUTS; i++) {
        if (i % 1024 == 0) { /* four sessions */
            m2_stream_reset(a, 0);
            m2_stream_reset(b, 0);
        }
        m2_stream_step(a, 0, X + (size_t)i * lay->d.F, pa);
        m2_stream_step(b, 0, X + (size_t)i * lay->d.F, pb);
        for (int o = 0; o < lay->d.O; o++) {
            *max_diff = fmax(*max_diff, fabs((double)pa[o] - pb[o]));
            *max_pred = fmax(*max_pred, fabs((double)pa[o]));
        }
    }
    m2_stream_close(a);
    m2_stream_close(b);
}

/* FLOPs of one tick: 2 M K per matrix, and per layer the SSM update (S = a S + dt x B^T: 3 per state element,
 * y = S C: 2 more). Element-wise work (norms, conv, SiLU) is left out, so the compute floor is a lower bound. */
static double tick_flops(const m2_dims *d)
{
    double mk = (double)d->D * d->F + (double)d->O * d->D;
    mk += (double)d->L * ((double)d->Win * d->D + (double)d->D * d->Di);
    return 2 * mk + 5.0 * d->L * d->H * d->N * d->P;
}

/* This core's one-thread sgemm rate (FLOP/s): OpenBLAS at 512^3, the fastest of 9 calls (the core's rate when
 * nothing else runs on it; a median would put other processes' time into the floor). */
static double sgemm_rate(void)
{
    enum { N = 512 };
    float *a = calloc((size_t)3 * N * N, sizeof *a);
    if (!a) return -1;
    for (size_t i = 0; i < (size_t)2 * N * N; i++) a[i] = (float)(i % 7) * 0.25f;
    openblas_set_num_threads(1);
    double best = 1e30;
    for (int r = 0; r < 9; r++) {
        double t0 = m2_now_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, a + N * N, N, 0.0f, a + 2 * N * N,
                    N);
        best = fmin(best, m2_now_ns() - t0);
    }
    free(a);
    return 2.0 * N * N * N / (best * 1e-9);
}

/* Issue 14, item 5: at S streams, time per tick against the larger of the compute floor (its FLOPs at the
 * sgemm rate) and the state floor (its states read and written at the bandwidth for their size). */
static void batched_floors(const m2_dims *d, int S, double rate, double cpu_rate, size_t state_bytes, double gflop_rate)
{
    double per_tick = 1e9 / rate, comp = tick_flops(d) / gflop_rate * 1e9;
    double state = m2_stream_state_floor_ns((size_t)S * state_bytes) / S, floor = comp > state ? comp : state;
    printf("  S=%d: %.0f ns per tick; compute floor %.0f ns (%.3g MFLOP at %.1f GFLOP/s), state floor %.0f ns "
           "(%.1f KB read+written per tick); by thread CPU time %.0f ns per tick, ratio %.2fx; ratio to the larger: "
           "%.2fx\n",
           S, per_tick, comp, tick_flops(d) / 1e6, gflop_rate / 1e9, state, state_bytes / 1024.0, 1e9 / cpu_rate,
           1e9 / cpu_rate / floor, per_tick / floor);
}

static double stalls_per_s; /* m2_stall_census in main */

/* bf16 weights once more without vdpbf16ps (widened by shift and and, as on CPUs without AVX-512-BF16), in the
 * same run: what the dot instruction gains. */
static void widen_latency(const m2_layout *lay, const float *params, const float *X, long ticks, double *buf,
                          double *fbuf)
{
    m2_cpu_set_bf16_dot(0);
    m2_stream *s;
    if (!open_model(lay, params, 1, 1, &s)) {
        m2_latency lat, hot;
        if (!latency(s, X, lay->d.F, ticks, m2_stream_weight_bytes(s), &lat, &hot, buf, fbuf))
            printf("  without vdpbf16ps (%s kernels, widened by shift): p50 %.0f  p99 %.0f ns; ratio to hot floor "
                   "(%.0f ns): p50 %.2fx  p99 %.2fx\n",
                   m2_stream_cpu(s), lat.p50, lat.p99, hot.p50, lat.p50 / hot.p50, lat.p99 / hot.p50);
        m2_stream_close(s);
    }
    m2_cpu_set_bf16_dot(1);
}

/* --gemm: the model's matrices alone (embed, per layer W_in and W_out, head; planned in one buffer in tick order
 * as the engine does) through the level's m2s_gemm, back to back: S=1 against the hot floor of the same weight
 * bytes, S=8 and S=64 against the one-thread sgemm rate. Medians of 201 passes (S=1) or 41 (S>1), and the fastest
 * pass (robust to other processes' time slices when old and new builds are compared on a shared machine). A kernel
 * micro-timing (the ticks' other work, which shares the caches, is left out), not a goal. */
/* The p50 of `reps` timed passes of gemm over the nm matrices for n streams (after a quarter as many untimed), and
 * the fastest into *fastest. */
static double time_passes(m2s_gemm_fn gemm, const m2s_mat *m, int nm, const void *mats, int bf16, int n, const float *x,
                          int ldx, float *y, int ldy, float *xq, int reps, double *fastest)
{
    double t[201];
    for (int r = -reps / 4; r < reps; r++) {
        double t0 = m2_now_ns();
        for (int i = 0; i < nm; i++) gemm(&m[i], mats, bf16, n, x, ldx, NULL, y, ldy, xq);
        if (r >= 0) t[r] = m2_now_ns() - t0;
    }
    m2_latency lat;
    m2_latency_summarize(t, (size_t)reps, &lat);
    *fastest = t[0];
    return lat.p50;
}

static void gemm_only(const m2_dims *d, double gflop_rate)
{
    enum { NMAX = 64 };
    const int nm = 2 * d->L + 2;
    m2s_mat *m = calloc((size_t)nm, sizeof *m);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        size_t cur = 0;
        int kmax = 0, ldmax = 0;
        m2s_mat_plan(&m[0], d->D, d->F, bf16, &cur);
        for (int l = 0; l < d->L; l++) {
            m2s_mat_plan(&m[1 + 2 * l], d->Win, d->D, bf16, &cur);
            m2s_mat_plan(&m[2 + 2 * l], d->D, d->Di, bf16, &cur);
        }
        m2s_mat_plan(&m[nm - 1], d->O, d->D, bf16, &cur);
        double flops = 0;
        for (int i = 0; i < nm; i++) {
            kmax = m[i].K > kmax ? m[i].K : kmax;
            ldmax = m[i].M > ldmax ? m[i].M : ldmax;
            flops += 2.0 * m[i].M * m[i].K;
        }
        ldmax = (ldmax + 15) / 16 * 16;
        kmax = (kmax + 15) / 16 * 16;
        const size_t wb = cur * (bf16 ? 2 : 4);
        void *mats = m2s_alloc_pages(wb);
        float *W = malloc((size_t)ldmax * kmax * sizeof *W), *x = malloc((size_t)NMAX * kmax * sizeof *x);
        float *y = malloc((size_t)NMAX * ldmax * sizeof *y), *xq = malloc(m2s_xq_floats(NMAX, kmax + 1) * sizeof *xq);
        for (size_t i = 0; i < (size_t)ldmax * kmax; i++) W[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < (size_t)NMAX * kmax; i++) x[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
        for (int i = 0; i < nm; i++) m2s_mat_pack(&m[i], W, NULL, mats, bf16);
        const m2s_kernels *k = m2s_kernels_for(m2_cpu_active());
        const m2s_gemm_fn gemm = bf16 && k->level >= M2_CPU_AVX512 && m2_cpu_bf16_dot() ? m2s_gemm_avx512bf16 : k->gemm;
        const double hot = m2_stream_floor_ns(wb, 0, 10001);
        printf("%s weights %.1f KB, %s kernels: hot floor %.0f ns\n", bf16 ? "bf16" : "fp32", wb / 1024.0,
               gemm == m2s_gemm_avx512bf16 ? "avx512+bf16" : m2_cpu_name(k->level), hot);
        static const int ns[] = {1, 8, 64};
        for (int si = 0; si < 3; si++) {
            const int n = ns[si], reps = n == 1 ? 201 : 41;
            double fastest;
            const double p50 = time_passes(gemm, m, nm, mats, bf16, n, x, kmax, y, ldmax, xq, reps, &fastest);
            printf("  S=%-2d %9.0f ns per pass (%.0f ns per stream; fastest pass %.0f ns): %.2fx the hot floor, %.1f "
                   "GFLOP/s = %.2f of sgemm's %.1f\n",
                   n, p50, p50 / n, fastest, p50 / hot, n * flops / p50, n * flops / p50 / (gflop_rate / 1e9),
                   gflop_rate / 1e9);
            if (gemm == m2s_gemm_avx512bf16 && n > 1) {
                /* batches may take the widening kernel instead (stream.c, choose_batch_gemm): both, so that the
                 * line says what a batched tick can pay */
                const double w = time_passes(k->gemm, m, nm, mats, bf16, n, x, kmax, y, ldmax, xq, reps, &fastest);
                printf("        the widening %s kernel: %.0f ns per stream, %.2f of sgemm's rate\n",
                       m2_cpu_name(k->level), w / n, n * flops / w / (gflop_rate / 1e9));
            }
        }
        free(mats);
        free(W);
        free(x);
        free(y);
        free(xq);
    }
    free(m);
}

/* ns per call of f (a statement using r, the call's index): the fastest of 7 blocks of n calls, so that another
 * process's time slice or a slower phase of a shared host lands in some blocks, not in the figure. */
#define TIME_CALLS(best, n, f)                                \
    do {                                                      \
        (best) = 1e30;                                        \
        for (int blk = 0; blk < 7; blk++) {                   \
            const double t0_ = m2_now_ns();                   \
            for (int r = 0; r < (n); r++) {                   \
                f;                                            \
                __asm__ volatile("" ::: "memory");            \
            }                                                 \
            (best) = fmin((best), (m2_now_ns() - t0_) / (n)); \
        }                                                     \
    } while (0)

/* What carrying a stream across a restart costs (m2_stream_snapshot and m2_stream_restore of one stream, its whole
 * state copied and checksummed), and the live featuriser per event (m2_stream_features): the fastest of 7 blocks. */
static void state_and_features(m2_stream *s)
{
    const size_t bytes = m2_stream_snapshot_bytes(s);
    unsigned char *snap = malloc(bytes);
    if (!snap) return;
    double t_save = 1e30, t_restore = 1e30, t_feat = 1e30, raw[64];
    const int reps = 50, events = 20000;
    for (int blk = 0; blk < 7; blk++) {
        double t0 = m2_now_ns();
        for (int r = 0; r < reps; r++) m2_stream_snapshot(s, 0, snap, bytes);
        double t1 = m2_now_ns();
        for (int r = 0; r < reps; r++) m2_stream_restore(s, 0, snap, bytes);
        double t2 = m2_now_ns();
        m2_stream_reset(s, 0);
        for (int e = 0; e < events; e++) {
            const m2_stream_event ev = {.ts_ns = 34200000000000 + 1000000 * (int64_t)(blk * events + e),
                                        .bid_px = 100.0 - 0.01 * (e % 3),
                                        .ask_px = 100.01 + 0.01 * (e % 2),
                                        .bid_sz = 3 + e % 11,
                                        .ask_sz = 5 + e % 7,
                                        .trade_sz = e % 4 ? 0 : 2,
                                        .side = e % 4 ? 0 : 1};
            m2_stream_features(s, 0, &ev, 0.01, NULL, raw);
        }
        double t3 = m2_now_ns();
        t_save = fmin(t_save, (t1 - t0) / reps);
        t_restore = fmin(t_restore, (t2 - t1) / reps);
        t_feat = fmin(t_feat, (t3 - t2) / events);
    }
    printf("  one stream's state snapshot (%.1f KB): m2_stream_snapshot %.1f us, m2_stream_restore %.1f us; "
           "m2_stream_features %.0f ns per event\n",
           bytes / 1024.0, 1e-3 * t_save, 1e-3 * t_restore, t_feat);
    m2_stream_reset(s, 0);
    free(snap);
}

/* --kernels: each element-wise kernel of a tick (stream_kernels.c, the level in use) alone, called back to back on
 * one stream's buffers, then a layer's element-wise middle as one dependent chain (dt and decay, conv + SiLU, SSM,
 * gated norm, whose output is the next round's conv input and dt row): the tick's critical path between its two
 * GEMVs. A kernel micro-timing for comparing builds, less moved by the host than a tick's p50 (BENCHMARKS.md,
 * issue 14, 2026-12-03); not a goal. */
static void kernels_only(const m2_dims *d)
{
    const int Ccp = (d->Cc + 15) / 16 * 16, ldp = (d->P + 15) / 16 * 16, Kw = d->K > 4 ? d->K : 4;
    const size_t n_state = (size_t)d->H * d->N * ldp, n_vec = (size_t)(Ccp > d->Di ? Ccp : d->Di) + 16;
    float *S = m2s_alloc_pages(n_state * sizeof *S), *ring = m2s_alloc_pages((size_t)Kw * Ccp * sizeof *ring);
    float *wT = m2s_alloc_pages((size_t)Kw * Ccp * sizeof *wT), *v = m2s_alloc_pages((6 * n_vec + 5 * 64) * sizeof *v);
    float *cb = v, *xbc = v + n_vec, *y = v + 2 * n_vec, *z = v + 3 * n_vec, *u = v + 5 * n_vec;
    float *small = v + 6 * n_vec, *A = small, *bias = small + 64, *Dskip = small + 128, *dt = small + 192,
          *dec = small + 256;
    for (size_t i = 0; i < (size_t)Kw * Ccp; i++) wT[i] = 0.25f - 0.01f * (float)(i % 37), ring[i] = 0.01f * (i % 11);
    for (size_t i = 0; i < 6 * n_vec; i++) v[i] = 0.02f * (float)(i % 23) - 0.2f;
    for (size_t i = 0; i < n_state; i++) S[i] = 0.001f * (float)(i % 13);
    /* dt and decay hold pad16(H) floats: H <= 64 here (the default model has 8 heads, latency.ini 2) */
    for (int h = 0; h < 64; h++) A[h] = -0.5f, bias[h] = -2.0f, Dskip[h] = 1.0f, dt[h] = 0.1f, dec[h] = 0.95f;
    const m2s_kernels *k = m2s_kernels_for(m2_cpu_active());
    const int n = 20000, K = d->K;
#define RING_POS (K > 1 ? r % (K - 1) : 0)
    double t_rms, t_dt, t_conv, t_ssm, t_gn, t_chain;
    float scale = 0;
    TIME_CALLS(t_rms, n, scale += k->rms_scale(xbc, d->D));
    TIME_CALLS(t_dt, n, k->dt_decay(A, bias, d->H, 1, xbc, 0, dt, dec));
    TIME_CALLS(t_conv, n, k->conv_silu(wT, cb, ring, RING_POS, K, d->Cc, Ccp, xbc, u));
    TIME_CALLS(t_ssm, n, k->ssm(d, Dskip, S, xbc, dt, dec, y, NULL));
    /* the gate alone multiplies y by silu(z) call after call: z where silu is 1 keeps y from decaying into
     * denormals, whose assists (Intel) would be timed instead */
    for (int i = 0; i < d->Di; i++) z[i] = 1.27846454f;
    TIME_CALLS(t_gn, n, scale += k->gate(y, z, d->Di, d->G));
    TIME_CALLS(t_chain, n, {
        k->dt_decay(A, bias, d->H, 1, y + 1, 0, dt, dec);
        k->conv_silu(wT, cb, ring, RING_POS, K, d->Cc, Ccp, y, xbc);
        k->ssm(d, Dskip, S, xbc, dt, dec, y, NULL);
        scale += k->gate(y, z, d->Di, d->G);
    });
#undef RING_POS
    printf(
        "  %s kernels, ns per call: norm scale %.1f  dt+decay %.1f  conv+SiLU %.1f  SSM %.1f  gate %.1f;  the four as "
        "one dependent chain %.1f%s\n",
        m2_cpu_name(k->level), t_rms, t_dt, t_conv, t_ssm, t_gn, t_chain, isfinite(scale) ? "" : " (non-finite)");
    free(S);
    free(ring);
    free(wT);
    free(v);
}

static int bench_shape(const char *name, fixture_shape shape, long ticks)
{
    m2_layout lay;
    int rc = fixture_layout(&lay, shape);
    if (rc) return rc;
    const m2_dims *d = &lay.d;
    float *params = fixture_params(&lay, 1234, 0), *X = fixture_inputs(N_INPUTS, d->F, 77);
    double *buf = malloc((size_t)ticks * sizeof *buf), *fbuf = malloc((size_t)floor_samples(ticks) * sizeof *fbuf);
    if (!buf || !fbuf || !params || !X) rc = m2_fail(M2_EFAIL, "bench_stream: out of memory");
    /* touched now: otherwise every 512th timed record takes a page fault, whose kernel work evicts part of the
     * caches the next tick reads */
    if (!rc) {
        memset(buf, 0, (size_t)ticks * sizeof *buf);
        memset(fbuf, 0, (size_t)floor_samples(ticks) * sizeof *fbuf);
    }
    printf("\n== %s: F=%d O=%d D=%d L=%d E=%d P=%d N=%d G=%d K=%d (H=%d, %zu parameters, %.1f KB fp32)\n", name, d->F,
           d->O, d->D, d->L, d->E, d->P, d->N, d->G, d->K, d->H, lay.n_params, lay.n_params * 4 / 1024.0);
    for (int bf16 = 0; bf16 <= 1 && !rc; bf16++) {
        m2_stream *s;
        if ((rc = open_model(&lay, params, bf16, 1, &s))) break;
        size_t wb = m2_stream_weight_bytes(s);
        m2_latency lat, hot_lat;
        if (latency(s, X, d->F, ticks, wb, &lat, &hot_lat, buf, fbuf)) {
            m2_stream_close(s);
            rc = m2_fail(M2_EFAIL, "bench_stream: out of memory for the floor's buffer");
            break;
        }
        const double hot = hot_lat.p50, cold = m2_stream_floor_ns(wb, 1, 301);
        const size_t sb = m2_stream_state_bytes(s);
        printf("%s weights %.1f KB, state %.1f KB/stream, %s kernels\n", bf16 ? "bf16" : "fp32", wb / 1024.0,
               sb / 1024.0, m2_stream_cpu(s));
        printf("  latency/tick (ns): p50 %.0f  p99 %.0f  p99.9 %.0f  max %.0f  mean %.0f  (%ld ticks)\n", lat.p50,
               lat.p99, lat.p999, lat.max, lat.mean, ticks);
        printf("  floor: read %.1f KB once: hot %.0f ns (%.1f GB/s; timed in blocks between the ticks'), cold %.0f ns "
               "(%.1f GB/s)\n",
               wb / 1024.0, hot, wb / hot, cold, wb / cold);
        printf("  the hot floor's own read times: p99 %.0f ns, p99.9 %.0f ns (the same stalls hit a plain read)\n",
               hot_lat.p99, hot_lat.p999);
        printf("  ratio to hot floor: p50 %.2fx  p99 %.2fx;  ticks of p50 length hit by a stall >= 10 us: ~%.2f%%\n",
               lat.p50 / hot, lat.p99 / hot, 100 * stalls_per_s * lat.p50 * 1e-9);
        /* A tick also reads and writes its stream's state: both memory streams one after the other are a floor of
         * their own, which the hot floor alone leaves out (the default model's state is 29% of its bf16 weights) */
        const double st1 = m2_stream_state_floor_ns(sb);
        printf("  hot floor + one stream's state read and written (%.0f ns): %.0f ns, %.2fx the hot floor; p50 "
               "%.2fx of it\n",
               st1, hot + st1, (hot + st1) / hot, lat.p50 / (hot + st1));
        if (!bf16 && d->F == M2_N_FEATURES) state_and_features(s);
        m2_stream_close(s);
        if (bf16 && m2_cpu_bf16_dot()) widen_latency(&lay, params, X, ticks, buf, fbuf);
        double cpu64 = 0, r1 = batched_rate(&lay, params, bf16, 1, X, NULL),
               r8 = batched_rate(&lay, params, bf16, 8, X, NULL), r64 = batched_rate(&lay, params, bf16, 64, X, &cpu64);
        printf("  batched ticks/s, back to back: S=1 %.0f  S=8 %.0f (%.2fx)  S=64 %.0f (%.2fx)\n", r1, r8, r8 / r1, r64,
               r64 / r1);
        batched_floors(d, 64, r64, cpu64, sb, sgemm_rate());
        double c1 = cold_step(&lay, params, bf16, 1, X, 100, NULL),
               c64 = cold_step(&lay, params, bf16, 64, X, 50, NULL);
        printf("  cold steps (weights and states evicted before each step, as for sparse ticks): S=1 p50 %.0f ns "
               "(%.2fx the cold floor) = %.0f ticks/s; S=64 p50 %.0f ns = %.0f ticks/s (%.2fx)\n",
               c1, c1 / cold, 1e9 / c1, c64, 64e9 / c64, (64e9 / c64) / (1e9 / c1));
        double w1, w64, cw1 = cold_step(&lay, params, bf16, 1, X, 100, &w1),
                        cw64 = cold_step(&lay, params, bf16, 64, X, 50, &w64);
        printf("  the same after m2_stream_warm (itself from cold: S=1 %.0f ns, S=64 %.0f ns): S=1 p50 %.0f ns (%.2fx "
               "the cold step, %.2fx the hot p50); S=64 p50 %.0f ns (%.2fx the cold step)\n",
               w1, w64, cw1, cw1 / c1, cw1 / lat.p50, cw64, cw64 / c64);
    }
    if (!rc) {
        double md, mp;
        bf16_diff(&lay, params, X, &md, &mp);
        printf("bf16 vs fp32 predictions over %d synthetic ticks (4 sessions): max |diff| %.3g (max |pred| %.3g)\n",
               N_INPUTS, md, mp);
    }
    free(params);
    free(X);
    free(buf);
    free(fbuf);
    m2_layout_free(&lay);
    return rc;
}

int main(int argc, char **argv)
{
    m2_blas_core_ensure(argv); /* the compute floor on the kernels the trainer runs (core/blas_core.h) */
    char config[4096];
    snprintf(config, sizeof config, "%s", __FILE__);
    char *slash = strrchr(config, '/');
    snprintf(slash ? slash + 1 : config, sizeof config - (size_t)(slash ? slash + 1 - config : 0),
             "../configs/latency.ini");
    long ticks = 100000;
    int cpu = -1, gemm = 0, kernels = 0, breakdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            snprintf(config, sizeof config, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--ticks") && i + 1 < argc)
            ticks = atol(argv[++i]);
        else if (!strcmp(argv[i], "--cpu") && i + 1 < argc)
            cpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gemm"))
            gemm = 1;
        else if (!strcmp(argv[i], "--kernels"))
            kernels = 1;
        else if (!strcmp(argv[i], "--breakdown"))
            breakdown = 1;
        else {
            fprintf(stderr, "bench_stream: error: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (ticks < 1000) ticks = 1000;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set)) cpu = -1;
    } else
        cpu = m2_pin_to_current_cpu();
    m2_config cfg;
    m2_config_defaults(&cfg);
    int rc = m2_config_load_file(&cfg, config);
    if (rc) return m2_report("bench_stream", rc);
    double tmin = 1e9;
    for (int i = 0; i < 1000; i++) {
        double a = m2_now_ns(), b = m2_now_ns();
        tmin = fmin(tmin, b - a);
    }
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    char blas[160];
    m2_blas_core_describe(blas, sizeof blas);
    printf("bench_stream: one thread pinned to cpu %d; clock_gettime back-to-back %.0f ns (included in latencies); "
           "load average %.2f on %ld cores at start; the compute floor's sgemm: %s\n",
           cpu, tmin, load[0], sysconf(_SC_NPROCESSORS_ONLN), blas);
    /* The p99 of a tick is past the stalls once more than 1% of ticks contain one: ticks of t ns at r stalls/s. */
    double share;
    m2_stall_census(0.5, 10e3, &stalls_per_s, &share);
    printf("stalls of this core (clock spin, 0.5 s): %.0f/s of >= 10 us, %.2f%% of the time lost in them\n",
           stalls_per_s, 100 * share);
    fixture_shape lat = {8,
                         3,
                         cfg.model.d_model,
                         cfg.model.n_layers,
                         cfg.model.expand,
                         cfg.model.headdim,
                         cfg.model.d_state,
                         cfg.model.ngroups,
                         cfg.model.d_conv};
    if (gemm || kernels || breakdown) {
        const double rate = gemm ? sgemm_rate() : 0;
        fixture_shape shapes[2] = {lat, fixture_default()};
        for (int i = 0; i < 2; i++) {
            m2_layout lay;
            if ((rc = fixture_layout(&lay, shapes[i]))) return m2_report("bench_stream", rc);
            printf("\n== %s: D=%d L=%d Di=%d Win=%d\n", i ? "docs/MODEL.md default" : config, lay.d.D, lay.d.L,
                   lay.d.Di, lay.d.Win);
            if (gemm)
                gemm_only(&lay.d, rate);
            else if (kernels)
                kernels_only(&lay.d);
            else {
                float *params = fixture_params(&lay, 1234, 0), *X = fixture_inputs(N_INPUTS, lay.d.F, 77);
                rc = params && X ? stream_breakdown(&lay, params, X, N_INPUTS, ticks)
                                 : m2_fail(M2_EFAIL, "bench_stream: out of memory");
                free(params);
                free(X);
            }
            m2_layout_free(&lay);
            if (rc) return m2_report("bench_stream", rc);
        }
        return 0;
    }
    if ((rc = bench_shape(config, lat, ticks))) return m2_report("bench_stream", rc);
    if ((rc = bench_shape("docs/MODEL.md default", fixture_default(), ticks / 4 > 1000 ? ticks / 4 : 1000)))
        return m2_report("bench_stream", rc);
    getloadavg(load, 3);
    printf("\nload average %.2f at the end (other processes on these cores show up in p99 and beyond)\n", load[0]);
    return 0;
}
