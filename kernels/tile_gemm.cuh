/* A batched, tiled GEMM whose operands are read through functors, for the SSD's per-chunk products
 * (ssd_cuda*.cu). Each SSD stage is a small matrix product whose operands are gathered from strided token rows
 * and scaled by decays and masks on the fly (C.B^T, masked and decayed, times x; states; their gradients), so the
 * stage only has to say how to read A(i,k) and B(k,j) and where to put C(i,j); the tiling is written once here.
 *
 * One block of 256 threads computes a 64x64 tile of one batch entry's C. The operands are always gathered and
 * scaled in fp32 by the Op (decays, masks and dt stay fp32, docs/MODEL.md §3); what multiplies them follows the
 * backend's precision switch (m2_cuda_ctx::gemm_prec, ops_cuda.h):
 * - FP32: CUDA cores. K in steps of 16 through shared memory; each thread owns a 4x4 sub-tile (rows ty + 16r,
 *   columns tx + 16c), fp32 fma accumulation in a fixed order along k.
 * - BF16 (the default) and TF32: tensor cores through nvcuda::wmma. K in steps of 32; every gathered fp32
 *   operand is rounded once, when it is stored to shared memory (bf16: round to nearest even; tf32:
 *   wmma::__float_to_tf32), and the 8 warps each multiply a 16x32 strip of C (two 16x16 accumulators, fp32)
 *   with m16n16k16 (bf16) or m16n16k8 (tf32) fragments. Both operands sit in shared memory with k contiguous
 *   (As[i][k], Bs[j][k]: row-major A and column-major B, the layouts the fragments load without transposing
 *   instructions, stage_rows); the fp32 accumulators go through shared memory to the same per-thread
 *   (ty + 16r, tx + 16c) stores as the fp32 path.
 * Both are deterministic: a fixed order of the k steps, no atomics, so a run repeats bitwise on one GPU.
 * wmma rules kept here (and checked by the CPU emulation, tests/gpu/emu/mma.h): every fragment pointer is
 * 32-byte aligned (the shared arrays are aligned to 32 bytes, fragment offsets are multiples of 16 rows of a
 * leading dimension whose row is a multiple of 16 bytes and of 16 (bf16) or 8 (tf32) elements along k) and ldm
 * is a multiple of 8 elements for bf16, 4 for float. Fragments are only touched through
 * fill_fragment / load_matrix_sync (load_shared below: the same load with the shared state space named) / mma_sync /
 * store_matrix_sync, never element by element (the element layout inside a fragment is unspecified; the emulation
 * holds whole tiles, which is exact only under this rule).
 *
 * The Op concept (all members __device__ const, batch entry z):
 *   static constexpr bool a_kfast;  A(i,k) is contiguous in memory along k (else along i): picks the load order
 *   static constexpr bool b_jfast;  B(k,j) is contiguous along j (else along k)
 *   void dims(int z, int &m, int &n, int &k)                  this entry's sizes (at most the launch's max_m, max_n)
 *   void krange(int z, int i0, int i1, int j0, int j1, int &kb, int &ke)
 *        [kb, ke) within [0, k): every k where A(i,k) B(k,j) can be non-zero for i in [i0,i1), j in [j0,j1)
 *        (causal masks let a tile skip the k it never needs; kb >= ke means the tile is all zero)
 *   float a(int z, int i, int k), float b(int z, int k, int j)   only called inside the ranges above
 *   void store(int z, int i, int j, float acc)                      called once per (i < m, j < n) (j <= i: below)
 * and optionally
 *   V bind(int z)        a view of entry z with a(i,k) and b(k,j): the indices and base pointers that are the same
 *                        for the whole block (head, group, chunk, token row) computed once per block, so that the
 *                        per-element reads carry no division (BENCHMARKS.md, "Predicted GPU step")
 *   static constexpr bool lower_only;  C(i, j) for j > i is never read by anyone: only j <= i is stored (tiles
 *                        wholly above the diagonal are neither computed nor stored)
 *   float row_term(int z, int i, int j, float acc), void row_store(int z, int i, int tn, float sum)
 *                        also the sum over the tile's columns of row_term for each row i, in a fixed order
 *                        (row_sums), handed to row_store with the column tile tn = j0 / BN: a row reduction of the
 *                        result that its reader would otherwise read back from memory (the partials of the tiles are
 *                        added by the reader)
 *   V bind(int z, const span &t)   as bind(z), for views that depend on the block's tile t as well (a decay
 *                        factored at the tile's first or last row, a split at the tile's rows)
 *   static constexpr int shared_floats, V bind(int z, const span &t, float *sh): views that read a table of the
 *                        block's own in shared memory (sh, 16-byte aligned, shared_floats floats), which bind fills
 *                        (called by every thread of the block; the barrier after it is tile_gemm's)
 *   a view with split() and members lo, hi: lo read for k < split() and hi for the k above (k itself unchanged),
 *                        each in its own loop over k, so that each loop holds the code of one kind of operand only
 *                        (a stage whose reduction is a concatenation, e.g. the state entries then the chunk
 *                        positions; or the chunk positions of the tile's own rows and those before). When split() is
 *                        a multiple of the K step and of the tile's start, the k steps are the same as in one loop,
 *                        and so is the result, bitwise. lo and hi may be split again, or parted (parts(),
 *                        part_len(), part(q, k0), next(part): over_steps below); a view may set its own a_kfast
 *                        and b_jfast.
 *                        split_view_hi_first: the same, with hi's loop before lo's.
 *   a view with row_scaled = true, and the Op's float row_scale(int z, const span &t, int i): the products of that
 *                        view's k are accumulated apart and multiplied by row_scale(z, t, i) once, in the epilogue:
 *                        C(i, j) = (sum over the other views) + row_scale(i) (sum over the row_scaled views). A
 *                        decay e^{a_i - a_k} that factors as e^{a_i - a_r} e^{a_r - a_k} (r a row of the tile) then
 *                        costs its k factor on the B operand and its row factor once per output, not an exp per
 *                        operand element (BENCHMARKS.md, issue 16e)
 *   a4(i, k), b4(k, j)   (on a view) 4 elements in one 16-byte load: see stage below
 *   a4c(i, k, dk), b4c(k, j, dk)  (on a view) the same loads as cursors, formed once per loop and stepped by dk
 *                        along k: see vec_cursors below
 *   bool vec4() const    (host) every block of this launch may use the views' a4/b4: m2_tile_gemm then launches the
 *                        kernel built for them (the *_v4_kernel names), else the one built for scalar gathers, so
 *                        each compiled kernel has one k loop per operand kind (tools/sass_report.py prices it)
 *   a view with tapped = true, and the Op's float tap_term(const span &t, int i, int j, float acc) and
 *                        void tap_store(const span &t, int i, float sum): right after that view's loop, the sum over
 *                        the tile's columns of tap_term for each row i, in column order, of the accumulators of the
 *                        view's set (row_scaled or not, before any row_scale), handed to tap_store: a row reduction
 *                        of that view's products alone when its loop is the first of its set (split_view_hi_first
 *                        may order the loops so), formed on chip instead of by a product of its own
 *   a view with then_scaled = true and float then_scale(): right after that view's loop, the accumulators of its set
 *                        (row_scaled or not) are multiplied by then_scale(), a factor uniform over the block: a
 *                        factor common to all of the view's products, taken out of its k loop when its loop is the
 *                        first of its set, so that its operands reach the tiles as they are stored (a bf16 matrix
 *                        moved untouched instead of widened, scaled and rounded per element)
 *   static constexpr bool lower_tiles;  like lower_only for the tiles wholly above the diagonal (neither computed
 *                        nor stored), but the diagonal tiles are stored whole: readers' 16-byte loads may cover
 *                        their upper triangle (masked after the load), so it must be written memory */
