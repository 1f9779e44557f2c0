/* The chunked SSD on the GPU (docs/MODEL.md §2 step 5, §3): shared definitions of ssd_cuda.cu (forward) and
 * ssd_cuda_bwd.cu (backward).
 *
 * Per batch b, chunk c (positions c*Q .. c*Q+Lc-1, Lc = min(Q, T - c*Q): the tail chunk is simply shorter, which
 * is the same as dt = 0 past T), head h with group g = h / (H/G), in-chunk positions l, s:
 *   a_l   = sum_{k<=l} dt_k A                     chunk-local cumsum, fp32 ("acs", saved)
 *   CB    = C B^T                   [Lc,Lc]       per group
 *   y_l   = sum_{s<=l} CB[l,s] e^{a_l-a_s} dt_s x_s  +  e^{a_l} S_c C_l  +  D x_l
 *   st_c  = sum_s e^{a_last-a_s} dt_s x_s B_s^T   [P,N]
 *   S_0 = 0,  S_{c+1} = e^{a_last(c)} S_c + st_c   chunk-start states (saved)
 * Every exponent is of a quantity that is <= 0 mathematically and is computed as exp(min(delta, 0)); every mask
 * is applied by not reading (or zeroing) the masked term before any product. Everything is fp32 (cumsums, decays,
 * masks, dt scaling, chunk states, reductions) except the operands of the per-chunk products when the backend's
 * precision is bf16 or tf32: tile_gemm.cuh rounds the gathered fp32 operands on their way to the tensor cores and
 * accumulates in fp32 (docs/MODEL.md §3); and, at bf16, the token rows x, B, C, dy and the output y are stored in
 * bf16 and widened on every load (ssd_io, docs/MODEL.md §8); and, at bf16 precision, the chunk-start states S are
 * stored in bf16 by the fp32 state passing, as are its input, the chunk states st (summed in fp32 by their
 * product), and the gradients dSoff (summed in fp32 by its product) and dSt by the fp32 reverse state passing
 * (ssd_states_type).
 *
 * Index conventions in the kernels: bc = b*nc + c; a head's batch entry zh = bc*H + h; a group's zg = bc*G + g.
 *
 * Buffers (floats, each region rounded up to 64 floats):
 *   saved:   acs [B*nc*H][Q] (padded past Lc with a_last, so a_last = acs[zh][Q-1]), CB [B*nc*G][Q][Q], the tables
 *            eA, wR, dtc [B*nc*H][Q] (ssd_cuda.cu, stage 1): the forward's, kept for the backward, which would
 *            otherwise compute them again from the same inputs (two launches per layer, C B^T and the cumsums with
 *            the tables; G*Q + 3H floats per token, 1,312 bytes at
 *            configs/8gpu.ini's shape: the activations kept stay under upstream mamba_ssm's, BENCHMARKS.md);
 *            and S [B*nc*H][P][N] only when the backend keeps the chunk states (ssd_cuda.h; by default the
 *            backward recomputes them); S's elements are bf16 at bf16 precision (ssd_states_type: half the
 *            floats), else fp32
 *   scratch: room for the saved regions (the forward's own when it is not followed by a backward; S there when
 *            the states are not kept, where the backward recomputes them),
 *            dS [B*nc*H][P][N], of S's type (dSoff, then dSt in place, ssd_cuda_bwd.cu; the chunk states st_c, of S's
 *            type, lie in S itself, in slot c+1, from the states product to the state passing, which turns each into
 *            S_c where it lies: the forward alone needs no scratch past the saved regions' copy),
 *            rMq, cMq [B*nc*H][Q][ceil(Q/64)] (row and column sums of CB.E per tile, ssd_cuda_dcb.cu; E itself never
 *            reaches memory),  pDd [B*nc*H][ceil(Q/64)] (dy.x per diagonal tile, for dD),  dCBw [B*nc*G][Q][Q],
 *            pA [B*nc*H],  pD [B*nc*H],
 *            rOff [B*nc*H][Q][ceil(N/64)] (row sums of dCoff.C per column tile, ssd_cuda_bwd.cu; dCoff itself
 *            never reaches memory), rSt [B*nc*H][Q][ceil(P/64)] (dBst.B, as row sums of x times dx's state part per
 *            column tile of dx, formed by dx's product: dBst itself is never formed),
 *            pSd [B*nc*H][ceil(P*N/32)] (partials of <dSt_c, S_c> per 32 entries, of the reverse state passing)
 * ssd_cuda_bwd.cu says what the backward's buffers hold. */
