/* Chunked SSD forward (docs/MODEL.md §3). Per head, within chunk c of length L with a_l = dt_l·A:
 *   local state    st_c = Σ_s r_s dt_s x_s B_sᵀ,            r_s = exp(Σ_{s<k<L} a_k)
 *   state passing  S_{c+1} = E_c S_c + st_c,                E_c = exp(Σ_k a_k),  S_0 = 0
 *   output         y_l = Σ_{s≤l} (C_l·B_s) exp(Σ_{s<k≤l} a_k) dt_s x_s + e_l S_c C_l + D x_l,
 *                                                           e_l = exp(Σ_{k≤l} a_k)
 * which is S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_tᵀ, y_t = S_t C_t + D x_t regrouped by chunks. The chunk-start
 * states S_c (P×N, S_0 = 0 included) are what the backward needs; everything else it recomputes. */
#include "core/ssd.h"

#include <omp.h>
#include <string.h>

#include "core/ssd_chunk.h"

/* Pass 1, task (b, c, g) for c < nc-1: st_c of all heads of group g in one GEMM, Xsᵀ·B with
 * Xs = [diag(r_j∘dt_j) X_j]_j (L × hpg·P), into the state slots of chunk c+1; and the chunk decays E_c. The
 * last chunk's state is never used. */
static void local_states(const m2_ssd_plan *pl, const m2_real *x, const m2_real *dt, const m2_real *A,
                         const m2_real *Bm, m2_real *states, m2_real *E, m2_real *scratch)
{
    const m2_ssd_shape *s = &pl->s;
    const int nc = pl->nc, hpg = pl->hpg, ntask = s->B * (nc - 1) * s->G, HPg = hpg * s->P;
#pragma omp parallel num_threads(omp_get_max_threads())
    {
        m2_ssd_tbuf tb;
        m2_ssd_tbuf_init(pl, scratch, omp_get_thread_num(), &tb);
#pragma omp for schedule(static)
        for (int i = 0; i < ntask; i++) {
            const int g = i % s->G, c = (i / s->G) % (nc - 1), b = i / (s->G * (nc - 1));
            const int L = m2_ssd_chunk_len(s, c);
            const size_t row = (size_t)b * s->T + (size_t)c * s->Q;
            m2_ssd_group_decays(pl, &tb, dt, A, row, g, L, E + m2_ssd_bch(pl, b, c, g * hpg));
            for (int l = 0; l < L; l++) {
                const m2_real *xr = x + (row + l) * s->ld_x + (size_t)g * HPg;
                for (int j = 0; j < hpg; j++) {
                    const size_t o = j * tb.Qr + l;
                    m2_ssd_scale(tb.r[o] * tb.dtv[o], xr + j * s->P, tb.wide1 + (size_t)l * HPg + j * s->P, s->P);
                }
            }
            m2_ssd_gemm(1, 0, HPg, s->N, L, tb.wide1, HPg, Bm + row * s->ld_bc + (size_t)g * s->N, s->ld_bc, 0,
                        states + m2_ssd_bch(pl, b, c + 1, g * hpg) * pl->pn, s->N);
        }
    }
}

/* Pass 2, per (b, h): slot c (c >= 1) holds st_{c-1}; turn it into S_c = E_{c-1} S_{c-1} + st_{c-1}. */
static void pass_states(const m2_ssd_plan *pl, m2_real *states, const m2_real *E)
{
    const int nc = pl->nc, H = pl->s.H, nbh = pl->s.B * H;
    const size_t pn = pl->pn;
#pragma omp parallel for schedule(static) num_threads(omp_get_max_threads())
    for (int bh = 0; bh < nbh; bh++) {
        const int b = bh / H, h = bh % H;
        m2_real *prev = states + m2_ssd_bch(pl, b, 0, h) * pn;
        memset(prev, 0, pn * sizeof *prev);
        for (int c = 1; c < nc; c++) {
            m2_real *cur = states + m2_ssd_bch(pl, b, c, h) * pn;
            m2_ssd_axpy(E[m2_ssd_bch(pl, b, c - 1, h)], prev, cur, (int)pn);
            prev = cur;
        }
    }
}

