/* A batched, tiled fp32 GEMM whose operands are read through functors, for the SSD's per-chunk products
 * (ssd_cuda*.cu). Each SSD stage is a small matrix product whose operands are gathered from strided token rows
 * and scaled by decays and masks on the fly (C.B^T, masked and decayed, times x; states; their gradients), so the
 * stage only has to say how to read A(i,k) and B(k,j) and where to put C(i,j); the tiling is written once here.
 *
 * One block of 256 threads computes a 64x64 tile of one batch entry's C, walking K in steps of 16 through shared
 * memory; each thread owns a 4x4 sub-tile (rows ty + 16r, columns tx + 16c). fp32 operands, fp32 fma
 * accumulation in a fixed order along k (deterministic). Correctness first: no tensor cores yet.
 *
 * The Op concept (all members __device__ const, batch entry z):
 *   static constexpr bool a_kfast;  A(i,k) is contiguous in memory along k (else along i): picks the load order
 *   static constexpr bool b_jfast;  B(k,j) is contiguous along j (else along k)
 *   void dims(int z, int &m, int &n, int &k)                  this entry's sizes (at most the launch's max_m, max_n)
 *   void krange(int z, int i0, int i1, int j0, int j1, int &kb, int &ke)
 *        [kb, ke) within [0, k): every k where A(i,k) B(k,j) can be non-zero for i in [i0,i1), j in [j0,j1)
 *        (causal masks let a tile skip the k it never needs; kb >= ke means the tile is all zero)
 *   float a(int z, int i, int k), float b(int z, int k, int j)   only called inside the ranges above
 *   void store(int z, int i, int j, float acc)                      called once per (i < m, j < n) */
#ifndef MAMBA2_TILE_GEMM_CUH
#define MAMBA2_TILE_GEMM_CUH

#include "cuda_common.cuh"

namespace m2tile {
enum { BM = 64, BN = 64, BK = 16, THREADS = 256, SUB = 4 };
static_assert(BM * BK == SUB * THREADS && BN * BK == SUB * THREADS, "each thread loads SUB elements per operand");
static_assert(BM == 16 * SUB && BN == 16 * SUB && THREADS == 256, "16x16 threads, SUBxSUB outputs each");
} // namespace m2tile

template <class Op>
__global__ void __launch_bounds__(m2tile::THREADS) m2_tile_gemm_kernel(Op op, int tiles_m, int tiles_n)
{
    using namespace m2tile;
    __shared__ float As[BK][BM + 4]; /* As[k][i] */
    __shared__ float Bs[BK][BN + 4]; /* Bs[k][j] */
    int bid = blockIdx.x;
    const int tn = bid % tiles_n;
    bid /= tiles_n;
    const int tm = bid % tiles_m;
    const int z = bid / tiles_m;
    int m, n, k;
    op.dims(z, m, n, k);
    const int i0 = tm * BM, j0 = tn * BN;
    if (i0 >= m || j0 >= n) return; /* uniform over the block, before any barrier */
    const int i1 = min(m, i0 + BM), j1 = min(n, j0 + BN);
    int kb = 0, ke = k;
    op.krange(z, i0, i1, j0, j1, kb, ke);
    if (kb < 0) kb = 0;
    if (ke > k) ke = k;

    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    float acc[SUB][SUB];
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) acc[r][c] = 0.0f;

    for (int k0 = kb; k0 < ke; k0 += BK) {
#pragma unroll
        for (int q = 0; q < SUB; q++) {
            const int e = tid + THREADS * q;
            const int ai = Op::a_kfast ? e / BK : e % BM, ak = Op::a_kfast ? e % BK : e / BM;
            const int gi = i0 + ai, gka = k0 + ak;
            As[ak][ai] = (gi < i1 && gka < ke) ? op.a(z, gi, gka) : 0.0f;
            const int bj = Op::b_jfast ? e % BN : e / BK, bk = Op::b_jfast ? e / BN : e % BK;
            const int gj = j0 + bj, gkb = k0 + bk;
            Bs[bk][bj] = (gj < j1 && gkb < ke) ? op.b(z, gkb, gj) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float av[SUB], bv[SUB];
#pragma unroll
            for (int r = 0; r < SUB; r++) av[r] = As[kk][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < SUB; c++) bv[c] = Bs[kk][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < SUB; r++)
#pragma unroll
                for (int c = 0; c < SUB; c++) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
            if (i < i1 && j < j1) op.store(z, i, j, acc[r][c]);
        }
}

/* Runs op over nbatch entries whose sizes are at most max_m x max_n. */
template <class Op>
void m2_tile_gemm(cudaStream_t stream, const Op &op, int nbatch, int max_m, int max_n, const char *what)
{
    if (nbatch <= 0 || max_m <= 0 || max_n <= 0) return;
    const int tiles_m = (max_m + m2tile::BM - 1) / m2tile::BM, tiles_n = (max_n + m2tile::BN - 1) / m2tile::BN;
    const long long blocks = (long long)nbatch * tiles_m * tiles_n;
    if (blocks > 0x7fffffffLL) m2_cuda_check(cudaErrorInvalidConfiguration, what);
    m2_tile_gemm_kernel<Op><<<(unsigned)blocks, m2tile::THREADS, 0, stream>>>(op, tiles_m, tiles_n);
    M2_CUDA_LAUNCHED(what);
}

#endif
