/* CUDA ops: AdamW over n contiguous fp32 elements, the rule of core/adamw.h (torch.optim.AdamW) exactly as the
 * CPU does it: the bias corrections are formed once per call on the host in double, each element is independent
 * (so the result is deterministic). Parameters, gradients and moments are the fp32 masters (docs/MODEL.md §5). */
#include "cuda_common.cuh"

#include <math.h>

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, const unsigned char *decay_mask,
                             size_t n, float beta1, float beta2, float eps, float step_size, float decay,
                             float bc2_rsqrt)
{
    M2_GRID_STRIDE(i, n)
    {
        const float g = grads[i];
        float p = params[i];
        if (decay_mask && decay_mask[i]) p -= decay * p;
        const float mi = beta1 * m[i] + (1.0f - beta1) * g;
        const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        /* sqrt(v / bc2) = sqrt(v) / sqrt(bc2) */
        params[i] = p - step_size * mi / (sqrtf(vi) * bc2_rsqrt + eps);
    }
}

void m2_cuda_adamw(const m2_ops *o, float *params, const float *grads, float *m, float *v,
                   const unsigned char *decay_mask, size_t n, float lr, float beta1, float beta2, float eps,
                   float weight_decay, int64_t step)
{
    if (!n) return;
    const float bc1 = (float)(1.0 - pow(beta1, (double)step));
    const float bc2_rsqrt = (float)(1.0 / sqrt(1.0 - pow(beta2, (double)step)));
    adamw_kernel<<<m2_cuda_blocks(n), M2_CUDA_THREADS, 0, m2_cuda_ctx_of(o)->stream>>>(
        params, grads, m, v, decay_mask, n, beta1, beta2, eps, lr / bc1, lr * weight_decay, bc2_rsqrt);
    M2_CUDA_LAUNCHED("adamw");
}
