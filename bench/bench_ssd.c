/* Times the chunked SSD alone: forward and backward at the default shape (B=8, T=512, H=8, P=32, G=1, N=64,
 * Q=64, x/B/C strided inside an xBC buffer as in the model), best of 20 repetitions, and prints ms and
 * GFLOP/s (m2_ssd_flops: the GEMM work as executed, defined in src/core/ssd.c).
 * Usage: bench_ssd [threads] [B T H P G N Q]   (threads default: OMP_NUM_THREADS or all cores).
 * Run it with OPENBLAS_NUM_THREADS=1: OpenBLAS otherwise starts its own idle worker threads at load time. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/rng.h"
#include "core/blas_core.h"
#include "core/ssd.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static m2_real *reals(size_t n)
{
    m2_real *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_ssd: error: out of memory for %zu values\n", n);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    m2_blas_core_ensure(argv); /* the chunked SSD's GEMMs on OpenBLAS's kernels for this CPU (core/blas_core.h) */
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    m2_ssd_shape s = {.B = 8, .T = 512, .H = 8, .P = 32, .G = 1, .N = 64, .Q = 64};
    if (argc > 8) {
        int *f[] = {&s.B, &s.T, &s.H, &s.P, &s.G, &s.N, &s.Q};
        for (int i = 0; i < 7; i++) *f[i] = atoi(argv[2 + i]);
    }
    if (threads < 1 || s.B < 1 || s.T < 1 || s.H < 1 || s.P < 1 || s.G < 1 || s.N < 1 || s.Q < 1 || s.H % s.G) {
        fprintf(stderr, "bench_ssd: error: bad arguments (usage: bench_ssd [threads] [B T H P G N Q])\n");
        return 2;
    }
    /* The SSD calls BLAS inside its own OpenMP regions: BLAS itself must stay single-threaded. */
    openblas_set_num_threads(1);
    omp_set_num_threads(threads);
    const int Cc = s.H * s.P + 2 * s.G * s.N;
    s.ld_x = s.ld_bc = Cc;
    const size_t rows = (size_t)s.B * s.T, ny = rows * s.H * s.P;
    m2_real *xbc = reals(rows * Cc), *dt = reals(rows * s.H), *y = reals(ny), *dy = reals(ny);
    m2_real *dxbc = reals(rows * Cc), *ddt = reals(rows * s.H), *A = reals(s.H), *D = reals(s.H);
    m2_real *dA = reals(s.H), *dD = reals(s.H);
    m2_real *saved = reals(m2_ssd_saved_size(&s)), *scratch = reals(m2_ssd_scratch_size(&s, threads));
    const uint64_t key = m2_rng_key(1, M2_RNG_TEST, 0xbe, 0);
    uint64_t ctr = 0;
    for (size_t i = 0; i < rows * Cc; i++) xbc[i] = (m2_real)(m2_rng_u01(key, ctr++) - 0.5);
    for (size_t i = 0; i < ny; i++) dy[i] = (m2_real)(m2_rng_u01(key, ctr++) - 0.5);
    for (size_t i = 0; i < rows * s.H; i++) dt[i] = (m2_real)(0.001 + 0.1 * m2_rng_u01(key, ctr++));
    for (int h = 0; h < s.H; h++) {
        A[h] = (m2_real) - (1 + h);
        D[h] = 1;
        dA[h] = dD[h] = 0;
    }
    const m2_real *x = xbc, *Bm = xbc + s.H * s.P, *Cm = Bm + s.G * s.N;
    double best_f = 1e30, best_b = 1e30;
    for (int rep = 0; rep < 21; rep++) {
        double t0 = now();
        m2_ssd_forward(&s, x, dt, A, Bm, Cm, D, y, saved, scratch);
        double t1 = now();
        m2_ssd_backward(&s, x, dt, A, Bm, Cm, D, dy, saved, dxbc, ddt, dA, dxbc + s.H * s.P,
                        dxbc + s.H * s.P + s.G * s.N, dD, scratch);
        double t2 = now();
        if (rep > 0) { /* the first run pays the page faults */
            best_f = t1 - t0 < best_f ? t1 - t0 : best_f;
            best_b = t2 - t1 < best_b ? t2 - t1 : best_b;
        }
    }
    double ff, fb;
    m2_ssd_flops(&s, &ff, &fb);
    printf("bench_ssd: B=%d T=%d H=%d P=%d G=%d N=%d Q=%d, %d thread(s), %s, best of 20\n", s.B, s.T, s.H, s.P, s.G,
           s.N, s.Q, threads, sizeof(m2_real) == 4 ? "fp32" : "fp64");
    printf("forward   %8.3f ms  %7.1f GFLOP/s  (%.3f GFLOP)\n", best_f * 1e3, ff / best_f * 1e-9, ff * 1e-9);
    printf("backward  %8.3f ms  %7.1f GFLOP/s  (%.3f GFLOP)\n", best_b * 1e3, fb / best_b * 1e-9, fb * 1e-9);
    printf("fwd+bwd   %8.3f ms  %7.1f GFLOP/s\n", (best_f + best_b) * 1e3, (ff + fb) / (best_f + best_b) * 1e-9);
    void *bufs[] = {xbc, dt, y, dy, dxbc, ddt, A, D, dA, dD, saved, scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    return 0;
}
