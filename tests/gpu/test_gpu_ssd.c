/* The CUDA chunked SSD, forward and backward, against the oracle of MODEL.md §3 (the sequential recurrence in
 * fp64, written here with its reverse-mode derivative, independent of every chunked implementation) and against
 * the CPU backend's SSD. Shapes: T not a multiple of Q, one partial chunk only, G = 2 and G = 3 with several heads
 * per group, and sizes past one 64-wide tile in P, N and Q (the tiled products' edges). x, B, C are read with the
 * model's strides from one xBC buffer, and the gradients are written into one such buffer whose padding columns
 * must stay untouched. Without a GPU: one SKIP line, exit 0.
 *
 * Tolerances (relative, norm-wise): everything is fp32 on the GPU against fp64; y, dx, dB, dC, dD to 1e-4 (sums of
 * at most a few hundred terms, decays in [e^-10, 1]: observed errors of fp32 chunked SSDs are ~1e-6);
 * ddt and dA to 1e-3: they are differences of decay-gradient terms of similar size (cancellation amplifies the
 * fp32 error by the ratio of those terms to their difference, ~10 here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"

enum { SEED = 77 };

typedef struct {
    int B, T, H, P, G, N, Q;
} shape;

typedef struct { /* dense fp64 results of the oracle */
    double *y, *dx, *dB, *dC, *ddt, *dA, *dD;
} oracle_out;

typedef struct { /* one problem's inputs, host side, and where x, B, C sit in xbc */
    shape sh;
    int HP, GN, ld, rows;
    float *xbc, *dt, *A, *D, *dy;
} problem;

static const float *xrow(const problem *p, int r) { return p->xbc + (size_t)r * p->ld; }

/* fp64 sequential recurrence, forward and reverse (MODEL.md §2 step 4). */
static void oracle(const problem *p, oracle_out *o)
{
    const shape s = p->sh;
    const int P = s.P, N = s.N, H = s.H, T = s.T, hpg = s.H / s.G;
    const size_t PN = (size_t)P * N;
    o->y = calloc((size_t)p->rows * p->HP, sizeof(double));
    o->dx = calloc((size_t)p->rows * p->HP, sizeof(double));
    o->dB = calloc((size_t)p->rows * p->GN, sizeof(double));
    o->dC = calloc((size_t)p->rows * p->GN, sizeof(double));
    o->ddt = calloc((size_t)p->rows * H, sizeof(double));
    o->dA = calloc((size_t)H, sizeof(double));
    o->dD = calloc((size_t)H, sizeof(double));
    double *S = malloc((size_t)(T + 1) * PN * sizeof(double)), *dS = malloc(PN * sizeof(double));
    assert_non_null(S);
    assert_non_null(dS);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < H; h++) {
            const int g = h / hpg;
            const double A = p->A[h], D = p->D[h];
            memset(S, 0, PN * sizeof(double)); /* S[0] = S_{-1} = 0; S[t+1] = S_t */
            for (int t = 0; t < T; t++) {
                const int r = b * T + t;
                const float *x = xrow(p, r) + h * P, *Bt = xrow(p, r) + p->HP + g * N, *Ct = Bt + p->GN;
                const double dt = p->dt[(size_t)r * H + h], al = exp(dt * A);
                const double *Sp = S + (size_t)t * PN;
                double *Sn = S + (size_t)(t + 1) * PN;
                for (int i = 0; i < P; i++) {
                    double acc = 0;
                    for (int n = 0; n < N; n++) {
                        Sn[i * N + n] = al * Sp[i * N + n] + dt * x[i] * Bt[n];
                        acc += Sn[i * N + n] * Ct[n];
                    }
                    o->y[(size_t)r * p->HP + h * P + i] = acc + D * x[i];
                }
            }
            memset(dS, 0, PN * sizeof(double));
            for (int t = T - 1; t >= 0; t--) {
                const int r = b * T + t;
                const float *x = xrow(p, r) + h * P, *Bt = xrow(p, r) + p->HP + g * N, *Ct = Bt + p->GN;
                const float *dy = p->dy + (size_t)r * p->HP + h * P;
                const double dt = p->dt[(size_t)r * H + h], al = exp(dt * A);
                const double *St = S + (size_t)(t + 1) * PN, *Sp = S + (size_t)t * PN;
                double *dx = o->dx + (size_t)r * p->HP + h * P, *dB = o->dB + (size_t)r * p->GN + g * N;
                double *dC = o->dC + (size_t)r * p->GN + g * N;
                double dal = 0, ddt = 0;
                for (int i = 0; i < P; i++) {
                    o->dD[h] += (double)dy[i] * x[i];
                    dx[i] += D * dy[i];
                    for (int n = 0; n < N; n++) {
                        dC[n] += (double)dy[i] * St[i * N + n];
                        dS[i * N + n] += (double)dy[i] * Ct[n];
                    }
                }
                for (int i = 0; i < P; i++)
                    for (int n = 0; n < N; n++) {
                        const double d = dS[i * N + n];
                        dal += d * Sp[i * N + n];
                        ddt += d * x[i] * Bt[n];
                        dx[i] += dt * d * Bt[n];
                        dB[n] += dt * d * x[i];
                    }
                o->ddt[(size_t)r * H + h] = ddt + dal * al * A;
                o->dA[h] += dal * al * dt;
                for (size_t i = 0; i < PN; i++) dS[i] *= al;
            }
        }
    free(S);
    free(dS);
}

