/* CUDA ops: the causal depthwise conv1d + bias + SiLU over the x, B, C channels (docs/MODEL.md §2 step 3), forward and
 * backward.
 *
 * Backward, per sequence: pre(t, c) = b[c] + sum_k w[c,k] in[t-K+1+k, c] (zero before t = 0), out = silu(pre).
 *   dpre(t, c) = dout(t, c) * silu'(pre(t, c))                 (in registers only)
 *   din(t, c)  = sum_k w[c,k] dpre(t+K-1-k, c)                  (over output ticks inside the sequence)
 *   dw[c,k]   += sum_t dpre(t, c) in[t-K+1+k, c],   db[c] += sum_t dpre(t, c)
 * The weight and bias gradients are the deterministic column sum of cuda_common.cuh over the token rows, with
 * C*(K+1) virtual columns (c, k), k = K standing for the bias: the same blocks of rows, the same order.
 *
 * Layout of the work (BENCHMARKS.md, "Predicted GPU step"): a thread owns V consecutive channels (V = 4: one 16-byte
 * load or store per token row when the strides and pointers allow it, else V = 1) and walks consecutive rows (the
 * forward: CONV_TT ticks of one sequence; the backward: up to CONV_WALK_MAX column-sum blocks of rows), keeping the K
 * taps' inputs in registers as a sliding window, so every input row is loaded once per walk instead of K times and no
 * index is divided per element. The window is right-aligned in an array of KM >= K registers (KM a compile-time 4 or
 * 16, so the window stays in registers); every sum is formed in the order k = 0..K-1 (conv_bwd_row says where
 * the backward's rounding differs by an ulp). The backward is one kernel (dpre, din and the weight partials from
 * one read of in and dout; BENCHMARKS.md, issue 16a) and the column sum's final pass. */
#include "cuda_common.cuh"

enum { CONV_TT = 32 };

/* The kernels' configurations: V channels per thread, a window of KM >= K registers, and KF, the tap count when it is
 * fixed at compile time (named types, so that a kernel's counters and its SASS row share one key,
 * tests/gpu/emu/emu_counters.h). The 4-register windows serve K = 4 only (the model's d_conv default): with K a
 * constant every tap test and window offset is resolved by the compiler (no predicated taps, no zero-initialised
 * sums); the 16-register windows serve every other K (KF = 0: K from the arguments; K < 4, which no configuration
 * uses, runs there too, correct but with the wider window's registers). BWD_BLOCKS: the backward's blocks per SM
 * that its registers must allow (__launch_bounds__): 2 where the walk's bookkeeping would otherwise take the
 * 1-channel 16-tap kernel past 128 registers (142 in sm_90 SASS, one block per SM; 127 with the bound), 1 elsewhere
 * (the 1-channel 4-tap kernel's bf16 outer loop: 523 instructions at 62 registers, 4 blocks per SM, where a bound of
 * 6 blocks took 594 at 40 and none 570 at 48). */
struct conv_v4k4 {
    static constexpr int V = 4, KM = 4, KF = 4, BWD_BLOCKS = 2;
};
struct conv_v1k4 {
    static constexpr int V = 1, KM = 4, KF = 4, BWD_BLOCKS = 1;
};
struct conv_v4k16 {
    static constexpr int V = 4, KM = 16, KF = 0, BWD_BLOCKS = 1;
};
struct conv_v1k16 {
    static constexpr int V = 1, KM = 16, KF = 0, BWD_BLOCKS = 2;
};

/* The tap count K of a configuration's kernels. */
template <class Cfg, class CA> __device__ __forceinline__ int conv_taps(const CA &a) { return Cfg::KF ? Cfg::KF : a.K; }

/* TI: the element type of the input (a slice of the stored in_proj output: fp32 or bf16, widened on load), of the
 * forward's output (the SSD's x, B, C) and of the backward's input gradient (a slice of the in_proj output's gradient),
 * each rounded once on the store when bf16, and of the backward's output gradient dout (the SSD backward's dx, dB,
 * dC, widened on load). The weight and bias partials stay fp32 sums of fp32 values. */
template <class TI> struct conv_args {
    const TI *in;
    const float *w, *b;
    const TI *dout;
    TI *out, *din;
    float *part;
    int ld_in, ld_din, T, C, K, rows, per, walk; /* walk: the backward's rows per block, a multiple of per */
};

