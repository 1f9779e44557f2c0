/* The chunked SSD on the GPU, exact analytic backward (definitions and the forward's formulas in ssd_cuda.cuh).
 *
 * With dy given, per (b, c, h), in-chunk positions l (output side) and s (input side), s <= l:
 *   dSoff_c  = sum_l dy_l (e^{a_l} C_l)^T                 d(loss)/dS_c through this chunk's outputs   [P,N]
 *   dS_c     = dSoff_c + e^{a_last(c)} dS_{c+1};   dSt_c = dS_{c+1} (0 for the last chunk): d(loss)/d(st_c)
 *   dx_s     = sum_{l>=s} CB[l,s] e^{a_l-a_s} dt_s dy_l  +  e^{a_last-a_s} dt_s dSt_c B_s  +  D dy_s
 *   E[l,s]   = e^{a_l-a_s} (dy_l . x_s)                   per head;   dCBw[l,s] = sum_{h in g} E_h[l,s] dt_s,h
 *   dCoff_l  = e^{a_l} dy_l^T S_c                         [N] per head (the C gradient through the state)
 *   dBst_s   = e^{a_last-a_s} x_s^T dSt_c                 [N] per head (the B gradient through st_c, over dt_s)
 *   dC_l     = sum_{s<=l} dCBw[l,s] B_s + sum_{h in g} dCoff_l,h
 *   dB_s     = sum_{l>=s} dCBw[l,s] C_l + sum_{h in g} dt_s,h dBst_s,h
 * and the scalars, with Mq[l,s] = CB[l,s] E[l,s] (the loss is sum_{l,s} Mq[l,s] dt_s + ...):
 *   d(loss)/d a_i = sum_{s<=i} Mq[i,s] dt_s - dt_i sum_{l>=i} Mq[l,i] + C_i . dCoff_i - dt_i (B_i . dBst_i)
 *                   + [i = last] (sum_s dt_s (B_s . dBst_s) + e^{a_last} <dSt_c, S_c>)
 *   ddt_i (direct) = sum_{l>=i} Mq[l,i] + B_i . dBst_i
 *   a_i = A sum_{k<=i} dt_k, so with rc_i = sum_{l>=i} d(loss)/d a_l:   ddt_i = direct_i + A rc_i,
 *   dA = sum_i dt_i rc_i;   dD += sum dy . x.
 * dA and dD are per-(b, c, h) partials reduced over (b, c) in a fixed order: no atomics anywhere.
 * B_i . dBst_i = sum_p x_i[p] (e^{a_last-a_i} dSt_c B_i)[p], x_i times dx's state part over dt_i: dx's product forms
 * it from its accumulators (ssd_dx_op, tap), so dBst itself is never formed.
 *
 * Buffers: dS holds dSoff, then (after the reverse pass, in place) dSt, both in the states' type (ssd_states_type:
 * bf16 at bf16 precision, each rounded once: dSoff from its product's fp32 sums, dSt from the reverse pass's fp32
 * running value, as upstream mamba_ssm's state passing backward stores its dstates in the inputs' dtype). dSoff's
 * reader is the reverse pass's fp32 recurrence; dSt's are the products of dx and dB, whose tensor-core operand it is.
 * The tail chunk needs no special case: its length bounds every loop, and its dSt is 0. */
#include "ssd_cuda.cuh"

/* ---- dSoff[zh][p][n] = sum_l dy_l[p] e^{a_l} C_l[n], summed in fp32, stored as TS ---- */
template <class TX, class TS> struct ssd_dsoff_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = false, b_jfast = true;
    __device__ void dims(int zh, int &m, int &n, int &k) const
    {
        m = s.P;
        n = s.N;
        k = s.len(zh / s.H);
    }
    __device__ void krange(int zh, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.Q;
    }
    bool vec4() const { return s.vec4(); }
    struct view {
        ssd_mat_t<TX> dyT, C;
        const float *eA;
        __device__ float a(int p, int l) const { return dyT(p, l); }
        __device__ auto a4(int p, int l) const { return dyT.T().raw4(l, p); } /* p..p+3 */
        __device__ float b(int l, int n) const { return eA[l] * C(l, n); }
        __device__ m2_vec<4> b4(int l, int n) const { return ssd_scaled4(eA[l], C.row4(l, n)); }
    };
    __device__ view bind(int zh) const
    {
        const int bc = zh / s.H, h = zh % s.H;
        return view{s.dy_of(bc, h).T(), s.C_of(bc, h / s.hpg), s.eA + (size_t)zh * s.Q};
    }
    __device__ void store(int zh, int p, int n, float acc) const
    {
        m2_st(s.template dS_of<TS>(zh) + (size_t)p * s.N + n, acc);
    }
};

