/* Chunked SSD (src/core/ssd*.c) against the sequential fp64 oracle (ssd_oracle.c), and the oracle's backward
 * against central finite differences. Compiled twice: test_ssd_f32 (the product, m2_real = float) and
 * test_ssd_f64 (-DMAMBA2_FP64 via mamba2_core_f64), with tolerances derived from the build's epsilon.
 *
 * Tolerance. Every output of the SSD is a sum of products of inputs and decays; both the chunked algorithm and
 * the recurrence add the same terms, in different groupings. A sum of k floating-point terms computed in any
 * order is within about k·eps of the exact value relative to Σ|term|, and Σ|term| is what the oracle computes
 * in magnitude mode (mag). The longest chains here: a dot product over N or P, a sum over the ≤ Q positions of
 * a chunk, the passing over ≤ T/Q chunk states (the oracle: T recurrence steps). So each element must satisfy
 *     |chunked − oracle| ≤ K·eps·mag + K·tiny,   K = 2·(N + P + Q + T),
 * tiny = the smallest normal number (decays that underflow: the chunked code flushes them to 0). The decay
 * exponents are segment sums of ≤ Q same-signed terms, so their rounding perturbs a term by ~eps·|Δ| relative
 * while the term itself carries the factor e^{-|Δ|}; terms with a large |Δ| are negligible beside the
 * undecayed diagonal ones that every output has, which keeps this inside K in practice (a purely adversarial
 * input could need a K that grows with |Δ|). This bound is far below the error of any algebraic mistake (a
 * wrong or missing term is O(1) relative to mag). Measured worst |err|/(eps·mag): ≤ 4 in both builds for
 * T ≤ 100 (K ≥ 130) and ≤ 7 for the T = 4096 extreme case (K = 8344); each test prints it.
 * fp64: K·eps ≈ 8e-14 for T = 100, 2e-12 for T = 4096, tighter than the customary 1e-10 yet justified;
 * fp32: K·eps ≈ 4e-5 and 1e-3 respectively. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "core/blas_core.h"
#include "core/ssd.h"
#include "core/ssd_chunk.h" /* m2_ssd_decay: the SSD's own exp */
#include "ssd_oracle.h"

#ifdef MAMBA2_FP64
#define EPS   DBL_EPSILON
#define TINY  DBL_MIN
#define BUILD "fp64"
#else
#define EPS   FLT_EPSILON
#define TINY  FLT_MIN
#define BUILD "fp32"
#endif

static const double PAD_SENTINEL = 777.0; /* the padding columns of the gradient buffer must keep it */

enum { DT_TYPICAL, DT_EXTREME };

/* One SSD problem laid out as the model lays it out: x, B and C are column ranges of one conv output
 * xBC [B,T,Cc] with Cc = H*P + 2*G*N + 3 (3 padding columns), so ld_x = ld_bc = Cc > the packed widths. */
typedef struct {
    m2_ssd_shape s;
    int Cc, ox, ob, oc; /* column offsets of x, B, C in xBC */
    size_t rows;        /* B*T */
    m2_real *xbc, *dt, *A, *D, *dy;
    double *xbc64, *dt64, *A64, *D64, *dy64;
} problem;

static double uni(uint64_t key, uint64_t *ctr, double lo, double hi)
{
    return lo + (hi - lo) * m2_rng_u01(key, (*ctr)++);
}
static double loguni(uint64_t key, uint64_t *ctr, double lo, double hi) { return exp(uni(key, ctr, log(lo), log(hi))); }

/* dt and A per regime. DT_EXTREME: head 0 dt = 100 with A = -16 (decay exp(-1600)), head 1 dt = 1e-6
 * (no decay over thousands of ticks), head 2 dt log-uniform over [1e-6, 100] per tick (strong and negligible
 * decays mixed inside a chunk), head 3 a huge A = -1e4 with dt in [1e-3, 1]. */
