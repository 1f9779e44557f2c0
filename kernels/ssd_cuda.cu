/* The chunked SSD on the GPU, forward (definitions in ssd_cuda.cuh). Stages, in stream order:
 *   1. acs: chunk-local cumsums of dt*A, sequential along the chunk (fp32), and the decay tables from them
 *   2. CB = C B^T per (b, c, g)
 *   3. st_c per (b, c < nc-1, h), summed in fp32 and stored in S's type (bf16 at bf16 precision: rounded to nearest
 *      even, ssd_states_type) in slot c+1 of S itself
 *   4. state passing along the chunks: S_0 = 0, S_{c+1} = e^{a_last(c)} S_c + st_c, one thread per state entry, in
 *      fp32 from the widened st_c, each S_c stored once in S's type over st_{c-1}
 *   5. y = [e^{a_l} C_l | masked, decayed CB row times dt] . [S_c^T ; x] + D x: one product per (b, c, h) whose
 *      reduction runs over the N state entries, then over the positions s <= l. */
#include "ssd_cuda.h"

#include "ssd_cuda.cuh"

/* The backward recomputes the chunk states by default: they are 3,072 of the 4,480 bytes per token and layer the SSD
 * would keep at configs/8gpu.ini's shape (1,536 of 2,944 with bf16 states; the rest: the cumsums, CB and the decay
 * tables), and without them the activations fit upstream mamba_ssm's footprint (BENCHMARKS.md, issue 16d);
 * recomputing them costs the states product and the state passing once more per backward. */
static m2_cuda_ssd_states g_ssd_states = M2_CUDA_SSD_RECOMPUTE_STATES;
extern "C" m2_cuda_ssd_states m2_ops_cuda_set_ssd_states(m2_cuda_ssd_states mode)
{
    const m2_cuda_ssd_states old = g_ssd_states;
    g_ssd_states = mode;
    return old;
}
bool ssd_keep_states() { return g_ssd_states == M2_CUDA_SSD_KEEP_STATES; }

static ssd_layout ssd_layout_for(const m2_ops *o, const m2_ssd_shape *s)
{
    return ssd_layout_of(s, ssd_states_type(m2_cuda_ctx_of(o)));
}
size_t m2_cuda_ssd_saved_size(const m2_ops *o, const m2_ssd_shape *s) { return ssd_layout_for(o, s).saved_total; }
/* The forward alone uses the copy of the saved regions (the cumsums, CB, the tables, S, which also holds the chunk
 * states), which comes first (ssd_cuda.cuh); the backward's arrays follow. */
size_t m2_cuda_ssd_scratch_size(const m2_ops *o, const m2_ssd_shape *s, int with_backward)
{
    const ssd_layout L = ssd_layout_for(o, s);
    return with_backward ? L.scratch_total : L.fwd_scratch_total;
}

/* ---- 1. cumsums and the decay tables, one launch ----
 * The tables are the per-(head, position) decays that the products read for every row or column of every tile,
 * computed once (BENCHMARKS.md, "Predicted GPU step"): eA[zh][l] = e^{a_l} and wR[zh][s] = e^{a_last-a_s} dt_s, the
 * same fp32 expressions the operands evaluated inline, so the products are unchanged bitwise; and dtc[zh][s] = dt_s,
 * the head's dt contiguous (0 past the chunk's end) for 16-byte loads. In the saved buffer: the backward reads the
 * forward's.
 * A block takes one chunk bc and up to ssd_scan_heads heads of it: its threads stage the heads' dt rows in shared
 * memory (coalesced: dt is [token][H]), one thread per head runs the chunk's cumsum in order (the same sequential fp32
 * sum as the CPU's, so acs is the same bitwise as one thread per head over global memory gave), and then every thread
 * writes the tables' rows [zh][l], which lie contiguous for consecutive heads. The shared rows are ssd_scan_row(Q)
 * floats apart, an odd number: the staging stores (a warp's lanes on 32 heads at one l) and the cumsum threads' loads
 * (one head each at one l) then fall in distinct banks instead of all in one (a 32-way conflict at a stride of Q). */
enum { SSD_SCAN_FLOATS = 8192 }; /* shared floats for a block's dt and acs rows (2 x heads x row): 32 KB */
__host__ __device__ inline int ssd_scan_row(int Q) { return Q | 1; }
/* heads per block: all of the chunk's that fit, at most a warp's width (the staging loads' rows); at least one (the
 * array holds two rows of the longest chunk, 4096 + 1, past SSD_SCAN_FLOATS) */
