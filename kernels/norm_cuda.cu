/* CUDA ops: RMSNorm and the grouped gated RMSNorm (docs/MODEL.md §2, §2.5), forward and backward.
 *
 * One block per row; a segment (the whole row for RMSNorm, one group of n/G channels for the gated norm) is
 * reduced with the fixed-order block sum, statistics in fp32. Both backward passes use, for a segment v of ns
 * values normalised as out = v * r * w with r = rsqrt(mean(v^2) + eps):
 *   dv = r * (w * dout) - v * r^3 / ns * sum(w * dout * v),     dw += dout * v * r.
 * In the gated norm ns is the GROUP size (upstream divides by the full width when G > 1, a known bug that
 * docs/MODEL.md asks us not to copy). dw is a column sum over rows (the deterministic one of cuda_common.cuh): the
 * backwards form the column partials of their blocks of rows themselves, in shared memory, so their inputs are read
 * once (BENCHMARKS.md, issue 16a). The two backwards are one body (norm_bwd_rows) over a per-norm view of a row, at
 * 4 channels per thread where the sizes allow, and each can write the forward's output too (ops.h: the model's
 * backward needs it for a weight gradient and would otherwise recompute it in a second pass over the same inputs).
 * The stored activations (ops.h m2_act_type) the backwards read and write are in the element type of a template
 * argument, widened on load and rounded once on the store; the statistics and the weight gradient stay fp32. */
#include "cuda_common.cuh"

__device__ __forceinline__ float rstd_of(float sumsq, int ns)
{
    return 1.0f / sqrtf(sumsq / (float)ns + (float)M2_NORM_EPS);
}

/* Sum of v over the block's M2_CUDA_THREADS threads (blockDim.x must be that), every thread getting the same figure
 * in a fixed order: a butterfly within each warp (lanes i and i^o add the same two values, so all lanes hold the same
 * sum), then the warps' sums in warp order. 5 shuffles and 2 barriers instead of the 8 shared-memory rounds of
 * m2_block_sum: the norms reduce once or twice per row, a cost of the same order as a 768-channel row's own work.
 * sh: NORM_WARPS floats of shared memory. */
enum { NORM_WARPS = M2_CUDA_THREADS / 32 };
__device__ __forceinline__ float norm_block_sum(float v, float *sh)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = sh[0];
#pragma unroll
    for (int w = 1; w < NORM_WARPS; w++) s += sh[w];
    __syncthreads();
    return s;
}

/* ---- RMSNorm ---- */
/* TY: the output's element type (bf16 when it feeds the in_proj GEMM, ops.h m2_act_type). x_copy (NULL: none) is
 * written with x by the thread that reads it for the sum of squares (the next residual slot's pre-fill of ops.h). */
template <class TY>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    rmsnorm_fwd_kernel(const float *x, float *x_copy, const float *w, int n, TY *y)
{
    __shared__ float sh[NORM_WARPS];
    const size_t row = blockIdx.x;
    const float *xr = x + row * n;
    float *cr = x_copy ? x_copy + row * n : NULL;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = xr[j];
        if (cr) cr[j] = v;
        ss += v * v;
    }
    const float r = rstd_of(norm_block_sum(ss, sh), n);
    TY *yr = y + row * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m2_st(yr + j, xr[j] * r * w[j]);
}

/* The weight gradient's column partials that a backward block forms over its rows (gated_norm_bwd_kernel says how):
 * the thread's channels j = V*tid + i*V*blockDim.x of each of the G groups of ng, zeroed, then stored to part[blk]. */
template <int V> __device__ void norm_acc_zero(float *acc, int G, int ng)
{
    for (int g = 0; g < G; g++)
        for (int j = g * ng + V * threadIdx.x; j < (g + 1) * ng; j += V * blockDim.x)
            for (int e = 0; e < V; e++) acc[j + e] = 0.0f;
}
template <int V> __device__ void norm_acc_store(const float *acc, int G, int ng, float *part)
{
    for (int g = 0; g < G; g++)
        for (int j = g * ng + V * threadIdx.x; j < (g + 1) * ng; j += V * blockDim.x)
            for (int e = 0; e < V; e++) part[(size_t)blockIdx.x * G * ng + j + e] = acc[j + e];
}