static void draw_dt_A(problem *pb, int regime, uint64_t key, uint64_t *ctr)
{
    const int H = pb->s.H;
    for (int h = 0; h < H; h++) {
        double A = -loguni(key, ctr, 0.05, 16.0);
        if (regime == DT_EXTREME) A = (double[]){-16.0, -1.0, -16.0, -1e4}[h % 4];
        pb->A[h] = (m2_real)A;
    }
    for (size_t r = 0; r < pb->rows; r++)
        for (int h = 0; h < H; h++) {
            double dt = loguni(key, ctr, 1e-3, 0.5);
            if (regime == DT_EXTREME) {
                const int kind = h % 4;
                dt = kind == 0   ? 100.0
                     : kind == 1 ? 1e-6
                     : kind == 2 ? loguni(key, ctr, 1e-6, 100.0)
                                 : loguni(key, ctr, 1e-3, 1.0);
            }
            pb->dt[r * H + h] = (m2_real)dt;
        }
}

static problem make_problem(int B, int T, int H, int P, int G, int N, int Q, int regime, uint64_t seed)
{
    problem pb = {.s = {.B = B, .T = T, .H = H, .P = P, .G = G, .N = N, .Q = Q}};
    pb.Cc = H * P + 2 * G * N + 3;
    pb.ox = 0;
    pb.ob = H * P;
    pb.oc = H * P + G * N;
    pb.s.ld_x = pb.s.ld_bc = pb.Cc;
    pb.rows = (size_t)B * T;
    const size_t nx = pb.rows * pb.Cc, nd = pb.rows * H, ny = pb.rows * H * P;
    pb.xbc = malloc(nx * sizeof(m2_real));
    pb.dt = malloc(nd * sizeof(m2_real));
    pb.A = malloc(H * sizeof(m2_real));
    pb.D = malloc(H * sizeof(m2_real));
    pb.dy = malloc(ny * sizeof(m2_real));
    const uint64_t key = m2_rng_key(seed, M2_RNG_TEST, 0x55d, 0);
    uint64_t ctr = 0;
    for (size_t i = 0; i < nx; i++) pb.xbc[i] = (m2_real)uni(key, &ctr, -1, 1);
    for (size_t i = 0; i < ny; i++) pb.dy[i] = (m2_real)uni(key, &ctr, -1, 1);
    for (int h = 0; h < H; h++) pb.D[h] = (m2_real)uni(key, &ctr, -1, 1);
    draw_dt_A(&pb, regime, key, &ctr);
    /* The oracle sees exactly the values the chunked build sees. */
    pb.xbc64 = malloc(nx * sizeof(double));
    pb.dt64 = malloc(nd * sizeof(double));
    pb.A64 = malloc(H * sizeof(double));
    pb.D64 = malloc(H * sizeof(double));
    pb.dy64 = malloc(ny * sizeof(double));
    for (size_t i = 0; i < nx; i++) pb.xbc64[i] = pb.xbc[i];
    for (size_t i = 0; i < nd; i++) pb.dt64[i] = pb.dt[i];
    for (size_t i = 0; i < ny; i++) pb.dy64[i] = pb.dy[i];
    for (int h = 0; h < H; h++) {
        pb.A64[h] = pb.A[h];
        pb.D64[h] = pb.D[h];
    }
    return pb;
}

static void free_problem(problem *pb)
{
    void *p[] = {pb->xbc, pb->dt, pb->A, pb->D, pb->dy, pb->xbc64, pb->dt64, pb->A64, pb->D64, pb->dy64};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
}

static ssd_oracle_in oracle_in(const problem *pb)
{
    ssd_oracle_in in = {.x = pb->xbc64 + pb->ox,
                        .dt = pb->dt64,
                        .A = pb->A64,
                        .Bm = pb->xbc64 + pb->ob,
                        .Cm = pb->xbc64 + pb->oc,
                        .D = pb->D64};
    return in;
}

/* The chunked results of one problem. dA and dD start at 0.5 to check that the backward writes dA and ADDS into
 * dD (src/core/ssd.h). */
typedef struct {
    m2_real *y, *dxbc, *ddt, dA[16], dD[16];
} chunked;

static const m2_real DA0 = (m2_real)0.5;