static inline int ssd_scan_heads(const ssd_args &a)
{
    return max(1, min(min(a.H, 32), SSD_SCAN_FLOATS / (2 * ssd_scan_row(a.Q))));
}
__global__ void ssd_cumsum_tables_kernel(ssd_args s, int hb)
{
    __shared__ float sh[SSD_SCAN_FLOATS + 2];
    const int hn = (s.H + hb - 1) / hb, bc = blockIdx.x / hn, h0 = blockIdx.x % hn * hb, nh = min(hb, s.H - h0);
    const int L = s.len(bc), Q = s.Q, R = ssd_scan_row(Q);
    float *dts = sh, *as = sh + (size_t)hb * R; /* [head][l], rows R apart */
    for (int l = threadIdx.y; l < Q; l += blockDim.y)
        for (int j = threadIdx.x; j < nh; j += blockDim.x) dts[j * R + l] = l < L ? s.dtv(bc, l, h0 + j) : 0.0f;
    __syncthreads();
    const int t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
    if (t < nh) {
        const float A = s.A[h0 + t];
        const float *dt = dts + t * R;
        float *a = as + t * R, run = 0.0f;
        for (int l = 0; l < L; l++) {
            run += dt[l] * A;
            a[l] = run;
        }
        for (int l = L; l < Q; l++) a[l] = run; /* padding: a_last sits at Q-1 for every chunk */
    }
    __syncthreads();
    const size_t base = ((size_t)bc * s.H + h0) * Q;
    for (int j = 0; j < nh; j++) {
        const float last = as[j * R + Q - 1];
        for (int l = t; l < Q; l += nt) {
            const size_t i = base + (size_t)j * Q + l;
            const float al = as[j * R + l], dt = dts[j * R + l];
            s.acs[i] = al;
            s.eA[i] = ssd_args::dexp(al);
            s.wR[i] = l < L ? ssd_args::dexp(last - al) * dt : 0.0f;
            s.dtc[i] = dt;
        }
    }
}

/* ---- 2. CB: ssd_compute_cb (ssd_cuda.cuh) ---- */

/* ---- 3. chunk states: st[c+1][p][n] = sum_s x_s[p] * e^{a_last-a_s} dt_s B_s[n], c < nc-1, stored as TS (S's type)
 * in S: one rounding per chunk state before the fp32 recurrence at bf16 precision (docs/MODEL.md §8) ---- */
template <class TX, class TS> struct ssd_states_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = false, b_jfast = true;
    /* batch entry z = (b*(nc-1) + c)*H + h over the chunks that have a successor */
    __device__ int zh_of(int z) const
    {
        const int h = z % s.H, bcc = z / s.H, b = bcc / (s.nc - 1), c = bcc % (s.nc - 1);
        return (b * s.nc + c) * s.H + h;
    }
    __device__ void dims(int z, int &m, int &n, int &k) const
    {
        m = s.P;
        n = s.N;
        k = s.len(zh_of(z) / s.H);
    }
    __device__ void krange(int z, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.Q;
    }
    bool vec4() const { return s.vec4(); }
    struct view {
        ssd_mat_t<TX> X, Bg;
        const float *wR;
        __device__ float a(int p, int l) const { return X(l, p); }
        __device__ auto a4(int p, int l) const { return X.raw4(l, p); } /* p..p+3 */
        __device__ float b(int l, int n) const { return wR[l] * Bg(l, n); }
        __device__ m2_vec<4> b4(int l, int n) const { return ssd_scaled4(wR[l], Bg.row4(l, n)); }
    };
    __device__ view bind(int z) const
    {
        const int zh = zh_of(z), bc = zh / s.H, h = zh % s.H;
        return view{s.x_of(bc, h), s.B_of(bc, h / s.hpg), s.wR + (size_t)zh * s.Q};
    }
    __device__ void store(int z, int p, int n, float acc) const
    {
        m2_st(s.template S_of<TS>(zh_of(z) + s.H) + (size_t)p * s.N + n, acc); /* slot c+1 of the same (b, h) */
    }
};

/* ---- 4. state passing: the recurrence in fp32 from st (of type TS, in S itself: each entry is read before it is
 * overwritten), each S_c stored once as TS (m2_st: bf16 rounded to nearest even). Each thread runs V consecutive
 * entries of one head (ssd_pass_width: one 16-byte load and store per chunk, one decay factor for the V), stepping
 * its pointers chunk by chunk ---- */