/* ---- reverse state passing: dS[c] <- dSt_c = dS_{c+1}; dS_c = dSoff_c + e^{a_last(c)} dS_{c+1} ----
 * and, on the way, the partials of <dSt_c, S_c> (the scalars' decay gradient of the state passing): each group of 32
 * consecutive state entries sums its dSt_c S_c for every chunk (a fixed order, no barrier: ssd_sum32) and writes the
 * sum to pSd[zh][w] (w = the entries' index / 32), so the scalars kernel adds ceil(P*N / 32) numbers per (b, c, h)
 * instead of reading both state tensors again. Each thread runs V consecutive entries of one head (ssd_pass_width:
 * 16-byte accesses, one decay factor for the V), a block M2_CUDA_THREADS * V of them. S is read as stored (TS: bf16
 * at bf16 precision, widened; ssd_states_type), and so is dSoff; dSt is stored as TS over it, rounded from the fp32
 * running value, which the recurrence and the partials keep using. */
/* The sum of the 32 values of entries 32w..32w+31 held V to a lane (lanes 32/V apart per group, entry e in lane e / V
 * at v[e % V]), in the order of the butterfly over 32 lanes holding one each (x[e] += x[e ^ o], o = 16, 8, .., 1),
 * whatever V: the partials, hence ddt and dA, are bitwise those of one entry per thread. Distances o >= V are between
 * lanes (shuffles), the others within a lane; v is consumed. */
template <int V> __device__ __forceinline__ float ssd_sum32(float (&v)[V])
{
#pragma unroll
    for (int o = 16; o >= V; o >>= 1) {
#pragma unroll
        for (int e = 0; e < V; e++) v[e] += __shfl_xor_sync(0xffffffffu, v[e], o / V);
    }
#pragma unroll
    for (int o = V / 2; o > 0; o >>= 1) {
#pragma unroll
        for (int e = 0; e < o; e++) v[e] += v[e + o];
    }
    return v[0];
}
template <class TS, int V> __device__ __forceinline__ void ssd_pass_bwd_v(const ssd_args &s)
{
    const size_t PN = (size_t)s.P * s.N, per = (size_t)M2_CUDA_THREADS * V, step = (size_t)s.H * PN;
    const int qn = (int)((PN + per - 1) / per), q = blockIdx.x % qn, bh = blockIdx.x / qn;
    const int b = bh / s.H, h = bh % s.H, wn = ssd_state_warps(s.P, s.N);
    const size_t pn = (size_t)q * per + (size_t)threadIdx.x * V;
    const int w = (int)(pn / 32);
    const bool in = pn < PN, lead = threadIdx.x % (32 / V) == 0 && w < wn;
    /* chunk c's entries at c * step from chunk 0's, its partial at c * H * wn, its a_last at c * H * Q */
    const int zh0 = (b * s.nc) * s.H + h;
    TS *dS = s.dS_of<TS>(zh0) + pn;
    const TS *S = s.S_of<TS>(zh0) + pn;
    float *pSd = s.pSd + (size_t)zh0 * wn + w;
    const float *a_last = s.acs + (size_t)zh0 * s.Q + s.Q - 1;
    m2_vec<V> run = {}; /* dS_{c+1} */
    /* unroll 1: the one-entry path's loop kept shorter than the vector paths' (not unrolled either, being long), as
     * tools/sass_report.py reads the longest loop as the kernel's */
#pragma unroll 1
    for (int c = s.nc - 1; c >= 0; c--) {
        m2_vec<V> off = {}, st = {};
        if (in) {
            off = m2_vload<V>(dS + c * step);
            m2_vstore<V>(dS + c * step, run);
            st = m2_vload<V>(S + c * step);
        }
        float part[V];
#pragma unroll
        for (int e = 0; e < V; e++) part[e] = run.v[e] * st.v[e];
        const float sum = ssd_sum32<V>(part);
        if (lead) pSd[(size_t)c * s.H * wn] = sum;
        const float d = s.dexp(a_last[(size_t)c * s.H * s.Q]);
#pragma unroll
        for (int e = 0; e < V; e++) run.v[e] = off.v[e] + d * run.v[e];
    }
}
template <class TS> __device__ __forceinline__ void ssd_pass_bwd(const ssd_args &s)
{
    if (ssd_pass_width<TS>(s) > 1)
        ssd_pass_bwd_v<TS, 16 / sizeof(TS)>(s);
    else
        ssd_pass_bwd_v<TS, 1>(s);
}
/* one kernel per states type, each named apart (the per-kernel counts and tools/sass_report.py key kernels by name) */
__global__ void __launch_bounds__(M2_CUDA_THREADS) ssd_pass_bwd_kernel(ssd_args s) { ssd_pass_bwd<float>(s); }
__global__ void __launch_bounds__(M2_CUDA_THREADS) ssd_pass_bwd_bf16_kernel(ssd_args s)
{
    ssd_pass_bwd<__nv_bfloat16>(s);
}

