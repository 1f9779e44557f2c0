/* The chunked SSD's backward, dCB with E kept on chip (definitions in ssd_cuda.cuh, formulas in ssd_cuda_bwd.cu):
 *   E_h[l][s]   = e^{a_l-a_s} (dy_l . x_s)                  per head, s <= l
 *   dCBw[l][s]  = sum over the group's heads (in head order) of E_h[l][s] dt_s,h
 *   Mq_h[l][s]  = CB[l][s] E_h[l][s]: the scalars need, per head, its row sums weighted by dt_s (rMq) and its
 *                 column sums (cMq)
 * One block of 256 threads per 64x64 tile (on or below the diagonal) of a group's [Q][Q]: for each head of the
 * group it forms the tile of dy.x^T (the tensor cores, or the CUDA cores at fp32, as tile_gemm.cuh), then in its
 * epilogue the decayed E, its share of dCBw (kept in registers over the heads), and the row and column sums of Mq
 * reduced from the threads' elements by warp shuffles and one shared-memory step, written as one partial per tile
 * (rMq[zh][l][tn], cMq[zh][s][tm]) that the scalars kernel adds; the diagonal tiles also sum dy.x for dD (pDd[zh][tm],
 * load_step, or the product tile's diagonal at bf16 rows: dd_from_tile). E itself never reaches memory (BENCHMARKS.md,
 * issue 16d).
 *
 * The decays without an exp per element (docs/MODEL.md §3: exponents of quantities <= 0 only): for row l in the
 * tile's row block r (16 rows from i0 + 16r) and a column s before that block starts (every column of a tile below
 * the diagonal; the columns of the earlier blocks on a diagonal tile), e^{a_l-a_s} = e^{a_l-a_{i0+16r}}
 * e^{a_{i0+16r}-a_s}, both factors <= 1 (a is non-increasing): per head 64 row factors and 4 x 64 column factors
 * per tile, one exp per thread. The elements of the tile's four diagonal 16x16 blocks (the diagonal of a diagonal
 * tile among them) take the exp per element, the same expression as the CPU's.
 *
 * What a head costs besides its products and its epilogue's arithmetic is kept small (issue 16: the kernel is
 * predicted issue-bound, bench/gpu_roof.c): everything the same for every head (positions, clamps, masks, table
 * offsets) is formed once per block and per head only base pointers move; one load per thread stages the head's
 * cumsums and dt in shared memory, from which the factors are formed; at bf16 the operand tiles keep their masked
 * entries zero from the first head on (load_rows), the fragments are loaded and stored at constant offsets
 * (load_shared's constant offsets, store_at), and the per-thread decay tables are read 16 bytes at a time. None of this changes an fp32
 * expression or the order of a sum: the results are bitwise those of the plain form. */
#include "ssd_cuda.cuh"


/* The tile geometry of the product (locate, stage: tile_gemm.cuh): entry zg, a tile of [Lc][Lc], k over P. */
template <class TX> struct ssd_dcb_op {
    ssd_io<TX> s;
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
    /* head h's dy rows times its x rows transposed; the group's next heads are P columns on in both */
    typedef ssd_plain_view<TX, TX> view;
    __device__ view head(int bc, int h) const { return view{s.dy_of(bc, h), s.x_of(bc, h).T()}; }
    __device__ static view next(view v, int P)
    {
        v.A.p += P;
        v.B.p += P;
        return v;
    }
};