template <class TS, int V> __device__ __forceinline__ void ssd_pass_v(const ssd_args &s)
{
    const size_t PN = (size_t)s.P * s.N, PNv = PN / V, step = (size_t)s.H * PN, a_step = (size_t)s.H * s.Q;
    M2_GRID_STRIDE(i, (size_t)s.B * s.H * PNv)
    {
        const size_t pn = i % PNv * V;
        const int bh = (int)(i / PNv), b = bh / s.H, h = bh % s.H, zh = (b * s.nc) * s.H + h;
        TS *out = s.S_of<TS>(zh) + pn;                            /* st_{c-1}, then S_c */
        const float *a_last = s.acs + (size_t)zh * s.Q + s.Q - 1; /* of the chunk before */
        m2_vec<V> prev = {};
        /* S_0 = 0, as 16 zero bytes where V entries fill them (V bf16 zeros the compiler stores one by one) */
        if constexpr (V * sizeof(TS) % 16 == 0)
            m2_vstore<4>((float *)out, m2_vec<4>{});
        else
            m2_vstore<V>(out, prev);
        for (int c = 1; c < s.nc; c++, a_last += a_step) {
            out += step;
            const float d = s.dexp(*a_last);
            const m2_vec<V> st = m2_vload<V>(out);
#pragma unroll
            for (int e = 0; e < V; e++) prev.v[e] = d * prev.v[e] + st.v[e];
            m2_vstore<V>(out, prev);
        }
    }
}
template <class TS> __device__ __forceinline__ void ssd_pass(const ssd_args &s)
{
    if (ssd_pass_width<TS>(s) > 1)
        ssd_pass_v<TS, 16 / sizeof(TS)>(s);
    else
        ssd_pass_v<TS, 1>(s);
}
/* one kernel per states type, each named apart (the per-kernel counts and tools/sass_report.py key kernels by name) */
__global__ void ssd_pass_kernel(ssd_args s) { ssd_pass<float>(s); }
__global__ void ssd_pass_bf16_kernel(ssd_args s) { ssd_pass<__nv_bfloat16>(s); }

/* ---- 5. outputs: k < N runs over the state (e^{a_l} C_l[n] . S_c[p][n]), k >= N over s = k - N <= l ----
 * With r = i0 the tile's first row, e^{a_l} = e^{a_l-a_r} e^{a_r} and, for the positions j < r before the tile's rows,
 * e^{a_l-a_j} = e^{a_l-a_r} e^{a_r-a_j} (each factor of a quantity <= 0, docs/MODEL.md §3): the state part and those
 * positions are products of plain C rows with e^{a_r} S^T and of CB rows scaled by e^{a_r-a_j} dt_j with x, multiplied
 * by e^{a_l-a_r} once per output (tile_gemm.cuh, row_scaled), so their k loops carry no exp per element; the positions
 * of the tile's own rows (r <= j <= l) take the exact decay of each element from the block's table (ssd_own_decays).
 * With bf16 states (TS), the state part's B operand is S itself, moved to the tiles as stored (as upstream mamba_ssm
 * multiplies C by its states rounded to C's type), and e^{a_r} multiplies the part's fp32 sums once, after its loop
 * (tile_gemm.cuh, then_scaled): no per-element widening, scaling and rounding of S. With fp32 states it scales S's
 * elements on their way to the tiles, as before. */