/* ---- dx: k < Lc runs over the outputs l >= s (intra-chunk), k >= Lc over the state entries n ----
 * With r = i1 - 1 the tile's last row, for the outputs l > r after the tile's rows e^{a_l-a_s} = e^{a_l-a_r}
 * e^{a_r-a_s}, and e^{a_last-a_s} = e^{a_last-a_r} e^{a_r-a_s} (each factor of a quantity <= 0, docs/MODEL.md §3):
 * those outputs and the state part are products of plain CB and B rows with e^{a_l-a_r} dy_l and
 * e^{a_last-a_r} dSt^T, multiplied by e^{a_r-a_s} dt_s once per output (tile_gemm.cuh, row_scaled), so their k
 * loops carry no exp per element; the outputs of the tile's own rows (s <= l <= r) take the exact decay of each
 * element from the block's table (ssd_own_decays). */
template <class TX, class TS> struct ssd_dx_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = false, b_jfast = true;
    bool vec4() const { return s.vec4() && ssd_ktab_fits(s.Q); }
    __device__ void dims(int zh, int &m, int &n, int &k) const
    {
        m = s.len(zh / s.H);
        n = s.P;
        k = m + s.N;
    }
    __device__ void krange(int zh, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = i0; /* l >= s >= i0 */
        ke = s.len(zh / s.H) + s.N;
    }
    /* the outputs l = k of the tile's own rows: CB[l][s] (e^{a_l-a_s} dt_s, masked: the block's table) . dy_l[p] */
    struct own_view {
        int Q, i0;
        const float *CB, *tab; /* tab: ssd_own_decays */
        ssd_mat_t<TX> dy;
        __device__ float a(int si, int k) const
        {
            return CB[(size_t)k * Q + si] * tab[(k - i0) * m2tile::BM + si - i0];
        }
        /* the same products for si..si+3 (si a multiple of 4): CB's row and the table's in 16-byte loads */
        __device__ m2_vec<4> a4(int si, int k) const
        {
            const m2_vec<4> cb = m2_vload<4>(CB + (size_t)k * Q + si);
            const m2_vec<4> d = m2_vload<4>(tab + (k - i0) * m2tile::BM + si - i0);
            m2_vec<4> r;
#pragma unroll
            for (int c = 0; c < 4; c++) r.v[c] = cb.v[c] * d.v[c];
            return r;
        }
        __device__ float b(int k, int p) const { return dy(k, p); }
        __device__ auto b4(int k, int p) const { return dy.raw4(k, p); }
    };
    /* the outputs l = k after the tile's rows: CB[l][s] . e^{a_l-a_r} dy_l[p] (no mask: l > r >= s) */
    struct later_view {
        static constexpr bool row_scaled = true;
        int Q, k0; /* wt[k - k0] = w(k): the block's table (ssd_k_factors) */
        float ar;
        const float *acs, *CB, *wt;
        ssd_mat_t<TX> dy;
        __device__ float w(int k) const { return ssd_args::dexp(acs[k] - ar); }
        __device__ float a(int si, int k) const { return CB[(size_t)k * Q + si]; }
        __device__ m2_vec<4> a4(int si, int k) const { return m2_vload<4>(CB + (size_t)k * Q + si); }
        __device__ float b(int k, int p) const { return w(k) * dy(k, p); }
        __device__ m2_vec<4> b4(int k, int p) const { return ssd_scaled4(wt[k - k0], dy.row4(k, p)); }
    };
    /* the state part B_s[n] . e^{a_last-a_r} dSt[p][n] (n = k - Lc; B's and dSt's rows contiguous along k); tapped:
     * its loop runs first (view below), so the row_scaled accumulators then hold it alone, and tap_term and
     * tap_store form rSt from them. With bf16 dSt (TS) the B operand is dSt itself, moved to the tiles as stored,
     * and e^{a_last-a_r} multiplies the part's fp32 sums once, after its loop and before the tap (tile_gemm.cuh,
     * then_scaled), as the outputs' product does with bf16 S; with fp32 dSt it scales dSt's elements on their way
     * to the tiles. */
    struct state_view {
        static constexpr bool row_scaled = true, tapped = true, a_kfast = true, b_jfast = false;
        static constexpr bool then_scaled = std::is_same<TS, __nv_bfloat16>::value;
        int k0;
        float w; /* e^{a_last-a_r} */
        ssd_mat_t<TX> Bg;
        ssd_mat_t<TS> dSt;
        __device__ float a(int si, int k) const { return Bg(si, k - k0); }
        __device__ auto a4(int si, int k) const { return Bg.raw4(si, k - k0); }
        __device__ float b(int k, int p) const
        {
            if constexpr (then_scaled)
                return dSt(p, k - k0);
            else
                return w * dSt(p, k - k0);
        }
        __device__ auto b4k(int k, int p) const
        {
            if constexpr (then_scaled)
                return dSt.moved4(p, k - k0);
            else
                return ssd_scaled4(w, dSt.row4(p, k - k0));
        }
        __device__ float then_scale() const { return w; }
    };
    /* the state, then the tile's own outputs and the later ones (tile_gemm.cuh, split; the state's k are the last,
     * its loop the first): each loop holds one kind of operand, with the head's rows and arrays located once per
     * block */
    using chunk_parts = m2tile::split_view<own_view, later_view>;
    using view = m2tile::split_view_hi_first<chunk_parts, state_view>;
    static constexpr int shared_floats = SSD_OWN_FLOATS + SSD_KTAB_FLOATS;
    __device__ view bind(int zh, const m2tile::span &t, float *sh) const
    {
        const int bc = zh / s.H, h = zh % s.H, g = h / s.hpg, Lc = s.len(bc);
        const float *acs = s.acs + (size_t)zh * s.Q, *CB = s.QQ(s.CB, bc * s.G + g);
        const float ar = acs[t.i1 - 1];
        const ssd_mat_t<TX> dy = s.dy_of(bc, h);
        const float *tab = ssd_own_decays(acs, s.dtc + (size_t)zh * s.Q, t.i0, t.i1, sh);
        later_view later{s.Q, t.i1, ar, acs, CB, nullptr, dy};
        later.wt = ssd_k_factors(t.i1, Lc, sh + SSD_OWN_FLOATS, [&](int k) { return later.w(k); });
        return view{{Lc, chunk_parts{t.i1, own_view{s.Q, t.i0, CB, tab, dy}, later},
                     state_view{Lc, ssd_args::dexp(s.a_last(zh) - ar), s.B_of(bc, g),
                                ssd_mat_t<TS>{s.template dS_of<TS>(zh), (size_t)s.N, 1}}}};
    }
    /* The B gradient's row sums through the state (the scalars' B_s . dBst_s), from the state part's accumulators
     * T[s][p] = sum_n B_s[n] e^{a_last-a_r} dSt[p][n]: B_s . dBst_s = sum_n B_s[n] e^{a_last-a_s} sum_p x_s[p]
     * dSt[p][n] = e^{a_r-a_s} sum_p x_s[p] T[s][p], one partial per column tile of dx at rSt[zh][s][tn] (the scalars
     * add them); the separate product over [Lc][N] that formed it before is gone. */
    __device__ float tap_term(const m2tile::span &t, int si, int p, float acc) const
    {
        return s.xv(t.z / s.H, si, t.z % s.H, p) * acc;
    }
    __device__ void tap_store(const m2tile::span &t, int si, float sum) const
    {
        const float *acs = s.acs + (size_t)t.z * s.Q;
        const int tiles = (s.P + m2tile::BN - 1) / m2tile::BN;
        s.rSt[((size_t)t.z * s.Q + si) * tiles + t.j0 / m2tile::BN] = ssd_args::dexp(acs[t.i1 - 1] - acs[si]) * sum;
    }
    /* e^{a_r-a_s} dt_s, the row_scaled views' factor */
    __device__ float row_scale(int zh, const m2tile::span &t, int si) const
    {
        const float *acs = s.acs + (size_t)zh * s.Q;
        return ssd_args::dexp(acs[t.i1 - 1] - acs[si]) * s.dtc[(size_t)zh * s.Q + si];
    }
    __device__ void store(int zh, int si, int p, float acc) const
    {
        const int bc = zh / s.H, h = zh % s.H;
        m2_st(s.dx + s.row(bc, si) * s.ld_x + (size_t)h * s.P + p, acc + s.Dsk[h] * s.dyv(bc, si, h, p));
    }
};