/* One norm backward over the rows [blk * per, + per), written once for both norms: Seg says what a row's values v are
 * (RMSNorm: x; the gated norm: y * silu(z)) and where their gradient dv goes (rms_seg, gated_seg). Each segment of
 * ng = n/G channels in two passes: the sums of v^2 and w * dout * v (a thread's first C accesses of V channels kept
 * in registers, so a segment of up to C * V * 256 channels is read once), then dv, the weight gradient's term
 * dout * v * r and, when out is not NULL, the forward's output v * r * w (ops.h: the model's dW GEMM reads it instead
 * of a recompute; of type TO, rounded once when bf16). With V = 4 a thread's partial sums run over its 4 consecutive
 * channels first (another fp32 order than V = 1's: the emulated tests compare with the CPU at the same tolerance,
 * 1e-5).
 * acc != NULL: the block forms the weight gradient's column partials of its rows in shared memory (n floats), each
 * thread owning the same channels in every row (no barrier), stored to part[blk][j] (the same blocks of rows and
 * order as m2_colsum's, so the same figures) and the second pass over the inputs that a separate column sum makes is
 * saved. acc == NULL (rows too wide for shared memory): per is 1 and rstd [rows, G] is kept for m2_colsum.
 * sh: the block reduction's NORM_WARPS floats. */
template <class Cfg, class Seg, class TO>
__device__ __forceinline__ void norm_bwd_rows(const Seg &seg, const float *w, int rows, int n, int G, int per,
                                              float *acc, float *sh, float *part, float *rstd, TO *out)
{
    constexpr int V = Cfg::V, C = Cfg::C;
    using In = typename Seg::in;
    const int ng = n / G, step = V * blockDim.x;
    if (acc) norm_acc_zero<V>(acc, G, ng);
    const int r0 = blockIdx.x * per, r1 = min(rows, r0 + per);
    for (int row = r0; row < r1; row++) {
        const typename Seg::row sr = seg.at(row);
        TO *outr = out ? out + (size_t)row * n : NULL;
        for (int g = 0; g < G; g++) {
            const int jt = g * ng + V * threadIdx.x, end = (g + 1) * ng;
            In ac[C];
            float ss = 0.0f, s = 0.0f;
            auto stats = [&](const In &a, int j) {
                const m2_vec<V> wv = m2_vload<V>(w + j);
#pragma unroll
                for (int e = 0; e < V; e++) {
                    const float v = Seg::v(a, e);
                    ss += v * v;
                    s += wv.v[e] * a.d.v[e] * v;
                }
            };
#pragma unroll
            for (int i = 0; i < C; i++) {
                const int j = jt + i * step;
                if (j >= end) break;
                ac[i] = sr.load(j);
                stats(ac[i], j);
            }
            for (int j = jt + C * step; j < end; j += step) stats(sr.load(j), j);
            const float r = rstd_of(norm_block_sum(ss, sh), ng);
            const float cst = r * r * r * norm_block_sum(s, sh) / (float)ng;
            auto grads = [&](const In &a, int j) {
                const m2_vec<V> wv = m2_vload<V>(w + j);
                m2_vec<V> dv, o;
#pragma unroll
                for (int e = 0; e < V; e++) {
                    const float v = Seg::v(a, e);
                    dv.v[e] = r * wv.v[e] * a.d.v[e] - cst * v;
                    if (acc) acc[j + e] += a.d.v[e] * v * r;
                    o.v[e] = v * r * wv.v[e];
                }
                sr.store(j, a, dv);
                if (outr) m2_vstore<V>(outr + j, o);
            };
#pragma unroll
            for (int i = 0; i < C; i++) {
                const int j = jt + i * step;
                if (j >= end) break;
                grads(ac[i], j);
            }
            for (int j = jt + C * step; j < end; j += step) grads(sr.load(j), j);
            if (rstd && threadIdx.x == 0) rstd[(size_t)row * G + g] = r;
        }
    }
    if (acc) norm_acc_store<V>(acc, G, ng, part);
}

/* V channels per thread: 4 (16-byte loads and stores) when the segment width, the strides and the pointers allow it
 * (named types, so that a kernel's counters and its SASS row share one key); C: accesses kept in registers (above). */
struct norm_v1 {
    static constexpr int V = 1, C = 8;
};
struct norm_v4 {
    static constexpr int V = 4, C = 2;
};

/* RMSNorm's rows for norm_bwd_rows: v = x, dx ADDS dv; dy of type TD (ops.h dyt: bf16 for a layer's d(u) at bf16
 * precision), widened on load; dxa (NULL: none) gets the new dx too, in TY (ops.h dx_act). */