template <class TX, class TS> struct ssd_y_op {
    ssd_io<TX> s; /* s.y [B*T, H*P]: the kept output, in TX (rounded once here when bf16) */
    static constexpr bool a_kfast = true, b_jfast = true;
    bool vec4() const { return s.vec4() && ssd_ktab_fits(s.Q); }
    __device__ void dims(int zh, int &m, int &n, int &k) const
    {
        m = s.len(zh / s.H);
        n = s.P;
        k = s.N + m;
    }
    __device__ void krange(int zh, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.N + i1; /* s <= l < i1 */
    }
    /* the state part C_l[k] . e^{a_r} S[p][k] (S's rows contiguous along k); e^{a_r} after the loop for bf16 S */
    struct state_view {
        static constexpr bool row_scaled = true, b_jfast = false, then_scaled = std::is_same<TS, __nv_bfloat16>::value;
        float w; /* e^{a_r} */
        ssd_mat_t<TX> C;
        ssd_mat_t<TS> S;
        __device__ float a(int l, int k) const { return C(l, k); }
        __device__ auto a4c(int l, int k, int dk) const
        {
            return ssd_moved_cursor<TX>{ssd_cursor(C.at(l, k), (size_t)dk)};
        }
        __device__ auto a4(int l, int k) const { return a4c(l, k, 0).get(); }
        __device__ float b(int k, int p) const
        {
            if constexpr (then_scaled)
                return S(p, k);
            else
                return w * S(p, k);
        }
        __device__ auto b4c(int k, int p, int dk) const
        {
            if constexpr (then_scaled)
                return ssd_moved_cursor<TS>{ssd_cursor(S.at(p, k), (size_t)dk)};
            else
                return ssd_scaled_cursor<TS>{ssd_cursor(S.at(p, k), (size_t)dk), w};
        }
        __device__ auto b4k(int k, int p) const { return b4c(k, p, 0).get(); }
        __device__ float then_scale() const { return w; }
    };
    /* CB's row l at j..j+3 (j a multiple of 4) times 4 factors of a table, both in 16-byte loads, moved on together
     * (tile_gemm.cuh, a4c): the A operand of the chunk views below */
    struct cb_cursor {
        const float *cb, *d;
        int step;
        __device__ void next()
        {
            cb += step;
            d += step;
        }
        __device__ m2_vec<4> get() const
        {
            const m2_vec<4> c4 = m2_vload<4>(cb), d4 = m2_vload<4>(d);
            m2_vec<4> r;
#pragma unroll
            for (int c = 0; c < 4; c++) r.v[c] = c4.v[c] * d4.v[c];
            return r;
        }
    };
    /* the positions j = k - N before the tile's rows: CB[l][j] e^{a_r-a_j} dt_j . x_j[p] (no mask: j < r <= l); the
     * factor on CB's side, as upstream mamba_ssm's chunk scan scales its C B^T scores by the decay and dt before
     * their product with x, so that x reaches the tiles as stored (bf16 rows: untouched, as the own view's) */
    struct past_view {
        static constexpr bool row_scaled = true;
        int N, Q;
        float ar;
        const float *acs, *CB, *dt, *wt; /* wt[j] = w(j): the block's table (ssd_k_factors) */
        ssd_mat_t<TX> x;
        __device__ float w(int j) const { return ssd_args::dexp(ar - acs[j]) * dt[j]; }
        __device__ float a(int l, int k) const { return CB[(size_t)l * Q + k - N] * w(k - N); }
        __device__ cb_cursor a4c(int l, int k, int dk) const
        {
            return cb_cursor{CB + (size_t)l * Q + (k - N), wt + (k - N), dk};
        }
        __device__ m2_vec<4> a4(int l, int k) const { return a4c(l, k, 0).get(); }
        __device__ float b(int k, int p) const { return x(k - N, p); }
        __device__ auto b4c(int k, int p, int dk) const
        {
            return ssd_moved_cursor<TX>{ssd_cursor(x.at(k - N, p), (size_t)dk * x.rs)};
        }
        __device__ auto b4(int k, int p) const { return b4c(k, p, 0).get(); }
    };
    /* the positions of the tile's own rows: CB[l][j] (e^{a_l-a_j} dt_j, masked: the block's table) . x_j[p] */
    struct own_view {
        int N, Q, i0;
        const float *CB, *tab; /* tab: ssd_own_decays */
        ssd_mat_t<TX> x;
        __device__ float a(int l, int k) const
        {
            const int j = k - N;
            return CB[(size_t)l * Q + j] * tab[(l - i0) * m2tile::BM + j - i0];
        }
        /* the same products for j..j+3 (j a multiple of 4) */
        __device__ cb_cursor a4c(int l, int k, int dk) const
        {
            const int j = k - N;
            return cb_cursor{CB + (size_t)l * Q + j, tab + (l - i0) * m2tile::BM + j - i0, dk};
        }
        __device__ m2_vec<4> a4(int l, int k) const { return a4c(l, k, 0).get(); }
        __device__ float b(int k, int p) const { return x(k - N, p); }
        __device__ auto b4c(int k, int p, int dk) const
        {
            return ssd_moved_cursor<TX>{ssd_cursor(x.at(k - N, p), (size_t)dk * x.rs)};
        }
        __device__ auto b4(int k, int p) const { return b4c(k, p, 0).get(); }
    };
    /* k < N, then the chunk's positions before the tile's rows, then its own (tile_gemm.cuh, split): each loop
     * holds one kind of operand, with the head's rows and arrays located once per block */
    using chunk_parts = m2tile::split_view<past_view, own_view>;
    using view = m2tile::split_view<state_view, chunk_parts>;
    static constexpr int shared_floats = SSD_OWN_FLOATS + SSD_KTAB_FLOATS;
    __device__ view bind(int zh, const m2tile::span &t, float *sh) const
    {
        const int bc = zh / s.H, h = zh % s.H, g = h / s.hpg;
        const float *acs = s.acs + (size_t)zh * s.Q, *CB = s.QQ(s.CB, bc * s.G + g), *dt = s.dtc + (size_t)zh * s.Q;
        const ssd_mat_t<TX> x = s.x_of(bc, h);
        const float *tab = ssd_own_decays(acs, dt, t.i0, t.i1, sh);
        past_view past{s.N, s.Q, acs[t.i0], acs, CB, dt, nullptr, x};
        past.wt = ssd_k_factors(0, t.i0, sh + SSD_OWN_FLOATS, [&](int j) { return past.w(j); });
        const ssd_mat_t<TS> S{s.template S_of<TS>(zh), (size_t)s.N, 1};
        return view{s.N, state_view{s.eA[(size_t)zh * s.Q + t.i0], s.C_of(bc, g), S},
                    chunk_parts{s.N + t.i0, past, own_view{s.N, s.Q, t.i0, CB, tab, x}}};
    }
    /* e^{a_l-a_r}, the row_scaled views' factor */
    __device__ float row_scale(int zh, const m2tile::span &t, int l) const
    {
        const float *acs = s.acs + (size_t)zh * s.Q;
        return ssd_args::dexp(acs[l] - acs[t.i0]);
    }
    __device__ void store(int zh, int l, int p, float acc) const
    {
        const int bc = zh / s.H, h = zh % s.H;
        const size_t i = s.row(bc, l) * ((size_t)s.H * s.P) + (size_t)h * s.P + p;
        m2_st(s.y + i, acc + s.Dsk[h] * s.xv(bc, l, h, p));
    }
};