/* The shape of the product through the state (dCoff): a chunk's rows x the N states, summed over the P channels. */
template <class TX> struct ssd_rows_by_states {
    ssd_io<TX> s;
    static constexpr bool a_kfast = true, b_jfast = true;
    bool vec4() const { return s.vec4(); }
    __device__ void dims(int zh, int &m, int &n, int &k) const
    {
        m = s.len(zh / s.H);
        n = s.N;
        k = s.P;
    }
    __device__ void krange(int zh, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.P;
    }
};

/* The row sums the scalars need from the product through the state, sum_n dCoff[l][n] . C_l[n] (tile_gemm.cuh,
 * row_term), one partial per column tile at r[zh][l][tn]: the scalars kernel reads these instead of the [Q][N]
 * result. (B's counterpart, B_s . dBst_s, is formed by dx's product: ssd_dx_op's tap.) */
__device__ __forceinline__ void ssd_row_partial(const ssd_args &s, float *r, int zh, int l, int tn, float sum)
{
    const int tiles = (s.N + m2tile::BN - 1) / m2tile::BN;
    r[((size_t)zh * s.Q + l) * tiles + tn] = sum;
}

/* ---- the row sums of dCoff[zh][l][n] = e^{a_l} sum_p dy_l[p] S_c[p][n] with C_l: dCoff itself is never stored
 * (dC sums it over the group's heads inside its own product); S of element type TS (ssd_states_type) ---- */