/* Row l of M = (C·Bᵀ) ∘ decay ∘ dt (k <= l), in the same pass as the segment sums' advance to row l. */
static void intra_row(int l, m2_real a_l, m2_real *restrict run, const m2_real *restrict cbr,
                      const m2_real *restrict dtv, m2_real *restrict mr)
{
    for (int k = 0; k <= l; k++) mr[k] = cbr[k] * m2_ssd_seg_decay(run, a_l, k, l) * dtv[k];
}

/* M of head j over the chunk, lower triangle with decays; the mask is applied by never forming k > l (the
 * upper triangle stays zero from m2_ssd_tbuf_init for the GEMM). */
static void intra_matrix(const m2_ssd_tbuf *tb, int j, int L, int Q)
{
    const m2_real *a = tb->a + j * tb->Qr, *dtv = tb->dtv + j * tb->Qr;
    for (int l = 0; l < L; l++) {
        const size_t o = (size_t)l * Q;
        intra_row(l, a[l], tb->run, tb->cb + o, dtv, tb->m + o);
    }
}

/* Pass 3, task (b, c, g): y of all heads of group g over chunk c. The inter-chunk term of all heads comes
 * from one GEMM Z = C·[S_j]ᵀ (L × hpg·P); head j adds diag(e_j) Z_j. */
static void chunk_outputs(const m2_ssd_plan *pl, const m2_real *x, const m2_real *dt, const m2_real *A,
                          const m2_real *Bm, const m2_real *Cm, const m2_real *Dsk, const m2_real *states, m2_real *y,
                          m2_real *scratch)
{
    const m2_ssd_shape *s = &pl->s;
    const int nc = pl->nc, hpg = pl->hpg, ntask = s->B * nc * s->G, Q = s->Q, HP = s->H * s->P, HPg = hpg * s->P;
#pragma omp parallel num_threads(omp_get_max_threads())
    {
        m2_ssd_tbuf tb;
        m2_ssd_tbuf_init(pl, scratch, omp_get_thread_num(), &tb);
#pragma omp for schedule(static)
        for (int i = 0; i < ntask; i++) {
            const int g = i % s->G, c = (i / s->G) % nc, b = i / (s->G * nc);
            const int L = m2_ssd_chunk_len(s, c);
            const size_t row = (size_t)b * s->T + (size_t)c * Q;
            const m2_real *Bc = Bm + row * s->ld_bc + (size_t)g * s->N;
            const m2_real *Cc = Cm + row * s->ld_bc + (size_t)g * s->N;
            m2_ssd_group_decays(pl, &tb, dt, A, row, g, L, NULL);
            m2_ssd_gemm_tri(M2_SSD_TRI_OUT, 1, L, L, s->N, Cc, s->ld_bc, Bc, s->ld_bc, 0, tb.cb, Q);
            if (c > 0) /* S_0 = 0 */
                m2_ssd_gemm(0, 1, L, HPg, s->N, Cc, s->ld_bc, states + m2_ssd_bch(pl, b, c, g * hpg) * pl->pn, s->N, 0,
                            tb.wide2, HPg);
            for (int j = 0; j < hpg; j++) {
                const int h = g * hpg + j;
                const m2_real *X = x + row * s->ld_x + (size_t)h * s->P;
                m2_real *Y = y + row * HP + (size_t)h * s->P;
                intra_matrix(&tb, j, L, Q);
                m2_ssd_add_diag(tb.m, L, Q, Dsk[h]);
                m2_ssd_gemm_tri(M2_SSD_TRI_A, 0, L, s->P, L, tb.m, Q, X, s->ld_x, 0, Y, HP);
                if (c == 0) continue;
                for (int l = 0; l < L; l++)
                    m2_ssd_axpy(tb.e[j * tb.Qr + l], tb.wide2 + (size_t)l * HPg + j * s->P, Y + (size_t)l * HP, s->P);
            }
        }
    }
}

void m2_ssd_forward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                    const m2_real *Cm, const m2_real *Dsk, m2_real *y, m2_real *saved, m2_real *scratch)
{
    m2_ssd_plan pl;
    m2_ssd_plan_init(&pl, s);
    m2_real *states = saved ? saved : scratch + pl.off_states;
    m2_real *E = scratch + pl.off_decay;
    local_states(&pl, x, dt, A, Bm, states, E, scratch);
    pass_states(&pl, states, E);
    chunk_outputs(&pl, x, dt, A, Bm, Cm, Dsk, states, y, scratch);
}