template <class TX>
void ssd_compute_states(const m2_cuda_ctx *c, const ssd_io<TX> &a, const ssd_layout &L, const char *const what[2])
{
    m2_act_dispatch(L.states, [&](auto tag) {
        using TS = m2_elem_t<decltype(tag)>;
        m2_tile_gemm(c, ssd_states_op<TX, TS>{a}, a.B * (a.nc - 1) * a.H, a.P, a.N, what[0]);
    });
    const size_t pass_n = (size_t)a.B * a.H * a.P * a.N; /* entries, ssd_pass_width to a thread */
    if (L.states == M2_ACT_BF16) {
        const unsigned blocks = m2_cuda_blocks(pass_n / ssd_pass_width<__nv_bfloat16>(a));
        ssd_pass_bf16_kernel<<<blocks, M2_CUDA_THREADS, 0, c->stream>>>(a);
    } else {
        const unsigned blocks = m2_cuda_blocks(pass_n / ssd_pass_width<float>(a));
        ssd_pass_kernel<<<blocks, M2_CUDA_THREADS, 0, c->stream>>>(a);
    }
    M2_CUDA_LAUNCHED(what[1]);
}

template void ssd_compute_states(const m2_cuda_ctx *, const ssd_io<float> &, const ssd_layout &, const char *const[2]);
template void ssd_compute_states(const m2_cuda_ctx *, const ssd_io<__nv_bfloat16> &, const ssd_layout &,
                                 const char *const[2]);

template <class TX>
static void ssd_forward(const m2_cuda_ctx *c, ssd_io<TX> a, const ssd_layout &L, m2_real *saved, m2_real *scratch)
{
    cudaStream_t st = c->stream;
    ssd_set_buffers(&a, &L, saved ? saved : scratch + L.fwd_saved, scratch);
    const int heads = a.B * a.nc * a.H;

    const int hb = ssd_scan_heads(a), scan_blocks = a.B * a.nc * ((a.H + hb - 1) / hb);
    ssd_cumsum_tables_kernel<<<scan_blocks, dim3(32, 8), 0, st>>>(a, hb);
    M2_CUDA_LAUNCHED("ssd_fwd (cumsums, decay tables)");
    ssd_compute_cb(c, a);
    static const char *const states[2] = {"ssd_fwd (chunk states)", "ssd_fwd (state passing)"};
    ssd_compute_states(c, a, L, states);
    m2_act_dispatch(L.states, [&](auto tag) {
        using TS = m2_elem_t<decltype(tag)>;
        m2_tile_gemm(c, ssd_y_op<TX, TS>{a}, heads, a.Q, a.P, "ssd_fwd (outputs)");
    });
}

void m2_cuda_ssd_fwd(const m2_ops *o, const m2_ssd_shape *sh, const void *x, const m2_real *dt, const m2_real *A,
                     const void *Bm, const void *Cm, const m2_real *Dsk, void *y, m2_act_type at, m2_real *saved,
                     m2_real *scratch)
{
    if (sh->B <= 0 || sh->T <= 0) return;
    const m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const ssd_layout L = ssd_layout_for(o, sh);
    ssd_on_rows(at, sh, x, dt, A, Bm, Cm, Dsk, [&](auto a) {
        a.y = (decltype(a.y))y;
        ssd_forward(c, a, L, saved, scratch);
    });
}