namespace ssd_dcb
{
using namespace m2tile;
/* The reduction over P in steps of KB: one step when P <= KB (the kernels without a k loop). 64 with bf16
 * operands; 32 with fp32 ones (tf32, CUDA cores: chosen when CB's tile also sat in shared memory, which it no
 * longer does; 64 would fit now, but those are the reference paths, not the production one). */
template <class Prec> constexpr int kb() { return std::is_same<typename Prec::elem, float>::value ? 32 : 64; }
template <class Prec> constexpr int pad()
{
    if constexpr (std::is_same<Prec, fp32_operands>::value)
        return 4; /* rows of 68 floats, as fp32_tiles */
    else
        return Prec::PAD;
}
/* Four floats that one 16-byte shared-memory load reads (the epilogue's per-thread decay values, below). */
struct alignas(16) quad {
    float v[4];
};
template <class Prec> struct smem {
    typedef typename Prec::elem T;
    /* dy's rows a[i][k] (row-major A) and x's rows b[j][k] (column-major B): a 16-byte load is 4 consecutive
     * elements of one row in both */
    static constexpr int KB = kb<Prec>(), LDK = KB + pad<Prec>(), LDC = BN + CPAD;
    /* The operand tiles and the product's tile: apart at bf16 (36 KB, the shared memory that the fp32 path's wider
     * tiles would exceed), so that the product's tile may be stored while other warps still read the operands, and
     * the operands' entries that no head writes (load_rows) stay zero; else overlaid. */
    static constexpr bool APART = std::is_same<Prec, bf16_operands>::value;
    struct ab_t {
        T a[BM * LDK];
        T b[BN * LDK];
    };
    struct apart_t {
        ab_t ab;
        float c[BM * LDC];
    };
    union together_t {
        ab_t ab;
        float c[BM * LDC];
    };
    alignas(32) std::conditional_t<APART, apart_t, together_t> u;
    /* per head: the decays (file comment) e^{a_l - a_{i0+16r}} of each row l in row block r and
     * e^{a_{i0+16r} - a_s} of each column s per row block r; the cumsums of the tile's rows and columns (for the
     * exact decays of the diagonal 16x16 blocks, and the factors' exponents) and dt per column, copied from
     * memory (stage: arow, acol, dtcol in that order). Laid out for the epilogue's threads: the values of rows
     * ty + 16r (r = 0..3) at [ty], of columns tx + 16c at [tx] (colw: [r][tx], c = 0..3), each thread's four in
     * one 16-byte load instead of four, the 16 lanes' loads of one table consecutive (no bank conflict), and the
     * tables read at [tx] at constant offsets from one address. */
    quad rowf[16], stage[3][16], colw[BM / 16][16];
    float colbuf[WARPS][BN + 1]; /* the warps' column sums, and at [BN] their dy.x sums (diagonal tiles) */
};
static_assert(sizeof(smem<bf16_operands>) <= 48 * 1024 && sizeof(smem<tf32_operands>) <= 48 * 1024 &&
                  sizeof(smem<fp32_operands>) <= 48 * 1024,
              "static shared memory");

/* Whether dD's sum dy.x is read off the diagonal of the product's tile (dd_of below) instead of formed by load_step:
 * with bf16 token rows and bf16 tiles the operands are dy and x exactly, their products exact in the tensor cores'
 * fp32 accumulation, so the tile's diagonal on a diagonal tile is that sum over the tile's rows, formed in fp32 (in
 * another order), and load_step hands the rows to the tiles as they are (no widening, no rounding). Elsewhere the
 * tiles hold rounded operands (tf32, or fp32 rows at bf16), and load_step sums the fp32 values. */
template <class Prec, class V> constexpr bool dd_from_tile()
{
    return std::is_same<typename Prec::elem, __nv_bfloat16>::value &&
           std::is_same<std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<V>().A.p)>>, __nv_bfloat16>::value;
}

/* Loads [k0, k0 + KB) of the head's dy rows i0.. and x rows j0.. (zero outside the ranges; W = 4: 16-byte loads),
 * rounded by Prec. Thread e of a step takes row e / (KB / W) of both, at the same k: on a diagonal tile (i0 = j0) it
 * holds dy_l[p] and x_l[p] of the same (l, p) in fp32, and adds their product to dd (dD = sum dy.x, formed in fp32
 * on the way: docs/MODEL.md §3), so that no other kernel reads dy and x for it (the caller keeps the diagonal
 * tiles' dd only), unless dd_from_tile. */