#ifndef MAMBA2_SSD_CUDA_CUH
#define MAMBA2_SSD_CUDA_CUH

#include <string.h>

#include "tile_gemm.cuh"

typedef struct {
    int keep_states;    /* S in the saved buffer (else in the scratch, recomputed by the backward) */
    m2_act_type states; /* S's element type (ssd_states_type) */
    size_t acs, CB, eA, wR, dtc, S, fwd_total, saved_total; /* offsets in the saved buffer, or in its copy in the
                                                             * scratch at fwd_saved */
    size_t fwd_saved, dS, fwd_scratch_total;                /* scratch: both passes */
    size_t rMq, cMq, pDd, dCBw, pA, pD, rOff, rSt, pSd, scratch_total; /* the backward's */
} ssd_layout;

/* Whether the backend keeps the chunk states for the backward (ssd_cuda.h; defined in ssd_cuda.cu). */
bool ssd_keep_states();

/* The element type of the chunk-start states S the products read: bf16 at bf16 precision (docs/MODEL.md §8), as
 * upstream mamba_ssm's chunk scan rounds its previous states to C's type before their product; the state passing
 * still runs in fp32 and rounds each S_c once, when it stores it. fp32 at tf32 and fp32 precision. */
static inline m2_act_type ssd_states_type(const m2_cuda_ctx *c)
{
    return c->gemm_prec == M2_CUDA_GEMM_BF16 ? M2_ACT_BF16 : M2_ACT_REAL;
}

static inline size_t ssd_round(size_t n) { return (n + 63) / 64 * 64; }
/* column tiles of the tile products over the N state entries (tile_gemm.cuh) */
static inline size_t ssd_state_tiles(const m2_ssd_shape *s) { return (size_t)(s->N + m2tile::BN - 1) / m2tile::BN; }
/* over a head's P channels (dx's columns) */
static inline size_t ssd_head_tiles(const m2_ssd_shape *s) { return (size_t)(s->P + m2tile::BN - 1) / m2tile::BN; }
/* and over a chunk's positions */
static inline size_t ssd_chunk_tiles(const m2_ssd_shape *s) { return (size_t)(s->Q + m2tile::BN - 1) / m2tile::BN; }
/* the groups of 32 state entries of a head (the reverse state passing's partials, ssd_cuda_bwd.cu) */
__host__ __device__ inline int ssd_state_warps(int P, int N) { return (P * N + 31) / 32; }

/* states: S's element type (ssd_states_type) */
static inline ssd_layout ssd_layout_of(const m2_ssd_shape *s, m2_act_type states)
{
    const size_t nc = (size_t)(s->T + s->Q - 1) / s->Q, bc = (size_t)s->B * nc;
    const size_t heads = bc * s->H, groups = bc * s->G, Q = s->Q, PN = (size_t)s->P * s->N;
    ssd_layout L;
    L.keep_states = ssd_keep_states();
    L.states = states;
    L.acs = 0;
    L.CB = L.acs + ssd_round(heads * Q);
    L.eA = L.CB + ssd_round(groups * Q * Q);
    L.wR = L.eA + ssd_round(heads * Q);
    L.dtc = L.wR + ssd_round(heads * Q);
    L.S = L.dtc + ssd_round(heads * Q); /* last: the saved buffer ends before it when the states are recomputed */
    L.fwd_total = L.S + ssd_round((heads * PN * m2_act_bytes(states) + sizeof(float) - 1) / sizeof(float));
    L.saved_total = L.keep_states ? L.fwd_total : L.S;
    L.fwd_saved = 0;
    L.dS = L.fwd_saved + L.fwd_total;
    L.fwd_scratch_total = L.dS; /* the chunk states st lie in S (ssd_cuda.cu) */
    L.rMq = L.dS + ssd_round((heads * PN * m2_act_bytes(states) + sizeof(float) - 1) / sizeof(float));
    L.cMq = L.rMq + ssd_round(heads * Q * ssd_chunk_tiles(s));
    L.pDd = L.cMq + ssd_round(heads * Q * ssd_chunk_tiles(s));
    L.dCBw = L.pDd + ssd_round(heads * ssd_chunk_tiles(s));
    L.pA = L.dCBw + ssd_round(groups * Q * Q);
    L.pD = L.pA + ssd_round(heads);
    L.rOff = L.pD + ssd_round(heads);
    L.rSt = L.rOff + ssd_round(heads * Q * ssd_state_tiles(s));
    L.pSd = L.rSt + ssd_round(heads * Q * ssd_head_tiles(s));
    L.scratch_total = L.pSd + ssd_round(heads * (size_t)ssd_state_warps(s->P, s->N));
    return L;
}

