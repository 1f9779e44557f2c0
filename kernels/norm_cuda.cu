/* CUDA ops: RMSNorm and the grouped gated RMSNorm (docs/MODEL.md §2, §2.5), forward and backward.
 *
 * One block per row; a segment (the whole row for RMSNorm, one group of n/G channels for the gated norm) is
 * reduced with the fixed-order block sum, statistics in fp32. Both backward passes use, for a segment v of ns
 * values normalised as out = v * r * w with r = rsqrt(mean(v^2) + eps):
 *   dv = r * (w * dout) - v * r^3 / ns * sum(w * dout * v),     dw += dout * v * r.
 * In the gated norm ns is the GROUP size (upstream divides by the full width when G > 1, a known bug that
 * docs/MODEL.md asks us not to copy). dw is a column sum over rows: each row's r is kept in the workspace and the
 * deterministic column sum (cuda_common.cuh) forms dw. */
#include "cuda_common.cuh"

__device__ __forceinline__ float rstd_of(float sumsq, int ns)
{
    return 1.0f / sqrtf(sumsq / (float)ns + (float)M2_NORM_EPS);
}

/* ---- RMSNorm ---- */
__global__ void __launch_bounds__(M2_CUDA_THREADS) rmsnorm_fwd_kernel(const float *x, const float *w, int n, float *y)
{
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const float *xr = x + row * n;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) ss += xr[j] * xr[j];
    const float r = rstd_of(m2_block_sum(ss, sh), n);
    float *yr = y + row * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = xr[j] * r * w[j];
}

__global__ void __launch_bounds__(M2_CUDA_THREADS)
    rmsnorm_bwd_kernel(const float *dy, const float *x, const float *w, int n, float *dx, float *rstd)
{
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const float *xr = x + row * n, *dyr = dy + row * n;
    float ss = 0.0f, s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        ss += xr[j] * xr[j];
        s += w[j] * dyr[j] * xr[j];
    }
    const float r = rstd_of(m2_block_sum(ss, sh), n);
    const float cst = r * r * r * m2_block_sum(s, sh) / (float)n;
    float *dxr = dx + row * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) dxr[j] += r * w[j] * dyr[j] - cst * xr[j];
    if (threadIdx.x == 0) rstd[row] = r;
}

struct rmsnorm_dw_term {
    const float *dy, *x, *rstd;
    int n;
    __device__ float operator()(int r, int j) const
    {
        const size_t i = (size_t)r * n + j;
        return dy[i] * x[i] * rstd[r];
    }
};

void m2_cuda_rmsnorm_fwd(const m2_ops *o, const m2_real *x, const m2_real *w, int rows, int n, m2_real *y)
{
    if (rows <= 0 || n <= 0) return;
    rmsnorm_fwd_kernel<<<rows, M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(x, w, n, y);
    M2_CUDA_LAUNCHED("rmsnorm_fwd");
}

