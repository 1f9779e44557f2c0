/* Chunked SSD: sizes, scratch layout and the FLOP count. The passes themselves
 * are in ssd_forward.c and ssd_backward.c; ssd_chunk.h describes the decomposition. */
#include "core/ssd.h"

#include <string.h>

#include "base/cpu.h"
#include "core/ops_cpu.h"
#include "core/ssd_chunk.h"

/* Sub-buffers start on 64-byte boundaries (when scratch does) so the vector loops and BLAS see aligned rows. */
static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

void m2_ssd_plan_init(m2_ssd_plan *pl, const m2_ssd_shape *s)
{
    const size_t Q = (size_t)s->Q, Qr = round16(Q), wide = round16(Q * (size_t)(s->H / s->G) * s->P);
    pl->s = *s;
    pl->nc = (s->T + s->Q - 1) / s->Q;
    pl->hpg = s->H / s->G;
    pl->pn = (size_t)s->P * s->N;
    pl->n_chunks = (size_t)s->B * pl->nc * s->H;
    pl->n_states = pl->n_chunks * pl->pn;
    pl->off_decay = 0;
    pl->off_part = round16(pl->n_chunks);
    pl->off_states = pl->off_part + round16(2 * pl->n_chunks);
    pl->off_thread = pl->off_states + round16(pl->n_states);
    pl->per_thread = 4 * pl->hpg * Qr + 6 * Qr + 5 * round16(Q * Q) + round16(Q * (size_t)s->N) + 2 * wide +
                     round16(pl->pn);
}

void m2_ssd_tbuf_init(const m2_ssd_plan *pl, m2_real *scratch, int tid, m2_ssd_tbuf *tb)
{
    const size_t Q = (size_t)pl->s.Q, Qr = round16(Q), mq = round16(Q * Q);
    const size_t wide = round16(Q * (size_t)pl->hpg * pl->s.P);
    m2_real *p = scratch + pl->off_thread + (size_t)tid * pl->per_thread;
    tb->Qr = Qr;
    m2_real **per_head[] = {&tb->dtv, &tb->a, &tb->e, &tb->r};
    for (size_t i = 0; i < 4; i++, p += pl->hpg * Qr) *per_head[i] = p;
    m2_real **vecs[] = {&tb->run, &tb->v1, &tb->v2, &tb->v3, &tb->v4, &tb->v5};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++, p += Qr) *vecs[i] = p;
    m2_real **mats[] = {&tb->cb, &tb->m, &tb->g, &tb->dcb, &tb->tm};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++, p += mq) *mats[i] = p;
    memset(tb->m, 0, Q * Q * sizeof *tb->m); /* only lower triangles are ever written into m */
    tb->p1 = p;
    p += round16(Q * (size_t)pl->s.N);
    tb->wide1 = p;
    tb->wide2 = p + wide;
    tb->st = p + 2 * wide;
}

size_t m2_ssd_saved_size(const m2_ssd_shape *s)
{
    m2_ssd_plan pl;
    m2_ssd_plan_init(&pl, s);
    return pl.n_states;
}

size_t m2_ssd_scratch_size(const m2_ssd_shape *s, int n_threads)
{
    m2_ssd_plan pl;
    m2_ssd_plan_init(&pl, s);
    return pl.off_thread + (size_t)(n_threads > 0 ? n_threads : 1) * pl.per_thread;
}

/* FLOPs of the GEMMs as executed (2 per multiply-add; each causal L×L product counted as m2_ssd_gemm_tri runs
 * it, without the block above the diagonal that it skips: m2_ssd_tri_products(L) for L²), per chunk of length L, summed over batch and chunks; the O(L²) elementwise work (decays, masks) and
 * the O(P·N) state passing are left out. Forward: C·Bᵀ once per group (L²N), per head the intra-chunk
 * product (L²P), the chunk state (LPN, not for the last chunk) and the inter-chunk output (LPN, not for the
 * first). Backward: per group C·Bᵀ again, dC and dB from the group's d(C·Bᵀ) (3·L²N); per head dY·Xᵀ and
 * Mᵀ·dY (2·L²P), the state gradient term of dY (LPN, not for the first chunk), dY·S0 (LPN, not for the
 * first), X·dS and the dS term of dX (2·LPN, not for the last). */
void m2_ssd_flops(const m2_ssd_shape *s, double *fwd, double *bwd)
{
    const int nc = (s->T + s->Q - 1) / s->Q;
    const double P = s->P, N = s->N, H = s->H, G = s->G;
    double f = 0, b = 0;
    for (int c = 0; c < nc; c++) {
        const double L = m2_ssd_chunk_len(s, c), LL = m2_ssd_tri_products(m2_ssd_chunk_len(s, c));
        const double first = c == 0, last = c == nc - 1;
        f += G * LL * N + H * (LL * P + (2 - first - last) * L * P * N);
        b += 3 * G * LL * N + H * (2 * LL * P + (1 - first) * 2 * L * P * N + (1 - last) * 2 * L * P * N);
    }
    *fwd = 2.0 * s->B * f;
    *bwd = 2.0 * s->B * b;
}

/* The copies of the level in use (ssd.h); the CPU ops table calls its own level's copies directly. */
void m2_ssd_forward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                    const m2_real *Cm, const m2_real *Dsk, m2_real *y, m2_real *saved, m2_real *scratch)
{
    m2_cpu_kernels_for(m2_cpu_active())->ssd_forward(s, x, dt, A, Bm, Cm, Dsk, y, saved, scratch);
}

void m2_ssd_backward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                     const m2_real *Cm, const m2_real *Dsk, const m2_real *dy, const m2_real *saved, m2_real *dx,
                     m2_real *ddt, m2_real *dA, m2_real *dBm, m2_real *dCm, m2_real *dD, m2_real *scratch)
{
    m2_cpu_kernels_for(m2_cpu_active())
        ->ssd_backward(s, x, dt, A, Bm, Cm, Dsk, dy, saved, dx, ddt, dA, dBm, dCm, dD, scratch);
}