static void run_chunked(const problem *pb, int n_threads, chunked *out)
{
    const m2_ssd_shape *s = &pb->s;
    m2_real *saved = malloc(m2_ssd_saved_size(s) * sizeof(m2_real));
    m2_real *scratch = malloc(m2_ssd_scratch_size(s, n_threads) * sizeof(m2_real));
    assert_non_null(saved);
    assert_non_null(scratch);
    assert_true(s->H <= 16);
    out->y = malloc(pb->rows * s->H * s->P * sizeof(m2_real));
    out->dxbc = malloc(pb->rows * pb->Cc * sizeof(m2_real));
    out->ddt = malloc(pb->rows * s->H * sizeof(m2_real));
    for (size_t i = 0; i < pb->rows * pb->Cc; i++) out->dxbc[i] = (m2_real)PAD_SENTINEL;
    for (int h = 0; h < s->H; h++) out->dA[h] = out->dD[h] = DA0;
    omp_set_dynamic(0);
    omp_set_num_threads(n_threads);
    m2_ssd_forward(s, pb->xbc + pb->ox, pb->dt, pb->A, pb->xbc + pb->ob, pb->xbc + pb->oc, pb->D, out->y, saved,
                   scratch);
    m2_ssd_backward(s, pb->xbc + pb->ox, pb->dt, pb->A, pb->xbc + pb->ob, pb->xbc + pb->oc, pb->D, pb->dy, saved,
                    out->dxbc + pb->ox, out->ddt, out->dA, out->dxbc + pb->ob, out->dxbc + pb->oc, out->dD, scratch);
    omp_set_num_threads(1);
    free(saved);
    free(scratch);
}

static void free_chunked(chunked *c)
{
    free(c->y);
    free(c->dxbc);
    free(c->ddt);
}

/* The oracle's results, plus magnitudes. Gradient buffers share the xBC layout. */
typedef struct {
    double *y, *ymag, *dxbc, *dxbc_mag, *ddt, *ddt_mag, dA[16], dA_mag[16], dD[16], dD_mag[16];
} reference;

static ssd_oracle_grad grad_view(const problem *pb, double *dxbc, double *ddt, double *dA, double *dD)
{
    ssd_oracle_grad g = {
        .dx = dxbc + pb->ox, .ddt = ddt, .dA = dA, .dBm = dxbc + pb->ob, .dCm = dxbc + pb->oc, .dD = dD};
    return g;
}

static void run_oracle(const problem *pb, reference *ref)
{
    const ssd_oracle_in in = oracle_in(pb);
    const size_t ny = pb->rows * pb->s.H * pb->s.P, nx = pb->rows * pb->Cc, nd = pb->rows * pb->s.H;
    ref->y = malloc(ny * sizeof(double));
    ref->ymag = malloc(ny * sizeof(double));
    ref->dxbc = calloc(nx, sizeof(double));
    ref->dxbc_mag = calloc(nx, sizeof(double));
    ref->ddt = malloc(nd * sizeof(double));
    ref->ddt_mag = malloc(nd * sizeof(double));
    ssd_oracle_forward(&pb->s, &in, ref->y, 0);
    ssd_oracle_forward(&pb->s, &in, ref->ymag, 1);
    ssd_oracle_grad g = grad_view(pb, ref->dxbc, ref->ddt, ref->dA, ref->dD);
    ssd_oracle_grad gm = grad_view(pb, ref->dxbc_mag, ref->ddt_mag, ref->dA_mag, ref->dD_mag);
    assert_int_equal(ssd_oracle_backward(&pb->s, &in, pb->dy64, &g, 0), 0);
    assert_int_equal(ssd_oracle_backward(&pb->s, &in, pb->dy64, &gm, 1), 0);
}

static void free_reference(reference *r)
{
    free(r->y);
    free(r->ymag);
    free(r->dxbc);
    free(r->dxbc_mag);
    free(r->ddt);
    free(r->ddt_mag);
}

/* Compares n elements (rows × cols with row strides) and returns the worst |err|/(eps·mag); fails the test on
 * a non-finite value or an element beyond K·eps·mag + K·tiny (+ eps·|offset|: the rounding of the one addition
 * onto a preset value `offset`, for dA and dD). */
static double compare(const char *what, const m2_real *got, const double *ref, const double *mag, size_t rows, int cols,
                      size_t ld, double offset, double K)
{
    double worst = 0;
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            const size_t i = r * ld + (size_t)j;
            const double g = (double)got[i] - offset, e = fabs(g - ref[i]), m = mag[i];
            if (isfinite((double)got[i]) && !isfinite(ref[i])) continue; /* compared where the oracle is finite */
            if (!isfinite((double)got[i]) || e > K * EPS * m + K * TINY + EPS * fabs(offset)) {
                print_error("%s [%s] element (%zu, %d): chunked %.17g, oracle %.17g, magnitude %.3g, |err|/(eps*mag) "
                            "%.3g > K = %.0f\n",
                            what, BUILD, r, j, g, ref[i], m, e / (EPS * m), K);
                fail();
            }
            if (m > 0) worst = fmax(worst, fmax(e - EPS * fabs(offset), 0) / (EPS * m));
        }
    return worst;
}