#ifndef MAMBA2_TILE_GEMM_CUH
#define MAMBA2_TILE_GEMM_CUH

#include <cuda_bf16.h>
#include <mma.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "cuda_common.cuh"

namespace m2tile
{
enum { BM = 64, BN = 64, BK = 16, THREADS = 256, SUB = 4 };
static_assert(BM * BK == SUB * THREADS && BN * BK == SUB * THREADS, "each thread loads SUB elements per operand");
static_assert(BM == 16 * SUB && BN == 16 * SUB && THREADS == 256, "16x16 threads, SUBxSUB outputs each");

/* tensor-core path: K step, warps, and each warp's share of the 4x4 grid of 16x16 accumulators */
constexpr int TBK = 32, WARPS = THREADS / 32, FRAGS = (BM / 16) * (BN / 16) / WARPS, CPAD = 4;
static_assert(FRAGS == 2 && BN / 16 == 2 * FRAGS, "a warp owns one row of 16 and two columns of 16");

/* A split view (file comment, "a view with split()"): lo read for the k below at, hi from at on. */
template <class Lo, class Hi> struct split_view {
    int at;
    Lo lo;
    Hi hi;
    __device__ int split() const { return at; }
};
/* The same split with hi's loop run before lo's (the k themselves unchanged): a view whose products must reach its
 * accumulators first, e.g. a tapped one (file comment). */
template <class Lo, class Hi> struct split_view_hi_first : split_view<Lo, Hi> {
    static constexpr bool hi_first = true;
};

/* How the operands reach shared memory, per path: the element type and the rounding applied on the way. */
struct fp32_operands {
    typedef float elem;
    __device__ static float round(float v) { return v; }
};
struct bf16_operands {
    typedef __nv_bfloat16 elem;
    typedef __nv_bfloat16 frag_type;
    static constexpr int WK = 16, PAD = 8; /* m16n16k16; rows of 40 bf16 = 80 bytes (ldm a multiple of 8) */
    __device__ static elem round(float v) { return __float2bfloat16(v); }
};
struct tf32_operands {
    typedef float elem;
    typedef nvcuda::wmma::precision::tf32 frag_type;
    static constexpr int WK = 8, PAD = 4; /* m16n16k8; rows of 36 floats = 144 bytes (ldm a multiple of 4) */
    __device__ static elem round(float v) { return nvcuda::wmma::__float_to_tf32(v); }
};

/* An operand element as the tiles of element type T hold it: an fp32 value rounded by R; a bf16 value (a view's raw
 * 4-element load of bf16 token rows, kernels/ssd_cuda.cuh) as it is where the tiles hold bf16 (rounding its fp32
 * value to bf16 gives it back: the same tile, without the widening and the rounding instructions), else rounded
 * from its fp32 value. */
template <class R, class T> __device__ __forceinline__ T tile_elem(float v) { return R::round(v); }
template <class R, class T> __device__ __forceinline__ T tile_elem(__nv_bfloat16 v)
{
    if constexpr (std::is_same<T, __nv_bfloat16>::value)
        return v;
    else
        return R::round(__bfloat162float(v));
}

/* A view's 4-element load as its elements: a bf16 row's 8 bytes (a view's bits4, kernels/ssd_cuda.cuh, for bf16
 * tiles, which take them as they are: stage_rows) as its 4 bf16 for the paths that take elements one by one;
 * anything else as it is. */
template <class W> __device__ __forceinline__ const W &elems4(const W &w) { return w; }
__device__ __forceinline__ m2_bvec<4> elems4(uint64_t u)
{
    m2_bvec<4> b;
    memcpy(&b, &u, sizeof b);
    return b;
}
/* Whether a 4-element load W reaches tiles of element type T as its bytes: bf16 bits into bf16 tiles. */
template <class W, class T> constexpr bool moved_bits()
{
    return std::is_same<W, uint64_t>::value && std::is_same<T, __nv_bfloat16>::value;
}

/* An operand fragment from a tile in shared memory: A row-major (As[i][k]), B column-major (Bs[j][k]), the layouts
 * of stage_rows. wmma::load_matrix_sync takes a generic pointer, and nvcc 13 compiles it, even for a pointer into
 * a __shared__ array, to 4 generic 32-bit loads (LD.E, with 64-bit address arithmetic) per fragment; the same PTX
 * instruction with the .shared state space named is one ldmatrix (LDSM.16.M88.4) per fragment (BENCHMARKS.md,
 * "Fragments loaded from shared memory", 2026-12-03). Only the state space differs, so the fragment holds what
 * load_matrix_sync would put there: the file comment's rule (no code reads a fragment's elements) still holds for
 * the kernels, whose only view of the registers is this one instruction. The CPU emulation (no __CUDA_ARCH__)
 * runs load_matrix_sync itself. "memory": the tile is rewritten between the k steps at the same addresses, so the
 * compiler must neither merge nor move the loads across the stores and barriers around them. The fragment is the
 * one at p + OFF elements, with the offset and the leading dimension LDM constants of the instruction: a kernel that
 * loads several fragments from one base (ssd_cuda_dcb.cu) then names one address register for all of them, so that
 * ptxas forms the lanes' addresses once instead of per load. */
template <int OFF, unsigned LDM, class Use, int K, class P, class L, class T>
__device__ __forceinline__ void load_shared(nvcuda::wmma::fragment<Use, 16, 16, K, P, L> &f, const T *p)
{
#ifdef __CUDA_ARCH__
    namespace wmma = nvcuda::wmma;
    constexpr bool A = std::is_same<Use, wmma::matrix_a>::value, BF = std::is_same<P, __nv_bfloat16>::value;
    static_assert(std::is_same<L, std::conditional_t<A, wmma::row_major, wmma::col_major>>::value &&
                      sizeof(f.x) == 16 && (BF || std::is_same<P, wmma::precision::tf32>::value),
                  "row-major A or column-major B of bf16 m16n16k16 or tf32 m16n16k8: 4 registers");
    unsigned *r = reinterpret_cast<unsigned *>(&f.x[0]);
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
#define M2_WMMA_LDS(OP)                                           \
    asm volatile(OP " {%0, %1, %2, %3}, [%4+%5], %6;"             \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) \
                 : "r"(a), "n"(OFF * (int)sizeof(T)), "n"(LDM)    \
                 : "memory")
    if constexpr (A && BF)
        M2_WMMA_LDS("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16");
    else if constexpr (BF)
        M2_WMMA_LDS("wmma.load.b.sync.aligned.col.m16n16k16.shared.bf16");
    else if constexpr (A)
        M2_WMMA_LDS("wmma.load.a.sync.aligned.row.m16n16k8.shared.tf32");
    else
        M2_WMMA_LDS("wmma.load.b.sync.aligned.col.m16n16k8.shared.tf32");
#undef M2_WMMA_LDS
#else
    nvcuda::wmma::load_matrix_sync(f, p + OFF, LDM);
#endif
}

