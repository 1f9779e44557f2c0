/* CUDA ops: the small elementwise ops (bias, residual add, dt = softplus(dt_raw + dt_bias) with A = -exp(A_log)) and
 * their gradients; the rounding of a weight to the activation type. Gradients of parameters are deterministic column sums (cuda_common.cuh). */
#include "cuda_common.cuh"

/* ---- bias ---- */
__global__ void bias_add_kernel(float *Y, int ldy, const float *bias, int rows, int n)
{
    M2_GRID_STRIDE(i, (size_t)rows * n)
    {
        const size_t r = i / n, j = i % n;
        Y[r * ldy + j] += bias[j];
    }
}

void m2_cuda_bias_add(const m2_ops *o, m2_real *Y, int ldy, const m2_real *bias, int rows, int n)
{
    const size_t total = (size_t)rows * n;
    if (!total) return;
    bias_add_kernel<<<m2_cuda_blocks(total), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(Y, ldy, bias, rows, n);
    M2_CUDA_LAUNCHED("bias_add");
}

struct strided_value {
    const float *p;
    int ld;
    __device__ float operator()(int r, int j) const { return p[(size_t)r * ld + j]; }
};

void m2_cuda_bias_grad(const m2_ops *o, const m2_real *dY, int ldy, int rows, int n, m2_real *db)
{
    m2_colsum(m2_cuda_ctx_of(o), 0, rows, n, strided_value{dY, ldy}, db, "bias_grad");
}

/* ---- residual ---- */
__global__ void add_kernel(float *y, const float *x, size_t n) { M2_GRID_STRIDE(i, n) y[i] += x[i]; }

void m2_cuda_add(const m2_ops *o, m2_real *y, const m2_real *x, size_t n)
{
    if (!n) return;
    add_kernel<<<m2_cuda_blocks(n), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(y, x, n);
    M2_CUDA_LAUNCHED("add");
}

/* ---- dt = softplus(dt_raw + dt_bias), softplus(v) = v above the threshold, and A = -exp(A_log) (docs/MODEL.md §2
 * step 4); the backward's dA_log += dA * A. A and dA_log ride on the dt kernels (the first H threads of the grid),
 * which run anyway: a kernel of their own for H values was a launch for nothing (~3 us each, 3 per layer). ---- */
__device__ __forceinline__ float softplusf(float v) { return v > (float)M2_SOFTPLUS_THRESHOLD ? v : log1pf(expf(v)); }

/* d softplus(v)/dv = sigmoid(v); exactly 1 where softplus is the identity. */
__device__ __forceinline__ float softplus_grad(float v)
{
    return v > (float)M2_SOFTPLUS_THRESHOLD ? 1.0f : m2_dev_sigmoid(v);
}

/* TR: the element type of dt_raw (a slice of the stored in_proj output); dt and its gradients stay fp32. */
template <class TR>
__global__ void dt_fwd_kernel(const TR *dt_raw, int ld, const float *dt_bias, const float *A_log, int rows, int H,
                              float *dt, float *A)
{
    M2_GRID_STRIDE(h, H) A[h] = -expf(A_log[h]);
    M2_GRID_STRIDE(i, (size_t)rows * H)
    {
        const size_t r = i / H, h = i % H;
        dt[i] = softplusf(m2_ld(dt_raw + r * ld + h) + dt_bias[h]);
    }
}

/* ddt_raw = ddt * softplus'(dt_raw + dt_bias), stored in TR (rounded once when bf16), dA_log += dA * A (the threads
 * of the first row block), and dt_bias's gradient from the fp32 values before that rounding: the thread of column h
 * walks the column-sum block of rows [r0, r1) (blockIdx.y) in order and leaves its sum in part[blk][h] for
 * m2_colsum_finish, the same blocks of rows and order as m2_colsum's over the fp32 ddt_raw (so, at fp32, the figures
 * of a separate column sum that reads ddt_raw back). */
