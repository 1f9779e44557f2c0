/* The CUDA chunked SSD, forward and backward, against the oracle of docs/MODEL.md §3 (the sequential recurrence in
 * fp64, written here with its reverse-mode derivative, independent of every chunked implementation) and against
 * the CPU backend's SSD. Shapes: T not a multiple of Q, one partial chunk only, G = 2 and G = 3 with several heads
 * per group, and sizes past one 64-wide tile in P, N and Q (the tiled products' edges). x, B, C are read with the
 * model's strides from one xBC buffer, and the gradients are written into one such buffer whose padding columns
 * must stay untouched. Without a GPU: one SKIP line, exit 0.
 *
 * The products inside the chunked SSD (tile_gemm.cuh) follow the backend's precision switch, so every case runs
 * with the products in fp32 (CUDA cores), tf32 and bf16 (tensor cores), and the CPU backend once.
 *
 * Tolerances (relative, norm-wise, against the fp64 oracle):
 * - fp32 products: y, dx, dB, dC, dD to 1e-4 (sums of at most a few hundred terms, decays in [e^-10, 1]: observed
 *   errors of fp32 chunked SSDs are ~1e-6); ddt and dA to 1e-3: they are differences of decay-gradient terms of
 *   similar size (cancellation amplifies the error by the ratio of those terms to their difference, ~10 here).
 * - bf16 products (unit roundoff u = 2^-8): every operand of a product is rounded once (relative error <= u, of
 *   random sign), so each term of a sum carries about sqrt(2/3) u ~ 0.8u of relative error (two operands, each
 *   uniform in [-u, u]); the terms have mixed signs, so both the sum and its error grow like sqrt(K): the
 *   norm-wise relative error of one product is ~0.8u whatever K is. y and the gradients chain two or three such
 *   products (C B^T, then the decayed CB times x; the states, then C times the state; likewise backward):
 *   sqrt(3) * 0.8u ~ 1.4u = 5.4e-3 expected; tolerance 2e-2 (~5u; observed 2e-3 to 3.7e-3). ddt and dA are formed
 *   from the same products' outputs (E, dCoff, dBst, CB) and may lose up to the cancellation factor ~10 noted for
 *   fp32: 5.4e-2 at worst, tolerance 8e-2 (observed up to 3.9e-3: the rounding enters before the differences, so
 *   little of it cancels). The chunk-start states are stored in bf16 at bf16 precision (kernels/ssd_cuda.cuh,
 *   ssd_states_type): S is still one rounded operand of its products, and one more rounding (<= u/2) enters the
 *   fp32 <dSt, S> of ddt and dA, inside the same bounds (observed: y, ddt and dA move by ~1e-6 relative). The chunk
 *   states st_c, the state passing's input, are stored in bf16 too: one more rounding (<= u/2) per chunk state
 *   before the fp32 recurrence, which S_c's own rounding mostly absorbs (S_1 = bf16(st_0) is the same; observed: in
 *   the 5-chunk case y 2.495e-3 -> 2.515e-3, ddt 2.794e-3 -> 2.829e-3, dA 4.8e-3 -> 3.6e-3, the others unchanged to
 *   4 digits). Likewise dSoff, the reverse state passing's input, is stored in bf16, its rounding mostly absorbed by
 *   dSt's (observed: the 5-chunk case dx 2.535e-3 -> 2.524e-3, dB 3.089e-3 -> 3.069e-3, ddt 2.829e-3 -> 2.792e-3,
 *   dA 3.6e-3 -> 3.0e-3, the others unchanged to 3 digits). dD is a sum of dy.x formed in fp32 outside the products
 *   (docs/MODEL.md §3: reductions stay fp32), so it keeps the fp32 tolerance 1e-4 in every mode.
 * - tf32 products (u = 2^-11): the same reasoning, 8 times smaller: 2.5e-3 and 1e-2 (observed up to 6e-4 and
 *   1.1e-3).
 * - the tensor-core result must differ from the fp32 one by at least u/16 (norm-wise, y and dx): the fp32 path is
 *   ~1e-6 from the oracle, so a precision switch that silently ran the fp32 products would fail here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "ssd_cuda.h"

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

/* fp64 sequential recurrence, forward and reverse (docs/MODEL.md §2 step 5). */
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