/* One k step of KB for a warp: its A strip a0 (16 rows) times its FRAGS column strips of B from b0, k steps of WK
 * (KS), fragment FS at 16 FS rows of b0: every fragment at a constant offset from a0 or b0 (load_shared), so that
 * the warp's loads name two address registers, not one per fragment (wmma_tiles, ssd_cuda_dcb.cu) */
template <class Prec, int LDK, class Acc, class T, int... KS, int... FS>
__device__ __forceinline__ void mma_steps(Acc (&acc)[FRAGS], const T *a0, const T *b0,
                                          std::integer_sequence<int, KS...>, std::integer_sequence<int, FS...>)
{
    namespace wmma = nvcuda::wmma;
    const auto step = [&]<int KK>(std::integral_constant<int, KK>) {
        wmma::fragment<wmma::matrix_a, 16, 16, Prec::WK, typename Prec::frag_type, wmma::row_major> fa;
        load_shared<KK, LDK>(fa, a0);
        const auto frag = [&]<int F>(std::integral_constant<int, F>) {
            wmma::fragment<wmma::matrix_b, 16, 16, Prec::WK, typename Prec::frag_type, wmma::col_major> fb;
            load_shared<16 * F * LDK + KK, LDK>(fb, b0);
            wmma::mma_sync(acc[F], fa, fb, acc[F]);
        };
        (frag(std::integral_constant<int, FS>{}), ...);
    };
    (step(std::integral_constant<int, KS * Prec::WK>{}), ...);
}

/* The operand reader of the block's entry: op.bind(z, t) or op.bind(z) where the Op has one, else the Op's own
 * a(z, ...) and b(z, ...). */
template <class Op> struct entry_view {
    const Op &op;
    int z;
    __device__ float a(int i, int k) const { return op.a(z, i, k); }
    __device__ float b(int k, int j) const { return op.b(z, k, j); }
};

template <class Op> constexpr bool lower_only()
{
    if constexpr (requires { Op::lower_only; })
        return Op::lower_only;
    else
        return false;
}
template <class Op> constexpr bool upper_tiles_skipped()
{
    if constexpr (requires { Op::lower_tiles; })
        return Op::lower_tiles || lower_only<Op>();
    else
        return lower_only<Op>();
}

/* One block's tile: batch entry z, rows [i0, i1), columns [j0, j1), reduction range [kb, ke). */
struct span {
    int z, i0, i1, j0, j1, kb, ke;
};
/* The floats of shared memory an Op's views share over the block's k loops (Op::shared_floats; 0 without). */
template <class Op> constexpr int shared_floats()
{
    if constexpr (requires { Op::shared_floats; })
        return Op::shared_floats;
    else
        return 0;
}
template <class Op> __device__ __forceinline__ float *views_shared()
{
    if constexpr (shared_floats<Op>() > 0) {
        alignas(16) __shared__ float tab[shared_floats<Op>()];
        return tab;
    } else {
        return nullptr;
    }
}
template <class Op> __device__ __forceinline__ auto bind(const Op &op, const span &t)
{
    if constexpr (shared_floats<Op>() > 0) { /* every thread fills its share, then every view may read all */
        const auto v = op.bind(t.z, t, views_shared<Op>());
        __syncthreads();
        return v;
    } else if constexpr (requires { op.bind(t.z, t); })
        return op.bind(t.z, t);
    else if constexpr (requires { op.bind(t.z); })
        return op.bind(t.z);
    else
        return entry_view<Op>{op, t.z};
}

/* The block's tile; false when it lies outside its entry (uniform over the block, so the caller may return
 * before any barrier). */
template <class Op> __device__ bool locate(const Op &op, int tiles_m, int tiles_n, span &t)
{
    int bid = blockIdx.x;
    const int tn = bid % tiles_n;
    bid /= tiles_n;
    const int tm = bid % tiles_m;
    t.z = bid / tiles_m;
    int m, n, k;
    op.dims(t.z, m, n, k);
    t.i0 = tm * BM;
    t.j0 = tn * BN;
    if (t.i0 >= m || t.j0 >= n) return false;
    t.i1 = min(m, t.i0 + BM);
    t.j1 = min(n, t.j0 + BN);
    t.kb = 0;
    t.ke = k;
    if (upper_tiles_skipped<Op>() && t.j0 > t.i1 - 1) return false;
    op.krange(t.z, t.i0, t.i1, t.j0, t.j1, t.kb, t.ke);
    if (t.kb < 0) t.kb = 0;
    if (t.ke > k) t.ke = k;
    return true;
}

/* Whether the block stores C(i, j) (inside the entry, and on or below the diagonal for a lower_only Op). */
template <class Op> __device__ __forceinline__ bool stored(const span &t, int i, int j)
{
    return i < t.i1 && j < t.j1 && (!lower_only<Op>() || j <= i);
}

/* 16-byte operand loads. A view may offer a4(i, k) (4 consecutive elements of A along its contiguous dimension:
 * k..k+3 when a_kfast, else i..i+3), b4(k, j) (B(k, j..j+3), b_jfast only) and b4k(k, j) (B(k..k+3, j), for an Op
 * without b_jfast: B contiguous along k, e.g. a matrix of token rows transposed). The kernels built for them
 * (V4 below) use every one offered; they are launched only when the Op's host-side vec4() says that for every block
 * the views' pointers and strides allow them and the block's ranges [kb, ke) and [i0, i1), [j0, j1) start and end
 * on multiples of 4, so that a group of 4 is wholly inside or wholly outside. */
template <class Op, class V> constexpr bool has_a4()
{
    return requires(const V &v) { v.a4(0, 0); };
}
template <class Op, class V> constexpr bool b_jfast();
template <class Op, class V> constexpr bool has_b4()
{
    if constexpr (b_jfast<Op, V>()) return requires(const V &v)
        {
            v.b4(0, 0);
        };
    else
        return requires(const V &v) { v.b4k(0, 0); };
}
/* A view may set its own a_kfast and b_jfast (a split Op whose parts read A or B in different orders); else the
 * Op's. */
template <class Op, class V> constexpr bool a_kfast()
{
    if constexpr (requires { V::a_kfast; })
        return V::a_kfast;
    else
        return Op::a_kfast;
}
template <class Op, class V> constexpr bool b_jfast()
{
    if constexpr (requires { V::b_jfast; })
        return V::b_jfast;
    else
        return Op::b_jfast;
}
/* Whether a view's products are accumulated apart, to be multiplied by the Op's row_scale (file comment). */
template <class V> constexpr bool row_scaled()
{
    if constexpr (requires { V::row_scaled; })
        return V::row_scaled;
    else
        return false;
}
template <class Op> constexpr bool has_row_scale()
{
    return requires(const Op &op, const span &t) { op.row_scale(0, t, 0); };
}
/* Whether the accumulators of a view's set are handed to the Op's tap_term and tap_store after its loop (file
 * comment). */