template <class TX, class TS> struct ssd_dcoff_op : ssd_rows_by_states<TX> {
    using ssd_rows_by_states<TX>::s;
    __device__ ssd_plain_view<TX, TS> bind(int zh) const
    {
        return ssd_plain_view<TX, TS>{s.dy_of(zh / s.H, zh % s.H),
                                      ssd_mat_t<TS>{s.template S_of<TS>(zh), (size_t)s.N, 1}};
    }
    __device__ void store(int zh, int l, int n, float acc) const {}
    __device__ float row_term(int zh, int l, int n, float acc) const
    {
        return s.Cv(zh / s.H, l, zh % s.H / s.hpg, n) * (s.eA[(size_t)zh * s.Q + l] * acc);
    }
    __device__ void row_store(int zh, int l, int tn, float sum) const { ssd_row_partial(s, s.rOff, zh, l, tn, sum); }
};

/* dCBw (UPPER: its transpose) as the A operand of the k from k0 on, zero where s > l: A(i, k - k0) for k - k0 <= i
 * (UPPER: >= i). a4: 4 along its contiguous dimension, k (dCBw's rows) or i (UPPER: the transpose's columns), masked
 * after the 16-byte load (ssd_cuda_dcb.cu writes the diagonal tiles whole, so the load reads written memory). */
template <bool UPPER, class TB> struct ssd_causal_view {
    ssd_mat A;
    ssd_mat_t<TB> B;
    int k0;
    __device__ float a(int i, int k) const
    {
        const int kk = k - k0;
        return (UPPER ? kk >= i : kk <= i) ? A(i, kk) : 0.0f;
    }
    __device__ m2_vec<4> a4(int i, int k) const
    {
        const int kk = k - k0;
        m2_vec<4> r = UPPER ? A.T().row4(kk, i) : A.row4(i, kk);
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (UPPER ? kk < i + c : kk + c > i) r.v[c] = 0.0f;
        return r;
    }
    __device__ float b(int k, int j) const { return B(k - k0, j); }
    __device__ auto b4(int k, int j) const { return B.raw4(k - k0, j); }
};

