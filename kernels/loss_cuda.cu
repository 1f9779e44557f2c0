/* CUDA ops: the training loss of docs/MODEL.md §4 before normalisation (sum of squared errors and its count) and
 * d(sse)/d(pred). Deterministic: a fixed grid (its size depends only on the element count) where each thread
 * strides over the elements, then a fixed-order block sum per block in fp64 / int64, then one thread adds the
 * block partials in block order. No atomics. */
#include "cuda_common.cuh"

enum { LOSS_MAX_BLOCKS = 1024 };

__global__ void __launch_bounds__(M2_CUDA_THREADS)
    mse_kernel(const float *pred, const float *Y, int T, int O, int burn_in, size_t total, float *dpred,
               double *part_sse, long long *part_cnt)
{
    __shared__ double shd[M2_CUDA_THREADS];
    __shared__ long long shc[M2_CUDA_THREADS];
    double s = 0.0;
    long long cnt = 0;
    M2_GRID_STRIDE(i, total)
    {
        const int t = (int)((i / O) % T);
        const float y = Y[i];
        /* Masked terms get an exact zero gradient, whatever pred holds. */
        if (t < burn_in || !isfinite(y)) {
            dpred[i] = 0.0f;
            continue;
        }
        const float e = pred[i] - y;
        dpred[i] = 2.0f * e;
        s += (double)e * (double)e;
        cnt++;
    }
    s = m2_block_sum(s, shd);
    cnt = m2_block_sum(cnt, shc);
    if (threadIdx.x == 0) {
        part_sse[blockIdx.x] = s;
        part_cnt[blockIdx.x] = cnt;
    }
}

__global__ void mse_final_kernel(const double *part_sse, const long long *part_cnt, int nblk, double *sse,
                                 long long *cnt)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double s = 0.0;
    long long c = 0;
    for (int b = 0; b < nblk; b++) {
        s += part_sse[b];
        c += part_cnt[b];
    }
    *sse = s;
    *cnt = c;
}

void m2_cuda_mse_loss(const m2_ops *o, const m2_real *pred, const m2_real *Y, int B, int T, int O, int burn_in,
                      m2_real *dpred, double *sse, int64_t *count)
{
    const size_t total = (size_t)B * T * O;
    *sse = 0.0;
    *count = 0;
    if (!total) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    unsigned nblk = m2_cuda_blocks(total);
    if (nblk > LOSS_MAX_BLOCKS) nblk = LOSS_MAX_BLOCKS;
    /* workspace: [sse, count] totals, then the per-block partials */
    char *ws = (char *)m2_cuda_ws(c, 256 + (size_t)nblk * (sizeof(double) + sizeof(long long)));
    double *tot_sse = (double *)ws;
    long long *tot_cnt = (long long *)(ws + sizeof(double));
    double *part_sse = (double *)(ws + 256);
    long long *part_cnt = (long long *)(ws + 256 + (size_t)nblk * sizeof(double));
    mse_kernel<<<nblk, M2_CUDA_THREADS, 0, c->stream>>>(pred, Y, T, O, burn_in, total, dpred, part_sse, part_cnt);
    M2_CUDA_LAUNCHED("mse_loss");
    mse_final_kernel<<<1, 1, 0, c->stream>>>(part_sse, part_cnt, (int)nblk, tot_sse, tot_cnt);
    M2_CUDA_LAUNCHED("mse_loss (total)");
    double host_sse = 0.0;
    long long host_cnt = 0;
    m2_cuda_check(cudaMemcpyAsync(&host_sse, tot_sse, sizeof host_sse, cudaMemcpyDeviceToHost, c->stream),
                  "mse_loss: copying the sum back");
    m2_cuda_check(cudaMemcpyAsync(&host_cnt, tot_cnt, sizeof host_cnt, cudaMemcpyDeviceToHost, c->stream),
                  "mse_loss: copying the count back");
    m2_cuda_check(cudaStreamSynchronize(c->stream), "mse_loss: waiting for the sum");
    *sse = host_sse;
    *count = (int64_t)host_cnt;
}