template <class V> constexpr bool tapped()
{
    if constexpr (requires { V::tapped; })
        return V::tapped;
    else
        return false;
}
/* Whether a view's set of accumulators is multiplied by its then_scale() after its loop (file comment). */
template <class V> constexpr bool then_scaled()
{
    if constexpr (requires { V::then_scaled; })
        return V::then_scaled;
    else
        return false;
}
/* The accumulators of a view: the row_scaled ones or the others. */
template <class V, class A> __device__ __forceinline__ A &acc_of(A &plain, A &scaled)
{
    if constexpr (row_scaled<V>())
        return scaled;
    else
        return plain;
}
template <class Op> bool vec4_launch(const Op &op)
{
    if constexpr (requires { op.vec4(); })
        return op.vec4();
    else
        return false;
}

/* The CUDA-core path's operands (the tensor cores': stage_k below), k-major for its threads' 4x4 sub-tiles, which
 * read a row of As and of Bs per k without bank conflicts.
 * Gathers A[k0, k0+KB) x [i0, i0+BM) into As[k*lda + i] and B into Bs[k*ldb + j] (zero outside the ranges),
 * rounded by R; consecutive threads take consecutive addresses of the operand's contiguous dimension. With VA
 * (VB) A (B) arrives in 16-byte loads of 4 elements along its contiguous dimension, the same values in the same
 * places: the result is unchanged bitwise, with a quarter of the loads and index arithmetic (BENCHMARKS.md,
 * "Predicted GPU step"). */
template <int KB, class R, class Op, bool VA, bool VB, class V, class T>
__device__ __forceinline__ void stage(const V &v, const span &t, int k0, int ke, T *As, int lda, T *Bs, int ldb)
{
    const int tid = threadIdx.x;
    constexpr bool AK = a_kfast<Op, V>(), BJ = b_jfast<Op, V>();
    auto a1 = [&](int e) {
        const int ai = AK ? e / KB : e % BM, ak = AK ? e % KB : e / BM;
        const int gi = t.i0 + ai, gka = k0 + ak;
        As[ak * lda + ai] = R::round((gi < t.i1 && gka < ke) ? v.a(gi, gka) : 0.0f);
    };
    auto b1 = [&](int e) {
        const int bj = BJ ? e % BN : e / KB, bk = BJ ? e / BN : e % KB;
        const int gj = t.j0 + bj, gkb = k0 + bk;
        Bs[bk * ldb + bj] = R::round((gj < t.j1 && gkb < ke) ? v.b(gkb, gj) : 0.0f);
    };
    if constexpr (!VA && !VB) { /* the scalar gathers of A and B interleaved, as the compiler schedules best */
#pragma unroll
        for (int q = 0; q < BM * KB / THREADS; q++) {
            a1(tid + THREADS * q);
            b1(tid + THREADS * q);
        }
        return;
    }
    if constexpr (VA) {
#pragma unroll
        for (int q = 0; q < BM * KB / (4 * THREADS); q++) {
            const int e = tid + THREADS * q;
            const int ai = AK ? e / (KB / 4) : 4 * (e % (BM / 4));
            const int ak = AK ? 4 * (e % (KB / 4)) : e / (BM / 4);
            const int gi = t.i0 + ai, gka = k0 + ak;
            decltype(v.a4(0, 0)) w{};
            if (gi < t.i1 && gka < ke) w = v.a4(gi, gka);
#pragma unroll
            for (int c = 0; c < 4; c++)
                As[(ak + (AK ? c : 0)) * lda + ai + (AK ? 0 : c)] = tile_elem<R, T>(elems4(w).v[c]);
        }
    } else {
#pragma unroll
        for (int q = 0; q < BM * KB / THREADS; q++) a1(tid + THREADS * q);
    }
    if constexpr (VB && BJ) {
#pragma unroll
        for (int q = 0; q < BN * KB / (4 * THREADS); q++) {
            const int e = tid + THREADS * q, bj = 4 * (e % (BN / 4)), bk = e / (BN / 4);
            const int gj = t.j0 + bj, gkb = k0 + bk;
            decltype(v.b4(0, 0)) w{};
            if (gj < t.j1 && gkb < ke) w = v.b4(gkb, gj);
#pragma unroll
            for (int c = 0; c < 4; c++) Bs[bk * ldb + bj + c] = tile_elem<R, T>(elems4(w).v[c]);
        }
    } else if constexpr (VB) { /* along k: consecutive threads take consecutive groups of 4 of one column j */
#pragma unroll
        for (int q = 0; q < BN * KB / (4 * THREADS); q++) {
            const int e = tid + THREADS * q, bj = e / (KB / 4), bk = 4 * (e % (KB / 4));
            const int gj = t.j0 + bj, gkb = k0 + bk;
            decltype(v.b4k(0, 0)) w{};
            if (gj < t.j1 && gkb < ke) w = v.b4k(gkb, gj);
#pragma unroll
            for (int c = 0; c < 4; c++) Bs[(bk + c) * ldb + bj] = tile_elem<R, T>(elems4(w).v[c]);
        }
    } else {
#pragma unroll
        for (int q = 0; q < BN * KB / THREADS; q++) b1(tid + THREADS * q);
    }
}

/* A parted view (parts(), part_len(), part(q, k0): the view of part q, whose first k is k0, next(part): part q + 1
 * from part q; e.g. one part per head of a group, each with its own rows) is run part by part, part q over
 * [base + q * part_len, base + (q + 1) * part_len), so that a part's operands are located once per part, not per
 * element; parts() >= 1. The view of a k step (step_view_t): a parted view's part, any other view itself. */
template <class V> constexpr bool parted()
{
    return requires(const V &v) { v.parts(); };
}
template <class V> __device__ auto step_view_of(const V &v)
{
    if constexpr (parted<V>())
        return v.part(0, 0);
    else
        return v;
}
template <class V> using step_view_t = decltype(step_view_of(std::declval<V>()));

/* Where stage_rows's 16-byte loads fall, per thread: VEC_LOADS<ROWS, KB, KFAST> loads q per k step, along r each
 * with a second one (w = 1) at k + 1; load (q, w) reads row r, k (vec_place) of the step's tile.
 * The places are chosen for the stores into the tiles (rows of LDK = 40 bf16 = 20 banks: wmma_tiles), whose bank
 * conflicts ncu measured on an H200 as 28-62% excess shared-memory wavefronts in the SSD's tile kernels
 * (BENCHMARKS.md, "The first GPU run", 2026-12-04):
 * - KFAST: a row's KB = 32 k are the loads of 8 consecutive lanes; the two rows of a half-warp (one wavefront of
 *   8-byte stores) are rows 4 apart (80 words: the other 16 banks), not adjacent rows (20 words: 4 banks shared,
 *   two wavefronts);
 * - along r: a lane holds 4 rows at a pair of k and stores a pair into each (stage_rows). Row groups 4 rows apart
 *   are 16 banks apart, so a warp whose 32 lanes took 16 row groups at one k pair (the old places) met 4 distinct
 *   banks per store: 8-way conflicts. A warp takes 4 consecutive row groups (16 rows: a whole 32-byte sector of a
 *   bf16 operand per k) at 8 k pairs: 16 distinct banks, 2-way.
 * Which element each lane loads changes; what lands in the tiles, and so every product, does not. */
