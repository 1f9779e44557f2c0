/* Timing helpers shared by mamba2_stream and bench_stream: latency percentiles, the monotonic clock, CPU
 * pinning, and the weight-streaming floor (how long one core takes just to read the model's weight bytes,
 * which every tick must do at least once). */
#define _GNU_SOURCE /* sched_getcpu, CPU_SET */
#include "stream/engine.h"
#include "stream/timing.h"

#include <sched.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <time.h>


double m2_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double rank(const double *sorted, size_t n, double q)
{
    size_t i = (size_t)(q * (double)n + 0.5);
    if (i > 0) i--; /* nearest rank: the ceil(q n)-th smallest */
    return sorted[i < n ? i : n - 1];
}

void m2_latency_summarize(double *ns, size_t n, m2_latency *out)
{
    memset(out, 0, sizeof *out);
    if (!n) return;
    qsort(ns, n, sizeof *ns, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += ns[i];
    out->mean = sum / (double)n;
    out->p50 = rank(ns, n, 0.50);
    out->p99 = rank(ns, n, 0.99);
    out->p999 = rank(ns, n, 0.999);
    out->max = ns[n - 1];
}

void *m2s_alloc_pages(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    const int big = bytes >= M2S_HUGE_MIN;
    const size_t align = big ? huge : 64;
    bytes = bytes ? (bytes + align - 1) / align * align : align;
    void *p = aligned_alloc(align, bytes);
    if (!p) return NULL;
#if defined(MADV_HUGEPAGE)
    if (big) (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only: failure leaves 4 KiB pages */
#endif
    memset(p, 0, bytes);
    return p;
}

int m2_pin_to_current_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

/* The floor reads with the kernels' own loads (m2s_kernels.read_bytes of the level in use), through a pointer
 * so that the compiler cannot drop the reads. */
static uint64_t read_once(const void *buf, size_t n) { return m2s_kernels_for(m2_cpu_active())->read_bytes(buf, n); }

int m2_stream_floor_times(size_t bytes, int cold, int reps, double *t)
{
    const size_t arena_bytes = (size_t)256 << 20;
    bytes = (bytes + 4095) / 4096 * 4096;
    size_t total = cold ? (bytes > arena_bytes / 4 ? 4 * bytes : arena_bytes) : bytes;
    size_t slices = total / bytes;
    char *buf = m2s_alloc_pages(total); /* the engine's page policy (m2s_alloc_pages) */
    if (!buf) return -1;
    for (size_t i = 0; i < total; i += 4096) buf[i] = 1; /* private pages (not the shared zero page) */
    volatile uint64_t sink = 0;
    sink |= read_once(buf, bytes); /* warm the hot buffer */
    for (int r = 0; r < reps; r++) {
        const char *b = buf + (cold ? (size_t)(r + 1) % slices * bytes : 0);
        double t0 = m2_now_ns();
        sink |= read_once(b, bytes);
        t[r] = m2_now_ns() - t0;
    }
    (void)sink;
    free(buf);
    return 0;
}

int m2_stream_floor(size_t bytes, int cold, int reps, m2_latency *out)
{
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t || m2_stream_floor_times(bytes, cold, reps, t)) {
        free(t);
        return -1;
    }
    m2_latency_summarize(t, (size_t)reps, out);
    free(t);
    return 0;
}

double m2_stream_state_floor_ns(size_t bytes)
{
    const size_t n = bytes / sizeof(float);
    if (n <= 16) return 0.0;
    float *v = m2s_alloc_pages(bytes);
    double t[101];
    if (!v) return -1.0;
    for (int r = 0; r < 101; r++) {
        double t0 = m2_now_ns();
        memmove(v, v + 16, (n - 16) * sizeof *v);
        t[r] = m2_now_ns() - t0;
    }
    free(v);
    m2_latency l;
    m2_latency_summarize(t, 101, &l);
    return l.p50;
}

double m2_stream_floor_ns(size_t bytes, int cold, int reps)
{
    m2_latency lat;
    return m2_stream_floor(bytes, cold, reps, &lat) ? -1.0 : lat.p50;
}

void m2_stall_census(double seconds, double min_ns, double *per_s, double *share)
{
    long n = 0;
    double lost = 0, t0 = m2_now_ns(), prev = t0, end = t0 + seconds * 1e9, t;
    while ((t = m2_now_ns()) < end) {
        if (t - prev >= min_ns) {
            n++;
            lost += t - prev;
        }
        prev = t;
    }
    *per_s = (double)n / ((t - t0) * 1e-9);
    *share = lost / (t - t0);
}