template <class TR>
__global__ void dt_bwd_kernel(const float *ddt, const TR *dt_raw, int ld, const float *dt_bias, const float *dA,
                              const float *A_log, int rows, int H, int per, TR *ddt_raw, float *part, float *dA_log)
{
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    if (blockIdx.y == 0) dA_log[h] += dA[h] * -expf(A_log[h]);
    const int r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
    const float bias = dt_bias[h];
    float s = 0.0f;
    for (int r = r0; r < r1; r++) {
        const size_t i = (size_t)r * ld + h;
        const float g = ddt[(size_t)r * H + h] * softplus_grad(m2_ld(dt_raw + i) + bias);
        m2_st(ddt_raw + i, g);
        s += g;
    }
    part[(size_t)blockIdx.y * H + h] = s;
}

void m2_cuda_dt_fwd(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias,
                    const m2_real *A_log, int rows, int H, m2_real *dt, m2_real *A)
{
    const size_t total = (size_t)(rows > 1 ? rows : 1) * H; /* A's H values when there are no rows */
    if (!total) return;
    m2_act_dispatch(rt, [&](auto *tr) {
        using TR = m2_elem_t<decltype(tr)>;
        dt_fwd_kernel<TR><<<m2_cuda_blocks(total), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(
            (const TR *)dt_raw, ld, dt_bias, A_log, rows, H, dt, A);
        M2_CUDA_LAUNCHED("dt_fwd");
    });
}

/* ddt_raw, dA_log and dt_bias's column partials in one kernel (above), then the column sum's final pass. With no
 * rows one row block of none (dA_log alone; its partials 0). */
void m2_cuda_dt_bwd(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                    const m2_real *dt_bias, const m2_real *dA, const m2_real *A_log, int rows, int H, void *ddt_raw,
                    m2_real *ddt_bias, m2_real *dA_log)
{
    if (H <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const int per = m2_colsum_rows_per_block(rows > 0 ? rows : 1), nblk = rows > 0 ? (rows + per - 1) / per : 1;
    float *part = m2_colsum_parts(c, 0, rows, H);
    m2_act_dispatch(rt, [&](auto *tr) {
        using TR = m2_elem_t<decltype(tr)>;
        const dim3 grid((H + M2_CUDA_THREADS - 1) / M2_CUDA_THREADS, nblk);
        dt_bwd_kernel<TR><<<grid, M2_CUDA_THREADS, 0, c->stream>>>(ddt, (const TR *)dt_raw, ld, dt_bias, dA, A_log,
                                                                   rows, H, per, (TR *)ddt_raw, part, dA_log);
        M2_CUDA_LAUNCHED("dt_bwd");
    });
    const m2_colsum_seg seg = {part, ddt_bias, nblk, H, H};
    m2_colsum_finish(c, &seg, 1, "dt_bwd (dt_bias)");
}

/* ---- weights in the activation type: dst = x rounded (the model's bf16 copy of its parameters, ops.h to_act) ---- */
__global__ void to_bf16_kernel(const float *x, size_t n, __nv_bfloat16 *dst)
{
    M2_GRID_STRIDE(i, n) dst[i] = __float2bfloat16(x[i]);
}

void m2_cuda_to_act(const m2_ops *o, const m2_real *x, size_t n, void *dst, m2_act_type t)
{
    if (!n) return;
    cudaStream_t st = m2_cuda_ctx_of(o)->stream;
    if (t == M2_ACT_REAL) {
        m2_cuda_check(cudaMemcpyAsync(dst, x, n * sizeof(float), cudaMemcpyDeviceToDevice, st), "to_act (copy)");
        return;
    }
    to_bf16_kernel<<<m2_cuda_blocks(n), M2_CUDA_THREADS, 0, st>>>(x, n, (__nv_bfloat16 *)dst);
    M2_CUDA_LAUNCHED("to_act (bf16 weight)");
}