void m2_cuda_rmsnorm_bwd(const m2_ops *o, const m2_real *dy, const m2_real *x, const m2_real *w, int rows, int n,
                         m2_real *dx, m2_real *dw)
{
    if (rows <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    /* The rows' rstd at the start of the workspace, the column sum's partials after it. */
    const size_t off = m2_cuda_align((size_t)rows * sizeof(float));
    float *rstd = (float *)m2_cuda_ws(c, off + m2_colsum_ws_bytes(rows, n));
    rmsnorm_bwd_kernel<<<rows, M2_CUDA_THREADS, 0, c->stream>>>(dy, x, w, n, dx, rstd);
    M2_CUDA_LAUNCHED("rmsnorm_bwd");
    m2_colsum(c, off, rows, n, rmsnorm_dw_term{dy, x, rstd, n}, m2_add_to{dw}, "rmsnorm_bwd (weight)");
}

/* ---- gated RMSNorm: v = y * silu(z), out = v * rsqrt(mean_group(v^2) + eps) * w ---- */
__device__ __forceinline__ float gate(float y, float z) { return y * z * m2_dev_sigmoid(z); }

/* V channels per thread: 4 (16-byte loads and stores) when the group width, the strides and the pointers allow it
 * (named types, so that a kernel's counters and its SASS row share one key). With V = 1 the kernels are the
 * one-channel-per-thread loops; with V = 4 each thread's partial sums run over its 4 consecutive channels first, a
 * different fp32 order (the emulated tests compare with the CPU at the same tolerance, 1e-6 / 1e-5). */
struct norm_v1 {
    static constexpr int V = 1;
};
struct norm_v4 {
    static constexpr int V = 4;
};

template <class Cfg>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_fwd_kernel(const float *y, const float *z, int ld_z, const float *w, int n, int G, float *out)
{
    constexpr int V = Cfg::V;
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const int ng = n / G, step = V * blockDim.x;
    const float *yr = y + row * n, *zr = z + row * ld_z;
    float *outr = out + row * n;
    for (int g = 0; g < G; g++) {
        const int j0 = g * ng;
        float ss = 0.0f;
        for (int j = j0 + V * threadIdx.x; j < j0 + ng; j += step) {
            const m2_vec<V> yv = m2_vload<V>(yr + j), zv = m2_vload<V>(zr + j);
#pragma unroll
            for (int e = 0; e < V; e++) {
                const float v = gate(yv.v[e], zv.v[e]);
                ss += v * v;
            }
        }
        const float r = rstd_of(m2_block_sum(ss, sh), ng);
        for (int j = j0 + V * threadIdx.x; j < j0 + ng; j += step) {
            const m2_vec<V> yv = m2_vload<V>(yr + j), zv = m2_vload<V>(zr + j), wv = m2_vload<V>(w + j);
            m2_vec<V> o;
#pragma unroll
            for (int e = 0; e < V; e++) o.v[e] = gate(yv.v[e], zv.v[e]) * r * wv.v[e];
            m2_vstore<V>(outr + j, o);
        }
    }
}

template <class Cfg>
__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_bwd_kernel(const float *dout, const float *y, const float *z, int ld_z, const float *w, int n, int G,
                          float *dy, float *dz, int ld_dz, float *rstd)
{
    constexpr int V = Cfg::V;
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const int ng = n / G, step = V * blockDim.x;
    const float *yr = y + row * n, *zr = z + row * ld_z, *dor = dout + row * n;
    float *dyr = dy + row * n, *dzr = dz + row * ld_dz;
    for (int g = 0; g < G; g++) {
        const int j0 = g * ng;
        float ss = 0.0f, s = 0.0f;
        for (int j = j0 + V * threadIdx.x; j < j0 + ng; j += step) {
            const m2_vec<V> yv = m2_vload<V>(yr + j), zv = m2_vload<V>(zr + j), wv = m2_vload<V>(w + j),
                            dv = m2_vload<V>(dor + j);
#pragma unroll
            for (int e = 0; e < V; e++) {
                const float v = gate(yv.v[e], zv.v[e]);
                ss += v * v;
                s += wv.v[e] * dv.v[e] * v;
            }
        }
        const float r = rstd_of(m2_block_sum(ss, sh), ng);
        const float cst = r * r * r * m2_block_sum(s, sh) / (float)ng;
        for (int j = j0 + V * threadIdx.x; j < j0 + ng; j += step) {
            const m2_vec<V> yv = m2_vload<V>(yr + j), zv = m2_vload<V>(zr + j), wv = m2_vload<V>(w + j),
                            dov = m2_vload<V>(dor + j);
            m2_vec<V> oy, oz;
#pragma unroll
            for (int e = 0; e < V; e++) {
                const float zj = zv.v[e], sg = m2_dev_sigmoid(zj), yj = yv.v[e];
                const float dv = r * wv.v[e] * dov.v[e] - cst * gate(yj, zj);
                oy.v[e] = dv * zj * sg;
                /* d silu(z)/dz = s (1 + z (1 - s)) */
                oz.v[e] = dv * yj * sg * (1.0f + zj * (1.0f - sg));
            }
            m2_vstore<V>(dyr + j, oy);
            m2_vstore<V>(dzr + j, oz);
        }
        if (threadIdx.x == 0) rstd[row * G + g] = r;
    }
}

/* The 4-channel kernels when every group, row and pointer is 16-byte aligned. */
static bool norm_vec4(int n, int G, std::initializer_list<const void *> ptrs, std::initializer_list<long long> ld)
{
    return n % G == 0 && (n / G) % 4 == 0 && m2_vec4_ok(ptrs, ld);
}

struct gated_dw_term {
    const float *dout, *y, *z, *rstd;
    int ld_z, n, G, ng;
    __device__ float operator()(int r, int j) const
    {
        const size_t i = (size_t)r * n + j;
        return dout[i] * gate(y[i], z[(size_t)r * ld_z + j]) * rstd[(size_t)r * G + j / ng];
    }
};

/* Launched from templates on Cfg, so that the emulation's counters key the launch as its SASS row is keyed
 * (gated_norm_fwd_kernel<norm_v4>, tests/gpu/emu/emu_counters.h). */
template <class Cfg>
static void gated_fwd_run(cudaStream_t st, const float *y, const float *z, int ld_z, const float *w, int rows, int n,
                          int G, float *out)
{
    gated_norm_fwd_kernel<Cfg><<<rows, M2_CUDA_THREADS, 0, st>>>(y, z, ld_z, w, n, G, out);
    M2_CUDA_LAUNCHED("gated_norm_fwd");
}
template <class Cfg>
static void gated_bwd_run(cudaStream_t st, const float *dout, const float *y, const float *z, int ld_z, const float *w,
                          int rows, int n, int G, float *dy, float *dz, int ld_dz, float *rstd)
{
    gated_norm_bwd_kernel<Cfg><<<rows, M2_CUDA_THREADS, 0, st>>>(dout, y, z, ld_z, w, n, G, dy, dz, ld_dz, rstd);
    M2_CUDA_LAUNCHED("gated_norm_bwd");
}

void m2_cuda_gated_norm_fwd(const m2_ops *o, const m2_real *y, const m2_real *z, int ld_z, const m2_real *w, int rows,
                            int n, int G, m2_real *out)
{
    if (rows <= 0 || n <= 0) return;
    cudaStream_t st = m2_cuda_ctx_of(o)->stream;
    if (norm_vec4(n, G, {y, z, w, out}, {ld_z}))
        gated_fwd_run<norm_v4>(st, y, z, ld_z, w, rows, n, G, out);
    else
        gated_fwd_run<norm_v1>(st, y, z, ld_z, w, rows, n, G, out);
}

void m2_cuda_gated_norm_bwd(const m2_ops *o, const m2_real *dout, const m2_real *y, const m2_real *z, int ld_z,
                            const m2_real *w, int rows, int n, int G, m2_real *dy, m2_real *dz, int ld_dz, m2_real *dw)
{
    if (rows <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const size_t off = m2_cuda_align((size_t)rows * G * sizeof(float));
    float *rstd = (float *)m2_cuda_ws(c, off + m2_colsum_ws_bytes(rows, n));
    if (norm_vec4(n, G, {dout, y, z, w, dy, dz}, {ld_z, ld_dz}))
        gated_bwd_run<norm_v4>(c->stream, dout, y, z, ld_z, w, rows, n, G, dy, dz, ld_dz, rstd);
    else
        gated_bwd_run<norm_v1>(c->stream, dout, y, z, ld_z, w, rows, n, G, dy, dz, ld_dz, rstd);
    m2_colsum(c, off, rows, n, gated_dw_term{dout, y, z, rstd, ld_z, n, G, n / G}, m2_add_to{dw},
              "gated_norm_bwd (weight)");
}
