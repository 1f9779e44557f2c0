#include "core/flops.h"

#include <string.h>

double m2_train_flops_per_token(const m2_dims *d)
{
    const double D = d->D, Di = d->Di, Win = d->Win, H = d->H, P = d->P, N = d->N, Q = d->Q, G = d->G;
    const double layer = 2 * (D * Win + Di * D) + G * Q * N + H * (Q * P + 4 * N * P);
    return 3 * (d->L * layer + 2.0 * d->F * D + 2.0 * D * d->O);
}

double m2_gpu_bf16_peak(const char *name)
{
    if (!name) return 0;
    if (strstr(name, "H200")) return 989e12;
    if (strstr(name, "H100")) return strstr(name, "PCIe") ? 756e12 : 989e12;
    if (strstr(name, "A100")) return 312e12;
    return 0;
}