static void oracle_free(oracle_out *o)
{
    free(o->y);
    free(o->dx);
    free(o->dB);
    free(o->dC);
    free(o->ddt);
    free(o->dA);
    free(o->dD);
}

static problem problem_make(shape sh, uint64_t seed)
{
    problem p;
    p.sh = sh;
    p.HP = sh.H * sh.P;
    p.GN = sh.G * sh.N;
    p.ld = p.HP + 2 * p.GN + 3; /* the model's xBC has no padding; 3 extra columns check the strides */
    p.rows = sh.B * sh.T;
    p.xbc = m2_host_uniform((size_t)p.rows * p.ld, -1, 1, seed, 1);
    p.dt = m2_host_uniform((size_t)p.rows * sh.H, 0.05f, 1.0f, seed, 2);
    p.A = m2_host_uniform((size_t)sh.H, -1.0f, 1.5f, seed, 3);
    for (int h = 0; h < sh.H; h++) p.A[h] = -expf(p.A[h]);
    p.D = m2_host_uniform((size_t)sh.H, -1, 1, seed, 4);
    p.dy = m2_host_uniform((size_t)p.rows * p.HP, -1, 1, seed, 5);
    return p;
}

static void problem_free(problem *p)
{
    free(p->xbc);
    free(p->dt);
    free(p->A);
    free(p->D);
    free(p->dy);
}

typedef struct { /* one backend's results, host copies in the layouts of the ops */
    float *y, *dxbc, *ddt, *dA, *dD;
} results;

static void results_free(results *r)
{
    free(r->y);
    free(r->dxbc);
    free(r->ddt);
    free(r->dA);
    free(r->dD);
}

/* Runs forward and backward on backend g (host memory for the CPU, device memory for CUDA). dA and dD start at
 * dA0 / dD0 (they ADD); dxbc and ddt start as 7 (their padding must stay 7). Also checks that a forward without
 * `saved` gives the same y, and, when `repeat`, that a second backward gives bitwise the same gradients. */