static double bound_K(const m2_ssd_shape *s) { return 2.0 * (s->N + s->P + s->Q + s->T); }

static void check_forward(const problem *pb, const chunked *c, const reference *ref, const char *name)
{
    const m2_ssd_shape *s = &pb->s;
    const double K = bound_K(s);
    double w = compare(name, c->y, ref->y, ref->ymag, pb->rows, s->H * s->P, (size_t)s->H * s->P, 0, K);
    print_message("  %-28s y   worst %.3g eps*mag (bound %.0f)\n", name, w, K);
}

static void check_backward(const problem *pb, const chunked *c, const reference *ref, const char *name)
{
    const m2_ssd_shape *s = &pb->s;
    const double K = bound_K(s);
    char what[96];
    double w = 0;
    snprintf(what, sizeof what, "%s dx", name);
    w = fmax(w, compare(what, c->dxbc + pb->ox, ref->dxbc + pb->ox, ref->dxbc_mag + pb->ox, pb->rows, s->H * s->P,
                        pb->Cc, 0, K));
    snprintf(what, sizeof what, "%s dB", name);
    w = fmax(w, compare(what, c->dxbc + pb->ob, ref->dxbc + pb->ob, ref->dxbc_mag + pb->ob, pb->rows, s->G * s->N,
                        pb->Cc, 0, K));
    snprintf(what, sizeof what, "%s dC", name);
    w = fmax(w, compare(what, c->dxbc + pb->oc, ref->dxbc + pb->oc, ref->dxbc_mag + pb->oc, pb->rows, s->G * s->N,
                        pb->Cc, 0, K));
    snprintf(what, sizeof what, "%s ddt", name);
    w = fmax(w, compare(what, c->ddt, ref->ddt, ref->ddt_mag, pb->rows, s->H, s->H, 0, K));
    /* dA, dD: the sums run over B*T terms, so K grows by B*T; dA overwrote DA0, dD was added onto it. */
    const double Kbt = K + 2.0 * pb->rows;
    snprintf(what, sizeof what, "%s dA", name);
    w = fmax(w, compare(what, c->dA, ref->dA, ref->dA_mag, 1, s->H, 0, 0, Kbt));
    snprintf(what, sizeof what, "%s dD", name);
    w = fmax(w, compare(what, c->dD, ref->dD, ref->dD_mag, 1, s->H, 0, DA0, Kbt));
    print_message("  %-28s grads worst %.3g eps*mag (bound %.0f)\n", name, w, K);
    /* The padding columns of the strided gradient buffer are not the SSD's to write. */
    for (size_t r = 0; r < pb->rows; r++)
        for (int j = pb->oc + s->G * s->N; j < pb->Cc; j++)
            assert_true(c->dxbc[r * pb->Cc + j] == (m2_real)PAD_SENTINEL);
}

/* Q ∈ {1, 8, 64} × T ∈ {100, 77, 40} (none a multiple of 8 or 64; 40 < 64 gives a single, partial chunk)
 * × G ∈ {1, 2}, B = 2, H = 4. */
typedef void (*config_check)(const problem *, const chunked *, const reference *, const char *);

static void for_each_config(config_check check)
{
    static const int Qs[] = {1, 8, 64}, Ts[] = {100, 77, 40}, Gs[] = {1, 2};
    uint64_t seed = 1;
    for (int iq = 0; iq < 3; iq++)
        for (int it = 0; it < 3; it++)
            for (int ig = 0; ig < 2; ig++) {
                problem pb = make_problem(2, Ts[it], 4, 8, Gs[ig], 16, Qs[iq], DT_TYPICAL, seed++);
                chunked c;
                reference ref;
                run_chunked(&pb, 2, &c);
                run_oracle(&pb, &ref);
                char name[64];
                snprintf(name, sizeof name, "Q=%d T=%d G=%d", Qs[iq], Ts[it], Gs[ig]);
                check(&pb, &c, &ref, name);
                free_chunked(&c);
                free_reference(&ref);
                free_problem(&pb);
            }
}