/* pad: columns after x, B and C in each xBC row (the model's xBC has none), which check the strides and must stay
 * untouched; with pad 3 no row but the first is 16-byte aligned (run_case) */
static problem problem_make(shape sh, int pad, uint64_t seed)
{
    problem p;
    p.sh = sh;
    p.HP = sh.H * sh.P;
    p.GN = sh.G * sh.N;
    p.ld = p.HP + 2 * p.GN + pad;
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

/* Runs forward and backward on backend g (host memory for the CPU, device memory for CUDA). dA and dD start at dA0 /
 * dD0 (dA is written, dD ADDS: src/core/ssd.h); dxbc and ddt start as 7 (their padding must stay 7). Also checks that a
 * forward without `saved`, in the forward-only scratch size (ssd_scratch_size(.., 0), as inference allocates), gives
 * the same y and writes nothing past that size, and, when `repeat`, that a second backward gives bitwise the same
 * gradients. */
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
    float *scratch = g->alloc(g, g->ssd_scratch_size(g, &ss, 1) * sizeof(float));
    /* the forward alone (saved == NULL) gets only its own size, followed by a guard that must stay untouched */
    enum { GUARD = 256 };
    const size_t n_fwd = g->ssd_scratch_size(g, &ss, 0);
    float *fwd_scratch = g->alloc(g, (n_fwd + GUARD) * sizeof(float)), *guard = m2_host_fill(GUARD, -7.0f);
    assert_true(y && y2 && saved && scratch && fwd_scratch);
    assert_true(n_fwd <= g->ssd_scratch_size(g, &ss, 1));
    g->to_device(g, fwd_scratch + n_fwd, guard, GUARD * sizeof(float));
    const size_t n_scratch = g->ssd_scratch_size(g, &ss, 1);
    float *poison = host ? NULL : m2_host_fill(n_scratch, NAN);
    const float *Bm = xbc + p->HP, *Cm = xbc + p->HP + p->GN;
    float *dBm = dxbc + p->HP, *dCm = dxbc + p->HP + p->GN;

    g->ssd_fwd(g, &ss, xbc, dt, A, Bm, Cm, D, y, M2_ACT_REAL, saved, scratch);
    g->ssd_fwd(g, &ss, xbc, dt, A, Bm, Cm, D, y2, M2_ACT_REAL, NULL, fwd_scratch);
    float *guard_after = m2_host_from(g, fwd_scratch + n_fwd, GUARD);
    assert_memory_equal(guard_after, guard, GUARD * sizeof(float));
    free(guard_after);
    free(guard);
    /* In a model the other layers' passes reuse the scratch before this layer's backward: the backward must read
     * nothing the forward left there (the chunk states, when not kept, are recomputed; a NaN read would show). */
    if (poison) g->to_device(g, scratch, poison, n_scratch * sizeof(float));
    free(poison);
    g->ssd_bwd(g, &ss, xbc, dt, A, Bm, Cm, D, dy, M2_ACT_REAL, saved, dxbc, ddt, dA, dBm, dCm, dD, scratch);

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
        /* dA keeps the first backward's values: written again, not added */
        g->to_device(g, dD, dD0, (size_t)s.H * sizeof(float));
        g->ssd_bwd(g, &ss, xbc, dt, A, Bm, Cm, D, dy, M2_ACT_REAL, saved, dxbc, ddt, dA, dBm, dCm, dD, scratch);
        float *again = m2_host_from(g, dxbc, nxbc), *ddt2 = m2_host_from(g, ddt, ndt), *dA2 = m2_host_from(g, dA, s.H);
        assert_memory_equal(again, r.dxbc, nxbc * sizeof(float));
        assert_memory_equal(ddt2, r.ddt, ndt * sizeof(float));
        assert_memory_equal(dA2, r.dA, (size_t)s.H * sizeof(float));
        free(again);
        free(ddt2);
        free(dA2);
    }
    void *bufs[] = {xbc, dt, A, D, dy, dxbc, ddt, dA, dD, y, y2, saved, scratch, fwd_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g->free(g, bufs[i]);
    free(seven);
    return r;
}