/* The thread's channels c0 .. c0+V-1 and its ticks [t0, t1) of sequence `seq`; false past the last channel. */
template <class Cfg, class CA> __device__ bool conv_walk(const CA &a, int &c0, size_t &seq, int &t0, int &t1)
{
    c0 = (blockIdx.y * blockDim.x + threadIdx.x) * Cfg::V;
    const int tiles = (a.T + CONV_TT - 1) / CONV_TT;
    seq = blockIdx.x / tiles;
    t0 = (blockIdx.x % tiles) * CONV_TT;
    t1 = min(a.T, t0 + CONV_TT);
    return c0 < a.C;
}

/* The weights in register order: tap k at m = KM-K+k (right-aligned, Rev false) or at m = KM-1-k (Rev true), so
 * that every register index is a compile-time constant. */
template <class Cfg, bool Rev, class CA> __device__ void conv_weights(const CA &a, int c0, float (&wr)[Cfg::KM][Cfg::V])
{
    const int K = conv_taps<Cfg>(a);
#pragma unroll
    for (int m = 0; m < Cfg::KM; m++) {
        const int k = Rev ? Cfg::KM - 1 - m : m - (Cfg::KM - K);
#pragma unroll
        for (int j = 0; j < Cfg::V; j++) wr[m][j] = k >= 0 && k < K ? a.w[(size_t)(c0 + j) * K + k] : 0.0f;
    }
}

/* Shifts the window one row on: win[m] <- win[m+1], win[KM-1] <- x. */
template <class Cfg> __device__ __forceinline__ void conv_shift(float (&win)[Cfg::KM][Cfg::V], const m2_vec<Cfg::V> &x)
{
#pragma unroll
    for (int m = 0; m < Cfg::KM - 1; m++)
#pragma unroll
        for (int j = 0; j < Cfg::V; j++) win[m][j] = win[m + 1][j];
#pragma unroll
    for (int j = 0; j < Cfg::V; j++) win[Cfg::KM - 1][j] = x.v[j];
}

/* pre(t) of the V channels from the window win[m] = in[t - (KM-1-m)]: b + taps k = 0..K-1 (m = KM-K+k) in order,
 * the taps before the sequence start skipped (Masked; a tick t >= KM-1 has none, so its loop drops the test). */
template <class Cfg, bool Masked = true, class CA>
__device__ __forceinline__ void conv_pre(const CA &a, int t, const float (&bias)[Cfg::V],
                                         const float (&wr)[Cfg::KM][Cfg::V], const float (&win)[Cfg::KM][Cfg::V],
                                         float (&pre)[Cfg::V])
{
#pragma unroll
    for (int j = 0; j < Cfg::V; j++) pre[j] = bias[j];
#pragma unroll
    for (int m = 0; m < Cfg::KM; m++)
        if (m >= Cfg::KM - conv_taps<Cfg>(a) && (!Masked || t >= Cfg::KM - 1 - m)) {
#pragma unroll
            for (int j = 0; j < Cfg::V; j++) pre[j] += wr[m][j] * win[m][j];
        }
}

/* The window before tick t0: win[m] = in[t0 - 1 - (KM-1-m)] where the next shift keeps it for a tap and the tick
 * exists (the rest is never used). */
template <class Cfg, class TI>
__device__ void conv_window(const TI *col, int ld, int t0, int K, float (&win)[Cfg::KM][Cfg::V])
{
#pragma unroll
    for (int m = 0; m < Cfg::KM; m++) {
        const int ts = t0 - Cfg::KM + m;
        m2_vec<Cfg::V> x = {};
        if (m > Cfg::KM - K && ts >= 0) x = m2_vload<Cfg::V>(col + (size_t)ts * ld);
#pragma unroll
        for (int j = 0; j < Cfg::V; j++) win[m][j] = x.v[j];
    }
}