template <int ROWS, int KB, bool KFAST> constexpr int vec_loads()
{
    return KFAST ? ROWS * KB / (4 * THREADS) : ROWS * KB / (8 * THREADS);
}
template <int ROWS, int KB, bool KFAST> __device__ __forceinline__ void vec_place(int q, int w, int &r, int &k)
{
    const int e = threadIdx.x + THREADS * q;
    if constexpr (KFAST) {
        static_assert(KB == 32 && ROWS % 8 == 0, "8 lanes a row; rows paired 4 apart within each 8");
        const int s = (e / 8) % 8; /* the row's slot among 8: half-warps take rows (0, 4), (1, 5), (2, 6), (3, 7) */
        r = 8 * (e / 64) + (s >> 1) + 4 * (s & 1);
        k = 4 * (e % 8);
    } else {
        static_assert(ROWS % 16 == 0 && KB % 16 == 0, "a warp: 4 row groups by 8 k pairs");
        const int lane = e % 32, warp = e / 32, groups = ROWS / 16; /* warps along r first, then along k */
        r = 4 * (4 * (warp % groups) + lane % 4);
        k = 2 * (8 * (warp / groups) + lane / 4) + w;
    }
}

/* One operand of the tensor-core path into S[r * ld + k] for its rows r in [r0, r0 + ROWS) (A's i, B's j) and the
 * k in [k0, k0 + KB), zero outside [r0, r1) x [k0, ke), rounded by R: k contiguous, the fragments' own layouts
 * (row-major A, column-major B), which load without transposes. KFAST: the operand is contiguous along k in
 * memory. get1(r, k) reads one element; with VEC, get4(q, w, r, k) reads 4 along the contiguous dimension in one
 * 16-byte load (the thread's load (q, w): vec_place): along k they make one store, along r the loads at k and k + 1
 * make 4 stores of a pair each (k is even and ke a multiple of 4 there, so k < ke covers k + 1). Consecutive
 * threads take consecutive addresses of the contiguous dimension. A get4 that gives 4 bf16 as their 8 bytes
 * (moved_bits) puts them in bf16 tiles as they are: along k one 8-byte store, along r each pair assembled from the
 * two loads' halves (a byte permute each, as many instructions as the pair conversions of fp32 operands, without
 * their rounding). */
template <int ROWS, int KB, class R, bool KFAST, bool VEC, class T, class G1, class G4>
__device__ __forceinline__ void stage_rows(int r0, int r1, int k0, int ke, T *S, int ld, G1 get1, G4 get4)
{
    const int tid = threadIdx.x;
    if constexpr (!VEC) {
#pragma unroll
        for (int q = 0; q < ROWS * KB / THREADS; q++) {
            const int e = tid + THREADS * q, r = KFAST ? e / KB : e % ROWS, k = KFAST ? e % KB : e / ROWS;
            const int gr = r0 + r, gk = k0 + k;
            S[r * ld + k] = R::round((gr < r1 && gk < ke) ? get1(gr, gk) : 0.0f);
        }
    } else if constexpr (KFAST) {
        struct alignas(4 * sizeof(T)) pack {
            T v[4];
        };
#pragma unroll
        for (int q = 0; q < vec_loads<ROWS, KB, KFAST>(); q++) {
            int r, k;
            vec_place<ROWS, KB, KFAST>(q, 0, r, k);
            const int gr = r0 + r, gk = k0 + k;
            decltype(get4(0, 0, 0, 0)) w{};
            if (gr < r1 && gk < ke) w = get4(q, 0, gr, gk);
            if constexpr (moved_bits<decltype(w), T>()) {
                *reinterpret_cast<uint64_t *>(&S[r * ld + k]) = w;
            } else {
                pack p;
#pragma unroll
                for (int c = 0; c < 4; c++) p.v[c] = tile_elem<R, T>(elems4(w).v[c]);
                *reinterpret_cast<pack *>(&S[r * ld + k]) = p;
            }
        }
    } else {
        struct alignas(2 * sizeof(T)) pair {
            T v[2];
        };
#pragma unroll
        for (int q = 0; q < vec_loads<ROWS, KB, KFAST>(); q++) {
            int r, k;
            vec_place<ROWS, KB, KFAST>(q, 0, r, k);
            const int gr = r0 + r, gk = k0 + k;
            decltype(get4(0, 0, 0, 0)) w0{}, w1{};
            if (gr < r1 && gk < ke) {
                w0 = get4(q, 0, gr, gk);
                w1 = get4(q, 1, gr, gk + 1);
            }
            if constexpr (moved_bits<decltype(w0), T>()) { /* element c of a load: bits 16c..16c+15 */
#pragma unroll
                for (int c = 0; c < 4; c++) { /* the halves c % 2 of their words c / 2: bytes 0-1 (0x5410) or 2-3 */
                    const unsigned lo = (unsigned)(w0 >> (32 * (c / 2))), hi = (unsigned)(w1 >> (32 * (c / 2)));
                    *reinterpret_cast<unsigned *>(&S[(r + c) * ld + k]) = __byte_perm(lo, hi, c % 2 ? 0x7632 : 0x5410);
                }
            } else {
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    pair p;
                    p.v[0] = tile_elem<R, T>(elems4(w0).v[c]);
                    p.v[1] = tile_elem<R, T>(elems4(w1).v[c]);
                    *reinterpret_cast<pair *>(&S[(r + c) * ld + k]) = p;
                }
            }
        }
    }
}

/* Cursors (a view's a4c(i, k, dk), b4c(k, j, dk)): the 16-byte load of a view at (i, k) as an object that reads it,
 * get(), and moves on by dk along k, next(); its pointers are formed once per loop and then only stepped, instead of
 * the load's address being formed from (i, k) at every k step (64-bit index arithmetic that ptxas left in the loop,
 * with the view's fields reloaded from the kernel's parameters: BENCHMARKS.md, issue 16 outputs). A view offers
 * them for the operands it also reads by a4 / b4 / b4k (the same loads, the same values); tile_gemm uses them in
 * the tensor-core kernels' loops over an unparted view. The cursors of an operand's loads for one thread: at
 * vec_place's rows and k from the loop's first k step k0 (rows past r1 clamped to the last one, never read). */