/* w times 4 values of a 16-byte load (an operand row scaled by a decay table entry, as its scalar reads do). */
__device__ __forceinline__ m2_vec<4> ssd_scaled4(float w, m2_vec<4> r)
{
#pragma unroll
    for (int c = 0; c < 4; c++) r.v[c] = w * r.v[c];
    return r;
}

/* The decays between the positions of a tile's own rows [i0, i1) (tile_gemm.cuh, shared_floats), for the products
 * whose reduction runs over those positions too (the outputs, dx): tab[l - i0][j - i0] = e^{a_l-a_j} dt_j for
 * i0 <= j <= l < i1 and 0 elsewhere (the causal mask), the exact decay of each element, formed once per block
 * instead of once per operand element and k step. acs, dtc: the head's cumsums and contiguous dt. */
enum { SSD_OWN_FLOATS = m2tile::BM * m2tile::BM };
__device__ __forceinline__ const float *ssd_own_decays(const float *acs, const float *dtc, int i0, int i1, float *tab)
{
#pragma unroll 4
    for (int e = threadIdx.x; e < SSD_OWN_FLOATS; e += m2tile::THREADS) {
        const int li = e / m2tile::BM, lj = e % m2tile::BM, l = i0 + li, j = i0 + lj;
        tab[e] = lj <= li && l < i1 ? expf(fminf(acs[l] - acs[j], 0.0f)) * dtc[j] : 0.0f;
    }
    return tab;
}

/* The k factors of the outputs' and dx's row_scaled chunk views (ssd_cuda.cu past_view: e^{a_r-a_j} dt_j for the
 * positions j before the tile's rows; ssd_cuda_bwd.cu later_view: e^{a_k-a_r} for the positions k after them), in a
 * table of the block's own formed once per block (ssd_k_factors): their 16-byte loads read a factor from it instead
 * of an exp per operand row and k step (every factor of a k step was formed by the 16 threads that load its row).
 * The table holds the chunk's positions outside the tile's rows, at most Q - BM, so those ops take their 16-byte
 * kernels only for Q - BM <= SSD_KTAB_FLOATS (their vec4; the scalar gathers form the factors as before, the same
 * expressions: the same operands either way). */
constexpr int SSD_KTAB_FLOATS = 256;
__host__ __device__ constexpr bool ssd_ktab_fits(int Q) { return Q - m2tile::BM <= SSD_KTAB_FLOATS; }
/* tab[k - k0] = f(k) for k in [k0, k1) (the first SSD_KTAB_FLOATS of them), every thread of the block a share */
template <class F> __device__ __forceinline__ const float *ssd_k_factors(int k0, int k1, float *tab, F f)
{
    k1 = min(k1, k0 + SSD_KTAB_FLOATS);
    for (int k = k0 + threadIdx.x; k < k1; k += m2tile::THREADS) tab[k - k0] = f(k);
    return tab;
}

/* A strided matrix view: element (r, c) at p[r*rs + c*cs], of element type E (fp32, or bf16 for the stored token
 * rows: ssd_io), widened to fp32 on every load; T() is the transpose. The tile products' operand views
 * (tile_gemm.cuh, bind) are built from these once per block. */