/* One forward row: shift tick t's input (the row at src) into the window, out(t) = silu(pre(t)) stored at dst. */
template <class Cfg, bool Masked, class TI>
__device__ __forceinline__ void conv_fwd_row(const conv_args<TI> &a, const TI *src, TI *dst, int t,
                                             const float (&bias)[Cfg::V], const float (&wr)[Cfg::KM][Cfg::V],
                                             float (&win)[Cfg::KM][Cfg::V])
{
    conv_shift<Cfg>(win, m2_vload<Cfg::V>(src));
    float pre[Cfg::V];
    conv_pre<Cfg, Masked>(a, t, bias, wr, win, pre);
    m2_vec<Cfg::V> r;
#pragma unroll
    for (int j = 0; j < Cfg::V; j++) r.v[j] = pre[j] * m2_dev_sigmoid(pre[j]);
    m2_vstore<Cfg::V>(dst, r);
}

/* Forward: out = silu(pre); the first KM-1 ticks of a sequence with the start mask, the rest without. */
template <class Cfg, class TI> __global__ void __launch_bounds__(M2_CUDA_THREADS) conv_fwd_kernel(conv_args<TI> a)
{
    int c0, t0, t1;
    size_t seq;
    if (!conv_walk<Cfg>(a, c0, seq, t0, t1)) return;
    float wr[Cfg::KM][Cfg::V], win[Cfg::KM][Cfg::V], bias[Cfg::V];
    conv_weights<Cfg, false>(a, c0, wr);
#pragma unroll
    for (int j = 0; j < Cfg::V; j++) bias[j] = a.b[c0 + j]; /* once: the stores below may alias it for nvcc */
    const TI *col = a.in + seq * a.T * a.ld_in + c0;
    conv_window<Cfg>(col, a.ld_in, t0, conv_taps<Cfg>(a), win);
    /* the rows by pointer steps (no index product per row) */
    const TI *src = col + (size_t)t0 * a.ld_in;
    TI *dst = a.out + (seq * a.T + t0) * a.C + c0;
    int t = t0;
    for (; t < t1 && t < Cfg::KM - 1; t++, src += a.ld_in, dst += a.C)
        conv_fwd_row<Cfg, true>(a, src, dst, t, bias, wr, win);
#pragma unroll 4 /* the window's shifts become register renames */
    for (; t < t1; t++, src += a.ld_in, dst += a.C) conv_fwd_row<Cfg, false>(a, src, dst, t, bias, wr, win);
}

/* One row r (tick t; ro = r - (K-1) at tick to) of the backward's walk (conv_bwd_kernel). Edge false: a row of the
 * block (r < r1 <= rows) whose taps are all inside its sequence (t >= K-1, so ro is in the same sequence and every
 * output tick of din(ro) exists) and whose din row is the block's (ro >= r0): the row makes none of the tests. The
 * same sums in the same order, but its products may be fused into the additions (FMA) where the tested form kept
 * them apart: an ulp's difference, not bitwise the edge form's. */
template <class Cfg, bool Edge, class TI>
__device__ __forceinline__ void conv_bwd_row(const conv_args<TI> &a, const TI *src, const TI *gp, TI *dp, int r, int t,
                                             int to, int r0, int r1, const float (&wf)[Cfg::KM][Cfg::V],
                                             const float (&wb)[Cfg::KM][Cfg::V], const float (&bias)[Cfg::V],
                                             float (&win)[Cfg::KM][Cfg::V], float (&dwin)[Cfg::KM][Cfg::V],
                                             float (&acc)[Cfg::KM + 1][Cfg::V])
{
    constexpr int KM = Cfg::KM, V = Cfg::V;
    const int K = conv_taps<Cfg>(a);
    m2_vec<V> d = {};
    if (!Edge || r < a.rows) {
        conv_shift<Cfg>(win, m2_vload<V>(src));
        float pre[V];
        conv_pre<Cfg, Edge>(a, t, bias, wf, win, pre);
        const m2_vec<V> g = m2_vload<V>(gp);
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float s = m2_dev_sigmoid(pre[j]);
            d.v[j] = g.v[j] * s * (1.0f + pre[j] * (1.0f - s));
        }
        if (!Edge || r < r1) {
#pragma unroll
            for (int m = 0; m < KM; m++)
                if (m >= KM - K) {
#pragma unroll
                    for (int j = 0; j < V; j++) acc[m][j] += !Edge || t >= KM - 1 - m ? d.v[j] * win[m][j] : 0.0f;
                }
#pragma unroll
            for (int j = 0; j < V; j++) acc[KM][j] += d.v[j];
        }
    }
    conv_shift<Cfg>(dwin, d);
    const int ro = r - (K - 1);
    if (!Edge || ro >= r0) {
        m2_vec<V> s = {};
#pragma unroll
        for (int k = 0; k < KM; k++)
            if (k < K && (!Edge || to + K - 1 - k < a.T)) {
#pragma unroll
                for (int j = 0; j < V; j++) s.v[j] += wb[KM - 1 - k][j] * dwin[KM - 1 - k][j];
            }
        m2_vstore<V>(dp, s);
    }
}