/* Compares one backend's results with the oracle (and its padding columns with the sentinel): y and the
 * gradients of x, B, C to tol, ddt and dA to tol_decay, dD to 1e-4 (see the top of the file). */
static void check_results(const char *name, const problem *p, const results *r, const oracle_out *o, const float *dA0,
                          const float *dD0, double tol, double tol_decay)
{
    const shape s = p->sh;
    const size_t ny = (size_t)p->rows * p->HP, nbc = (size_t)p->rows * p->GN, ndt = (size_t)p->rows * s.H;
    float *ref = malloc((ny + 1) * sizeof(float)), *got = malloc((ny + 1) * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    char what[96];
#define CMP(label, n, GOT, REF, tol)                       \
    do {                                                   \
        for (size_t i_ = 0; i_ < (n); i_++) {              \
            got[i_] = (GOT);                               \
            ref[i_] = (float)(REF);                        \
        }                                                  \
        snprintf(what, sizeof what, "%s %s", name, label); \
        m2_expect_close(what, got, ref, (n), tol);         \
    } while (0)
    CMP("y", ny, r->y[i_], o->y[i_], tol);
    CMP("dx", ny, r->dxbc[(i_ / p->HP) * p->ld + i_ % p->HP], o->dx[i_], tol);
    CMP("dB", nbc, r->dxbc[(i_ / p->GN) * p->ld + p->HP + i_ % p->GN], o->dB[i_], tol);
    CMP("dC", nbc, r->dxbc[(i_ / p->GN) * p->ld + p->HP + p->GN + i_ % p->GN], o->dC[i_], tol);
    CMP("ddt", ndt, r->ddt[i_], o->ddt[i_], tol_decay);
    CMP("dA (written)", (size_t)s.H, r->dA[i_], o->dA[i_], tol_decay);
    CMP("dD (adds)", (size_t)s.H, r->dD[i_] - dD0[i_], o->dD[i_], 1e-4);
#undef CMP
    for (int row = 0; row < p->rows; row++)
        for (int j = p->HP + 2 * p->GN; j < p->ld; j++) assert_true(r->dxbc[(size_t)row * p->ld + j] == 7.0f);
    free(ref);
    free(got);
}

typedef struct { /* one precision of the SSD's products, with its tolerances (see the top of the file) */
    const char *name;
    m2_cuda_gemm_precision prec;
    double tol, tol_decay, min_diff_from_fp32;
} precision_case;

static const precision_case PRECISIONS[] = {
    {"cuda fp32", M2_CUDA_GEMM_FP32, 1e-4, 1e-3, 0.0},
    {"cuda tf32", M2_CUDA_GEMM_TF32, 2.5e-3, 1e-2, 0x1p-11 / 16},
    {"cuda bf16", M2_CUDA_GEMM_BF16, 2e-2, 8e-2, 0x1p-8 / 16},
};
enum { NPREC = sizeof PRECISIONS / sizeof PRECISIONS[0] };

/* ||a - b|| / ||b|| over y and over dx (x's columns of dxbc): the smaller (both must differ); prints both. */
static double differs_by(const char *name, const problem *p, const results *a, const results *b)
{
    const size_t ny = (size_t)p->rows * p->HP;
    float *ga = malloc(ny * sizeof(float)), *gb = malloc(ny * sizeof(float));
    assert_true(ga && gb);
    for (size_t i = 0; i < ny; i++) {
        ga[i] = a->dxbc[(i / p->HP) * p->ld + i % p->HP];
        gb[i] = b->dxbc[(i / p->HP) * p->ld + i % p->HP];
    }
    const double dy = m2_rel_err(a->y, b->y, ny), dx = m2_rel_err(ga, gb, ny);
    printf("  %-44s y %.3e  dx %.3e\n", name, dy, dx);
    free(ga);
    free(gb);
    return dy < dx ? dy : dx;
}

static void run_case_padded(shape sh, int pad)
{
    printf(" SSD B=%d T=%d H=%d P=%d G=%d N=%d Q=%d, xBC rows of %d + %d\n", sh.B, sh.T, sh.H, sh.P, sh.G, sh.N, sh.Q,
           sh.H * sh.P + 2 * sh.G * sh.N, pad);
    problem p = problem_make(sh, pad, SEED + (uint64_t)sh.T);
    oracle_out o;
    oracle(&p, &o);
    float *dA0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 9),
          *dD0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 10);
    results rg[NPREC];
    for (int k = 0; k < NPREC; k++) {
        const precision_case *pc = &PRECISIONS[k];
        m2_cuda_gemm_precision old = m2_ops_cuda_set_gemm_precision(pc->prec);
        rg[k] = run_backend(m2_gpu_ops(), &p, dA0, dD0, 1);
        m2_ops_cuda_set_gemm_precision(old);
        check_results(pc->name, &p, &rg[k], &o, dA0, dD0, pc->tol, pc->tol_decay);
        if (pc->min_diff_from_fp32 > 0) {
            char what[96];
            snprintf(what, sizeof what, "%s differs from cuda fp32 (at least %.1e)", pc->name, pc->min_diff_from_fp32);
            const double d = differs_by(what, &p, &rg[k], &rg[0]);
            if (!(d >= pc->min_diff_from_fp32))
                fail_msg("%s: within %.3e of the fp32 products: the tensor-core path did not run", pc->name, d);
        }
    }
    results rc = run_backend(m2_ops_cpu(), &p, dA0, dD0, 0);
    check_results("cpu", &p, &rc, &o, dA0, dD0, PRECISIONS[0].tol, PRECISIONS[0].tol_decay);
    for (int k = 0; k < NPREC; k++) results_free(&rg[k]);
    results_free(&rc);
    free(dA0);
    free(dD0);
    oracle_free(&o);
    problem_free(&p);
}

