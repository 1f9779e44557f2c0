/* TEST-ONLY CPU emulation of the part of <cuda_bf16.h> that kernels/ uses (see cuda_runtime.h here): the bf16
 * storage type and its conversions. __float2bfloat16 rounds to nearest, ties to even, as the CUDA one does
 * (cvt.rn.bf16.f32); NaN stays a (quiet) NaN, infinities and overflow to infinity behave as IEEE rounding says. */
#ifndef MAMBA2_EMU_CUDA_BF16_H
#define MAMBA2_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    uint16_t m2emu_bits; /* the upper 16 bits of the fp32 value */
};
static_assert(sizeof(__nv_bfloat16) == 2, "bf16 is two bytes, as on the GPU");

inline __nv_bfloat16 __float2bfloat16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: keep the sign, make it quiet */
        h.m2emu_bits = (uint16_t)((u >> 16) | 0x0040u);
        return h;
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even (a carry into the exponent is right) */
    h.m2emu_bits = (uint16_t)(u >> 16);
    return h;
}

inline float __bfloat162float(__nv_bfloat16 h)
{
    const uint32_t u = (uint32_t)h.m2emu_bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
