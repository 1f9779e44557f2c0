/* The data-parallel step's communication for the default model (docs/MODEL.md §1 with F = 8, O = 3), under
 * `mpirun -np R build/bench_collectives [--iters N] [--backward-ms MS]`:
 *   - bytes per step: the reduce-scatter of the gradients and the all-gather of the parameters;
 *   - time of the reduce-scatter (one collective over the whole buffer) and of the all-gather;
 *   - overlap: a simulated backward (a compute-bound loop per gradient bucket, in backward order, its length
 *     proportional to the bucket's size) followed by m2_zero_step, with each bucket's reduce-scatter started as soon
 *     as its "backward" ends (overlap) or every bucket started only at the end (no overlap); reported: the time
 *     m2_zero_step spends waiting for the reduce-scatters, and the whole step.
 * Figures are the slowest rank's value per iteration (a step is as slow as its slowest rank), as the median over the
 * iterations and, in brackets, the minimum (the uncontended cost when other processes share the cores). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "dist/zero.h"

typedef struct {
    int iters;
    double backward_ms;
} options;

static int parse(int argc, char **argv, options *o)
{
    o->iters = 30;
    o->backward_ms = 40.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            o->iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--backward-ms") == 0 && i + 1 < argc)
            o->backward_ms = atof(argv[++i]);
        else
            return m2_fail(M2_EUSAGE, "%s: unknown argument (--iters N, --backward-ms MS)", argv[i]);
    }
    if (o->iters < 1 || o->backward_ms < 0) return m2_fail(M2_EUSAGE, "--iters must be >= 1, --backward-ms >= 0");
    return M2_OK;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Arithmetic for `seconds` (a stand-in for a layer's backward): keeps the core busy, calls no MPI. */
