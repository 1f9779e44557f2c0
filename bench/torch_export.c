/* The PyTorch comparison's input (bench/torch_mamba2.py): the docs/MODEL.md §1 default model with seeded
 * parameters, a seeded micro-batch, and what OUR CPU backend computes for it, so that the PyTorch network can be
 * checked against ours before it is timed.
 *
 *   torch_export OUT [B [T [seed]]]        defaults: bench_model's micro-batch, 8 x 512, seed 1
 *
 * OUT is raw little-endian data (written to a temporary name, fsync'd, renamed):
 *   int32 magic 0x4d324558 ("M2EX"), int32 version 1,
 *   int32 F O D L E P N G K Q Di H Cc Win, int32 B T, int64 n_params,
 *   float32 params [n_params] (the flat layout of docs/MODEL.md §9), X [B,T,F], Y [B,T,O],
 *   pred [B,T,O] (m2_model_forward_backward's predictions), grads [n_params] (d(SSE)/dparams, burn_in 0),
 *   float64 sse.
 * The model and inputs are bench_model's (bench_batch.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_batch.h"
#include "core/ops.h"

enum { MAGIC = 0x4d324558, VERSION = 1 };

static int write_all(FILE *f, const void *p, size_t size, size_t n) { return fwrite(p, size, n, f) == n ? 0 : -1; }

/* Writes the header and the arrays to path atomically (temporary name, fsync, rename). */
static int write_export(const char *path, const m2_layout *lay, int B, int T, const float *params, const float *X,
                        const float *Y, const float *pred, const float *grads, double sse)
{
    const m2_dims *d = &lay->d;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return m2_fail(M2_EFAIL, "torch_export (%s): cannot create", tmp);
    const int32_t head[] = {MAGIC, VERSION, d->F, d->O,  d->D, d->L,  d->E,   d->P, d->N,
                            d->G,  d->K,    d->Q, d->Di, d->H, d->Cc, d->Win, B,    T};
    const int64_t n = (int64_t)lay->n_params;
    const size_t nx = (size_t)B * T * d->F, ny = (size_t)B * T * d->O;
    int bad = write_all(f, head, sizeof head, 1) || write_all(f, &n, sizeof n, 1) ||
              write_all(f, params, sizeof *params, lay->n_params) || write_all(f, X, sizeof *X, nx) ||
              write_all(f, Y, sizeof *Y, ny) || write_all(f, pred, sizeof *pred, ny) ||
              write_all(f, grads, sizeof *grads, lay->n_params) || write_all(f, &sse, sizeof sse, 1) || fflush(f) ||
              fsync(fileno(f));
    if (fclose(f) || bad || rename(tmp, path)) {
        remove(tmp);
        return m2_fail(M2_EFAIL, "torch_export (%s): write failed", path);
    }
    return M2_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: torch_export OUT [B [T [seed]]]\n");
        return 2;
    }
    int B = argc > 2 ? atoi(argv[2]) : 8, T = argc > 3 ? atoi(argv[3]) : 512;
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    if (B < 1 || T < 1) {
        fprintf(stderr, "torch_export: error: B and T must be positive\n");
        return 2;
    }
    m2_ops_cpu_set_threads(1);
    m2_dims d;
    m2_layout lay;
    m2_model *m;
    if (bench_default_model(B, T, &d, &lay, &m)) return m2_report("torch_export", M2_EFAIL);
    const size_t nx = (size_t)B * T * d.F, ny = (size_t)B * T * d.O;
    float *params = malloc(lay.n_params * sizeof *params), *grads = calloc(lay.n_params, sizeof *grads);
    float *X = malloc(nx * sizeof *X), *Y = malloc(ny * sizeof *Y), *pred = malloc(ny * sizeof *pred);
    if (!params || !grads || !X || !Y || !pred) return fprintf(stderr, "torch_export: error: out of memory\n"), 1;
    m2_params_init(&lay, params, seed);
    BENCH_DRAW_BATCH(seed, X, nx, Y, ny);
    double sse;
    int64_t count;
    int rc = m2_model_forward_backward(m, params, grads, X, Y, B, T, 0, &sse, &count, pred, NULL, NULL);
    if (!rc) rc = write_export(argv[1], &lay, B, T, params, X, Y, pred, grads, sse);
    m2_model_free(m);
    m2_layout_free(&lay);
    free(params);
    free(grads);
    free(X);
    free(Y);
    free(pred);
    return rc ? m2_report("torch_export", rc) : 0;
}