template <class Prec, int W, class V>
__device__ __forceinline__ void load_step(const V &v, const span &t, int k0, int ke, smem<Prec> &sm, float &dd)
{
    typedef smem<Prec> S;
    constexpr int PER = S::KB / W;
    const auto X = v.B.T();
#pragma unroll
    for (int q = 0; q < BM * S::KB / (W * THREADS); q++) {
        const int e = threadIdx.x + THREADS * q, i = e / PER, k = W * (e % PER), gk = k0 + k;
        if constexpr (W == 4 && dd_from_tile<Prec, V>()) { /* bf16 rows to bf16 tiles: 8 bytes in, 8 bytes out */
            uint64_t wa = 0, wb = 0;                       /* 4 elements as 8 bytes (m2_vload_bits4) */
            if (t.i0 + i < t.i1 && gk < ke) wa = v.A.bits4(t.i0 + i, gk);
            if (t.j0 + i < t.j1 && gk < ke) wb = X.bits4(t.j0 + i, gk);
            *reinterpret_cast<uint64_t *>(&sm.u.ab.a[i * S::LDK + k]) = wa;
            *reinterpret_cast<uint64_t *>(&sm.u.ab.b[i * S::LDK + k]) = wb;
        } else {
            m2_vec<W> wa, wb;
#pragma unroll
            for (int c = 0; c < W; c++) wa.v[c] = wb.v[c] = 0.0f;
            if constexpr (W == 4) {
                if (t.i0 + i < t.i1 && gk < ke) wa = v.A.row4(t.i0 + i, gk);
                if (t.j0 + i < t.j1 && gk < ke) wb = X.row4(t.j0 + i, gk);
            } else {
                if (t.i0 + i < t.i1 && gk < ke) wa.v[0] = v.A(t.i0 + i, gk);
                if (t.j0 + i < t.j1 && gk < ke) wb.v[0] = X(t.j0 + i, gk);
            }
            /* W elements of a row in one shared-memory store each; dd on every tile (no code path of its own: only
             * a diagonal tile's is used) */
            struct alignas(sizeof(typename S::T) * W) pack {
                typename S::T v[W];
            } pa, pb;
#pragma unroll
            for (int c = 0; c < W; c++) {
                if constexpr (!dd_from_tile<Prec, V>()) dd = fmaf(wa.v[c], wb.v[c], dd);
                pa.v[c] = Prec::round(wa.v[c]);
                pb.v[c] = Prec::round(wb.v[c]);
            }
            *reinterpret_cast<pack *>(&sm.u.ab.a[i * S::LDK + k]) = pa;
            *reinterpret_cast<pack *>(&sm.u.ab.b[i * S::LDK + k]) = pb;
        }
    }
}

/* store_matrix_sync (row-major, to shared memory) of an accumulator at base + OFF, offset and ldm constants of the
 * instruction as in load_shared (tile_gemm.cuh); the emulation runs store_matrix_sync. */
template <int OFF, unsigned LDM, int K>
__device__ __forceinline__ void store_at(float *base,
                                         const nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, K, float> &f)
{
#ifdef __CUDA_ARCH__
    static_assert((K == 16 || K == 8) && sizeof(f.x) == 32, "m16n16k16 or m16n16k8 fp32 accumulators: 8 registers");
    const unsigned a = (unsigned)__cvta_generic_to_shared(base);
    const float *x = &f.x[0];
#define M2_DCB_STS(SHAPE)                                                                                             \
    asm volatile("wmma.store.d.sync.aligned.row." SHAPE ".shared.f32 [%0+%1], {%2, %3, %4, %5, %6, %7, %8, %9}, %10;" \
                 :                                                                                                    \
                 : "r"(a), "n"(OFF * 4), "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "f"(x[4]), "f"(x[5]), "f"(x[6]), \
                   "f"(x[7]), "n"(LDM)                                                                                \
                 : "memory")
    if constexpr (K == 16)
        M2_DCB_STS("m16n16k16");
    else
        M2_DCB_STS("m16n16k8");
#undef M2_DCB_STS
#else
    nvcuda::wmma::store_matrix_sync(base + OFF, f, LDM, nvcuda::wmma::mem_row_major);
#endif
}

/* Whether the operands' masked entries are zeroed once and left (load_rows): one k step, bf16 rows to bf16 tiles
 * with 8-byte loads, tiles apart from the product's. */
template <class Prec, bool V4, bool ONE, class V> constexpr bool keep_zeros()
{
    return ONE && V4 && dd_from_tile<Prec, V>() && smem<Prec>::APART;
}

/* The rows that load_rows moves for this thread, the same for every head of the block: row tid / 4 of the tile
 * in dy (a) and in x (b), its 4-element chunks 4 (tid % 4) + 16 q, q = 0..3. */
template <class T, class TX> struct rows_at {
    const TX *pa, *pb; /* the first chunk in the head's dy and x (rows past the end: the last row's); the caller
                        * moves them on to the next head's */
    T *da, *db;        /* where it goes in the tiles (rows past the end: a scratch row of the product's tile) */
    int kl;            /* chunk q is inside the reduction (k < P) when 16 q < kl */
};
template <class Prec, class V>
using rows_of = rows_at<typename Prec::elem, std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<V>().A.p)>>>;
template <class Prec, class V>
__device__ __forceinline__ rows_of<Prec, V> rows_index(const V &v, const span &t, smem<Prec> &sm)
{
    typedef smem<Prec> S;
    const int i = threadIdx.x / 4, k = 4 * (threadIdx.x % 4), la = t.i0 + i, lb = t.j0 + i;
    const auto X = v.B.T();
    /* the product's tile as two [BM][KB] scratch tiles (16 KB of its 17): written here before the barrier that
     * precedes the product's stores, which overwrite every entry anyone reads; each thread its own entries, as in
     * the operand tiles, so that no two threads write one address */
    typedef typename Prec::elem T;
    T *scratch = reinterpret_cast<T *>(sm.u.c);
    static_assert(2 * BM * S::KB * sizeof(T) <= sizeof(sm.u.c), "the scratch rows fit in the product's tile");
    return rows_of<Prec, V>{v.A.p + (size_t)min(la, t.i1 - 1) * v.A.rs + k, X.p + (size_t)min(lb, t.j1 - 1) * X.rs + k,
                            la < t.i1 ? sm.u.ab.a + i * S::LDK + k : scratch + i * S::KB + k,
                            lb < t.j1 ? sm.u.ab.b + i * S::LDK + k : scratch + (BM + i) * S::KB + k, t.ke - t.kb - k};
}

