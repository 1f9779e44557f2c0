/* Chunked SSD backward: the exact gradients of the forward in ssd_forward.c, chunk by chunk.
 *
 * Notation per head and chunk (length L, rows l, s): a_l = dt_l A; w_ls = exp(Σ_{s<k≤l} a_k) for s ≤ l;
 * e_l = exp(Σ_{k≤l} a_k); r_s = exp(Σ_{s<k<L} a_k); E = e_{L-1}; S0 = state entering the chunk (saved);
 * dSn = gradient of the state leaving the chunk (0 for the last chunk); CB = C·Bᵀ; G = dY·Xᵀ.
 *   dS0     = Σ_l e_l dy_l C_lᵀ + E dSn                       (pass 1 + pass 2: chunk states backwards)
 *   dX      = D dY + Mᵀ dY + diag(r∘dt) B dSnᵀ,               M_ls = CB_ls w_ls dt_s (s ≤ l)
 *   dC      = dCB·B + diag(e) dY S0,                          dCB_ls = G_ls w_ls dt_s, summed over the group
 *   dB      = dCBᵀ·C + diag(r∘dt) X dSn
 *   ddt_s   = Σ_{l≥s} G_ls CB_ls w_ls + r_s x_sᵀ dSn B_s + A da_s
 *   da_j    = Σ_{l≥j} Σ_{s<j} T_ls + Σ_{l≥j} e_l dy_lᵀ S0 C_l + E⟨dSn, S0⟩ + Σ_{s<j} U_s
 *             with T_ls = G_ls CB_ls w_ls dt_s and U_s = r_s dt_s x_sᵀ dSn B_s;   dA += Σ_j dt_j da_j
 *   dD     += Σ_l dy_l·x_l
 * Stable decay gradient: da_j is summed from the terms whose decay actually contains a_j (the block
 * l ≥ j > s of T, the suffix of the e-terms, the prefix of U), never as the reverse cumulative sum of a
 * gradient w.r.t. the cumulative sum, whose ±T_ls pairs cancel catastrophically when dt is large.
 * The dSn terms of all heads of a group come from two GEMMs: Zb = B·[dSn_j]ᵀ (L × hpg·P; head j's block
 * gives its dX term and x_sᵀ dSn B_s as a row dot) and dB += Xs·[dSn_j] with Xs = [diag(r_j∘dt_j) X_j]_j. */
#include "core/ssd.h"

#include <omp.h>
#include <string.h>

#include "core/ssd_chunk.h"

/* Pass 1, task (b, c, g) for c >= 1: the part of dS_c that chunk c's own outputs give, Σ_l e_l dy_l C_lᵀ,
 * for all heads of the group in one GEMM, [diag(e_j) dY_j]_jᵀ·C, into slot c; and the chunk decays E_c.
 * Chunk 0's state is zero and needs no gradient. */
static void local_state_grads(const m2_ssd_plan *pl, const m2_real *dt, const m2_real *A, const m2_real *Cm,
                              const m2_real *dy, m2_real *dstates, m2_real *E, m2_real *scratch)
{
    const m2_ssd_shape *s = &pl->s;
    const int nc = pl->nc, hpg = pl->hpg, ntask = s->B * (nc - 1) * s->G, HP = s->H * s->P, HPg = hpg * s->P;
#pragma omp parallel num_threads(omp_get_max_threads())
    {
        m2_ssd_tbuf tb;
        m2_ssd_tbuf_init(pl, scratch, omp_get_thread_num(), &tb);
#pragma omp for schedule(static)
        for (int i = 0; i < ntask; i++) {
            const int g = i % s->G, c = 1 + (i / s->G) % (nc - 1), b = i / (s->G * (nc - 1));
            const int L = m2_ssd_chunk_len(s, c);
            const size_t row = (size_t)b * s->T + (size_t)c * s->Q;
            m2_ssd_group_decays(pl, &tb, dt, A, row, g, L, E + m2_ssd_bch(pl, b, c, g * hpg));
            for (int l = 0; l < L; l++) {
                const m2_real *dyr = dy + (row + l) * HP + (size_t)g * HPg;
                for (int j = 0; j < hpg; j++)
                    m2_ssd_scale(tb.e[j * tb.Qr + l], dyr + j * s->P, tb.wide1 + (size_t)l * HPg + j * s->P, s->P);
            }
            m2_ssd_gemm(1, 0, HPg, s->N, L, tb.wide1, HPg, Cm + row * s->ld_bc + (size_t)g * s->N, s->ld_bc, 0,
                        dstates + m2_ssd_bch(pl, b, c, g * hpg) * pl->pn, s->N);
        }
    }
}