/* ---- dC_l[n] = sum_h e^{a_l,h} dy_l,h . S_h[:, n] + sum_{s<=l} dCBw[l][s] B_s[n] (per group, overwrites): one
 * reduction over the group's heads' channels (k < hpg*P, a part per head: the C gradient through the state, dCoff
 * summed over the heads) and then the chunk's positions (k - hpg*P = s); S of element type TS ---- */
template <class TX, class TS> struct ssd_dc_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = true, b_jfast = true;
    bool vec4() const { return s.vec4(); }
    __device__ void dims(int zg, int &m, int &n, int &k) const
    {
        m = s.len(zg / s.G);
        n = s.N;
        k = s.hpg * s.P + m;
    }
    __device__ void krange(int zg, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.hpg * s.P + i1; /* s <= l < i1 */
    }
    /* the heads' channels, then the positions (tile_gemm.cuh, split) */
    using view = m2tile::split_view<ssd_group_heads<TX, TS>, ssd_causal_view<false, TX>>;
    __device__ view bind(int zg) const
    {
        const int bc = zg / s.G, g = zg % s.G, zh = bc * s.H + g * s.hpg;
        return view{s.hpg * s.P,
                    ssd_group_heads<TX, TS>{s.hpg, s.P, s.Q, s.N, s.eA + (size_t)zh * s.Q, s.dy_of(bc, g * s.hpg),
                                            s.template S_of<TS>(zh)},
                    ssd_causal_view<false, TX>{ssd_mat{s.QQ(s.dCBw, zg), (size_t)s.Q, 1}, s.B_of(bc, g), s.hpg * s.P}};
    }
    __device__ void store(int zg, int l, int n, float acc) const
    {
        m2_st(s.dCm + s.row(zg / s.G, l) * s.ld_bc + (size_t)(zg % s.G) * s.N + n, acc);
    }
};

/* ---- dB_s[n] = sum_{l>=s} dCBw[l][s] C_l[n] + sum_h e^{a_last-a_s} dt_s,h x_s,h . dSt_h[:, n] (per group,
 * overwrites): one reduction over the chunk's positions l (k < Lc) and then the group's heads' channels (a part per
 * head: the B gradient through the state, dt dBst summed over the heads); dSt of element type TS, moved to the tiles
 * unscaled (bf16: as stored, the value the tiles rounded the fp32 dSt to before) ---- */
template <class TX, class TS> struct ssd_db_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = false, b_jfast = true; /* the heads' parts: a_kfast (ssd_scaled_view) */
    bool vec4() const { return s.vec4(); }
    __device__ void dims(int zg, int &m, int &n, int &k) const
    {
        m = s.len(zg / s.G);
        n = s.N;
        k = m + s.hpg * s.P;
    }
    __device__ void krange(int zg, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = i0; /* l >= s >= i0 */
        ke = s.len(zg / s.G) + s.hpg * s.P;
    }
    /* the positions, then the heads' channels (tile_gemm.cuh, split) */
    using view = m2tile::split_view<ssd_causal_view<true, TX>, ssd_group_heads<TX, TS>>;
    __device__ view bind(int zg) const
    {
        const int bc = zg / s.G, g = zg % s.G, zh = bc * s.H + g * s.hpg;
        return view{s.len(bc),
                    ssd_causal_view<true, TX>{ssd_mat{s.QQ(s.dCBw, zg), (size_t)s.Q, 1}.T(), s.C_of(bc, g), 0},
                    ssd_group_heads<TX, TS>{s.hpg, s.P, s.Q, s.N, s.wR + (size_t)zh * s.Q, s.x_of(bc, g * s.hpg),
                                            s.template dS_of<TS>(zh)}};
    }
    __device__ void store(int zg, int si, int n, float acc) const
    {
        m2_st(s.dBm + s.row(zg / s.G, si) * s.ld_bc + (size_t)(zg % s.G) * s.N + n, acc);
    }
};

/* ---- the per-position scalars of one (b, c, h): ddt, and the partials of dA and dD ----
 * One block per zh; dynamic shared memory: da[Q], direct[Q]. */