template <int V, class TD, class TY> struct rms_seg {
    const float *x;
    const TD *dy;
    float *dx;
    TY *dxa;
    int n;
    struct in {
        m2_vec<V> x, d; /* x, dout */
    };
    struct row {
        const float *x;
        const TD *dy;
        float *dx;
        TY *dxa;
        __device__ in load(int j) const { return in{m2_vload<V>(x + j), m2_vload<V>(dy + j)}; }
        __device__ void store(int j, const in &, const m2_vec<V> &dv) const
        {
            m2_vec<V> o = m2_vload<V>(dx + j);
#pragma unroll
            for (int e = 0; e < V; e++) o.v[e] += dv.v[e];
            m2_vstore<V>(dx + j, o);
            if (dxa) m2_vstore<V>(dxa + j, o);
        }
    };
    __device__ row at(int r) const
    {
        const size_t o = (size_t)r * n;
        return row{x + o, dy + o, dx + o, dxa ? dxa + o : NULL};
    }
    __device__ static float v(const in &a, int e) { return a.x.v[e]; }
};

/* TD: the element type of dy; TY: that of y and dx_act (ops.h rmsnorm_bwd). */
template <class Cfg, class TD, class TY>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    rmsnorm_bwd_kernel(const TD *dy, const float *x, const float *w, int rows, int n, int per, float *dx, float *part,
                       float *rstd, TY *y, TY *dxa)
{
    extern __shared__ float acc_sh[];
    __shared__ float sh[NORM_WARPS];
    norm_bwd_rows<Cfg>(rms_seg<Cfg::V, TD, TY>{x, dy, dx, dxa, n}, w, rows, n, 1, per, part ? acc_sh : NULL, sh, part,
                       rstd, y);
}

template <class TD> struct rmsnorm_dw_term {
    const TD *dy;
    const float *x, *rstd;
    int n;
    __device__ float operator()(int r, int j) const
    {
        const size_t i = (size_t)r * n + j;
        return m2_ld(dy + i) * x[i] * rstd[r];
    }
};

void m2_cuda_rmsnorm_fwd(const m2_ops *o, const m2_real *x, m2_real *x_copy, const m2_real *w, int rows, int n, void *y,
                         m2_act_type yt)
{
    if (rows <= 0 || n <= 0) return;
    m2_act_dispatch(yt, [&](auto *ty) {
        using TY = m2_elem_t<decltype(ty)>;
        rmsnorm_fwd_kernel<TY><<<rows, M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(x, x_copy, w, n, (TY *)y);
        M2_CUDA_LAUNCHED("rmsnorm_fwd");
    });
}

/* How a norm backward forms its weight gradient: in the kernel, as the column partials of blocks of per rows in
 * n floats of dynamic shared memory (part), when they fit the 48 KiB a block gets without an opt-in beside the static
 * reduction buffer (n up to 12,032); else row by row (per 1), each row's rstd [rows, G] kept for m2_colsum at ws_off.
 * The same blocks of rows and order as m2_colsum's either way, so the same figures. */
typedef struct {
    int per, nblk;
    size_t shmem, ws_off;
    float *part, *rstd;
} norm_bwd_plan;

enum { NORM_ACC_MAX_BYTES = 47 * 1024 }; /* 1 KiB left for the kernels' static shared memory */

static norm_bwd_plan norm_bwd_plan_of(m2_cuda_ctx *c, int rows, int n, int G)
{
    norm_bwd_plan p = {1, rows, 0, 0, NULL, NULL};
    if ((size_t)n * sizeof(float) <= NORM_ACC_MAX_BYTES) {
        p.per = m2_colsum_rows_per_block(rows);
        p.nblk = (rows + p.per - 1) / p.per;
        p.shmem = (size_t)n * sizeof(float);
        p.part = m2_colsum_parts(c, 0, rows, n);
    } else {
        p.ws_off = m2_cuda_align((size_t)rows * G * sizeof(float));
        p.rstd = (float *)m2_cuda_ws(c, p.ws_off + m2_colsum_ws_bytes(rows, n));
    }
    return p;
}