/* Pass 2, per (b, h), backwards over chunks: dS_c = local_c + E_c dS_{c+1}. Slot c ends up holding
 * dS_{c+1}, the gradient of the state leaving chunk c (zero for the last chunk). */
static void pass_state_grads(const m2_ssd_plan *pl, m2_real *dstates, const m2_real *E, m2_real *scratch)
{
    const int nc = pl->nc, H = pl->s.H, nbh = pl->s.B * H;
    const size_t pn = pl->pn;
#pragma omp parallel num_threads(omp_get_max_threads())
    {
        m2_ssd_tbuf tb;
        m2_ssd_tbuf_init(pl, scratch, omp_get_thread_num(), &tb);
        m2_real *run = tb.st;
#pragma omp for schedule(static)
        for (int bh = 0; bh < nbh; bh++) {
            const int b = bh / H, h = bh % H;
            memset(run, 0, pn * sizeof *run);
            for (int c = nc - 1; c >= 0; c--) {
                m2_real *slot = dstates + m2_ssd_bch(pl, b, c, h) * pn;
                if (c == 0) {
                    memcpy(slot, run, pn * sizeof *run);
                    break;
                }
                const m2_real e = E[m2_ssd_bch(pl, b, c, h)];
                for (size_t i = 0; i < pn; i++) {
                    const m2_real local = slot[i];
                    slot[i] = run[i];
                    run[i] = local + e * run[i];
                }
            }
        }
    }
}

/* The chunk a task works on. */
typedef struct {
    int b, c, g, L;
    size_t row; /* b*T + c*Q */
} chunk_at;

/* Row l of the lower triangle (k <= l) with decays w, in the same pass as the segment sums' advance to row l:
 * M for dX, the group's dCB, the column sums of T/dt (direct ddt) and T itself (for da). */
static void intra_row(int l, m2_real a_l, m2_real *restrict run, const m2_real *restrict g, const m2_real *restrict cbr,
                      const m2_real *restrict dtv, m2_real *restrict mr, m2_real *restrict dcbr, m2_real *restrict tmr,
                      m2_real *restrict ddt_direct)
{
    for (int k = 0; k <= l; k++) {
        const m2_real w = m2_ssd_seg_decay(run, a_l, k, l);
        const m2_real gw = g[k] * w, cb = cbr[k];
        const m2_real tp = gw * cb;
        mr[k] = cb * w * dtv[k];
        dcbr[k] += gw * dtv[k];
        ddt_direct[k] += tp;
        tmr[k] = tp * dtv[k];
    }
}

/* The intra-chunk terms of head j over the lower triangle (direct ddt into v1); the mask is applied by never
 * forming k > l (M's upper triangle stays zero from m2_ssd_tbuf_init for the GEMM). */
static void intra_terms(const m2_ssd_tbuf *tb, int j, int L, int Q)
{
    const m2_real *a = tb->a + j * tb->Qr, *dtv = tb->dtv + j * tb->Qr;
    memset(tb->v1, 0, (size_t)L * sizeof *tb->v1);
    for (int l = 0; l < L; l++) {
        const size_t o = (size_t)l * Q;
        intra_row(l, a[l], tb->run, tb->g + o, tb->cb + o, dtv, tb->m + o, tb->dcb + o, tb->tm + o, tb->v1);
    }
}

/* da_j (into v2; v5 is workspace) from the intra-chunk terms: Σ_{l≥j} Σ_{s<j} T_ls. Walking l downwards,
 * colsum[s] holds Σ_{l'≥l} T_l's, and da_l is its sum over s < l. */