template <class E> struct ssd_mat_t {
    const E *p;
    size_t rs, cs;
    __device__ float operator()(int r, int c) const { return m2_ld(p + (size_t)r * rs + (size_t)c * cs); }
    __device__ ssd_mat_t T() const { return ssd_mat_t{p, cs, rs}; }
    /* the address of (r, c) */
    __device__ const E *at(int r, int c) const { return p + (size_t)r * rs + (size_t)c * cs; }
    /* (r, c..c+3) in one load (16 bytes of fp32, 8 of bf16), c a multiple of 4, for contiguous aligned rows
     * (ssd_io::vec4) */
    __device__ m2_vec<4> row4(int r, int c) const { return m2_vload<4>(p + (size_t)r * rs + c); }
    /* the same 4 elements in their stored type, for operands that reach the tiles unscaled (tile_gemm.cuh,
     * tile_elem: bf16 rows go to bf16 tiles as they are) */
    __device__ auto raw4(int r, int c) const { return m2_vload_raw<4>(p + (size_t)r * rs + c); }
    /* the same 4 elements as 8 bytes (E bf16 only), for operands moved to bf16 tiles untouched */
    __device__ uint64_t bits4(int r, int c) const { return m2_vload_bits4(p + (size_t)r * rs + c); }
    /* the 4 elements for an operand that reaches the tiles unscaled: bf16 as their 8 bytes (bits4: into bf16 tiles
     * as they are, tile_gemm.cuh stage_rows), fp32 as values */
    __device__ auto moved4(int r, int c) const
    {
        if constexpr (std::is_same<E, __nv_bfloat16>::value)
            return bits4(r, c);
        else
            return row4(r, c);
    }
};
using ssd_mat = ssd_mat_t<float>;

/* The cursors of the views' 16-byte loads (tile_gemm.cuh, a4c / b4c): 4 consecutive elements of a strided row at
 * p, moved on by step elements (dk along k: dk itself where k runs along the row, dk times the row stride where k
 * is the row); get() the load as the views' a4 / b4 / b4k read it: row4 (fp32 values), moved4 (ssd_mat_t::moved4),
 * scaled by a fixed weight (ssd_scaled4). */
template <class E> struct ssd_mat_cursor {
    const E *p;
    size_t step;
    __device__ void next() { p += step; }
    __device__ m2_vec<4> row4() const { return m2_vload<4>(p); }
    __device__ auto moved4() const
    {
        if constexpr (std::is_same<E, __nv_bfloat16>::value)
            return m2_vload_bits4(p);
        else
            return row4();
    }
};
template <class E> __device__ __forceinline__ ssd_mat_cursor<E> ssd_cursor(const E *p, size_t step)
{
    return ssd_mat_cursor<E>{p, step};
}
template <class E> struct ssd_row_cursor : ssd_mat_cursor<E> {
    __device__ m2_vec<4> get() const { return this->row4(); }
};
template <class E> struct ssd_moved_cursor : ssd_mat_cursor<E> {
    __device__ auto get() const { return this->moved4(); }
};
/* w times the 4 elements */
template <class E> struct ssd_scaled_cursor {
    ssd_mat_cursor<E> m;
    float w;
    __device__ void next() { m.next(); }
    __device__ m2_vec<4> get() const { return ssd_scaled4(w, m.row4()); }
};

/* A product whose operands are plain strided matrices: A(i, k), B(k, j), of element types TA and TB. 4-element loads
 * (16 bytes of fp32, 8 of bf16) of A along k: only for the Ops whose A rows are contiguous (a_kfast, cs = 1), each with
 * vec4() (tile_gemm.cuh); of B along j (b4: b_jfast, B's rows contiguous) or along k (b4k: B a matrix of contiguous
 * rows transposed). */
template <class TA, class TB> struct ssd_plain_view {
    ssd_mat_t<TA> A;
    ssd_mat_t<TB> B;
    __device__ float a(int i, int k) const { return A(i, k); }
    __device__ auto a4(int i, int k) const { return A.moved4(i, k); }
    __device__ float b(int k, int j) const { return B(k, j); }
    __device__ auto b4(int k, int j) const { return B.moved4(k, j); }
    __device__ auto b4k(int k, int j) const { return B.T().moved4(j, k); }
};

/* A(i, k) = w[i] M(i, k - k0), B(k, j) = R(k - k0, j) for the k from k0 on: token rows of one head (element type
 * TM) scaled per row (a decay table) times one of the head's [P][N] matrices (element type TR: ssd_cuda_bwd.cu, dC
 * reads the states S and dB reads dSt, both bf16 at bf16 precision), which reaches the tiles unscaled (moved4:
 * bf16 untouched); M's and R's rows contiguous (4-element loads along k and j). */
