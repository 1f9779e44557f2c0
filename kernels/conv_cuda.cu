/* CUDA ops: the causal depthwise conv1d + bias + SiLU over the x, B, C channels (docs/MODEL.md §2 step 3), forward and
 * backward. One thread per (token, channel): consecutive threads take consecutive channels, so every load of a
 * token row is coalesced.
 *
 * Backward, per sequence: pre(t, c) = b[c] + sum_k w[c,k] in[t-K+1+k, c] (zero before t = 0), out = silu(pre).
 *   dpre(t, c) = dout(t, c) * silu'(pre(t, c))                 (kept in the workspace)
 *   din(t, c)  = sum_k w[c,k] dpre(t+K-1-k, c)                  (over output ticks inside the sequence)
 *   dw[c,k]   += sum_t dpre(t, c) in[t-K+1+k, c],   db[c] += sum_t dpre(t, c)
 * The weight and bias gradients are one deterministic column sum over the token rows with C*(K+1) virtual
 * columns (c, k), k = K standing for the bias. */
#include "cuda_common.cuh"

__device__ __forceinline__ float conv_pre(const float *seq, int ld_in, const float *w, const float *b, int t, int c,
                                          int K)
{
    float a = b[c];
    for (int k = 0; k < K; k++) {
        const int ts = t - K + 1 + k;
        if (ts >= 0) a += w[(size_t)c * K + k] * seq[(size_t)ts * ld_in + c];
    }
    return a;
}

__global__ void conv_fwd_kernel(const float *in, int ld_in, const float *w, const float *b, int T, int C, int K,
                                size_t total, float *out)
{
    M2_GRID_STRIDE(i, total)
    {
        const size_t r = i / C;
        const int c = (int)(i % C), t = (int)(r % T);
        const float *seq = in + (r - t) * ld_in; /* the sequence's first row */
        const float a = conv_pre(seq, ld_in, w, b, t, c, K);
        out[i] = a * m2_dev_sigmoid(a);
    }
}

void m2_cuda_conv_silu_fwd(const m2_ops *o, const m2_real *in, int ld_in, const m2_real *w, const m2_real *b, int B,
                           int T, int C, int K, m2_real *out)
{
    const size_t total = (size_t)B * T * C;
    if (!total) return;
    conv_fwd_kernel<<<m2_cuda_blocks(total), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(in, ld_in, w, b, T, C, K,
                                                                                              total, out);
    M2_CUDA_LAUNCHED("conv_silu_fwd");
}

__global__ void conv_dpre_kernel(const float *dout, const float *in, int ld_in, const float *w, const float *b, int T,
                                 int C, int K, size_t total, float *dpre)
{
    M2_GRID_STRIDE(i, total)
    {
        const size_t r = i / C;
        const int c = (int)(i % C), t = (int)(r % T);
        const float a = conv_pre(in + (r - t) * ld_in, ld_in, w, b, t, c, K);
        const float s = m2_dev_sigmoid(a);
        dpre[i] = dout[i] * s * (1.0f + a * (1.0f - s));
    }
}

__global__ void conv_din_kernel(const float *dpre, const float *w, int T, int C, int K, size_t total, float *din,
                                int ld_din)
{
    M2_GRID_STRIDE(i, total)
    {
        const size_t r = i / C;
        const int c = (int)(i % C), t = (int)(r % T);
        float s = 0.0f;
        for (int k = 0; k < K; k++) {
            const int tf = t + K - 1 - k; /* the output tick that saw input t through tap k */
            if (tf < T) s += w[(size_t)c * K + k] * dpre[(r + (K - 1 - k)) * C + c];
        }
        din[r * ld_din + c] = s;
    }
}

/* Virtual column j = c*(K+1) + k: k < K is dw[c,k]'s term, k = K is db[c]'s. */
struct conv_wb_term {
    const float *dpre, *in;
    int ld_in, T, C, K;
    __device__ float operator()(int r, int j) const
    {
        const int c = j / (K + 1), k = j % (K + 1);
        const float d = dpre[(size_t)r * C + c];
        if (k == K) return d;
        const int t = r % T, ts = t - K + 1 + k;
        return ts >= 0 ? d * in[((size_t)r - (size_t)(K - 1 - k)) * ld_in + c] : 0.0f;
    }
};

struct conv_wb_out {
    float *dw, *db;
    int K;
    __device__ void operator()(int j, float s) const
    {
        const int c = j / (K + 1), k = j % (K + 1);
        if (k == K)
            db[c] += s;
        else
            dw[(size_t)c * K + k] += s;
    }
};

void m2_cuda_conv_silu_bwd(const m2_ops *o, const m2_real *dout, const m2_real *in, int ld_in, const m2_real *w,
                           const m2_real *b, int B, int T, int C, int K, m2_real *din, int ld_din, m2_real *dw,
                           m2_real *db)
{
    const int rows = B * T;
    const size_t total = (size_t)rows * C;
    if (!total) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const int ncol = C * (K + 1);
    const size_t off = m2_cuda_align(total * sizeof(float));
    float *dpre = (float *)m2_cuda_ws(c, off + m2_colsum_ws_bytes(rows, ncol));
    conv_dpre_kernel<<<m2_cuda_blocks(total), M2_CUDA_THREADS, 0, c->stream>>>(dout, in, ld_in, w, b, T, C, K, total,
                                                                               dpre);
    M2_CUDA_LAUNCHED("conv_silu_bwd (dpre)");
    conv_din_kernel<<<m2_cuda_blocks(total), M2_CUDA_THREADS, 0, c->stream>>>(dpre, w, T, C, K, total, din, ld_din);
    M2_CUDA_LAUNCHED("conv_silu_bwd (din)");
    m2_colsum(c, off, rows, ncol, conv_wb_term{dpre, in, ld_in, T, C, K}, conv_wb_out{dw, db, K},
              "conv_silu_bwd (weight, bias)");
}