static void test_forward_matches_oracle(void **state) { for_each_config(check_forward); }

static void test_backward_matches_oracle(void **state) { for_each_config(check_backward); }

/* Without `saved` the forward keeps its states in scratch and must give the same y. */
static void test_forward_without_saved(void **state)
{
    problem pb = make_problem(2, 77, 4, 8, 2, 16, 8, DT_TYPICAL, 99);
    chunked c;
    run_chunked(&pb, 1, &c);
    const size_t ny = pb.rows * pb.s.H * pb.s.P;
    m2_real *y = malloc(ny * sizeof *y), *scratch = malloc(m2_ssd_scratch_size(&pb.s, 1) * sizeof *scratch);
    m2_ssd_forward(&pb.s, pb.xbc + pb.ox, pb.dt, pb.A, pb.xbc + pb.ob, pb.xbc + pb.oc, pb.D, y, NULL, scratch);
    assert_memory_equal(y, c.y, ny * sizeof *y);
    free(y);
    free(scratch);
    free_chunked(&c);
    free_problem(&pb);
}

/* T = 4096 with the extreme regimes of draw_dt_A: everything finite, and equal to the oracle within the
 * bound (the oracle is finite for these inputs: its decays underflow to 0, they never overflow). */
static void test_long_window_extreme_dt(void **state)
{
    problem pb = make_problem(1, 4096, 4, 4, 2, 8, 64, DT_EXTREME, 7);
    chunked c;
    reference ref;
    run_chunked(&pb, 2, &c);
    run_oracle(&pb, &ref);
    check_forward(&pb, &c, &ref, "T=4096 extreme dt");
    check_backward(&pb, &c, &ref, "T=4096 extreme dt");
    free_chunked(&c);
    free_reference(&ref);
    free_problem(&pb);
}

/* The decay exp (ssd_chunk.h) against libm's exp in fp64: within 2 ulp of the build's precision wherever the
 * result is a normal number, exactly 0 below that, exactly 1 for d >= 0 (the min(d, 0) guard), and 0 for
 * -inf. 2 ulp = the reduction/polynomial error (< 1 ulp, see ssd_chunk.h) plus the final rounding. */
static void test_decay_exp_accuracy(void **state)
{
    const double lo = 1.02 * log(TINY);
    double worst = 0;
    for (int i = 0; i <= 400000; i++) {
        const m2_real d = (m2_real)(lo * i / 400000.0);
        const double want = exp((double)d), got = (double)m2_ssd_decay(d);
        if (want < TINY) {
            assert_true(got == 0 || fabs(got - want) <= TINY);
            continue;
        }
        const double ulps = fabs(got - want) / (want * EPS);
        worst = fmax(worst, ulps);
        if (ulps > 2) {
            print_error("m2_ssd_decay(%.17g) = %.17g, exp = %.17g (%.2f ulp)\n", (double)d, got, want, ulps);
            fail();
        }
    }
    print_message("  decay exp worst %.3f ulp [%s]\n", worst, BUILD);
    assert_true(m2_ssd_decay(0) == 1);
    assert_true(m2_ssd_decay((m2_real)3.5) == 1);
    assert_true(m2_ssd_decay((m2_real)-INFINITY) == 0);
}

/* Forward and backward give bitwise identical results on 1 and on 4 threads, and twice on 4 threads. */
static void test_deterministic_across_threads(void **state)
{
    problem pb = make_problem(3, 200, 4, 8, 2, 16, 16, DT_TYPICAL, 5);
    chunked c1, c4, c4b;
    run_chunked(&pb, 1, &c1);
    run_chunked(&pb, 4, &c4);
    run_chunked(&pb, 4, &c4b);
    const size_t ny = pb.rows * pb.s.H * pb.s.P * sizeof(m2_real), nx = pb.rows * pb.Cc * sizeof(m2_real);
    const size_t nd = pb.rows * pb.s.H * sizeof(m2_real), nh = pb.s.H * sizeof(m2_real);
    const chunked *others[] = {&c4, &c4b};
    for (int k = 0; k < 2; k++) {
        assert_memory_equal(c1.y, others[k]->y, ny);
        assert_memory_equal(c1.dxbc, others[k]->dxbc, nx);
        assert_memory_equal(c1.ddt, others[k]->ddt, nd);
        assert_memory_equal(c1.dA, others[k]->dA, nh);
        assert_memory_equal(c1.dD, others[k]->dD, nh);
    }
    free_chunked(&c1);
    free_chunked(&c4);
    free_chunked(&c4b);
    free_problem(&pb);
}