template <class TM, class TR> struct ssd_scaled_view {
    static constexpr bool a_kfast = true;
    int k0;
    const float *w;
    ssd_mat_t<TM> M;
    ssd_mat_t<TR> R;
    __device__ float a(int i, int k) const { return w[i] * M(i, k - k0); }
    __device__ m2_vec<4> a4(int i, int k) const { return ssd_scaled4(w[i], M.row4(i, k - k0)); }
    __device__ float b(int k, int j) const { return R(k - k0, j); }
    __device__ auto b4(int k, int j) const { return R.moved4(k - k0, j); }
};

/* The heads of a group as the parts of one reduction (tile_gemm.cuh, over_steps), P values of k each: head q's
 * weights w + q*Q, its columns of the token rows M (at q*P) and its matrix R + q*P*N. */
template <class TM, class TR> struct ssd_group_heads {
    int n, P, Q, N;
    const float *w;
    ssd_mat_t<TM> M;
    const TR *R;
    __device__ int parts() const { return n; }
    __device__ int part_len() const { return P; }
    __device__ ssd_scaled_view<TM, TR> part(int q, int k0) const
    {
        return ssd_scaled_view<TM, TR>{k0, w + (size_t)q * Q, ssd_mat_t<TM>{M.p + (size_t)q * P, M.rs, 1},
                                       ssd_mat_t<TR>{R + (size_t)q * P * N, (size_t)N, 1}};
    }
    __device__ void next(ssd_scaled_view<TM, TR> &v) const
    {
        v.k0 += P;
        v.w += Q;
        v.M.p += P;
        v.R.p += P * N;
    }
};

/* The shape, the fp32 inputs and outputs and the work arrays: everything the kernels that read no token rows need,
 * passed by value. */
struct ssd_args {
    int B, T, H, P, G, N, Q, nc, hpg, ld_x, ld_bc;
    const float *dt, *A, *Dsk;
    float *ddt;
    void *S; /* the chunk-start states, of the layout's type (ssd_states_type): S_of; also the chunk states st */
    float *acs, *CB, *eA, *wR, *dtc, *rMq, *cMq, *pDd, *dCBw, *pA, *pD, *rOff, *rSt, *pSd;
    void *dS; /* dSoff, then dSt (ssd_cuda_bwd.cu), of the states' type: dS_of */

    __device__ int chunk_of(int bc) const { return bc % nc; }
    __device__ int len(int bc) const { return min(Q, T - chunk_of(bc) * Q); }
    /* token row of position l of chunk bc */
    __device__ size_t row(int bc, int l) const { return (size_t)(bc / nc) * T + (size_t)chunk_of(bc) * Q + l; }
    __device__ float a_at(int zh, int l) const { return acs[(size_t)zh * Q + l]; }
    __device__ float a_last(int zh) const { return acs[(size_t)zh * Q + Q - 1]; }
    /* exp of a quantity that is <= 0 mathematically (docs/MODEL.md §3) */
    __device__ static float dexp(float d) { return expf(fminf(d, 0.0f)); }
    __device__ float dtv(int bc, int l, int h) const { return dt[row(bc, l) * H + h]; }
    __device__ const float *dt_of(int bc, int h) const { return dt + row(bc, 0) * H + h; } /* stride H */
    /* TS: the states' element type (ssd_states_type) */
    template <class TS> __device__ TS *S_of(int zh) const { return (TS *)S + (size_t)zh * P * N; }
    template <class TS> __device__ TS *dS_of(int zh) const { return (TS *)dS + (size_t)zh * P * N; }
    __device__ float *QQ(float *base, int z) const { return base + (size_t)z * Q * Q; }
    __device__ float *QN(float *base, int z) const { return base + (size_t)z * Q * N; }
};

/* State entries per thread of the state passings (ssd_pass, ssd_pass_bwd): V consecutive entries of one head, moved
 * in 16-byte accesses (8 bf16 or 4 fp32) with one decay factor and one index computation per V entries, where P*N is
 * a multiple of V and the state tensors are 16-byte aligned; else 1 (small test shapes). The fp32 arithmetic per
 * entry is the same either way, so the results are bitwise the same; the host sizes the grids by it. */
