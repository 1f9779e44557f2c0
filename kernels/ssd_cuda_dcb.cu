/* The chunked SSD's backward, dCB with E kept on chip (definitions in ssd_cuda.cuh, formulas in ssd_cuda_bwd.cu):
 *   E_h[l][s]   = e^{a_l-a_s} (dy_l . x_s)                  per head, s <= l
 *   dCBw[l][s]  = sum over the group's heads (in head order) of E_h[l][s] dt_s,h
 *   Mq_h[l][s]  = CB[l][s] E_h[l][s]: the scalars need, per head, its row sums weighted by dt_s (rMq) and its
 *                 column sums (cMq)
 * One block of 256 threads per 64x64 tile (on or below the diagonal) of a group's [Q][Q]: for each head of the
 * group it forms the tile of dy.x^T (the tensor cores, or the CUDA cores at fp32, as tile_gemm.cuh), then in its
 * epilogue the decayed E, its share of dCBw (kept in registers over the heads), and the row and column sums of Mq
 * reduced from the threads' elements by warp shuffles and one shared-memory step, written as one partial per tile
 * (rMq[zh][l][tn], cMq[zh][s][tm]) that the scalars kernel adds. E itself never reaches memory (BENCHMARKS.md,
 * issue 16d).
 *
 * The decays: below the diagonal (every s of the tile before every l) e^{a_l-a_s} = e^{a_l-a_r} e^{a_r-a_s} with
 * r the tile's last column, both factors <= 1 (a is non-increasing), one exp per row and per column of the tile
 * per head instead of one per element; on the diagonal tiles the exp per element (docs/MODEL.md §3: exponents of
 * quantities <= 0 only). */
#include "ssd_cuda.cuh"

/* The tile geometry of the product (locate, stage: tile_gemm.cuh): entry zg, a tile of [Lc][Lc], k over P. */
struct ssd_dcb_op {
    ssd_args s;
    static constexpr bool a_kfast = true, b_jfast = false, lower_only = true;
    __device__ void dims(int zg, int &m, int &n, int &k) const
    {
        m = n = s.len(zg / s.G);
        k = s.P;
    }
    __device__ void krange(int zg, int i0, int i1, int j0, int j1, int &kb, int &ke) const
    {
        kb = 0;
        ke = s.P;
    }
    /* head h's dy rows times its x rows transposed */
    __device__ ssd_plain_view head(int bc, int h) const { return ssd_plain_view{s.dy_of(bc, h), s.x_of(bc, h).T()}; }
};