/* The weight gradient's last step: the final pass over the kernel's partials, or the whole column sum of f. */
template <class F>
static void norm_bwd_weight(m2_cuda_ctx *c, const norm_bwd_plan &p, int rows, int n, F f, float *dw, const char *what)
{
    if (p.part) {
        const m2_colsum_seg seg = {p.part, dw, p.nblk, n, n};
        m2_colsum_finish(c, &seg, 1, what);
    } else {
        m2_colsum(c, p.ws_off, rows, n, f, dw, what);
    }
}

/* The 4-channel kernels when every segment, row and pointer is 16-byte aligned. */
static bool norm_vec4(int n, int G, std::initializer_list<const void *> ptrs, std::initializer_list<long long> ld)
{
    return n % G == 0 && (n / G) % 4 == 0 && m2_vec4_ok(ptrs, ld);
}

/* Launched from a template on Cfg, so that the emulation's counters key the launch as its SASS row is keyed
 * (rmsnorm_bwd_kernel<norm_v4>, tests/gpu/emu/emu_counters.h). */
template <class Cfg, class TD, class TY>
static void rmsnorm_bwd_run(cudaStream_t st, const norm_bwd_plan &p, const TD *dy, const float *x, const float *w,
                            int rows, int n, float *dx, TY *y, TY *dxa)
{
    rmsnorm_bwd_kernel<Cfg, TD, TY>
        <<<p.nblk, M2_CUDA_THREADS, p.shmem, st>>>(dy, x, w, rows, n, p.per, dx, p.part, p.rstd, y, dxa);
    M2_CUDA_LAUNCHED("rmsnorm_bwd");
}

/* dy's type is yt's (a layer's d(u)) or fp32 (norm_f's, from the fp32 head): three pairs of types, not four. */
void m2_cuda_rmsnorm_bwd(const m2_ops *o, const void *dyv, m2_act_type dyt, const m2_real *x, const m2_real *w,
                         int rows, int n, m2_real *dx, m2_real *dw, void *yv, void *dx_act, m2_act_type yt)
{
    if (rows <= 0 || n <= 0) return;
    if (dyt != yt && dyt != M2_ACT_REAL)
        m2_cuda_check(cudaErrorInvalidValue, "rmsnorm_bwd: dy neither fp32 nor of y's type");
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const norm_bwd_plan p = norm_bwd_plan_of(c, rows, n, 1);
    m2_act_dispatch(yt, [&](auto *ty) {
        using TY = m2_elem_t<decltype(ty)>;
        TY *y = (TY *)yv, *dxa = (TY *)dx_act;
        auto run = [&](auto *td) {
            using TD = m2_elem_t<decltype(td)>;
            const TD *dy = (const TD *)dyv;
            if (norm_vec4(n, 1, {dy, x, w, dx, y, dxa}, {}))
                rmsnorm_bwd_run<norm_v4>(c->stream, p, dy, x, w, rows, n, dx, y, dxa);
            else
                rmsnorm_bwd_run<norm_v1>(c->stream, p, dy, x, w, rows, n, dx, y, dxa);
            norm_bwd_weight(c, p, rows, n, rmsnorm_dw_term<TD>{dy, x, p.rstd, n}, dw, "rmsnorm_bwd (weight)");
        };
        if (dyt == yt)
            run((const TY *)nullptr);
        else
            run((const float *)nullptr);
    });
}

/* ---- gated RMSNorm: v = y * silu(z), out = v * rsqrt(mean_group(v^2) + eps) * w ---- */
__device__ __forceinline__ float gate(float y, float z) { return y * z * m2_dev_sigmoid(z); }

/* The gated norm's configurations are norm_v1 / norm_v4 (above). With V = 1 the kernels are the one-channel-per-thread
 * loops; with V = 4 each thread's partial sums run over its 4 consecutive channels first, a different fp32 order (the
 * emulated tests compare with the CPU at the same tolerance, 1e-6 / 1e-5). C: a thread's first C accesses of V
 * channels per group stay in registers between a segment's two passes (the statistics, then the outputs), so a group
 * of up to 8 x 256 channels is read from memory once; a wider group's remaining channels are read twice. */
template <int V> struct gate_in { /* one access's operands */
    m2_vec<V> y, z;
};
template <int V, class TA> __device__ __forceinline__ gate_in<V> gate_load(const TA *y, const TA *z, int j)
{
    return gate_in<V>{m2_vload<V>(y + j), m2_vload<V>(z + j)};
}

/* Forward. Pass 1 forms v and its sum of squares, pass 2 writes v * r * w. TA: the element type of y and z (the
 * stored activations, widened on load). */