/* Stores the weight and bias partials of column-sum block blk, part[blk] = [C*K weights laid out as dw | C biases]
 * (two segments of one final pass, cuda_common.cuh), and restarts the sums. With V = 4 (C and c0 multiples of 4) and
 * K = KM = 4 the thread's 16 weights and its 4 biases are contiguous and 16-byte aligned: one 16-byte store per
 * channel's taps and one for the biases, where scalar stores took 20. */
template <class Cfg, class TI>
__device__ __forceinline__ void conv_bwd_flush(const conv_args<TI> &a, int blk, int c0,
                                               float (&acc)[Cfg::KM + 1][Cfg::V])
{
    constexpr int KM = Cfg::KM, V = Cfg::V;
    const int K = conv_taps<Cfg>(a);
    float *pw = a.part + (size_t)blk * a.C * (K + 1), *pb = pw + (size_t)a.C * K + c0;
    pw += (size_t)c0 * K;
#pragma unroll
    for (int j = 0; j < V; j++) {
        if constexpr (Cfg::KF == KM && V == 4) {
            m2_vec<KM> x;
#pragma unroll
            for (int m = 0; m < KM; m++) x.v[m] = acc[m][j];
            m2_vstore<KM>(pw + j * KM, x);
        } else {
#pragma unroll
            for (int m = 0; m < KM; m++)
                if (m >= KM - K) pw[j * K + m - (KM - K)] = acc[m][j];
        }
    }
    m2_vec<V> x;
#pragma unroll
    for (int j = 0; j < V; j++) x.v[j] = acc[KM][j];
    m2_vstore<V>(pb, x);
#pragma unroll
    for (int m = 0; m <= KM; m++)
#pragma unroll
        for (int j = 0; j < V; j++) acc[m][j] = 0.0f;
}

/* The backward in one walk over the rows [r0, r1) of a.walk / a.per consecutive column-sum blocks (blockIdx.x) of the
 * thread's channels, rows in order (a walk may span sequences: tick t restarts at 0, the taps before a sequence start
 * are masked):
 * - dpre(r) = dout(r) * silu'(pre(r)), pre from the input window as in the forward;
 * - the weight and bias partials of each column-sum block's rows (conv_bwd_flush at the block's end): weight (c, k)
 *   = sum_r dpre(r, c) in(r-K+1+k, c) (0 before the sequence start), tap k's sum at acc[KM-K+k] beside its window
 *   register; bias c = sum_r dpre(r, c);
 * - din(ro) = sum_k w[k] dpre(ro+K-1-k) over the output ticks inside the sequence, written at row r = ro + K - 1 from a
 *   window dwin[m] = dpre(r - (KM-1-m)) (tap k at m = KM-1-k, the weights in reversed order); the walk runs K - 1 rows
 *   past r1 (their dpre recomputed, not summed) to finish the walk's last rows.
 * The rows that need no test (conv_bwd_row's Edge false: all but the first K-1 of the walk and of each sequence,
 * and the K-1 past r1) run as one unrolled loop per run of them (sm_90 SASS at K = 4: about 125 instructions per
 * row of 4 channels there, 135 from bf16 rows; a tested row with the walk's bookkeeping about 340), a run ending at
 * a column-sum block's end, where the partials are stored and the walk goes on (the windows carry over: a block
 * boundary inside a walk costs no tested rows and no recomputed rows). After a run, ro's tick follows from t (no
 * division). dpre never goes to memory; every sum is formed in the order of the separate kernels this replaced. */