__global__ void __launch_bounds__(M2_CUDA_THREADS) ssd_scalars_kernel(ssd_args s)
{
    extern __shared__ float sm[];
    __shared__ float red[M2_CUDA_THREADS];
    float *da = sm, *direct = sm + s.Q;
    const int zh = blockIdx.x, bc = zh / s.H, h = zh % s.H, L = s.len(bc);
    const int tid = threadIdx.x;
    const int tiles = (s.N + m2tile::BN - 1) / m2tile::BN, qtiles = (s.Q + m2tile::BN - 1) / m2tile::BN;
    const float *rMq = s.rMq + (size_t)zh * s.Q * qtiles, *cMq = s.cMq + (size_t)zh * s.Q * qtiles;
    const int ptiles = (s.P + m2tile::BN - 1) / m2tile::BN; /* rSt: per column tile of dx (ssd_dx_op, tap) */
    const float *rOff = s.rOff + (size_t)zh * s.Q * tiles, *rSt = s.rSt + (size_t)zh * s.Q * ptiles;

    /* <dSt_c, S_c> (the state passing's decay gradient), from the reverse pass's partials per 32 state entries, and
     * this chunk's share of dD */
    float ps = 0.0f;
    const int wn = ssd_state_warps(s.P, s.N);
    for (int w = tid; w < wn; w += blockDim.x) ps += s.pSd[(size_t)zh * wn + w];
    ps = m2_block_sum(ps, red);
    float dd = 0.0f; /* this chunk's dy.x, from the dCB product's diagonal tiles (ssd_cuda_dcb.cu), in order */
    for (int tm = 0; tm <= (L - 1) / m2tile::BM; tm++) dd += s.pDd[(size_t)zh * qtiles + tm];

    float stsum = 0.0f;
    for (int i = tid; i < L; i += blockDim.x) {
        const float dti = s.dtv(bc, i, h);
        float rowsum = 0.0f, colsum = 0.0f, off = 0.0f, stp = 0.0f;
        /* sum_{j<=i} Mq[i][j] dt_j and sum_{l>=i} Mq[l][i], from the tiles that hold them (ssd_cuda_dcb.cu) */
        for (int tn = 0; tn <= i / m2tile::BN; tn++) rowsum += rMq[(size_t)i * qtiles + tn];
        for (int tm = i / m2tile::BM; tm <= (L - 1) / m2tile::BM; tm++) colsum += cMq[(size_t)i * qtiles + tm];
        /* C_i . dCoff_i and B_i . dBst_i, from the products' row sums */
        for (int tn = 0; tn < tiles; tn++) off += rOff[(size_t)i * tiles + tn];
        for (int tn = 0; tn < ptiles; tn++) stp += rSt[(size_t)i * ptiles + tn];
        da[i] = rowsum - colsum * dti + off - dti * stp;
        direct[i] = colsum + stp;
        stsum += dti * stp;
    }
    stsum = m2_block_sum(stsum, red); /* its barriers also publish da[] and direct[] */
    if (tid == 0) {
        da[L - 1] += stsum + s.dexp(s.a_last(zh)) * ps;
        float run = 0.0f; /* reverse cumsum, in place: da[i] <- sum_{l>=i} da[l] */
        for (int i = L - 1; i >= 0; i--) {
            run += da[i];
            da[i] = run;
        }
    }
    __syncthreads();
    const float A = s.A[h];
    float pa = 0.0f;
    for (int i = tid; i < L; i += blockDim.x) {
        s.ddt[s.row(bc, i) * s.H + h] = direct[i] + A * da[i];
        pa += s.dtv(bc, i, h) * da[i];
    }
    pa = m2_block_sum(pa, red);
    if (tid == 0) {
        s.pA[zh] = pa;
        s.pD[zh] = dd;
    }
}

/* dA[h] = sum over (b, c) of the partials, in (b, c) order (written: src/core/ssd.h); dD[h] += likewise. */
__global__ void ssd_param_grads_kernel(ssd_args s, float *dA, float *dD)
{
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= s.H) return;
    float sa = 0.0f, sd = 0.0f;
    for (int bc = 0; bc < s.B * s.nc; bc++) {
        sa += s.pA[(size_t)bc * s.H + h];
        sd += s.pD[(size_t)bc * s.H + h];
    }
    dA[h] = sa;
    dD[h] += sd;
}

