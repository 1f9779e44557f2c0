/* bench_stream --breakdown: where a tick's time goes, by ablation. The tick is timed whole, then once without each
 * part (its kernel replaced by a no-op through m2s_use_kernels, engine.h), and a part's cost is the difference. On
 * the cores measured here a single stream's tick is a chain whose parts follow one another, so the costs add up to
 * the tick (the "rest": embedding bias, residual adds, loops and calls); a sampling profile of the same tick
 * (perf's cpu-clock, the only event on these virtual machines) charged a kernel for the stall of the load before
 * it and could not say that. Variants alternate within each of ROUNDS rounds and each figure is the median of the
 * rounds', so that a change of the machine's speed during the run moves every variant alike. S = 1: p50 of timed
 * ticks (as bench_stream's latency); S = 64: per stream-tick, the median of back-to-back batched steps. The matrix
 * products' cost is also given against the hot floor of the weight bytes (m2_stream_floor_ns, in the same rounds).
 *
 * A tick without a part computes garbage from stale buffers: left alone, such values can decay into denormals,
 * whose microcode assists (Intel) would be timed instead, so the whole breakdown runs with FTZ and DAZ set on this
 * thread (the engine itself leaves the caller's MXCSR alone; docs/ARCHITECTURE.md, "CPU dispatch"). */
#include "stream_breakdown.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "base/error.h"
#include "stream/timing.h"

enum { ROUNDS = 5, N_PARTS = 6, BATCH = 64 };

static void no_gemm(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx, const float *scale,
                    float *y, int ldy, void *xq)
{
}
static float no_scale(const float *h, int n) { return 1.0f; }
static void no_conv(const float *restrict wT, const float *restrict b, float *restrict ring, int pos, int K, int C,
                    int ldc, const float *restrict xnew, float *restrict out)
{
}
static void no_dt(const float *A, const float *dt_bias, int H, int n, const float *dt_raw, int ld, float *restrict dt,
                  float *restrict decay)
{
}
static void no_ssm(const m2_dims *d, const float *Dskip, float *S, const float *xbc, const float *dt,
                   const float *decay, float *y, const float *next)
{
}
static float no_gate(float *y, const float *restrict z, int Di, int G) { return 1.0f; }

static const char *const part_name[N_PARTS] = {"matrix products", "SSM",  "conv+SiLU",
                                               "dt+decay",        "gate", "norm scales"};

/* The set without part p (-1: the set as it is). */
static m2s_kernel_set without(m2s_kernel_set set, int p)
{
    switch (p) {
    case 0: set.k.gemm = set.gemm_batch = no_gemm; break;
    case 1: set.k.ssm = no_ssm; break;
    case 2: set.k.conv_silu = no_conv; break;
    case 3: set.k.dt_decay = no_dt; break;
    case 4: set.k.gate = no_gate; break;
    case 5: set.k.rms_scale = no_scale; break;
    }
    return set;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* One measurement of handle s with S streams: S = 1, the p50 of n timed ticks; S > 1, the median of n batched steps
 * per stream. t: n doubles of scratch. */
static double measure(m2_stream *s, int S, const float *X, int F, int n_inputs, int n, double *t, float *pred)
{
    for (int i = 0; i < n; i++) {
        const float *x = X + (size_t)(i * S % (n_inputs - S + 1)) * F;
        if (S == 1 && i % 4096 == 4095) m2_stream_reset(s, 0); /* sessions, as bench_stream's latency */
        const double t0 = m2_now_ns();
        if (S == 1)
            m2_stream_step(s, 0, x, pred);
        else
            m2_stream_step_batch(s, S, NULL, x, pred);
        t[i] = (m2_now_ns() - t0) / S;
    }
    return median(t, n);
}

int stream_breakdown(const m2_layout *lay, const float *params, const float *X, int n_inputs, long ticks)
{
    int rc = M2_OK;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
    const m2_dims *d = &lay->d;
    printf("a tick without each part (cost = the whole tick - the tick without it), median of %d alternated rounds:\n",
           ROUNDS);
    static const int streams[] = {1, BATCH};
    for (int bf16 = 0; bf16 <= 1 && !rc; bf16++)
        for (int si = 0; si < 2 && !rc; si++) {
            const int S = streams[si];
            m2_stream_options o = m2_stream_defaults();
            o.bf16 = bf16;
            o.max_streams = S;
            m2_stream *s;
            if ((rc = m2_stream_open_params(lay, params, NULL, NULL, &o, &s))) break;
            const m2s_kernel_set set = m2s_kernels_in_use(s);
            const size_t wb = m2_stream_weight_bytes(s);
            /* ~25 ms a measurement: n steps of a tick of about t0 ns */
            float *pred = malloc((size_t)S * d->O * sizeof *pred);
            if (!pred) {
                m2_stream_close(s);
                rc = m2_fail(M2_EFAIL, "bench_stream --breakdown: out of memory");
                break;
            }
            const double probe = measure(s, S, X, d->F, n_inputs, 200, (double[200]){0}, pred) * S;
            int n = (int)(25e6 / (probe > 100 ? probe : 100));
            if (S == 1 && n > ticks) n = (int)ticks;
            n = n < 21 ? 21 : n;
            double *t = malloc((size_t)n * sizeof *t), per[N_PARTS + 2][ROUNDS];
            if (!t) {
                free(pred);
                m2_stream_close(s);
                rc = m2_fail(M2_EFAIL, "bench_stream --breakdown: out of memory");
                break;
            }
            for (int r = 0; r < ROUNDS; r++) {
                for (int p = -1; p < N_PARTS; p++) {
                    const m2s_kernel_set v = without(set, p);
                    m2s_use_kernels(s, &v);
                    per[p + 1][r] = measure(s, S, X, d->F, n_inputs, n, t, pred);
                }
                per[N_PARTS + 1][r] = S == 1 ? m2_stream_floor_ns(wb, 0, 201) : 0;
            }
            m2s_use_kernels(s, &set);
            double whole = median(per[0], ROUNDS), sum = 0;
            printf("%s, S=%d (%s kernels, %d ticks a measurement): whole tick %.0f ns per stream;",
                   bf16 ? "bf16" : "fp32", S, m2_stream_cpu(s), n, whole);
            for (int p = 0; p < N_PARTS; p++) {
                const double cost = whole - median(per[p + 1], ROUNDS);
                sum += cost;
                printf("%s %s %.0f", p ? "," : "", part_name[p], cost);
                if (p == 0 && S == 1)
                    printf(" (%.2fx the hot floor, %.0f ns)", cost / median(per[N_PARTS + 1], ROUNDS),
                           median(per[N_PARTS + 1], ROUNDS));
            }
            printf("; rest %.0f\n", whole - sum);
            free(t);
            free(pred);
            m2_stream_close(s);
        }
    _mm_setcsr(csr);
    return rc;
}