template <class TS> __host__ __device__ inline int ssd_pass_width(const ssd_args &s)
{
    constexpr int V = 16 / sizeof(TS);
    return (s.P * s.N) % V == 0 && (uintptr_t)s.S % 16 == 0 && (uintptr_t)s.dS % 16 == 0 ? V : 1;
}

/* ssd_args with the token rows the products read: x, B, C (the conv+SiLU output) and dy (the gated norm's
 * gradient), stored activations of element type TX (ops.h m2_act_type: fp32, or bf16 at model.precision = bf16,
 * docs/MODEL.md §8), widened on every load; and the token rows the products write in TX, each element rounded once
 * from its fp32 sum: y, the forward's output, and the backward's dx, dB, dC (the conv backward's input, which widens
 * them; upstream mamba_ssm's chunk-scan backward also writes them in the inputs' dtype). With bf16 token rows the
 * tensor-core operands are the values the fp32 path would have rounded them to, and every fp32 expression is the
 * same on the widened values, so the results are those of fp32 token rows holding the same values, up to the
 * multiply-adds the compiler fuses differently in the two instantiations (tests/gpu/test_gpu_act.c). */
template <class TX> struct ssd_io : ssd_args {
    const TX *x, *Bm, *Cm, *dy;
    TX *y, *dx, *dBm, *dCm;

    __device__ float xv(int bc, int l, int h, int p) const { return m2_ld(x + row(bc, l) * ld_x + (size_t)h * P + p); }
    __device__ float dyv(int bc, int l, int h, int p) const
    {
        return m2_ld(dy + row(bc, l) * ((size_t)H * P) + (size_t)h * P + p);
    }
    __device__ float Bv(int bc, int l, int g, int n) const
    {
        return m2_ld(Bm + row(bc, l) * ld_bc + (size_t)g * N + n);
    }
    __device__ float Cv(int bc, int l, int g, int n) const
    {
        return m2_ld(Cm + row(bc, l) * ld_bc + (size_t)g * N + n);
    }
    /* one chunk's rows of a head (x, dy: [l][p]) or of a group (B, C: [l][n]) */
    __device__ ssd_mat_t<TX> x_of(int bc, int h) const
    {
        return ssd_mat_t<TX>{x + row(bc, 0) * ld_x + (size_t)h * P, (size_t)ld_x, 1};
    }
    __device__ ssd_mat_t<TX> dy_of(int bc, int h) const
    {
        return ssd_mat_t<TX>{dy + row(bc, 0) * ((size_t)H * P) + (size_t)h * P, (size_t)H * P, 1};
    }
    __device__ ssd_mat_t<TX> B_of(int bc, int g) const
    {
        return ssd_mat_t<TX>{Bm + row(bc, 0) * ld_bc + (size_t)g * N, (size_t)ld_bc, 1};
    }
    __device__ ssd_mat_t<TX> C_of(int bc, int g) const
    {
        return ssd_mat_t<TX>{Cm + row(bc, 0) * ld_bc + (size_t)g * N, (size_t)ld_bc, 1};
    }
    /* (host) Whether every block of every product may load its operands 4 elements at a time (tile_gemm.cuh,
     * vec4): sizes and row strides multiples of 4 elements and the arrays 16-byte aligned, so that every row start,
     * range end and view pointer a block derives from them is aligned for its load (16 bytes of fp32, 8 of bf16; the
     * scratch regions are rounded to 64 floats). */
    bool vec4() const { return m2_vec4_ok({x, Bm, Cm, dy, acs, S, CB, dS, dCBw, dtc}, {T, Q, N, P, ld_x, ld_bc}); }
};

/* Fills the shape and the input pointers; the caller sets the buffers it uses. */
template <class TX>
static inline ssd_io<TX> ssd_io_of(const m2_ssd_shape *s, const TX *x, const float *dt, const float *A, const TX *Bm,
                                   const TX *Cm, const float *Dsk)
{
    ssd_io<TX> a;
    memset(&a, 0, sizeof a);
    a.B = s->B;
    a.T = s->T;
    a.H = s->H;
    a.P = s->P;
    a.G = s->G;
    a.N = s->N;
    a.Q = s->Q;
    a.nc = (s->T + s->Q - 1) / s->Q;
    a.hpg = s->H / s->G;
    a.ld_x = s->ld_x;
    a.ld_bc = s->ld_bc;
    a.x = x;
    a.dt = dt;
    a.A = A;
    a.Bm = Bm;
    a.Cm = Cm;
    a.Dsk = Dsk;
    return a;
}