template <int ROWS, int KB, bool KFAST, class C> struct vec_cursors {
    static constexpr int NQ = vec_loads<ROWS, KB, KFAST>(), W = KFAST ? 1 : 2;
    C c[NQ][W];
    __device__ __forceinline__ void next()
    {
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int w = 0; w < W; w++) c[q][w].next();
    }
};
template <int ROWS, int KB, bool KFAST, class M>
__device__ __forceinline__ auto cursors_at(int r0, int r1, int k0, M make)
{
    vec_cursors<ROWS, KB, KFAST, decltype(make(0, 0))> cs;
#pragma unroll
    for (int q = 0; q < cs.NQ; q++)
#pragma unroll
        for (int w = 0; w < cs.W; w++) {
            int r, k;
            vec_place<ROWS, KB, KFAST>(q, w, r, k);
            cs.c[q][w] = make(min(r0 + r, r1 - 1), k0 + k);
        }
    return cs;
}
struct no_cursors {
    __device__ void next() {}
};
template <class V> constexpr bool has_a4c()
{
    return requires(const V &v) { v.a4c(0, 0, 0); };
}
template <class V> constexpr bool has_b4c()
{
    return requires(const V &v) { v.b4c(0, 0, 0); };
}
/* A step's cursors of both operands (either no_cursors where the view has none or the load is not VEC) */
template <class CA, class CB> struct step_cursors {
    CA a;
    CB b;
    __device__ __forceinline__ void next()
    {
        a.next();
        b.next();
    }
};
/* The cursors of a loop over an unparted view v from k0 on in steps of KB, with the flags of stage (VA, VB) */
template <int KB, class Op, bool VA, bool VB, class V>
__device__ __forceinline__ auto loop_cursors(const V &v, const span &t, int k0)
{
    auto a = [&] {
        if constexpr (VA && !parted<V>() && has_a4c<V>())
            return cursors_at<BM, KB, a_kfast<Op, V>()>(t.i0, t.i1, k0, [&](int i, int k) { return v.a4c(i, k, KB); });
        else
            return no_cursors{};
    }();
    auto b = [&] {
        if constexpr (VB && !parted<V>() && has_b4c<V>())
            return cursors_at<BN, KB, !b_jfast<Op, V>()>(t.j0, t.j1, k0, [&](int j, int k) { return v.b4c(k, j, KB); });
        else
            return no_cursors{};
    }();
    return step_cursors<decltype(a), decltype(b)>{a, b};
}

/* Both operands of the tensor-core path: As[i * ld + k], Bs[j * ld + k] (stage_rows), with the view's 16-byte
 * loads where VA (VB), read through the loop's cursors cur where it has them (loop_cursors), which move on by KB. */
template <int KB, class R, class Op, bool VA, bool VB, class V, class T, class Cur>
__device__ __forceinline__ void stage_k(const V &v, const span &t, int k0, int ke, T *As, T *Bs, int ld, Cur &cur)
{
    constexpr bool CA = !std::is_same<decltype(cur.a), no_cursors>::value;
    constexpr bool CB = !std::is_same<decltype(cur.b), no_cursors>::value;
    stage_rows<BM, KB, R, a_kfast<Op, V>(), VA>(
        t.i0, t.i1, k0, ke, As, ld, [&](int i, int k) { return v.a(i, k); },
        [&](int q, int w, int i, int k) {
            if constexpr (!VA)
                return m2_vec<4>{};
            else if constexpr (CA)
                return cur.a.c[q][w].get();
            else
                return v.a4(i, k);
        });
    stage_rows<BN, KB, R, !b_jfast<Op, V>(), VB>(
        t.j0, t.j1, k0, ke, Bs, ld, [&](int j, int k) { return v.b(k, j); },
        [&](int q, int w, int j, int k) {
            if constexpr (!VB)
                return m2_vec<4>{};
            else if constexpr (CB)
                return cur.b.c[q][w].get();
            else if constexpr (b_jfast<Op, V>())
                return v.b4(k, j);
            else
                return v.b4k(k, j);
        });
    cur.next();
}

/* Runs body(va, vb) with the flags of stage: the 16-byte loads the view offers in a V4 kernel, none otherwise. */
template <bool A, bool B> struct vec_flags {
    static constexpr bool va = A, vb = B;
};
template <class Op, bool V4, class V, class F> __device__ __forceinline__ void with_loads(const V &, F body)
{
    using S = step_view_t<V>;
    if constexpr (V4)
        body(vec_flags<has_a4<Op, S>(), has_b4<Op, S>()>());
    else
        body(vec_flags<false, false>());
}

/* Runs step(view, k0, ke) for the k steps k0 = kb, kb + STEP, ... below ke of a view that starts at k = base, with
 * ke the end of the k the step may read (those at or above it are zero). A parted view's steps (over each part's
 * share of [kb, ke)) are one loop, moving to the next part (next) where a part's steps end: the per-thread setup
 * of the steps' loads and fragment addresses, invariant, stays outside it instead of running again per part
 * (BENCHMARKS.md, issue 16 dC and dB). The same steps as a loop per part, in the same order: the same result. */
template <int STEP, class V, class F>
__device__ __forceinline__ void over_steps(const V &v, int base, int kb, int ke, F step)
{
    if constexpr (parted<V>()) {
        const int len = v.part_len(), n = v.parts();
        auto p = v.part(0, base);
        int q = 0, pe = min(ke, base + len), k0 = max(kb, base);
        for (;;) {
            if (k0 >= pe) { /* this part's steps are done */
                if (++q >= n) break;
                v.next(p);
                base += len;
                pe = min(ke, base + len);
                k0 = max(kb, base);
                continue;
            }
            step(p, k0, pe);
            k0 += STEP;
        }
    } else {
        for (int k0 = kb; k0 < ke; k0 += STEP) step(v, k0, ke);
    }
}

/* Runs acc_k(view, base, kb, ke) for the k in [kb, ke) of a view that starts at k = base: a split view (file
 * comment) as its two halves, any other (parted ones too: over_steps) at once. */
template <class V, class F> __device__ __forceinline__ void over_view(const V &v, int base, int kb, int ke, F acc_k)
{
    if constexpr (requires { v.split(); }) {
        const int at = v.split();
        if constexpr (requires { V::hi_first; }) {
            over_view(v.hi, at, max(kb, at), ke, acc_k);
            over_view(v.lo, base, kb, min(ke, at), acc_k);
        } else {
            over_view(v.lo, base, kb, min(ke, at), acc_k);
            over_view(v.hi, at, max(kb, at), ke, acc_k);
        }
    } else {
        acc_k(v, base, kb, ke);
    }
}

/* Runs acc_k(view, base, kb, ke) over the block's reduction range. */
template <class Op, class F> __device__ __forceinline__ void over_k(const Op &op, const span &t, F acc_k)
{
    over_view(bind(op, t), 0, t.kb, t.ke, acc_k);
}

/* The row sums of an Op with row_store (file comment) over the block's tile c[(i - i0) * ldc + (j - j0)] (shared
 * memory, complete: after a barrier): a warp a row (rows warp, warp + WARPS, ...), its lanes over the columns (j0 +
 * lane, j0 + lane + 32: consecutive words, no bank conflicts, and row_term's own loads of a row's consecutive columns
 * coalesced), then a butterfly over the lanes: a fixed order, so a run repeats bitwise. With one thread a row walking
 * its columns (as tap_sums below) the dC-through-the-state kernel, whose epilogue this is, met 4-way bank conflicts in
 * rows of 68 floats and made a strided load per term with 64 of its 256 threads: L1 at 91% of its peak, 917 us a
 * layer on an H200; this way 34% and 877 us (BENCHMARKS.md, "The first GPU run"). */
template <class Op> __device__ void row_sums(const Op &op, const span &t, const float *c, int ldc)
{
    if constexpr (requires { op.row_store(t.z, 0, 0, 0.0f); }) {
        const int lane = threadIdx.x % 32;
        /* every warp makes BM / WARPS rounds, rows past i1 included (summing nothing): the shuffles' count is the
         * same for the whole block, as the CPU emulation's (a block barrier) needs */
        for (int r = threadIdx.x / 32; r < BM; r += WARPS) {
            const int i = t.i0 + r;
            float sum = 0.0f;
            if (i < t.i1)
                for (int j = t.j0 + lane; j < t.j1; j += 32) sum += op.row_term(t.z, i, j, c[r * ldc + (j - t.j0)]);
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (lane == 0 && i < t.i1) op.row_store(t.z, i, t.j0 / BN, sum);
        }
    }
}