static void intra_decay_grad(const m2_ssd_tbuf *tb, int L, int Q)
{
    m2_real *da = tb->v2, *colsum = tb->v5;
    memset(colsum, 0, (size_t)L * sizeof *colsum);
    da[0] = 0;
    for (int l = L - 1; l >= 1; l--) {
        m2_ssd_axpy(1, tb->tm + (size_t)l * Q, colsum, l);
        m2_real acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int k = 0; k < l; k++) acc += colsum[k];
        da[l] = acc;
    }
}

/* The pointers of one head's block in one chunk. */
typedef struct {
    const m2_real *X, *dY, *Cc; /* row strides ld_x, H*P, ld_bc */
    m2_real *dX, *dC;           /* row strides ld_x, ld_bc */
} head_at;

/* This block's Σ dy·x for dD (the D dY term of dX comes from M's diagonal, m2_ssd_add_diag). */
static m2_real skip_grads(const m2_ssd_shape *s, const head_at *p, int L)
{
    const int HP = s->H * s->P;
    m2_real dD = 0;
    for (int l = 0; l < L; l++) dD += m2_ssd_dot(p->dY + (size_t)l * HP, p->X + (size_t)l * s->ld_x, s->P);
    return dD;
}

/* Inter-chunk output e_l S0 C_l: W = dY·S0 gives dC += diag(e) W and dAcs_l = e_l W_l·C_l (into v3). */
static void inter_output_grads(const m2_ssd_shape *s, const head_at *p, int L, const m2_real *S0, const m2_real *e,
                               const m2_ssd_tbuf *tb)
{
    const int N = s->N;
    m2_real *W = tb->p1, *dacs = tb->v3;
    m2_ssd_gemm(0, 0, L, N, s->P, p->dY, s->H * s->P, S0, N, 0, W, N);
    for (int l = 0; l < L; l++) {
        const m2_real *wr = W + (size_t)l * N;
        dacs[l] = e[l] * m2_ssd_dot(wr, p->Cc + (size_t)l * s->ld_bc, N);
        m2_ssd_axpy(e[l], wr, p->dC + (size_t)l * s->ld_bc, N);
    }
}

/* Head j's share of the chunk state Σ_s r_s dt_s x_s B_sᵀ as seen by dSn, from Zb_j (row l: dSn B_l):
 * dX += diag(r∘dt) Zb_j, the direct ddt_l += r_l x_l·Zb_jl (v1) and U_l = r_l dt_l x_l·Zb_jl (v4). */
static void chunk_state_grads(const m2_ssd_shape *s, const head_at *p, int L, int j, int HPg, const m2_real *r,
                              const m2_real *dtv, const m2_ssd_tbuf *tb)
{
    for (int l = 0; l < L; l++) {
        const m2_real *zr = tb->wide2 + (size_t)l * HPg + j * s->P;
        const m2_real vb = m2_ssd_dot(p->X + (size_t)l * s->ld_x, zr, s->P);
        tb->v1[l] += r[l] * vb;
        tb->v4[l] = r[l] * dtv[l] * vb;
        m2_ssd_axpy(r[l] * dtv[l], zr, p->dX + (size_t)l * s->ld_x, s->P);
    }
}

/* da_j += Σ_{l≥j} dAcs_l + Σ_{s<j} U_s; then ddt (overwrite) and returns Σ_j dt_j da_j for dA. */
static m2_real decay_grads(const m2_ssd_tbuf *tb, const m2_real *dtv, int L, m2_real A, m2_real *ddt, int ld_ddt)
{
    const m2_real *ddt_direct = tb->v1, *dacs = tb->v3, *u = tb->v4;
    m2_real *da = tb->v2;
    m2_real suffix = 0, prefix = 0, dA = 0;
    for (int j = L - 1; j >= 0; j--) {
        suffix += dacs[j];
        da[j] += suffix;
    }
    for (int j = 0; j < L; j++) {
        da[j] += prefix;
        prefix += u[j];
        ddt[(size_t)j * ld_ddt] = ddt_direct[j] + A * da[j];
        dA += dtv[j] * da[j];
    }
    return dA;
}

/* The gradients of head j of the task's group (see the top of the file): dX, ddt and the dA, dD partials
 * written; dC rows receive the inter-chunk term; the group's dCB accumulates in tb->dcb. S0 is NULL for the
 * first chunk (zero state), dSn NULL for the last (nothing downstream; then Zb is not formed). */