/* Calls f(a) with the ssd_io of the element type `at` names (ops.h m2_act_type) over the given inputs: the entry
 * points' one dispatch on the token rows' type. */
template <class F>
static void ssd_on_rows(m2_act_type at, const m2_ssd_shape *s, const void *x, const float *dt, const float *A,
                        const void *Bm, const void *Cm, const float *Dsk, F f)
{
    m2_act_dispatch(at, [&](auto tag) {
        using TX = m2_elem_t<decltype(tag)>;
        f(ssd_io_of(s, (const TX *)x, dt, A, (const TX *)Bm, (const TX *)Cm, Dsk));
    });
}

/* Points acs (and S when the states are kept) at the saved buffer and the work arrays at the scratch buffer. */
static inline void ssd_set_buffers(ssd_args *a, const ssd_layout *L, float *saved, float *scratch)
{
    a->acs = saved + L->acs;
    float *S = (L->keep_states ? saved : scratch + L->fwd_saved) + L->S;
    a->S = S;
    a->CB = saved + L->CB;
    a->eA = saved + L->eA;
    a->wR = saved + L->wR;
    a->dtc = saved + L->dtc;
    a->rMq = scratch + L->rMq;
    a->cMq = scratch + L->cMq;
    a->pDd = scratch + L->pDd;
    a->dCBw = scratch + L->dCBw;
    a->dS = scratch + L->dS;
    a->pA = scratch + L->pA;
    a->pD = scratch + L->pD;
    a->rOff = scratch + L->rOff;
    a->rSt = scratch + L->rSt;
    a->pSd = scratch + L->pSd;
}

/* CB[zg] = C B^T over the chunk's positions (both passes need it; the forward's is kept in the saved buffer for the
 * backward). Only s <= l is used (every reader masks s > l), so the tiles wholly above the diagonal are neither
 * computed nor stored; the diagonal tiles are stored whole, because the readers' 16-byte loads of a row group may
 * reach past the diagonal (masked after the load, but the memory they read must have been written:
 * compute-sanitizer's initcheck). */
template <class TX> struct ssd_cb_op {
    ssd_io<TX> s;
    static constexpr bool a_kfast = true, b_jfast = false, lower_tiles = true;
    bool vec4() const { return s.vec4(); }
    __device__ void dims(int zg, int &m, int &n, int &k) const
    {
        m = n = s.len(zg / s.G);
        k = s.N;
    }
    __device__ void krange(int zg, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = j0 > i1 - 1 ? 0 : s.N;
    }
    __device__ ssd_plain_view<TX, TX> bind(int zg) const
    {
        return ssd_plain_view<TX, TX>{s.C_of(zg / s.G, zg % s.G), s.B_of(zg / s.G, zg % s.G).T()};
    }
    __device__ void store(int zg, int l, int j, float acc) const { s.QQ(s.CB, zg)[(size_t)l * s.Q + j] = acc; }
};

template <class TX> static inline void ssd_compute_cb(const m2_cuda_ctx *c, const ssd_io<TX> &a)
{
    m2_tile_gemm(c, ssd_cb_op<TX>{a}, a.B * a.nc * a.G, a.Q, a.Q, "ssd (C B^T)");
}

/* The chunk-start states S of element type L.states (the forward's stages 3 and 4, ssd_cuda.cu), from the cumsums
 * and the decay tables; the backward runs them again when the states are not kept (what = the launches' names,
 * chunk states first). */
template <class TX>
void ssd_compute_states(const m2_cuda_ctx *c, const ssd_io<TX> &a, const ssd_layout &L, const char *const what[2]);
/* dCBw and the per-tile row and column sums of CB.E of every head (ssd_cuda_dcb.cu) */
template <class TX> void ssd_compute_dcb(const m2_cuda_ctx *c, const ssd_io<TX> &a);

#endif