/* Each shape with the xBC rows padded by 3 columns, so that the tiled products gather their operands element by
 * element (m2_tile_gemm_wmma_kernel and the like), and, where the sizes allow the 16-byte loads (T, Q, N, P and
 * the row stride multiples of 4: kernels/ssd_cuda.cuh, vec4), by 4: the _v4 kernels, which the model's shapes run.
 * The two place their operands in the tiles through different code (tile_gemm.cuh: stage_rows, vec_place), so
 * each must be checked against the oracle on its own. */
static void run_case(shape sh)
{
    run_case_padded(sh, 3);
    if (sh.T % 4 == 0 && sh.Q % 4 == 0 && sh.N % 4 == 0 && sh.P % 4 == 0) run_case_padded(sh, 4);
}

/* The CUDA backend's two ways of having the chunk states in the backward (kernels/ssd_cuda.h): kept from the forward
 * or recomputed from the saved cumsums. The same kernels on the same inputs, so the results are bitwise the same;
 * the saved buffer of the recompute holds the cumsums only (at the default precision, bf16: the kept states are
 * bf16). */
static void states_kept_or_recomputed(shape sh)
{
    problem p = problem_make(sh, 4, SEED + (uint64_t)sh.T);
    float *dA0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 9),
          *dD0 = m2_host_uniform((size_t)sh.H, -0.1f, 0.1f, SEED, 10);
    const m2_ops *g = m2_gpu_ops();
    m2_ssd_shape ss = {sh.B, sh.T, sh.H, sh.P, sh.G, sh.N, sh.Q, p.ld, p.ld};
    results r[2];
    size_t saved[2];
    const m2_cuda_ssd_states modes[2] = {M2_CUDA_SSD_KEEP_STATES, M2_CUDA_SSD_RECOMPUTE_STATES};
    for (int k = 0; k < 2; k++) {
        const m2_cuda_ssd_states old = m2_ops_cuda_set_ssd_states(modes[k]);
        saved[k] = g->ssd_saved_size(g, &ss);
        r[k] = run_backend(g, &p, dA0, dD0, 0);
        m2_ops_cuda_set_ssd_states(old);
    }
    const int nc = (sh.T + sh.Q - 1) / sh.Q;
    printf(" SSD T=%d Q=%d: saved %zu floats with the states kept, %zu recomputed\n", sh.T, sh.Q, saved[0], saved[1]);
    assert_true(saved[1] < saved[0]);
    /* S: [B*nc*H][P][N], bf16 at bf16 precision (the backend's act_type; kernels/ssd_cuda.cuh, ssd_states_type) */
    const size_t s_bytes = m2_act_bytes(g->act_type(g));
    assert_true((saved[0] - saved[1]) * sizeof(float) >= (size_t)sh.B * nc * sh.H * sh.P * sh.N * s_bytes);
    const size_t ny = (size_t)p.rows * p.HP, nxbc = (size_t)p.rows * p.ld, ndt = (size_t)p.rows * sh.H;
    assert_memory_equal(r[0].y, r[1].y, ny * sizeof(float));
    assert_memory_equal(r[0].dxbc, r[1].dxbc, nxbc * sizeof(float));
    assert_memory_equal(r[0].ddt, r[1].ddt, ndt * sizeof(float));
    assert_memory_equal(r[0].dA, r[1].dA, (size_t)sh.H * sizeof(float));
    assert_memory_equal(r[0].dD, r[1].dD, (size_t)sh.H * sizeof(float));
    results_free(&r[0]);
    results_free(&r[1]);
    free(dA0);
    free(dD0);
    problem_free(&p);
}
static void test_states_kept_or_recomputed(void **state)
{
    states_kept_or_recomputed((shape){2, 130, 6, 16, 3, 16, 64}); /* 3 chunks, the last partial */
    states_kept_or_recomputed((shape){1, 300, 2, 64, 1, 128, 256});
}

