/* AdamW (decoupled weight decay, Loshchilov & Hutter; the rule of torch.optim.AdamW) over n contiguous fp32
 * elements of the flat buffers: a plain function so that the data-parallel step can run it on its ZeRO-1
 * shard [begin, end) by passing params + begin, grads + begin, ... and n = end - begin.
 *
 * For each i (step counts from 1):
 *   p -= lr * weight_decay * p                      only where decay_mask[i] != 0 (NULL: nowhere)
 *   m  = beta1 m + (1 - beta1) g
 *   v  = beta2 v + (1 - beta2) g^2
 *   p -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
 * grads are used as given (already averaged and clipped by the caller). Parallel with OpenMP; the result
 * does not depend on the thread count (each element is independent). */
#ifndef MAMBA2_ADAMW_H
#define MAMBA2_ADAMW_H

#include <stddef.h>
#include <stdint.h>

void m2_adamw(float *params, const float *grads, float *m, float *v, const unsigned char *decay_mask, size_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step);

#endif