static double compute_for(double seconds)
{
    volatile double acc = 1.0;
    const double until = now() + seconds;
    while (now() < until)
        for (int k = 0; k < 2000; k++) acc = acc * 1.0000001 + 1e-9;
    return acc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The slowest rank's value per iteration; out[0] = median over iterations, out[1] = minimum. */
static void summarise(const m2_dist *pg, double *xs, int n, double out[2])
{
    MPI_Allreduce(MPI_IN_PLACE, xs, n, MPI_DOUBLE, MPI_MAX, pg->comm);
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    out[0] = xs[n / 2];
    out[1] = xs[0];
}

typedef struct {
    double wait[2], step[2], allgather[2], adam[2];
} step_times;

/* mode 0: buckets started during the simulated backward; 1: all started after it; 2: no buckets (one whole-buffer
 * reduce-scatter inside m2_zero_step). */
static int run_mode(const m2_dist *pg, const m2_layout *lay, m2_zero *z, float *params, float *grads, int mode,
                    const options *o, step_times *out)
{
    const int nb = m2_layout_n_buckets(lay);
    double *wait = calloc((size_t)o->iters, sizeof *wait), *step = calloc((size_t)o->iters, sizeof *step);
    double *ag = calloc((size_t)o->iters, sizeof *ag), *adam = calloc((size_t)o->iters, sizeof *adam);
    int err = M2_OK;
    for (int it = 0; it < o->iters && !err; it++) {
        if ((err = m2_dist_barrier(pg))) break;
        for (int b = 0; b < nb && !err; b++) {
            size_t begin, end;
            m2_layout_bucket(lay, b, &begin, &end);
            compute_for(1e-3 * o->backward_ms * (double)(end - begin) / (double)lay->n_params);
            if (mode == 0) err = m2_zero_bucket_ready(z, grads, begin, end);
        }
        for (int b = 0; b < nb && mode == 1 && !err; b++) {
            size_t begin, end;
            m2_layout_bucket(lay, b, &begin, &end);
            err = m2_zero_bucket_ready(z, grads, begin, end);
        }
        double loss, norm, t0 = now();
        int skipped;
        if (!err) err = m2_zero_step(z, params, grads, 1.0, 1000, 1e-4f, 0.1f, 1.0f, &loss, &norm, &skipped);
        step[it] = now() - t0;
        m2_zero_timing t = m2_zero_last_timing(z);
        wait[it] = t.reduce_wait_s;
        ag[it] = t.allgather_s;
        adam[it] = t.adam_s;
    }
    if (!err) {
        summarise(pg, wait, o->iters, out->wait);
        summarise(pg, step, o->iters, out->step);
        summarise(pg, ag, o->iters, out->allgather);
        summarise(pg, adam, o->iters, out->adam);
    }
    free(wait), free(step), free(ag), free(adam);
    return err;
}

static int bench(const m2_dist *pg, const options *o)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    m2_dims d;
    m2_layout lay;
    int err = m2_dims_init(&d, &cfg, 8, 3);
    if (!err) err = m2_layout_init(&lay, &d);
    if (err) return err;
    const size_t n = lay.n_params;
    unsigned char *mask = malloc(n);
    m2_layout_decay_mask(&lay, mask);
    m2_zero *z = NULL;
    err = m2_zero_create_host(&z, pg, n, mask);
    free(mask);
    if (err) return err;
    const size_t P = m2_zero_padded_len(z), R = (size_t)pg->world;
    float *params = calloc(P, sizeof *params), *grads = calloc(P, sizeof *grads);
    m2_params_init(&lay, params, 1);
    for (size_t i = 0; i < n; i++) grads[i] = (float)sin((double)i) * 1e-3f;

    step_times t[3];
    for (int mode = 0; mode < 3 && !err; mode++) err = run_mode(pg, &lay, z, params, grads, mode, o, &t[mode]);
    if (!err && pg->rank == 0) {
        const double mb = 1.0 / (1 << 20);
        /* A ring reduce-scatter or all-gather moves (R-1)/R of the buffer out of (and into) each rank. */
        const double wire = 2.0 * (double)(R - 1) / (double)R * (double)P * sizeof(float);
        printf("ranks %d   parameters %zu   padded %zu (shard %zu)   buckets %d   optimiser state per rank %.2f MiB\n",
               pg->world, n, P, m2_zero_shard_len(z), m2_layout_n_buckets(&lay), m2_zero_state_bytes(z) * mb);
        printf("bytes per step: reduce-scatter payload %.2f MiB + all-gather payload %.2f MiB; "
               "sent per rank (ring) %.2f MiB\n",
               (double)n * sizeof(float) * mb, (double)P * sizeof(float) * mb, wire * mb);
        printf("simulated backward %.1f ms, %d iterations; slowest rank, median [minimum], ms:\n", o->backward_ms,
               o->iters);
        printf("  %-40s %15s %15s %15s %15s\n", "mode", "reduce wait", "all-gather", "adamw", "step");
        const char *names[3] = {"overlap (bucket_ready during backward)", "no overlap (all buckets at the end)",
                                "no buckets (one reduce-scatter)"};
        for (int mode = 0; mode < 3; mode++) {
            printf("  %-40s", names[mode]);
            const double *cols[4] = {t[mode].wait, t[mode].allgather, t[mode].adam, t[mode].step};
            for (int c = 0; c < 4; c++) printf("   %5.2f [%5.2f]", 1e3 * cols[c][0], 1e3 * cols[c][1]);
            printf("\n");
        }
        for (int k = 0; k < 2; k++)
            printf("communication share of (backward + step), %s: overlap %.1f%%, no overlap %.1f%%\n",
                   k ? "minimum" : "median",
                   100.0 * (t[0].wait[k] + t[0].allgather[k]) / (o->backward_ms * 1e-3 + t[0].step[k]),
                   100.0 * (t[1].wait[k] + t[1].allgather[k]) / (o->backward_ms * 1e-3 + t[1].step[k]));
    }
    free(params), free(grads);
    m2_zero_free(z);
    m2_layout_free(&lay);
    return err;
}

int main(int argc, char **argv)
{
    m2_dist pg;
    if (m2_dist_init(&argc, &argv, &pg)) return m2_report("bench_collectives", M2_EFAIL);
    options o;
    int err = parse(argc, argv, &o);
    if (!err) err = bench(&pg, &o);
    if (err) m2_dist_abort(&pg, err, m2_last_error());
    m2_dist_finalize(&pg);
    return 0;
}