static void test_tail_chunk_two_groups(void **state) { run_case((shape){2, 37, 4, 8, 2, 6, 8}); }
static void test_whole_chunks(void **state) { run_case((shape){1, 64, 2, 4, 1, 8, 16}); }
static void test_one_partial_chunk(void **state) { run_case((shape){2, 5, 2, 4, 1, 4, 8}); }
static void test_three_groups(void **state) { run_case((shape){2, 130, 6, 16, 3, 16, 64}); }
static void test_past_one_tile(void **state)
{
    run_case((shape){1, 200, 2, 72, 1, 70, 96});
    run_case((shape){1, 200, 2, 72, 1, 68, 96}); /* N = 68: the partial tiles with the 16-byte loads too */
}
/* P*N = 35, a multiple of neither state-passing vector width (8 bf16, 4 fp32: ssd_pass_width), so the state passings
 * run one entry per thread, over two groups of 32 entries, the second partial (the others run the vector paths) */
static void test_odd_state_size(void **state) { run_case((shape){2, 37, 4, 5, 2, 7, 8}); }
/* configs/8gpu.ini's head shape (P 64, N 128, Q 256; 2 of its 24 heads), a whole chunk and a partial one */
static void test_production_head_shape(void **state) { run_case((shape){1, 300, 2, 64, 1, 128, 256}); }
/* 17 heads at Q = 256: the cumsums and decay tables take a chunk's heads 15 to a block (ssd_cuda.cu, ssd_scan_heads),
 * so a chunk spans two blocks, the second with 2 heads */
static void test_heads_past_one_block(void **state) { run_case((shape){1, 300, 17, 4, 1, 8, 256}); }

/* An argument is a cmocka test-name pattern (e.g. "*production*"): check.sh's racecheck runs the model's head shape
 * alone, which fits the sanitizer's time slot where the whole file does not. */
int main(int argc, char **argv)
{
    if (m2_gpu_skip()) return 0;
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail_chunk_two_groups),
        cmocka_unit_test(test_whole_chunks),
        cmocka_unit_test(test_one_partial_chunk),
        cmocka_unit_test(test_three_groups),
        cmocka_unit_test(test_past_one_tile),
        cmocka_unit_test(test_odd_state_size),
        cmocka_unit_test(test_production_head_shape),
        cmocka_unit_test(test_heads_past_one_block),
        cmocka_unit_test(test_states_kept_or_recomputed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