template <class Cfg, class TI>
__global__ void __launch_bounds__(M2_CUDA_THREADS, Cfg::BWD_BLOCKS) conv_bwd_kernel(conv_args<TI> a)
{
    constexpr int KM = Cfg::KM, V = Cfg::V;
    const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * V;
    if (c0 >= a.C) return;
    const int r0 = blockIdx.x * a.walk, r1 = min(a.rows, r0 + a.walk), K = conv_taps<Cfg>(a);
    int blk = r0 / a.per, b1 = min(r1, r0 + a.per); /* the column-sum block of the rows and its end */
    const TI *col = a.in + c0;
    float wf[KM][V], wb[KM][V], bias[V], win[KM][V], dwin[KM][V], acc[KM + 1][V];
    conv_weights<Cfg, false>(a, c0, wf);
    conv_weights<Cfg, true>(a, c0, wb);
#pragma unroll
    for (int j = 0; j < V; j++) bias[j] = a.b[c0 + j];
    int t = r0 % a.T, to = ((r0 - (K - 1)) % a.T + a.T) % a.T; /* the ticks of r and of ro = r - (K-1) */
    conv_window<Cfg>(col + (size_t)(r0 - t) * a.ld_in, a.ld_in, t, K, win);
#pragma unroll
    for (int m = 0; m <= KM; m++)
#pragma unroll
        for (int j = 0; j < V; j++) {
            acc[m][j] = 0.0f;
            if (m < KM) dwin[m][j] = 0.0f;
        }
    for (int r = r0; r < r1 + K - 1;) {
        if (r == b1) { /* a column-sum block's rows are done (the last one's at r1, before the rows past it) */
            conv_bwd_flush<Cfg>(a, blk++, c0, acc);
            b1 = min(r1, b1 + a.per);
        }
        /* row r's input and output gradient, din's row ro = r - (K-1) (only formed where it is stored) */
        const TI *src = col + (size_t)r * a.ld_in, *gp = a.dout + (size_t)r * a.C + c0;
        TI *dp = a.din + (size_t)max(r - (K - 1), 0) * a.ld_din + c0;
        if (r >= r0 + K - 1 && r < r1 && t >= K - 1) {
            const int re = r + min(b1 - r, a.T - t); /* to the column-sum block's or the sequence's end */
            /* the rows by pointer steps: no 64-bit index product per row (sm_90 SASS at K = 4: 498 instructions
             * per 4 rows of 4 fp32 channels, 521 with the products) */
#pragma unroll 4
            for (; r < re; r++, t++, src += a.ld_in, gp += a.C, dp += a.ld_din)
                conv_bwd_row<Cfg, false>(a, src, gp, dp, r, t, 0, r0, r1, wf, wb, bias, win, dwin, acc);
            to = t - (K - 1); /* ro's tick: in r's sequence, or (t == T) the last ticks of the one just ended */
            if (t == a.T) t = 0;
        } else {
            conv_bwd_row<Cfg, true>(a, src, gp, dp, r, t, to, r0, r1, wf, wb, bias, win, dwin, acc);
            r++;
            t = t + 1 == a.T ? 0 : t + 1;
            to = to + 1 == a.T ? 0 : to + 1;
        }
    }
    if (K == 1) conv_bwd_flush<Cfg>(a, blk, c0, acc); /* no rows past r1: the loop ended before the last flush */
}

/* Grids: x over (sequence, tile of CONV_TT ticks) or the column-sum row blocks, y over blocks of channel groups. */
template <class Cfg, class CA> static dim3 conv_grid(const CA &a, int ny)
{
    const int groups = (a.C + Cfg::V - 1) / Cfg::V;
    return dim3(ny, (groups + M2_CUDA_THREADS - 1) / M2_CUDA_THREADS);
}
template <class CA> static int conv_tiles(const CA &a) { return a.rows / a.T * ((a.T + CONV_TT - 1) / CONV_TT); }

template <class Cfg, class TI> static void conv_fwd_run(const m2_cuda_ctx *c, const conv_args<TI> &a)
{
    const dim3 grid = conv_grid<Cfg>(a, conv_tiles(a));
    conv_fwd_kernel<Cfg, TI><<<grid, M2_CUDA_THREADS, 0, c->stream>>>(a);
    M2_CUDA_LAUNCHED("conv_silu_fwd");
}