static void head_grads(const m2_ssd_plan *pl, const chunk_at *at, int j, const m2_real *x, const m2_real *A,
                       const m2_real *Cm, const m2_real *Dsk, const m2_real *dy, const m2_real *S0, const m2_real *dSn,
                       m2_real *dx, m2_real *ddt, m2_real *dCm, m2_real *part_dA, m2_real *part_dD,
                       const m2_ssd_tbuf *tb)
{
    const m2_ssd_shape *s = &pl->s;
    const int L = at->L, Q = s->Q, HP = s->H * s->P, h = at->g * pl->hpg + j;
    const size_t gcol = (size_t)at->g * s->N, hcol = (size_t)h * s->P;
    const head_at p = {.X = x + at->row * s->ld_x + hcol,
                       .dY = dy + at->row * HP + hcol,
                       .Cc = Cm + at->row * s->ld_bc + gcol,
                       .dX = dx + at->row * s->ld_x + hcol,
                       .dC = dCm + at->row * s->ld_bc + gcol};
    const m2_real *dtv = tb->dtv + j * tb->Qr, *e = tb->e + j * tb->Qr, *r = tb->r + j * tb->Qr;

    m2_ssd_gemm_tri(M2_SSD_TRI_OUT, 1, L, L, s->P, p.dY, HP, p.X, s->ld_x, 0, tb->g, Q);
    intra_terms(tb, j, L, Q);
    intra_decay_grad(tb, L, Q);
    *part_dD = skip_grads(s, &p, L);
    m2_ssd_add_diag(tb->m, L, Q, Dsk[h]);
    m2_ssd_gemm_tri(M2_SSD_TRI_AT, 0, L, s->P, L, tb->m, Q, p.dY, HP, 0, p.dX, s->ld_x); /* dX = (M + D I)ᵀ dY */
    memset(tb->v3, 0, (size_t)L * sizeof *tb->v3);
    memset(tb->v4, 0, (size_t)L * sizeof *tb->v4);
    if (S0) inter_output_grads(s, &p, L, S0, e, tb);
    if (dSn) chunk_state_grads(s, &p, L, j, pl->hpg * s->P, r, dtv, tb);
    if (S0 && dSn) tb->v3[L - 1] += e[L - 1] * m2_ssd_dot(dSn, S0, (int)pl->pn); /* S_{c+1} = E S0 + st */
    *part_dA = decay_grads(tb, dtv, L, A[h], ddt + at->row * s->H + h, s->H);
}

/* The dSn terms shared by the group (c < nc-1): Zb = B·[dSn_j]ᵀ into wide2, and dB = Xs·[dSn_j] (overwrite)
 * with Xs = [diag(r_j∘dt_j) X_j]_j built in wide1. */
static void group_state_grads(const m2_ssd_plan *pl, const chunk_at *at, const m2_real *x, const m2_real *Bc,
                              const m2_real *dSn, m2_real *dB, const m2_ssd_tbuf *tb)
{
    const m2_ssd_shape *s = &pl->s;
    const int hpg = pl->hpg, HPg = hpg * s->P;
    for (int l = 0; l < at->L; l++) {
        const m2_real *xr = x + (at->row + l) * s->ld_x + (size_t)at->g * HPg;
        for (int j = 0; j < hpg; j++) {
            const size_t o = j * tb->Qr + l;
            m2_ssd_scale(tb->r[o] * tb->dtv[o], xr + j * s->P, tb->wide1 + (size_t)l * HPg + j * s->P, s->P);
        }
    }
    m2_ssd_gemm(0, 1, at->L, HPg, s->N, Bc, s->ld_bc, dSn, s->N, 0, tb->wide2, HPg);
    m2_ssd_gemm(0, 0, at->L, s->N, HPg, tb->wide1, HPg, dSn, s->N, 0, dB, s->ld_bc);
}