/* The one k step's operands when bf16 rows go to the bf16 tiles untouched (dd_from_tile, V4): 8-byte loads of the
 * thread's chunks (rows_at), no register zeroed, no test per row. The tiles' entries outside the ranges (rows past
 * the end, k from P on) were zeroed before the first head and no head writes them (smem::APART): a row past the
 * end is read from the tile's last row and written to scratch (rows_index), a chunk past P is neither read nor
 * written. The same tiles as load_step's. */
template <class Prec, class V> __device__ __forceinline__ void load_rows(const rows_of<Prec, V> &at)
{
#pragma unroll
    for (int q = 0; q < 4; q++)
        if (16 * q < at.kl) {
            const uint64_t wa = m2_vload_bits4(at.pa + 16 * q), wb = m2_vload_bits4(at.pb + 16 * q);
            *reinterpret_cast<uint64_t *>(at.da + 16 * q) = wa;
            *reinterpret_cast<uint64_t *>(at.db + 16 * q) = wb;
        }
}

/* The tile of entry t.z's head view v, [kb, ke) of its reduction, accumulated into sm.u.c (complete on return:
 * after a barrier). ONE: a single step (ke - kb <= KB). first() runs after the first step's loads and barrier
 * (what was stored to shared memory before the call is complete there). */