/* The backward's blocks walk CONV_WALK_MAX column-sum blocks of rows, or fewer where the grid would then fall
 * under CONV_MIN_CTAS blocks (about two waves of the kernel's 2 blocks per SM on a 132-SM H200: fewer would idle
 * SMs). A longer walk costs its K-1 tested rows at each end and its K-1 recomputed rows once instead of once per
 * column-sum block (sm_90 SASS at K = 4: 6 tested rows of about 340 instructions per 64 rows of about 135). */
enum { CONV_WALK_MAX = 4, CONV_MIN_CTAS = 256 };

template <class Cfg, class TI> static void conv_bwd_run(m2_cuda_ctx *c, conv_args<TI> a, float *dw, float *db)
{
    const int nblk = (a.rows + a.per - 1) / a.per, ny = conv_grid<Cfg>(a, 1).y;
    int nb = CONV_WALK_MAX;
    while (nb > 1 && (long)((nblk + nb - 1) / nb) * ny < CONV_MIN_CTAS) nb /= 2;
    a.walk = a.per * nb;
    const dim3 grid = conv_grid<Cfg>(a, (nblk + nb - 1) / nb);
    conv_bwd_kernel<Cfg, TI><<<grid, M2_CUDA_THREADS, 0, c->stream>>>(a);
    M2_CUDA_LAUNCHED("conv_silu_bwd");
    const int ld = a.C * (a.K + 1);
    const m2_colsum_seg segs[2] = {{a.part, dw, nblk, a.C * a.K, ld}, {a.part + (size_t)a.C * a.K, db, nblk, a.C, ld}};
    m2_colsum_finish(c, segs, 2, "conv_silu_bwd (weight, bias)");
}

/* 16-byte rows of 4 channels when every row start of every array is 16-byte aligned. */
template <class CA> static bool conv_vec4(const CA &a)
{
    return m2_vec4_ok({a.in, a.out, a.dout, a.din}, {a.C, a.ld_in, a.ld_din});
}

/* Runs F<Cfg> with the configuration the arguments allow. */
#define CONV_DISPATCH(a, call)                                        \
    (conv_vec4(a) ? ((a).K == 4 ? call(conv_v4k4) : call(conv_v4k16)) \
                  : ((a).K == 4 ? call(conv_v1k4) : call(conv_v1k16)))

void m2_cuda_conv_silu_fwd(const m2_ops *o, const void *in, int ld_in, m2_act_type it, const m2_real *w,
                           const m2_real *b, int B, int T, int C, int K, void *out)
{
    if ((size_t)B * T * C == 0) return;
    const m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    m2_act_dispatch(it, [&](auto *ti) {
        using TI = m2_elem_t<decltype(ti)>;
        conv_args<TI> a = {(const TI *)in, w, b, NULL, (TI *)out, NULL, NULL, ld_in, C, T, C, K, B * T, 0, 0};
#define CONV_FWD(Cfg) conv_fwd_run<Cfg>(c, a)
        CONV_DISPATCH(a, CONV_FWD);
#undef CONV_FWD
    });
}

void m2_cuda_conv_silu_bwd(const m2_ops *o, const void *dout, const void *in, int ld_in, m2_act_type it,
                           const m2_real *w, const m2_real *b, int B, int T, int C, int K, void *din, int ld_din,
                           m2_real *dw, m2_real *db)
{
    const int rows = B * T;
    const size_t total = (size_t)rows * C;
    if (!total) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    float *part = m2_colsum_parts(c, 0, rows, C * (K + 1));
    m2_act_dispatch(it, [&](auto *ti) {
        using TI = m2_elem_t<decltype(ti)>;
        const TI *g = (const TI *)dout;
        conv_args<TI> a = {(const TI *)in,
                           w,
                           b,
                           g,
                           NULL,
                           (TI *)din,
                           part,
                           ld_in,
                           ld_din,
                           T,
                           C,
                           K,
                           rows,
                           m2_colsum_rows_per_block(rows),
                           0};
#define CONV_BWD(Cfg) conv_bwd_run<Cfg>(c, a, dw, db)
        CONV_DISPATCH(a, CONV_BWD);
#undef CONV_BWD
    });
}