/* The tap of a tapped view (file comment): the row sums of tap_term over the block's tile c[(i - i0) * ldc + (j - j0)]
 * (shared memory, complete: after a barrier), in column order, handed to tap_store. One thread a row: row_sums' warp
 * a row made the dx kernel (the one with a tapped view) slower on an H200, 1730 -> 1840 us a layer, for a reason not
 * yet measured (perhaps its 8 rounds of 5 dependent shuffles, not unrolled: BENCHMARKS.md, "The first GPU run"). */
template <class Op> __device__ void tap_sums(const Op &op, const span &t, const float *c, int ldc)
{
    const int r = threadIdx.x, i = t.i0 + r;
    if (r >= BM || i >= t.i1) return;
    float sum = 0.0f;
    for (int j = t.j0; j < t.j1; j++) sum += op.tap_term(t, i, j, c[r * ldc + (j - t.j0)]);
    op.tap_store(t, i, sum);
}
/* The CUDA-core path's tile for the taps (the tensor cores' reuse their operand tiles' memory). */
constexpr int TAP_LD = BN + 1;
template <class Op> __device__ __forceinline__ float *tap_shared()
{
    __shared__ float tile[BM * TAP_LD];
    return tile;
}
} // namespace m2tile

/* The kernels' bodies, per way of loading the operands (V4: the views' 16-byte loads). */
namespace m2tile
{
template <class Op, bool V4> __device__ __forceinline__ void fp32_tiles(const Op &op, int tiles_m, int tiles_n)
{
    __shared__ float As[BK][BM + 4]; /* As[k][i] */
    __shared__ float Bs[BK][BN + 4]; /* Bs[k][j] */
    span t;
    if (!locate(op, tiles_m, tiles_n, t)) return;

    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    float acc[SUB][SUB], accs[SUB][SUB]; /* accs: the row_scaled views' */
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) acc[r][c] = accs[r][c] = 0.0f;

    over_k(op, t, [&](const auto &v, int base, int kb, int ke) {
        auto &dst = acc_of<std::decay_t<decltype(v)>>(acc, accs);
        with_loads<Op, V4>(v, [&](auto vf) {
            over_steps<BK>(v, base, kb, ke, [&](const auto &sv, int k0, int se) {
                stage<BK, fp32_operands, Op, decltype(vf)::va, decltype(vf)::vb>(sv, t, k0, se, &As[0][0], BM + 4,
                                                                                 &Bs[0][0], BN + 4);
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
                        for (int c = 0; c < SUB; c++) dst[r][c] = fmaf(av[r], bv[c], dst[r][c]);
                }
                __syncthreads();
            });
        });
        if constexpr (then_scaled<std::decay_t<decltype(v)>>()) {
            const float w = v.then_scale();
#pragma unroll
            for (int r = 0; r < SUB; r++)
#pragma unroll
                for (int c = 0; c < SUB; c++) dst[r][c] *= w;
        }
        if constexpr (tapped<std::decay_t<decltype(v)>>()) {
            float *tc = tap_shared<Op>();
#pragma unroll
            for (int r = 0; r < SUB; r++)
#pragma unroll
                for (int c = 0; c < SUB; c++) tc[(ty + 16 * r) * TAP_LD + tx + 16 * c] = dst[r][c];
            __syncthreads();
            tap_sums(op, t, tc, TAP_LD);
            __syncthreads();
        }
    });
    if constexpr (has_row_scale<Op>()) {
#pragma unroll
        for (int r = 0; r < SUB; r++) {
            const int i = t.i0 + ty + 16 * r;
            const float w = i < t.i1 ? op.row_scale(t.z, t, i) : 0.0f;
#pragma unroll
            for (int c = 0; c < SUB; c++) acc[r][c] = fmaf(w, accs[r][c], acc[r][c]);
        }
    }
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int i = t.i0 + ty + 16 * r, j = t.j0 + tx + 16 * c;
            if (stored<Op>(t, i, j)) op.store(t.z, i, j, acc[r][c]);
        }
    if constexpr (requires { op.row_store(t.z, 0, 0, 0.0f); }) {
        __shared__ float Cs[BM][BN + 1];
#pragma unroll
        for (int r = 0; r < SUB; r++)
#pragma unroll
            for (int c = 0; c < SUB; c++) Cs[ty + 16 * r][tx + 16 * c] = acc[r][c];
        __syncthreads();
        row_sums(op, t, &Cs[0][0], BN + 1);
    }
}
} // namespace m2tile

/* FP32: CUDA cores (the reference path: the GPU tests compare it with the CPU at fp32 tolerances); the _v4 kernel
 * with the views' 16-byte loads, launched when the Op's vec4() allows them. */
template <class Op>
__global__ void __launch_bounds__(m2tile::THREADS) m2_tile_gemm_kernel(Op op, int tiles_m, int tiles_n)
{
    m2tile::fp32_tiles<Op, false>(op, tiles_m, tiles_n);
}
template <class Op>
__global__ void __launch_bounds__(m2tile::THREADS) m2_tile_gemm_v4_kernel(Op op, int tiles_m, int tiles_n)
{
    m2tile::fp32_tiles<Op, true>(op, tiles_m, tiles_n);
}