/* Pass 3, task (b, c, g): all gradients of chunk c for the heads of group g. */
static void chunk_grads(const m2_ssd_plan *pl, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                        const m2_real *Cm, const m2_real *Dsk, const m2_real *dy, const m2_real *states,
                        const m2_real *dstates, m2_real *dx, m2_real *ddt, m2_real *dBm, m2_real *dCm, m2_real *part,
                        m2_real *scratch)
{
    const m2_ssd_shape *s = &pl->s;
    const int nc = pl->nc, hpg = pl->hpg, ntask = s->B * nc * s->G, Q = s->Q, N = s->N;
#pragma omp parallel num_threads(omp_get_max_threads())
    {
        m2_ssd_tbuf tb;
        m2_ssd_tbuf_init(pl, scratch, omp_get_thread_num(), &tb);
#pragma omp for schedule(static)
        for (int i = 0; i < ntask; i++) {
            chunk_at at = {.g = i % s->G, .c = (i / s->G) % nc, .b = i / (s->G * nc)};
            at.L = m2_ssd_chunk_len(s, at.c);
            at.row = (size_t)at.b * s->T + (size_t)at.c * Q;
            const int L = at.L;
            const size_t first = m2_ssd_bch(pl, at.b, at.c, at.g * hpg);
            const m2_real *Bc = Bm + at.row * s->ld_bc + (size_t)at.g * N;
            const m2_real *Cc = Cm + at.row * s->ld_bc + (size_t)at.g * N;
            const m2_real *S0 = at.c > 0 ? states + first * pl->pn : NULL;
            const m2_real *dSn = at.c < nc - 1 ? dstates + first * pl->pn : NULL;
            m2_real *dB = dBm + at.row * s->ld_bc + (size_t)at.g * N;
            m2_real *dC = dCm + at.row * s->ld_bc + (size_t)at.g * N;
            memset(tb.dcb, 0, (size_t)L * Q * sizeof *tb.dcb);
            for (int l = 0; l < L; l++) {
                memset(dC + (size_t)l * s->ld_bc, 0, (size_t)N * sizeof *dC);
                if (!dSn) memset(dB + (size_t)l * s->ld_bc, 0, (size_t)N * sizeof *dB);
            }
            m2_ssd_group_decays(pl, &tb, dt, A, at.row, at.g, L, NULL);
            m2_ssd_gemm_tri(M2_SSD_TRI_OUT, 1, L, L, N, Cc, s->ld_bc, Bc, s->ld_bc, 0, tb.cb, Q);
            if (dSn) group_state_grads(pl, &at, x, Bc, dSn, dB, &tb);
            for (int j = 0; j < hpg; j++)
                head_grads(pl, &at, j, x, A, Cm, Dsk, dy, S0 ? S0 + j * pl->pn : NULL, dSn ? dSn + j * pl->pn : NULL,
                           dx, ddt, dCm, part + first + j, part + pl->n_chunks + first + j, &tb);
            m2_ssd_gemm_tri(M2_SSD_TRI_A, 0, L, N, L, tb.dcb, Q, Bc, s->ld_bc, 1, dC, s->ld_bc);
            m2_ssd_gemm_tri(M2_SSD_TRI_AT, 0, L, N, L, tb.dcb, Q, Cc, s->ld_bc, 1, dB, s->ld_bc);
        }
    }
}

void m2_ssd_backward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                     const m2_real *Cm, const m2_real *Dsk, const m2_real *dy, const m2_real *saved, m2_real *dx,
                     m2_real *ddt, m2_real *dA, m2_real *dBm, m2_real *dCm, m2_real *dD, m2_real *scratch)
{
    m2_ssd_plan pl;
    m2_ssd_plan_init(&pl, s);
    m2_real *dstates = scratch + pl.off_states, *E = scratch + pl.off_decay, *part = scratch + pl.off_part;
    local_state_grads(&pl, dt, A, Cm, dy, dstates, E, scratch);
    pass_state_grads(&pl, dstates, E, scratch);
    chunk_grads(&pl, x, dt, A, Bm, Cm, Dsk, dy, saved, dstates, dx, ddt, dBm, dCm, part, scratch);
    /* dA, dD: per-(b, c, h) partials summed in a fixed order, independent of the thread count. */
    for (int h = 0; h < s->H; h++) {
        m2_real sa = 0, sd = 0;
        for (int b = 0; b < s->B; b++)
            for (int c = 0; c < pl.nc; c++) {
                const size_t i = m2_ssd_bch(&pl, b, c, h);
                sa += part[i];
                sd += part[pl.n_chunks + i];
            }
        dA[h] = sa;
        dD[h] += sd;
    }
}