template <class Cfg, class TA, class TO>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_fwd_kernel(const TA *y, const TA *z, int ld_z, const float *w, int n, int G, TO *out)
{
    constexpr int V = Cfg::V, C = Cfg::C;
    __shared__ float sh[NORM_WARPS];
    const size_t row = blockIdx.x;
    const int ng = n / G, step = V * blockDim.x;
    const TA *yr = y + row * n, *zr = z + row * ld_z;
    TO *outr = out + row * n;
    for (int g = 0; g < G; g++) {
        const int jt = g * ng + V * threadIdx.x, end = (g + 1) * ng;
        m2_vec<V> vc[C];
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < C; i++) {
            const int j = jt + i * step;
            if (j >= end) break;
            const gate_in<V> a = gate_load<V>(yr, zr, j);
#pragma unroll
            for (int e = 0; e < V; e++) {
                vc[i].v[e] = gate(a.y.v[e], a.z.v[e]);
                ss += vc[i].v[e] * vc[i].v[e];
            }
        }
        for (int j = jt + C * step; j < end; j += step) {
            const gate_in<V> a = gate_load<V>(yr, zr, j);
#pragma unroll
            for (int e = 0; e < V; e++) {
                const float v = gate(a.y.v[e], a.z.v[e]);
                ss += v * v;
            }
        }
        const float r = rstd_of(norm_block_sum(ss, sh), ng);
#pragma unroll
        for (int i = 0; i < C; i++) {
            const int j = jt + i * step;
            if (j >= end) break;
            const m2_vec<V> wv = m2_vload<V>(w + j);
            m2_vec<V> o;
#pragma unroll
            for (int e = 0; e < V; e++) o.v[e] = vc[i].v[e] * r * wv.v[e];
            m2_vstore<V>(outr + j, o);
        }
        for (int j = jt + C * step; j < end; j += step) {
            const gate_in<V> a = gate_load<V>(yr, zr, j);
            const m2_vec<V> wv = m2_vload<V>(w + j);
            m2_vec<V> o;
#pragma unroll
            for (int e = 0; e < V; e++) o.v[e] = gate(a.y.v[e], a.z.v[e]) * r * wv.v[e];
            m2_vstore<V>(outr + j, o);
        }
    }
}

/* The gated norm's rows for norm_bwd_rows: v = y * silu(z); dout read and dy (the SSD backward's input) and dz
 * written in TA (ops.h), dy and dz from dv, each rounded once when bf16. */
template <int V, class TA> struct gated_seg {
    const TA *dout;
    const TA *y, *z;
    TA *dy;
    TA *dz;
    int n, ld_z, ld_dz;
    struct in {
        m2_vec<V> y, z, d; /* y, z, dout */
    };
    struct row {
        const TA *d;
        const TA *y, *z;
        TA *dy;
        TA *dz;
        __device__ in load(int j) const { return in{m2_vload<V>(y + j), m2_vload<V>(z + j), m2_vload<V>(d + j)}; }
        __device__ void store(int j, const in &a, const m2_vec<V> &dv) const
        {
            m2_vec<V> oy, oz;
#pragma unroll
            for (int e = 0; e < V; e++) {
                const float zj = a.z.v[e], sg = m2_dev_sigmoid(zj), yj = a.y.v[e];
                oy.v[e] = dv.v[e] * zj * sg;
                /* d silu(z)/dz = s (1 + z (1 - s)) */
                oz.v[e] = dv.v[e] * yj * sg * (1.0f + zj * (1.0f - sg));
            }
            m2_vstore<V>(dy + j, oy);
            m2_vstore<V>(dz + j, oz);
        }
    };
    __device__ row at(int r) const
    {
        const size_t o = (size_t)r * n;
        return row{dout + o, y + o, z + (size_t)r * ld_z, dy + o, dz + (size_t)r * ld_dz};
    }
    __device__ static float v(const in &a, int e) { return gate(a.y.v[e], a.z.v[e]); }
};

template <class Cfg, class TA>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_bwd_kernel(const TA *dout, const TA *y, const TA *z, int ld_z, const float *w, int rows, int n, int G,
                          int per, TA *dy, TA *dz, int ld_dz, float *part, float *rstd, TA *out)
{
    extern __shared__ float acc_sh[];
    __shared__ float sh[NORM_WARPS];
    norm_bwd_rows<Cfg>(gated_seg<Cfg::V, TA>{dout, y, z, dy, dz, n, ld_z, ld_dz}, w, rows, n, G, per,
                       part ? acc_sh : NULL, sh, part, rstd, out);
}