namespace m2tile
{
template <class Op, class Prec, bool V4>
__device__ __forceinline__ void wmma_tiles(const Op &op, int tiles_m, int tiles_n)
{
    namespace wmma = nvcuda::wmma;
    typedef typename Prec::elem T;
    constexpr int LDK = TBK + Prec::PAD, LDC = BN + CPAD, WK = Prec::WK;
    static_assert(LDK * sizeof(T) % 16 == 0 && LDC * sizeof(float) % 16 == 0, "wmma ldm: a multiple of 16 bytes");
    static_assert(16 * LDK * sizeof(T) % 32 == 0 && WK * sizeof(T) % 32 == 0 && 16 * LDC * sizeof(float) % 32 == 0,
                  "fragment rows start 32-byte aligned");
    /* the operands (As[i][k], Bs[j][k]) while accumulating, then the accumulators (Cs[i][j]) for the stores */
    union alignas(32) smem_t {
        struct {
            T a[BM * LDK];
            T b[BN * LDK];
        } ab;
        float c[BM * LDC];
    };
    static_assert(sizeof(smem_t) <= 48 * 1024, "static shared memory");
    __shared__ smem_t sm;
    span t;
    if (!locate(op, tiles_m, tiles_n, t)) return;

    const int warp = threadIdx.x / 32, wi = 16 * (warp / 2), wj = 16 * FRAGS * (warp % 2);
    wmma::fragment<wmma::accumulator, 16, 16, WK, float> acc[FRAGS], accs[FRAGS];
#pragma unroll
    for (int f = 0; f < FRAGS; f++) wmma::fill_fragment(acc[f], 0.0f);
    if constexpr (has_row_scale<Op>()) {
#pragma unroll
        for (int f = 0; f < FRAGS; f++) wmma::fill_fragment(accs[f], 0.0f);
    }

    over_k(op, t, [&](const auto &v, int base, int kb, int ke) {
        auto &dst = acc_of<std::decay_t<decltype(v)>>(acc, accs);
        with_loads<Op, V4>(v, [&](auto vf) {
            auto cur = loop_cursors<TBK, Op, decltype(vf)::va, decltype(vf)::vb>(v, t, kb);
            over_steps<TBK>(v, base, kb, ke, [&](const auto &sv, int k0, int se) {
                stage_k<TBK, Prec, Op, decltype(vf)::va, decltype(vf)::vb>(sv, t, k0, se, sm.ab.a, sm.ab.b, LDK, cur);
                __syncthreads();
                mma_steps<Prec, LDK>(dst, sm.ab.a + wi * LDK, sm.ab.b + wj * LDK,
                                     std::make_integer_sequence<int, TBK / WK>{},
                                     std::make_integer_sequence<int, FRAGS>{});
                __syncthreads(); /* also: every warp is done with the operands before sm.c overwrites them */
            });
        });
        constexpr bool scale = then_scaled<std::decay_t<decltype(v)>>(), tap = tapped<std::decay_t<decltype(v)>>();
        if constexpr (scale || tap) {
            /* through the free operand tiles: the fragments' elements are only touched by whole-fragment loads and
             * stores (file comment); each thread scales its own (ty + 16r, tx + 16c) elements, then the tap reads
             * the scaled sums */
#pragma unroll
            for (int f = 0; f < FRAGS; f++)
                wmma::store_matrix_sync(sm.c + wi * LDC + wj + 16 * f, dst[f], LDC, wmma::mem_row_major);
            __syncthreads();
            if constexpr (scale) {
                const float w = v.then_scale();
                const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
                for (int r = 0; r < SUB; r++)
#pragma unroll
                    for (int c = 0; c < SUB; c++) sm.c[(ty + 16 * r) * LDC + tx + 16 * c] *= w;
                __syncthreads();
#pragma unroll
                for (int f = 0; f < FRAGS; f++)
                    wmma::load_matrix_sync(dst[f], sm.c + wi * LDC + wj + 16 * f, LDC, wmma::mem_row_major);
            }
            if constexpr (tap) tap_sums(op, t, sm.c, LDC);
            __syncthreads(); /* before the next loop's operands overwrite sm.c */
        }
    });
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float scaled[SUB][SUB]; /* the row_scaled views' sums times row_scale, at this thread's elements */
    if constexpr (has_row_scale<Op>()) {
#pragma unroll
        for (int f = 0; f < FRAGS; f++)
            wmma::store_matrix_sync(sm.c + wi * LDC + wj + 16 * f, accs[f], LDC, wmma::mem_row_major);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < SUB; r++) {
            const int i = t.i0 + ty + 16 * r;
            const float w = i < t.i1 ? op.row_scale(t.z, t, i) : 0.0f;
#pragma unroll
            for (int c = 0; c < SUB; c++) scaled[r][c] = w * sm.c[(ty + 16 * r) * LDC + tx + 16 * c];
        }
        __syncthreads();
    }
#pragma unroll
    for (int f = 0; f < FRAGS; f++)
        wmma::store_matrix_sync(sm.c + wi * LDC + wj + 16 * f, acc[f], LDC, wmma::mem_row_major);
    __syncthreads();
    if constexpr (has_row_scale<Op>()) { /* each thread its own elements (those it stores below), then for row_sums */
#pragma unroll
        for (int r = 0; r < SUB; r++)
#pragma unroll
            for (int c = 0; c < SUB; c++) sm.c[(ty + 16 * r) * LDC + tx + 16 * c] += scaled[r][c];
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int i = t.i0 + ty + 16 * r, j = t.j0 + tx + 16 * c;
            if (stored<Op>(t, i, j)) op.store(t.z, i, j, sm.c[(ty + 16 * r) * LDC + tx + 16 * c]);
        }
    row_sums(op, t, sm.c, LDC);
}
} // namespace m2tile

/* BF16 / TF32: tensor cores (Prec: m2tile::bf16_operands or tf32_operands, passed as a value so that the launch
 * names one template argument, as tests/gpu/emu/transform.cmake expects). At least 2 blocks per SM: at most 128
 * registers per thread (the operand views would otherwise take up to 163 and leave one block per SM). The _v4
 * kernel: with the views' 16-byte loads. */
template <class Op, class Prec>
__global__ void __launch_bounds__(m2tile::THREADS, 2) m2_tile_gemm_wmma_kernel(Op op, Prec, int tiles_m, int tiles_n)
{
    m2tile::wmma_tiles<Op, Prec, false>(op, tiles_m, tiles_n);
}
template <class Op, class Prec>
__global__ void __launch_bounds__(m2tile::THREADS, 2) m2_tile_gemm_wmma_v4_kernel(Op op, Prec, int tiles_m, int tiles_n)
{
    m2tile::wmma_tiles<Op, Prec, true>(op, tiles_m, tiles_n);
}

/* Launches the kernel of Prec (fp32_operands: CUDA cores), with 16-byte loads when v4 (only Ops with vec4()). */
template <class Op, class Prec>
void m2_tile_launch(const m2_cuda_ctx *c, const Op &op, Prec prec, bool v4, unsigned blocks, int tiles_m, int tiles_n)
{
    if constexpr (std::is_same<Prec, m2tile::fp32_operands>::value) {
        if constexpr (requires { op.vec4(); })
            if (v4) {
                m2_tile_gemm_v4_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, tiles_m, tiles_n);
                return;
            }
        m2_tile_gemm_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, tiles_m, tiles_n);
    } else {
        if constexpr (requires { op.vec4(); })
            if (v4) {
                m2_tile_gemm_wmma_v4_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, tiles_m, tiles_n);
                return;
            }
        m2_tile_gemm_wmma_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, tiles_m, tiles_n);
    }
}

/* Runs op over nbatch entries whose sizes are at most max_m x max_n, on c's stream, at c's precision. */
template <class Op>
void m2_tile_gemm(const m2_cuda_ctx *c, const Op &op, int nbatch, int max_m, int max_n, const char *what)
{
    if (nbatch <= 0 || max_m <= 0 || max_n <= 0) return;
    const int tiles_m = (max_m + m2tile::BM - 1) / m2tile::BM, tiles_n = (max_n + m2tile::BN - 1) / m2tile::BN;
    const long long nblocks = (long long)nbatch * tiles_m * tiles_n;
    if (nblocks > 0x7fffffffLL) m2_cuda_check(cudaErrorInvalidConfiguration, what);
    const unsigned blocks = (unsigned)nblocks;
    const bool v4 = m2tile::vec4_launch(op);
    switch (c->gemm_prec) {
    case M2_CUDA_GEMM_FP32: m2_tile_launch(c, op, m2tile::fp32_operands(), v4, blocks, tiles_m, tiles_n); break;
    case M2_CUDA_GEMM_TF32: m2_tile_launch(c, op, m2tile::tf32_operands(), v4, blocks, tiles_m, tiles_n); break;
    case M2_CUDA_GEMM_BF16:
    default: m2_tile_launch(c, op, m2tile::bf16_operands(), v4, blocks, tiles_m, tiles_n); break;
    }
    M2_CUDA_LAUNCHED(what);
}

#endif