template <class Prec, bool V4, bool ONE, class V, class F>
__device__ __forceinline__ void product(const V &v, const span &t, smem<Prec> &sm, float &dd,
                                        const rows_of<Prec, V> &at, F &&first)
{
    typedef smem<Prec> S;
    const int tid = threadIdx.x;
    if constexpr (std::is_same<Prec, fp32_operands>::value) {
        const int tx = tid % 16, ty = tid / 16;
        float acc[SUB][SUB] = {};
        for (int k0 = t.kb; ONE || k0 < t.ke; k0 += S::KB) { /* ONE: as below */
            load_step<Prec, V4 ? 4 : 1>(v, t, k0, t.ke, sm, dd);
            __syncthreads();
            if (k0 == t.kb) first();
            for (int kk = 0; kk < S::KB; kk++)
#pragma unroll
                for (int r = 0; r < SUB; r++)
#pragma unroll
                    for (int c = 0; c < SUB; c++)
                        acc[r][c] = fmaf(sm.u.ab.a[(ty + 16 * r) * S::LDK + kk], sm.u.ab.b[(tx + 16 * c) * S::LDK + kk],
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
        for (int k0 = t.kb; ONE || k0 < t.ke; k0 += S::KB) { /* ONE: the step even where kb >= ke (ke = P = 0,
                                                               all loads masked: a zero tile, as without it) */
            if constexpr (keep_zeros<Prec, V4, ONE, V>())
                load_rows<Prec, V>(at);
            else
                load_step<Prec, V4 ? 4 : 1>(v, t, k0, t.ke, sm, dd);
            __syncthreads();
            if (k0 == t.kb) first();
            /* the warp's strips of the operands: the k steps and fragments at constant offsets from them */
            mma_steps<Prec, S::LDK>(acc, sm.u.ab.a + wi * S::LDK, sm.u.ab.b + wj * S::LDK,
                                    std::make_integer_sequence<int, S::KB / Prec::WK>{},
                                    std::make_integer_sequence<int, FRAGS>{});
            /* every warp is done with the operands before sm.u.c overwrites them or the next k step does; apart and
             * without a next step, the barrier after the epilogue is the next head's */
            if constexpr (!(ONE && S::APART)) __syncthreads();
            if (ONE) break;
        }
        float *c0 = sm.u.c + wi * S::LDC + wj; /* the warp's strip of the tile */
        [&]<int... FS>(std::integer_sequence<int, FS...>) { (store_at<16 * FS, S::LDC>(c0, acc[FS]), ...); }
        (std::make_integer_sequence<int, FRAGS>{});
    }
    __syncthreads();
}

/* Per head, a thread of the first 3 BM copies one value of the head's cumsums or dt into sm.stage: threads
 * [0, BM) the tile's rows' cumsums (arow), [BM, 2 BM) its columns' (acol), [2 BM, 3 BM) its columns' dt (dtcol),
 * positions past the chunk's end clamped to its last (dt is 0 there). Where from, in the group's first head (the
 * caller moves src on by Q floats per head: acs and dtc are [head][Q]), and where to. */
struct stage_at {
    const float *src;
    float *dst;
};
template <class S> __device__ __forceinline__ stage_at stage_index(const ssd_args &s, const span &t, size_t zh0, S &sm)
{
    const int tid = threadIdx.x, c = tid % BM, role = min(tid / BM, 2), last = s.Q - 1;
    const int at = min((role == 0 ? t.i0 : t.j0) + c, last);
    return stage_at{(role < 2 ? s.acs : s.dtc) + zh0 * s.Q + at, &sm.stage[role][c % 16].v[c / 16]};
}

/* The head's decay factors for the tile from the staged cumsums (after the barrier that follows stage's copies;
 * read after the product's barriers): colw[r][c] = e^{a_{i0+16r} - a_c} by every thread, rowf[l] = e^{a_l -
 * a_{i0+16(l/16)}} by the first BM, the cumsums at their clamped positions as before. */
template <class S> __device__ __forceinline__ void factors(S &sm)
{
    const int tid = threadIdx.x, c = tid % BN, r = tid / BN;
    static_assert(BM / 16 * BN == THREADS && BM == BN, "one column factor per thread; rows and columns staged alike");
    const quad *arow = sm.stage[0], *acol = sm.stage[1];
    sm.colw[r][c % 16].v[c / 16] = ssd_args::dexp(arow[0].v[r] - acol[c % 16].v[c / 16]);
    /* thread tid < BM: row l = 16 (tid % 4) + tid / 4, whose entry [l % 16].v[l / 16] is [tid / 4].v[tid % 4] */
    if (tid < BM) sm.rowf[tid / 4].v[tid % 4] = ssd_args::dexp(arow[tid / 4].v[tid % 4] - arow[0].v[tid % 4]);
}

template <class Prec, bool V4, bool ONE, class Op> __device__ __forceinline__ void tiles(const Op &op, int tiles_q)
{
    typedef smem<Prec> S;
    __shared__ S sm;
    const ssd_args &s = op.s;
    span t;
    if (!locate(op, tiles_q, tiles_q, t)) return;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16, lane = tid % 32, warp = tid / 32;
    const int bc = t.z / s.G, g = t.z % s.G, tm = t.i0 / BM, tn = t.j0 / BN;
    const bool diag = t.i0 == t.j0;
    const float *CB = s.QQ(s.CB, t.z);
    float cbr[SUB][SUB]; /* this thread's elements of the group's CB tile, 0 where no term (kept over the heads) */
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int l = t.i0 + ty + 16 * r, si = t.j0 + tx + 16 * c;
            cbr[r][c] = stored<Op>(t, l, si) ? CB[(size_t)l * s.Q + si] : 0.0f;
        }
    constexpr bool DDT = dd_from_tile<Prec, typename Op::view>();
    float keep[SUB][SUB];
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) keep[r][c] = 0.0f;
    typename Op::view v = op.head(bc, g * s.hpg); /* located once; the heads' views by offsets */
    /* the per-thread offsets of the reads and writes below that are the same for every head: per head only the
     * head's base pointers change */
    constexpr bool KZ = keep_zeros<Prec, V4, ONE, typename Op::view>();
    rows_of<Prec, typename Op::view> ra{};
    if constexpr (KZ) { /* load_rows: zeros where no head writes */
        ra = rows_index(v, t, sm);
        for (int e = tid; e < (BM + BN) * S::LDK / 4; e += THREADS)
            reinterpret_cast<uint64_t *>(sm.u.ab.a)[e] = 0; /* a and b, contiguous */
        __syncthreads();
    }
    const int QT = s.Q * tiles_q;
    const size_t zh0 = (size_t)bc * s.H + g * s.hpg; /* the group's first head */
    stage_at st = stage_index(s, t, zh0, sm);
    /* the row sum of row i0 + ty + 4 tx (row block tx / 4) for the threads with tx % 4 = 0 (position clamped for
     * the others, which write none) */
    float *rout = s.rMq + zh0 * QT + min(t.i0 + ty + 4 * tx, s.Q - 1) * tiles_q + tn;
    /* the sums of colbuf's column tid: cMq's column j0 + tid for the first BN threads (position clamped: only the
     * columns inside the chunk are written), pDd for thread BN */
    const int cstride = tid < BN ? QT : tiles_q;
    float *cout = tid < BN ? s.cMq + zh0 * QT + min(t.j0 + tid, s.Q - 1) * tiles_q + tm : s.pDd + zh0 * tiles_q + tm;
    for (int q = 0; q < s.hpg; q++, v = Op::next(v, s.P), st.src += s.Q, rout += QT, cout += cstride) {
        if (tid < 3 * BM) *st.dst = *st.src;
        float dd = 0.0f;
        product<Prec, V4, ONE>(v, t, sm, dd, ra, [&] { factors(sm); });
        if constexpr (KZ) { /* the next head's rows: P columns on */
            ra.pa += s.P;
            ra.pb += s.P;
        }
        float rp[SUB] = {}, cp[SUB] = {};
        const quad rowf = sm.rowf[ty], arow = sm.stage[0][ty], acol = sm.stage[1][tx], dtcol = sm.stage[2][tx];
#pragma unroll
        for (int r = 0; r < SUB; r++) {
            const quad colw = sm.colw[r][tx];
#pragma unroll
            for (int c = 0; c < SUB; c++) {
                const int li = ty + 16 * r, sj = tx + 16 * c;
                /* row block r of the tile is after column block c, except for c = r on a diagonal tile: the exact
                 * decay for every c = r, so that no tile takes a code path of its own (above the diagonal, c > r,
                 * nothing is stored or summed) */
                const float dec = r == c ? ssd_args::dexp(arow.v[r] - acol.v[c]) : rowf.v[r] * colw.v[c];
                const float E = dec * sm.u.c[li * S::LDC + sj], Edt = E * dtcol.v[c], cb = cbr[r][c];
                keep[r][c] += Edt; /* finite everywhere; 0 is written above the diagonal */
                if constexpr (DDT) /* the tile's diagonal (dd_from_tile): this thread's (l, l) where tx = ty */
                    if (r == c && tx == ty) dd += sm.u.c[li * S::LDC + sj];
                rp[r] = fmaf(cb, Edt, rp[r]); /* Mq dt_s */
                cp[c] = fmaf(cb, E, cp[c]);   /* Mq */
            }
        }
        /* Row sums over the tile's 64 columns (the 16 threads of a row are 16 consecutive lanes) and column sums
         * over its 64 rows (the two rows of a warp, then the 8 warps through shared memory), as reduce-scatters: each
         * exchange hands the partner the half of the sums the partner keeps (an add per sum, a select per value), 8
         * shuffles for the 4 row sums instead of 16, 2 for the column sums instead of 4. Afterwards lane tx holds
         * the sum of row block tx / 4, and a lane of the warp's upper half holds column blocks 2 and 3. */
        const bool x8 = tx & 8, x4 = tx & 4, hi = lane & 16;
        const float r0 = (x8 ? rp[2] : rp[0]) + __shfl_xor_sync(0xffffffffu, x8 ? rp[0] : rp[2], 8);
        const float r1 = (x8 ? rp[3] : rp[1]) + __shfl_xor_sync(0xffffffffu, x8 ? rp[1] : rp[3], 8);
        float rsum = (x4 ? r1 : r0) + __shfl_xor_sync(0xffffffffu, x4 ? r0 : r1, 4);
        rsum += __shfl_xor_sync(0xffffffffu, rsum, 2);
        rsum += __shfl_xor_sync(0xffffffffu, rsum, 1);
        sm.colbuf[warp][tx + (hi ? 32 : 0)] = (hi ? cp[2] : cp[0]) +
                                              __shfl_xor_sync(0xffffffffu, hi ? cp[0] : cp[2], 16);
        sm.colbuf[warp][tx + (hi ? 48 : 16)] = (hi ? cp[3] : cp[1]) +
                                               __shfl_xor_sync(0xffffffffu, hi ? cp[1] : cp[3], 16);
        if (diag) {              /* uniform over the block */
            if constexpr (DDT) { /* dd is +0 except in the two lanes where tx = ty, 2 warp and 17 + 2 warp (= 2 warp
                                  * xor 17): the butterfly's sum is theirs, its additions of +0 exact (a sum from +0 is
                                  * never -0) */
                const float other = __shfl_xor_sync(0xffffffffu, dd, 17);
                if (lane == 2 * warp) sm.colbuf[warp][BN] = dd + other;
            } else {
#pragma unroll
                for (int m = 16; m > 0; m >>= 1) dd += __shfl_xor_sync(0xffffffffu, dd, m);
                if (lane == 0) sm.colbuf[warp][BN] = dd;
            }
        }
        if (tx % 4 == 0) {
            const int l = t.i0 + ty + 4 * tx; /* row block tx / 4 */
            if (l < t.i1) *rout = rsum;
        }
        __syncthreads(); /* colbuf complete; every thread is done with this head's tile and factors */
        /* the column sums over the warps, in warp order, and on a diagonal tile this chunk's dy.x over the tile's
         * rows, warps in order */
        if ((tid < BN && t.j0 + tid < t.j1) || (diag && tid == BN)) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) sum += sm.colbuf[w][tid];
            *cout = sum;
        }
    }