static results run_backend(const m2_ops *g, const problem *p, const float *dA0, const float *dD0, int repeat)
{
    const shape s = p->sh;
    m2_ssd_shape ss = {s.B, s.T, s.H, s.P, s.G, s.N, s.Q, p->ld, p->ld};
    const size_t nxbc = (size_t)p->rows * p->ld, ny = (size_t)p->rows * p->HP, ndt = (size_t)p->rows * s.H;
    const int host = strcmp(g->name, "cpu") == 0;
#define UP(src, n) (host ? memcpy(malloc((n) * sizeof(float)), (src), (n) * sizeof(float)) : m2_dev_from(g, (src), (n)))
    float *xbc = UP(p->xbc, nxbc), *dt = UP(p->dt, ndt), *A = UP(p->A, (size_t)s.H), *D = UP(p->D, (size_t)s.H);
    float *dy = UP(p->dy, ny);
    float *seven = m2_host_fill(nxbc, 7.0f);
    float *dxbc = UP(seven, nxbc), *ddt = UP(seven, ndt), *dA = UP(dA0, (size_t)s.H), *dD = UP(dD0, (size_t)s.H);
#undef UP
    float *y = g->alloc(g, ny * sizeof(float)), *y2 = g->alloc(g, ny * sizeof(float));
    float *saved = g->alloc(g, g->ssd_saved_size(g, &ss) * sizeof(float));
    float *scratch = g->alloc(g, g->ssd_scratch_size(g, &ss) * sizeof(float));
    assert_true(y && y2 && saved && scratch);
    const float *Bm = xbc + p->HP, *Cm = xbc + p->HP + p->GN;
    float *dBm = dxbc + p->HP, *dCm = dxbc + p->HP + p->GN;

    g->ssd_fwd(g, &ss, xbc, dt, A, Bm, Cm, D, y, saved, scratch);
    g->ssd_fwd(g, &ss, xbc, dt, A, Bm, Cm, D, y2, NULL, scratch);
    g->ssd_bwd(g, &ss, xbc, dt, A, Bm, Cm, D, dy, saved, dxbc, ddt, dA, dBm, dCm, dD, scratch);

    results r;
    r.y = m2_host_from(g, y, ny);
    r.dxbc = m2_host_from(g, dxbc, nxbc);
    r.ddt = m2_host_from(g, ddt, ndt);
    r.dA = m2_host_from(g, dA, (size_t)s.H);
    r.dD = m2_host_from(g, dD, (size_t)s.H);
    float *y_nosave = m2_host_from(g, y2, ny);
    assert_memory_equal(y_nosave, r.y, ny * sizeof(float));
    free(y_nosave);
    if (repeat) {
        g->to_device(g, dxbc, seven, nxbc * sizeof(float));
        g->to_device(g, dA, dA0, (size_t)s.H * sizeof(float));
        g->to_device(g, dD, dD0, (size_t)s.H * sizeof(float));
        g->ssd_bwd(g, &ss, xbc, dt, A, Bm, Cm, D, dy, saved, dxbc, ddt, dA, dBm, dCm, dD, scratch);
        float *again = m2_host_from(g, dxbc, nxbc), *ddt2 = m2_host_from(g, ddt, ndt), *dA2 = m2_host_from(g, dA, s.H);
        assert_memory_equal(again, r.dxbc, nxbc * sizeof(float));
        assert_memory_equal(ddt2, r.ddt, ndt * sizeof(float));
        assert_memory_equal(dA2, r.dA, (size_t)s.H * sizeof(float));
        free(again);
        free(ddt2);
        free(dA2);
    }
    void *bufs[] = {xbc, dt, A, D, dy, dxbc, ddt, dA, dD, y, y2, saved, scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g->free(g, bufs[i]);
    free(seven);
    return r;
}

/* Compares one backend's results with the oracle (and its padding columns with the sentinel). */
static void check_results(const char *name, const problem *p, const results *r, const oracle_out *o,
                          const float *dA0, const float *dD0)
{
    const shape s = p->sh;
    const size_t ny = (size_t)p->rows * p->HP, nbc = (size_t)p->rows * p->GN, ndt = (size_t)p->rows * s.H;
    float *ref = malloc((ny + 1) * sizeof(float)), *got = malloc((ny + 1) * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    char what[96];
#define CMP(label, n, GOT, REF, tol)                                                                                 \
    do {                                                                                                             \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                                        \
            got[i_] = (GOT);                                                                                         \
            ref[i_] = (float)(REF);                                                                                  \
        }                                                                                                            \
        snprintf(what, sizeof what, "%s %s", name, label);                                                          \
        m2_expect_close(what, got, ref, (n), tol);                                                                   \
    } while (0)
    CMP("y", ny, r->y[i_], o->y[i_], 1e-4);
    CMP("dx", ny, r->dxbc[(i_ / p->HP) * p->ld + i_ % p->HP], o->dx[i_], 1e-4);
    CMP("dB", nbc, r->dxbc[(i_ / p->GN) * p->ld + p->HP + i_ % p->GN], o->dB[i_], 1e-4);
    CMP("dC", nbc, r->dxbc[(i_ / p->GN) * p->ld + p->HP + p->GN + i_ % p->GN], o->dC[i_], 1e-4);
    CMP("ddt", ndt, r->ddt[i_], o->ddt[i_], 1e-3);
    CMP("dA (adds)", (size_t)s.H, r->dA[i_] - dA0[i_], o->dA[i_], 1e-3);
    CMP("dD (adds)", (size_t)s.H, r->dD[i_] - dD0[i_], o->dD[i_], 1e-4);
#undef CMP
    for (int row = 0; row < p->rows; row++)
        for (int j = p->HP + 2 * p->GN; j < p->ld; j++) assert_true(r->dxbc[(size_t)row * p->ld + j] == 7.0f);
    free(ref);
    free(got);
}

static void run_case(shape sh)
{
    printf(" SSD B=%d T=%d H=%d P=%d G=%d N=%d Q=%d\n", sh.B, sh.T, sh.H, sh.P, sh.G, sh.N, sh.Q);
    problem p = problem_make(sh, SEED + (uint64_t)sh.T);
    oracle_out o;
    oracle(&p, &o);
    float *dA0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 9), *dD0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 10);
    results rg = run_backend(m2_gpu_ops(), &p, dA0, dD0, 1);
    check_results("cuda", &p, &rg, &o, dA0, dD0);
    results rc = run_backend(m2_ops_cpu(), &p, dA0, dD0, 0);
    check_results("cpu ", &p, &rc, &o, dA0, dD0);
    results_free(&rg);
    results_free(&rc);
    free(dA0);
    free(dD0);
    oracle_free(&o);
    problem_free(&p);
}

static void test_tail_chunk_two_groups(void **state) { run_case((shape){2, 37, 4, 8, 2, 6, 8}); }
static void test_whole_chunks(void **state) { run_case((shape){1, 64, 2, 4, 1, 8, 16}); }
static void test_one_partial_chunk(void **state) { run_case((shape){2, 5, 2, 4, 1, 4, 8}); }
static void test_three_groups(void **state) { run_case((shape){2, 130, 6, 16, 3, 16, 64}); }
static void test_past_one_tile(void **state) { run_case((shape){1, 200, 2, 72, 1, 70, 96}); }

int main(void)
{
    if (m2_gpu_skip()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail_chunk_two_groups), cmocka_unit_test(test_whole_chunks),
        cmocka_unit_test(test_one_partial_chunk),     cmocka_unit_test(test_three_groups),
        cmocka_unit_test(test_past_one_tile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
