/* CUDA ops for the data-parallel step on a gradient shard (dist/zero.h): the sum of squares behind the global
 * gradient norm, and the scaling by 1/count and the clip factor. Deterministic as loss_cuda.cu: a grid whose size
 * depends only on n, each thread striding over the elements and accumulating in fp64, a fixed-order block sum, then
 * one thread adding the block partials in block order. No atomics, so the norm (and every later step) is
 * reproducible run to run. */
#include "cuda_common.cuh"

enum { SUMSQ_MAX_BLOCKS = 1024 };

__global__ void __launch_bounds__(M2_CUDA_THREADS) sumsq_kernel(const float *x, size_t n, double *part)
{
    __shared__ double sh[M2_CUDA_THREADS];
    double s = 0.0;
    M2_GRID_STRIDE(i, n)
    {
        const double v = (double)x[i];
        s += v * v;
    }
    s = m2_block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sumsq_final_kernel(const double *part, int nblk, double *total)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double s = 0.0;
    for (int b = 0; b < nblk; b++) s += part[b];
    *total = s;
}

double m2_cuda_sumsq(const m2_ops *o, const float *x, size_t n)
{
    if (!n) return 0.0;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    unsigned nblk = m2_cuda_blocks(n);
    if (nblk > SUMSQ_MAX_BLOCKS) nblk = SUMSQ_MAX_BLOCKS;
    /* workspace: the total, then the per-block partials */
    char *ws = (char *)m2_cuda_ws(c, 256 + (size_t)nblk * sizeof(double));
    double *total = (double *)ws, *part = (double *)(ws + 256);
    sumsq_kernel<<<nblk, M2_CUDA_THREADS, 0, c->stream>>>(x, n, part);
    M2_CUDA_LAUNCHED("sumsq");
    sumsq_final_kernel<<<1, 1, 0, c->stream>>>(part, (int)nblk, total);
    M2_CUDA_LAUNCHED("sumsq (total)");
    double host = 0.0;
    m2_cuda_check(cudaMemcpyAsync(&host, total, sizeof host, cudaMemcpyDeviceToHost, c->stream),
                  "sumsq: copying the sum back");
    m2_cuda_check(cudaStreamSynchronize(c->stream), "sumsq: waiting for the sum");
    return host;
}

/* In double, as the CPU step does, so the scaled gradient rounds once. */
__global__ void scale_kernel(float *x, size_t n, double factor)
{
    M2_GRID_STRIDE(i, n) x[i] = (float)((double)x[i] * factor);
}

void m2_cuda_scale(const m2_ops *o, float *x, size_t n, double factor)
{
    if (!n) return;
    scale_kernel<<<m2_cuda_blocks(n), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(x, n, factor);
    M2_CUDA_LAUNCHED("scale");
}