#ifdef MAMBA2_FP64
/* The oracle's backward against central differences of L = Σ dy ∘ y (oracle forward), for every input element
 * (x, B, C, dt, A, D), with G = 1 and G = 2 so the group sums are covered. Step h = 1e-5·max(|v|, 0.1):
 * truncation error ~h²|L'''|/6 ≈ 1e-11 and cancellation error ~eps·|L|/h ≈ 1e-10 for |L| ~ 10, so
 * 1e-7·(1 + mag) is a safe bound that a wrong term (O(1)·mag) cannot pass. */
static double loss_of(const problem *pb, const ssd_oracle_in *in, double *y)
{
    ssd_oracle_forward(&pb->s, in, y, 0);
    double L = 0;
    for (size_t i = 0; i < pb->rows * pb->s.H * pb->s.P; i++) L += pb->dy64[i] * y[i];
    return L;
}

static void fd_check(const problem *pb, ssd_oracle_in *in, double *v, size_t n, const double *g, const double *mag,
                     const char *what, double *y)
{
    for (size_t i = 0; i < n; i++) {
        const double v0 = v[i], h = 1e-5 * fmax(fabs(v0), 0.1);
        v[i] = v0 + h;
        const double lp = loss_of(pb, in, y);
        v[i] = v0 - h;
        const double lm = loss_of(pb, in, y);
        v[i] = v0;
        const double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - g[i]) <= 1e-7 * (1 + mag[i]))) {
            print_error("oracle %s[%zu]: backward %.12g, finite difference %.12g\n", what, i, g[i], fd);
            fail();
        }
    }
}

static void test_oracle_backward_matches_fd(void **state)
{
    for (int G = 1; G <= 2; G++) {
        problem pb = make_problem(2, 9, 2, 2, G, 3, 4, DT_TYPICAL, 40 + G);
        reference ref;
        run_oracle(&pb, &ref);
        ssd_oracle_in in = oracle_in(&pb);
        double *y = malloc(pb.rows * pb.s.H * pb.s.P * sizeof(double));
        /* Every element of xBC that is x, B or C (the padding has zero gradient and is skipped). */
        for (size_t r = 0; r < pb.rows; r++) {
            const size_t o = r * pb.Cc;
            fd_check(&pb, &in, pb.xbc64 + o, (size_t)pb.oc + pb.s.G * pb.s.N, ref.dxbc + o, ref.dxbc_mag + o, "xBC", y);
        }
        fd_check(&pb, &in, pb.dt64, pb.rows * pb.s.H, ref.ddt, ref.ddt_mag, "dt", y);
        fd_check(&pb, &in, pb.A64, pb.s.H, ref.dA, ref.dA_mag, "A", y);
        fd_check(&pb, &in, pb.D64, pb.s.H, ref.dD, ref.dD_mag, "D", y);
        free(y);
        free_reference(&ref);
        free_problem(&pb);
    }
}
#endif

int main(int argc, char **argv)
{
    /* OpenBLAS's kernels as the programs run them (core/blas_core.h), so that the SSD's GEMMs take the beta-0 path
     * they take in training (m2_blas_beta0_fast): on an AVX-512 machine this run passes beta 0 to OpenBLAS and the
     * test_ssd_f32_avx2 / _scalar reruns zero C first; elsewhere both runs zero C first. */
    (void)argc;
    m2_blas_core_ensure(argv);
    char core[128];
    m2_blas_core_describe(core, sizeof core);
    printf("%s: beta-0 products %s\n", core, m2_blas_beta0_fast() ? "passed to OpenBLAS" : "as C zeroed, then beta 1");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay_exp_accuracy),         cmocka_unit_test(test_forward_matches_oracle),
        cmocka_unit_test(test_backward_matches_oracle),    cmocka_unit_test(test_forward_without_saved),
        cmocka_unit_test(test_long_window_extreme_dt),     cmocka_unit_test(test_deterministic_across_threads),
#ifdef MAMBA2_FP64
        cmocka_unit_test(test_oracle_backward_matches_fd),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
