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

__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_fwd_kernel(const float *y, const float *z, int ld_z, const float *w, int n, int G, float *out)
{
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const int ng = n / G;
    const float *yr = y + row * n, *zr = z + row * ld_z;
    float *outr = out + row * n;
    for (int g = 0; g < G; g++) {
        const int j0 = g * ng;
        float ss = 0.0f;
        for (int j = j0 + threadIdx.x; j < j0 + ng; j += blockDim.x) {
            const float v = gate(yr[j], zr[j]);
            ss += v * v;
        }
        const float r = rstd_of(m2_block_sum(ss, sh), ng);
        for (int j = j0 + threadIdx.x; j < j0 + ng; j += blockDim.x) outr[j] = gate(yr[j], zr[j]) * r * w[j];
    }
}

__global__ void __launch_bounds__(M2_CUDA_THREADS)
    gated_norm_bwd_kernel(const float *dout, const float *y, const float *z, int ld_z, const float *w, int n, int G,
                          float *dy, float *dz, int ld_dz, float *rstd)
{
    __shared__ float sh[M2_CUDA_THREADS];
    const size_t row = blockIdx.x;
    const int ng = n / G;
    const float *yr = y + row * n, *zr = z + row * ld_z, *dor = dout + row * n;
    float *dyr = dy + row * n, *dzr = dz + row * ld_dz;
    for (int g = 0; g < G; g++) {
        const int j0 = g * ng;
        float ss = 0.0f, s = 0.0f;
        for (int j = j0 + threadIdx.x; j < j0 + ng; j += blockDim.x) {
            const float v = gate(yr[j], zr[j]);
            ss += v * v;
            s += w[j] * dor[j] * v;
        }
        const float r = rstd_of(m2_block_sum(ss, sh), ng);
        const float cst = r * r * r * m2_block_sum(s, sh) / (float)ng;
        for (int j = j0 + threadIdx.x; j < j0 + ng; j += blockDim.x) {
            const float zj = zr[j], sg = m2_dev_sigmoid(zj), yj = yr[j];
            const float dv = r * w[j] * dor[j] - cst * gate(yj, zj);
            dyr[j] = dv * zj * sg;
            /* d silu(z)/dz = s (1 + z (1 - s)) */
            dzr[j] = dv * yj * sg * (1.0f + zj * (1.0f - sg));
        }
        if (threadIdx.x == 0) rstd[row * G + g] = r;
    }
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

void m2_cuda_gated_norm_fwd(const m2_ops *o, const m2_real *y, const m2_real *z, int ld_z, const m2_real *w, int rows,
                            int n, int G, m2_real *out)
{
    if (rows <= 0 || n <= 0) return;
    gated_norm_fwd_kernel<<<rows, M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(y, z, ld_z, w, n, G, out);
    M2_CUDA_LAUNCHED("gated_norm_fwd");
}

void m2_cuda_gated_norm_bwd(const m2_ops *o, const m2_real *dout, const m2_real *y, const m2_real *z, int ld_z,
                            const m2_real *w, int rows, int n, int G, m2_real *dy, m2_real *dz, int ld_dz, m2_real *dw)
{
    if (rows <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const size_t off = m2_cuda_align((size_t)rows * G * sizeof(float));
    float *rstd = (float *)m2_cuda_ws(c, off + m2_colsum_ws_bytes(rows, n));
    gated_norm_bwd_kernel<<<rows, M2_CUDA_THREADS, 0, c->stream>>>(dout, y, z, ld_z, w, n, G, dy, dz, ld_dz, rstd);
    M2_CUDA_LAUNCHED("gated_norm_bwd");
    m2_colsum(c, off, rows, n, gated_dw_term{dout, y, z, rstd, ld_z, n, G, n / G}, m2_add_to{dw},
              "gated_norm_bwd (weight)");
}
