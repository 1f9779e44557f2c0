#include "core/adamw.h"

#include <math.h>

void m2_adamw(float *params, const float *grads, float *m, float *v, const unsigned char *decay_mask, size_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step)
{
    /* Bias corrections once per call, in double: beta2^step stays accurate for large steps. */
    const float bc1 = (float)(1.0 - pow(beta1, (double)step));
    const float bc2_rsqrt = (float)(1.0 / sqrt(1.0 - pow(beta2, (double)step)));
    const float step_size = lr / bc1;
    const float decay = lr * weight_decay;
    const long nn = (long)n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < nn; i++) {
        float g = grads[i];
        float p = params[i];
        if (decay_mask && decay_mask[i]) p -= decay * p;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        /* sqrt(v / bc2) = sqrt(v) / sqrt(bc2) */
        params[i] = p - step_size * mi / (sqrtf(vi) * bc2_rsqrt + eps);
    }
}