template <class TX>
static void ssd_backward(const m2_cuda_ctx *c, const ssd_io<TX> &a, const ssd_layout &L, float *dA, float *dD)
{
    cudaStream_t st = c->stream;
    const int heads = a.B * a.nc * a.H, groups = a.B * a.nc * a.G;

    /* CB and the decay tables are the forward's (the saved buffer, ssd_cuda.cuh) */
    if (!L.keep_states) { /* S recomputed from the saved cumsums, into the scratch (ssd_cuda.cuh) */
        static const char *const states[2] = {"ssd_bwd (chunk states, recomputed)",
                                              "ssd_bwd (state passing, recomputed)"};
        ssd_compute_states(c, a, L, states);
    }
    m2_act_dispatch(L.states, [&](auto tag) {
        using TS = m2_elem_t<decltype(tag)>;
        const size_t per = (size_t)M2_CUDA_THREADS * ssd_pass_width<TS>(a); /* entries per block (ssd_pass_bwd) */
        const unsigned pass_blocks = (unsigned)(a.B * a.H * (((size_t)a.P * a.N + per - 1) / per));
        m2_tile_gemm(c, ssd_dsoff_op<TX, TS>{a}, heads, a.P, a.N, "ssd_bwd (dS through outputs)");
        if constexpr (std::is_same<TS, __nv_bfloat16>::value)
            ssd_pass_bwd_bf16_kernel<<<pass_blocks, M2_CUDA_THREADS, 0, st>>>(a);
        else
            ssd_pass_bwd_kernel<<<pass_blocks, M2_CUDA_THREADS, 0, st>>>(a);
        M2_CUDA_LAUNCHED("ssd_bwd (reverse state passing)");
        m2_tile_gemm(c, ssd_dx_op<TX, TS>{a}, heads, a.Q, a.P, "ssd_bwd (dx)");
        ssd_compute_dcb(c, a); /* E kept on chip (ssd_cuda_dcb.cu) */
        m2_tile_gemm(c, ssd_dcoff_op<TX, TS>{{a}}, heads, a.Q, a.N, "ssd_bwd (dC through the state)");
        m2_tile_gemm(c, ssd_dc_op<TX, TS>{a}, groups, a.Q, a.N, "ssd_bwd (dC)");
        m2_tile_gemm(c, ssd_db_op<TX, TS>{a}, groups, a.Q, a.N, "ssd_bwd (dB)");
    });
    const size_t shmem = 2 * (size_t)a.Q * sizeof(float);
    if (shmem > 48 * 1024) /* a block's default dynamic shared memory; chunk sizes are 64..256 in practice */
        m2_cuda_check(cudaErrorInvalidValue, "ssd_bwd: chunk_size above 6144 (per-position scalars in shared memory)");
    ssd_scalars_kernel<<<heads, M2_CUDA_THREADS, shmem, st>>>(a);
    M2_CUDA_LAUNCHED("ssd_bwd (ddt, dA, dD)");
    ssd_param_grads_kernel<<<(a.H + 63) / 64, 64, 0, st>>>(a, dA, dD);
    M2_CUDA_LAUNCHED("ssd_bwd (dA, dD)");
}

void m2_cuda_ssd_bwd(const m2_ops *o, const m2_ssd_shape *sh, const void *x, const m2_real *dt, const m2_real *A,
                     const void *Bm, const void *Cm, const m2_real *Dsk, const void *dy, m2_act_type at,
                     const m2_real *saved, void *dx, m2_real *ddt, m2_real *dA, void *dBm, void *dCm, m2_real *dD,
                     m2_real *scratch)
{
    if (sh->B <= 0 || sh->T <= 0) return;
    const m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const ssd_layout L = ssd_layout_of(sh, ssd_states_type(c));
    ssd_on_rows(at, sh, x, dt, A, Bm, Cm, Dsk, [&](auto a) {
        ssd_set_buffers(&a, &L, (float *)saved, scratch); /* acs, CB, the tables (and kept states) are only read */
        a.dy = (decltype(a.dy))dy;
        a.dx = (decltype(a.dx))dx; /* dx, dB, dC in the token rows' type (ops.h) */
        a.ddt = ddt;
        a.dBm = (decltype(a.dBm))dBm;
        a.dCm = (decltype(a.dCm))dCm;
        ssd_backward(c, a, L, dA, dD);
    });
}