/* The weight gradient's term for m2_colsum, when the rows are too wide for the backward to form the partials. */
template <class TA> struct gated_dw_term {
    const TA *dout, *y, *z;
    const float *rstd;
    int ld_z, n, G, ng;
    __device__ float operator()(int r, int j) const
    {
        const size_t i = (size_t)r * n + j;
        return m2_ld(dout + i) * gate(m2_ld(y + i), m2_ld(z + (size_t)r * ld_z + j)) * rstd[(size_t)r * G + j / ng];
    }
};

/* Launched from templates on Cfg, so that the emulation's counters key the launch as its SASS row is keyed
 * (gated_norm_fwd_kernel<norm_v4>, tests/gpu/emu/emu_counters.h). */
template <class Cfg, class TA, class TO>
static void gated_fwd_run(cudaStream_t st, const TA *y, const TA *z, int ld_z, const float *w, int rows, int n, int G,
                          TO *out)
{
    gated_norm_fwd_kernel<Cfg, TA, TO><<<rows, M2_CUDA_THREADS, 0, st>>>(y, z, ld_z, w, n, G, out);
    M2_CUDA_LAUNCHED("gated_norm_fwd");
}

template <class Cfg, class TA>
static void gated_bwd_run(cudaStream_t st, const norm_bwd_plan &p, const TA *dout, const TA *y, const TA *z, int ld_z,
                          const float *w, int rows, int n, int G, TA *dy, TA *dz, int ld_dz, TA *out)
{
    gated_norm_bwd_kernel<Cfg, TA><<<p.nblk, M2_CUDA_THREADS, p.shmem, st>>>(dout, y, z, ld_z, w, rows, n, G, p.per, dy,
                                                                             dz, ld_dz, p.part, p.rstd, out);
    M2_CUDA_LAUNCHED("gated_norm_bwd");
}

void m2_cuda_gated_norm_fwd(const m2_ops *o, const void *yv, const void *zv, int ld_z, m2_act_type at, const m2_real *w,
                            int rows, int n, int G, void *outv, m2_act_type ot)
{
    if (rows <= 0 || n <= 0) return;
    cudaStream_t st = m2_cuda_ctx_of(o)->stream;
    m2_act_dispatch(at, [&](auto *ta) {
        m2_act_dispatch(ot, [&](auto *to) {
            using TA = m2_elem_t<decltype(ta)>;
            using TO = m2_elem_t<decltype(to)>;
            const TA *y = (const TA *)yv, *z = (const TA *)zv;
            TO *out = (TO *)outv;
            if (norm_vec4(n, G, {y, z, w, out}, {ld_z}))
                gated_fwd_run<norm_v4>(st, y, z, ld_z, w, rows, n, G, out);
            else
                gated_fwd_run<norm_v1>(st, y, z, ld_z, w, rows, n, G, out);
        });
    });
}

void m2_cuda_gated_norm_bwd(const m2_ops *o, const void *doutv, const void *yv, const void *zv, int ld_z,
                            m2_act_type at, const m2_real *w, int rows, int n, int G, void *dyv, void *dzv, int ld_dz,
                            m2_real *dw, void *outv)
{
    if (rows <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const norm_bwd_plan p = norm_bwd_plan_of(c, rows, n, G);
    m2_act_dispatch(at, [&](auto *ta) {
        using TA = m2_elem_t<decltype(ta)>;
        const TA *dout = (const TA *)doutv, *y = (const TA *)yv, *z = (const TA *)zv;
        TA *dy = (TA *)dyv, *dz = (TA *)dzv, *out = (TA *)outv;
        if (norm_vec4(n, G, {dout, y, z, w, dy, dz, out}, {ld_z, ld_dz}))
            gated_bwd_run<norm_v4>(c->stream, p, dout, y, z, ld_z, w, rows, n, G, dy, dz, ld_dz, out);
        else
            gated_bwd_run<norm_v1>(c->stream, p, dout, y, z, ld_z, w, rows, n, G, dy, dz, ld_dz, out);
        norm_bwd_weight(c, p, rows, n, gated_dw_term<TA>{dout, y, z, p.rstd, ld_z, n, G, n / G}, dw,
                        "gated_norm_bwd (weight)");
    });
}
