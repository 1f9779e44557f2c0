/* bf16 on the host, bit-exact: the one rounding the project uses wherever it makes bf16 on a CPU (the streaming
 * engine's bf16 mode, docs/MODEL.md §7; the GPU tests' reference for the device's conversions, docs/MODEL.md §8).
 * Round to nearest, ties to even, as cvt.rn.bf16.f32 and vcvtne2ps2bf16 do (a carry into the exponent is the right
 * result, up to infinity); a NaN stays a NaN, made quiet. */
#ifndef MAMBA2_BF16_H
#define MAMBA2_BF16_H

#include <stdint.h>
#include <string.h>

/* The bf16 bits of f (the upper 16 bits of the result are 0). */
static inline uint32_t m2_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? (u >> 16) | 0x40u : r;
}

/* The float a bf16 stands for (exact). */
static inline float m2_bf16_float(uint16_t b)
{
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