namespace ssd_dcb
{
using namespace m2tile;
enum { KB = 64 }; /* the reduction over P in steps of 64: one step when P <= 64 (the kernels without a k loop) */

template <class Prec> constexpr int pad()
{
    if constexpr (std::is_same<Prec, fp32_operands>::value)
        return 4; /* rows of 68 floats, as fp32_tiles */
    else
        return Prec::PAD;
}
template <class Prec> struct smem {
    typedef typename Prec::elem T;
    static constexpr int PAD = pad<Prec>();
    static constexpr int LDA = BM + PAD, LDB = BN + PAD, LDC = BN + CPAD;
    union alignas(32) {
        struct {
            T a[KB * LDA];
            T b[KB * LDB];
        } ab;
        float c[BM * LDC];
    } u;
    float arow[BM], acol[BN], rowf[BM], colf[BN], dtcol[BN]; /* per head: cumsums, decay factors, dt */
    float colbuf[WARPS][BN];                                 /* the warps' column sums */
};

/* The tile of entry t.z's head view v, [kb, ke) of its reduction, accumulated into sm.u.c (complete on return:
 * after a barrier). ONE: a single step (ke - kb <= KB). */
template <class Prec, bool V4, bool ONE, class V>
__device__ __forceinline__ void product(const V &v, const span &t, smem<Prec> &sm)
{
    typedef smem<Prec> S;
    const int tid = threadIdx.x;
    if constexpr (std::is_same<Prec, fp32_operands>::value) {
        const int tx = tid % 16, ty = tid / 16;
        float acc[SUB][SUB] = {};
        for (int k0 = t.kb; k0 < t.ke; k0 += KB) {
            stage<KB, Prec, ssd_dcb_op, V4, false>(v, t, k0, t.ke, sm.u.ab.a, S::LDA, sm.u.ab.b, S::LDB);
            __syncthreads();
            for (int kk = 0; kk < KB; kk++)
#pragma unroll
                for (int r = 0; r < SUB; r++)
#pragma unroll
                    for (int c = 0; c < SUB; c++)
                        acc[r][c] = fmaf(sm.u.ab.a[kk * S::LDA + ty + 16 * r], sm.u.ab.b[kk * S::LDB + tx + 16 * c],
                                         acc[r][c]);
            __syncthreads();
            if (ONE) break;
        }
#pragma unroll
        for (int r = 0; r < SUB; r++)
#pragma unroll
            for (int c = 0; c < SUB; c++) sm.u.c[(ty + 16 * r) * S::LDC + tx + 16 * c] = acc[r][c];
    } else {
        namespace wmma = nvcuda::wmma;
        const int warp = tid / 32, wi = 16 * (warp / 2), wj = 16 * FRAGS * (warp % 2);
        wmma::fragment<wmma::accumulator, 16, 16, Prec::WK, float> acc[FRAGS];
#pragma unroll
        for (int f = 0; f < FRAGS; f++) wmma::fill_fragment(acc[f], 0.0f);
        for (int k0 = t.kb; k0 < t.ke; k0 += KB) {
            stage<KB, Prec, ssd_dcb_op, V4, false>(v, t, k0, t.ke, sm.u.ab.a, S::LDA, sm.u.ab.b, S::LDB);
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < KB; kk += Prec::WK) {
                wmma::fragment<wmma::matrix_a, 16, 16, Prec::WK, typename Prec::frag_type, wmma::col_major> fa;
                wmma::load_matrix_sync(fa, sm.u.ab.a + kk * S::LDA + wi, S::LDA);
#pragma unroll
                for (int f = 0; f < FRAGS; f++) {
                    wmma::fragment<wmma::matrix_b, 16, 16, Prec::WK, typename Prec::frag_type, wmma::row_major> fb;
                    wmma::load_matrix_sync(fb, sm.u.ab.b + kk * S::LDB + wj + 16 * f, S::LDB);
                    wmma::mma_sync(acc[f], fa, fb, acc[f]);
                }
            }
            __syncthreads(); /* every warp is done with the operands before sm.u.c overwrites them */
            if (ONE) break;
        }
#pragma unroll
        for (int f = 0; f < FRAGS; f++)
            wmma::store_matrix_sync(sm.u.c + wi * S::LDC + wj + 16 * f, acc[f], S::LDC, wmma::mem_row_major);
    }
    __syncthreads();
}

template <class Prec, bool V4, bool ONE> __device__ __forceinline__ void tiles(const ssd_dcb_op &op, int tiles_q)
{
    typedef smem<Prec> S;
    __shared__ S sm;
    const ssd_args &s = op.s;
    span t;
    if (!locate(op, tiles_q, tiles_q, t)) return;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16, lane = tid % 32, warp = tid / 32;
    const int bc = t.z / s.G, g = t.z % s.G, tm = t.i0 / BM, tn = t.j0 / BN;
    const bool diag = t.i0 == t.j0; /* else every column of the tile precedes every row */
    const float *CB = s.QQ(s.CB, t.z);
    float cb[SUB][SUB], keep[SUB][SUB];
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int l = t.i0 + ty + 16 * r, si = t.j0 + tx + 16 * c;
            cb[r][c] = stored<ssd_dcb_op>(t, l, si) ? CB[(size_t)l * s.Q + si] : 0.0f; /* 0: no term */
            keep[r][c] = 0.0f;
        }
    for (int q = 0; q < s.hpg; q++) {
        const int h = g * s.hpg + q, zh = bc * s.H + h;
        const float *acs = s.acs + (size_t)zh * s.Q;
        if (tid < BM) { /* read after the product's barriers */
            sm.arow[tid] = acs[min(t.i0 + tid, s.Q - 1)];
            sm.rowf[tid] = ssd_args::dexp(sm.arow[tid] - acs[t.j1 - 1]);
        } else if (tid < BM + BN) {
            const int c = tid - BM, si = min(t.j0 + c, s.Q - 1);
            sm.acol[c] = acs[si];
            sm.colf[c] = ssd_args::dexp(acs[t.j1 - 1] - acs[si]);
            sm.dtcol[c] = s.dtc[(size_t)zh * s.Q + si]; /* 0 past the chunk's end */
        }
        product<Prec, V4, ONE>(op.head(bc, h), t, sm);
        float rp[SUB] = {}, cp[SUB] = {};
#pragma unroll
        for (int r = 0; r < SUB; r++)
#pragma unroll
            for (int c = 0; c < SUB; c++) {
                const int li = ty + 16 * r, sj = tx + 16 * c;
                const float dec = diag ? ssd_args::dexp(sm.arow[li] - sm.acol[sj]) : sm.rowf[li] * sm.colf[sj];
                const float E = dec * sm.u.c[li * S::LDC + sj], Edt = E * sm.dtcol[sj];
                keep[r][c] += Edt;                  /* finite everywhere; only the stored elements are written */
                rp[r] = fmaf(cb[r][c], Edt, rp[r]); /* Mq dt_s */
                cp[c] = fmaf(cb[r][c], E, cp[c]);   /* Mq */
            }
            /* row sums over the tile's 64 columns: the 16 threads of a row are 16 consecutive lanes */
#pragma unroll
        for (int r = 0; r < SUB; r++)
#pragma unroll
            for (int m = 1; m < 16; m <<= 1) rp[r] += __shfl_xor_sync(0xffffffffu, rp[r], m);
                /* column sums over the tile's 64 rows: the two rows of a warp, then the 8 warps through shared memory */
#pragma unroll
        for (int c = 0; c < SUB; c++) cp[c] += __shfl_xor_sync(0xffffffffu, cp[c], 16);
        if (lane < 16)
#pragma unroll
            for (int c = 0; c < SUB; c++) sm.colbuf[warp][tx + 16 * c] = cp[c];
        if (tx == 0)
#pragma unroll
            for (int r = 0; r < SUB; r++) {
                const int l = t.i0 + ty + 16 * r;
                if (l < t.i1) s.rMq[((size_t)zh * s.Q + l) * tiles_q + tn] = rp[r];
            }
        __syncthreads();
        if (tid < BN && t.j0 + tid < t.j1) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) sum += sm.colbuf[w][tid];
            s.cMq[((size_t)zh * s.Q + t.j0 + tid) * tiles_q + tm] = sum;
        }
    }
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int l = t.i0 + ty + 16 * r, si = t.j0 + tx + 16 * c;
            if (stored<ssd_dcb_op>(t, l, si)) s.QQ(s.dCBw, t.z)[(size_t)l * s.Q + si] = keep[r][c];
        }
}
} // namespace ssd_dcb