#pragma unroll
    for (int r = 0; r < SUB; r++)
#pragma unroll
        for (int c = 0; c < SUB; c++) {
            const int l = t.i0 + ty + 16 * r, si = t.j0 + tx + 16 * c;
            /* the diagonal tiles whole, 0 above the diagonal: dC's and dB's 16-byte loads of a row group may
             * reach past it (masked after the load, but the memory they read must have been written) */
            if (l < t.i1 && si < t.j1) s.QQ(s.dCBw, t.z)[(size_t)l * s.Q + si] = si <= l ? keep[r][c] : 0.0f;
        }
}
} // namespace ssd_dcb

/* One k step (P <= KB), scalar gathers or 16-byte loads of dy; and the k loop for any P (scalar gathers). Separate
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

/* Op first among the template arguments: the emulation keys the launches by it (tests/gpu/emu/emu_count.cpp). */
template <class Op, class Prec>
static void launch(const m2_cuda_ctx *c, const Op &op, Prec prec, unsigned blocks, int n)
{
    if (op.s.P > ssd_dcb::kb<Prec>())
        ssd_dcb_ksteps_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
    else if (op.s.vec4())
        ssd_dcb_v4_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
    else
        ssd_dcb_kernel<Op><<<blocks, m2tile::THREADS, 0, c->stream>>>(op, prec, n);
}

template <class TX> void ssd_compute_dcb(const m2_cuda_ctx *c, const ssd_io<TX> &a)
{
    const int n = (a.Q + m2tile::BM - 1) / m2tile::BM;
    const long long nblocks = (long long)a.B * a.nc * a.G * n * n;
    if (nblocks <= 0) return;
    if (nblocks > 0x7fffffffLL) m2_cuda_check(cudaErrorInvalidConfiguration, "ssd_bwd (dCB)");
    const ssd_dcb_op<TX> op{a};
    switch (c->gemm_prec) {
    case M2_CUDA_GEMM_FP32: launch(c, op, m2tile::fp32_operands(), (unsigned)nblocks, n); break;
    case M2_CUDA_GEMM_TF32: launch(c, op, m2tile::tf32_operands(), (unsigned)nblocks, n); break;
    case M2_CUDA_GEMM_BF16:
    default: launch(c, op, m2tile::bf16_operands(), (unsigned)nblocks, n); break;
    }
    M2_CUDA_LAUNCHED("ssd_bwd (dCB)");
}
template void ssd_compute_dcb(const m2_cuda_ctx *, const ssd_io<float> &);
template void ssd_compute_dcb(const m2_cuda_ctx *, const ssd_io<__nv_bfloat16> &);
