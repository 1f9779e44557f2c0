/* Window sampler throughput: windows per second for T=512, F=8 (draw a start + copy the window's features and
 * targets), on a synthetic dataset written to and read back from HDF5 as training does.
 *   bench_sampler [TICKS]      (default 1000000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "io/dataset.h"
#include "io/synth.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const int T = 512, B = 64;
    m2_synth_opts o;
    m2_synth_defaults(&o);
    o.ticks = argc > 1 ? atoll(argv[1]) : 1000000;
    o.sessions = (int)(o.ticks / 20000 > 1 ? o.ticks / 20000 : 1);
    char path[64];
    snprintf(path, sizeof path, "/tmp/bench_sampler_%ld.h5", (long)getpid());

    double t0 = now_s();
    m2_dataset made, ds;
    if (m2_synth_dataset(&o, &made, NULL) || m2_dataset_write(path, &made)) return m2_report("bench_sampler", M2_EFAIL);
    double t1 = now_s();
    if (m2_dataset_read(path, &ds, 0)) return m2_report("bench_sampler", M2_EFAIL);
    double t2 = now_s();
    unlink(path);
    m2_dataset_free(&made);

    m2_sampler s;
    if (m2_sampler_init(&s, &ds, M2_SPLIT_TRAIN, T, 64)) return m2_report("bench_sampler", M2_EFAIL);
    double t3 = now_s();
    float *X = malloc((size_t)B * T * ds.n_features * sizeof *X), *y = malloc((size_t)B * T * ds.n_targets * sizeof *y);

    /* Draws alone, then draws + copies, each for about a second. */
    int64_t draws = 0, sink = 0;
    double a = now_s();
    while (now_s() - a < 1.0)
        for (int i = 0; i < 4096; i++, draws++) sink += m2_sampler_start(&s, 1, draws / B, draws % B);
    double draw_ns = (now_s() - a) / (double)draws * 1e9;

    int64_t windows = 0;
    a = now_s();
    for (int64_t step = 0; now_s() - a < 1.0; step++)
        for (int i = 0; i < B; i++, windows++) {
            int64_t st = m2_sampler_start(&s, 7, step, i);
            m2_sampler_copy(&s, st, X + (size_t)i * T * ds.n_features, y + (size_t)i * T * ds.n_targets);
        }
    double per_s = (double)windows / (now_s() - a);

    printf("dataset: %lld rows, F=%d, O=%d; synth+write %.2f s, read %.3f s, sampler init %.3f s (%lld starts)\n",
           (long long)ds.n_rows, ds.n_features, ds.n_targets, t1 - t0, t2 - t1, t3 - t2, (long long)s.n_starts);
    printf("sampler start draw: %.0f ns\n", draw_ns);
    printf("sampler windows/s (T=%d, F=%d, draw + copy): %.0f  (%.2f us per window, %.1f GB/s)\n", T, ds.n_features,
           per_s, 1e6 / per_s, per_s * T * (ds.n_features + ds.n_targets) * 4 / 1e9);
    free(X);
    free(y);
    m2_sampler_free(&s);
    m2_dataset_free(&ds);
    return sink == -1;
}