/* One k step (P <= 64), scalar gathers or 16-byte loads of dy; and the k loop for any P (scalar gathers). Separate
 * names so that each compiled kernel is priced by its own loop (tools/sass_report.py). */
template <class Op, class Prec> __global__ void __launch_bounds__(m2tile::THREADS, 2) ssd_dcb_kernel(Op op, Prec, int n)
{
    ssd_dcb::tiles<Prec, false, true>(op, n);
}
template <class Op, class Prec>
__global__ void __launch_bounds__(m2tile::THREADS, 2) ssd_dcb_v4_kernel(Op op, Prec, int n)
{
    ssd_dcb::tiles<Prec, true, true>(op, n);
}
template <class Op, class Prec>
__global__ void __launch_bounds__(m2tile::THREADS, 2) ssd_dcb_ksteps_kernel(Op op, Prec, int n)
{
    ssd_dcb::tiles<Prec, false, false>(op, n);
}

template <class Prec> static void launch(const m2_cuda_ctx *c, const ssd_dcb_op &op, Prec prec, unsigned blocks, int n)
{
    if (op.s.P > ssd_dcb::KB)
        ssd_dcb_ksteps_kernel<ssd_dcb_op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
    else if (op.s.vec4())
        ssd_dcb_v4_kernel<ssd_dcb_op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
    else
        ssd_dcb_kernel<ssd_dcb_op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
}

void ssd_compute_dcb(const m2_cuda_ctx *c, const ssd_args &a)
{
    const int n = (a.Q + m2tile::BM - 1) / m2tile::BM;
    const long long nblocks = (long long)a.B * a.nc * a.G * n * n;
    if (nblocks <= 0) return;
    if (nblocks > 0x7fffffffLL) m2_cuda_check(cudaErrorInvalidConfiguration, "ssd_bwd (dCB)");
    const ssd_dcb_op op{a};
    switch (c->gemm_prec) {
    case M2_CUDA_GEMM_FP32: launch(c, op, m2tile::fp32_operands(), (unsigned)nblocks, n); break;
    case M2_CUDA_GEMM_TF32: launch(c, op, m2tile::tf32_operands(), (unsigned)nblocks, n); break;
    case M2_CUDA_GEMM_BF16:
    default: launch(c, op, m2tile::bf16_operands(), (unsigned)nblocks, n); break;
    }
    M2_CUDA_LAUNCHED("ssd_bwd (dCB)");
}
