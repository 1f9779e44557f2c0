/* The model's scalar math in one place, shared by the CPU training ops (src/core/ops_cpu*.c) and the streaming
 * engine (src/stream): exp, log, sigmoid, SiLU and softplus in plain fp32 arithmetic, and the RMSNorm epsilon.
 *
 * Why not libm: glibc's expf/logf are scalar calls that GCC does not vectorise without -ffast-math, and the
 * sigmoids of SiLU and of the gate made the conv and the norms slower than the GEMMs. These are Cephes-style:
 * exp by Cody-Waite reduction by ln 2 (split in two so n * C1 is exact) and a degree-6 polynomial, 2^n through
 * the exponent bits; log by x = m 2^e with m in [sqrt(1/2), sqrt(2)) and a degree-9 polynomial in m - 1. Both
 * are within 2 ulp of libm (tests/base/test_vmath.c). Only multiplications, additions and selects, so loops
 * around them vectorise on every instruction set (the compiler contracts a*b+c into FMA where there is one).
 * exp clamps its argument to [-87.3, 88.3]: the results stay finite and normal, which is all a sigmoid, a decay
 * exp(dt A) or a softplus needs. NaN in gives NaN out for every function here. */
#ifndef MAMBA2_VMATH_H
#define MAMBA2_VMATH_H

#include <stdint.h>
#include <string.h>

/* RMSNorm epsilon of docs/MODEL.md (the layer norm, the gated norm and the final norm). */
#define M2_NORM_EPS 1e-5
/* softplus(v) = v above this (docs/MODEL.md, dt), as upstream; m2_softplusf agrees there to the last bit. */
#define M2_SOFTPLUS_THRESHOLD 20.0

static inline float m2_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693359375f; /* exact: 0.693359375 has 9 significant bits */
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* log(x) for finite x > 0. */
static inline float m2_logf(float x)
{
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = (bits >> 23) - 127;
    int32_t mb = (bits & 0x007FFFFF) | 0x3F800000;
    float m;
    memcpy(&m, &mb, sizeof m); /* m in [1, 2) */
    int big = m > 1.41421356f;
    m *= big ? 0.5f : 1.0f; /* selects, not branches: loops stay vectorisable */
    e += big;
    float f = m - 1.0f, z = f * f, fe = (float)e;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    float y = f * z * p;
    y = y - fe * 2.12194440e-4f;
    y = y - z * 0.5f;
    return fe * 0.693359375f + (f + y); /* ln 2 split as in m2_expf */
}

static inline float m2_sigmoidf(float v) { return 1.0f / (1.0f + m2_expf(-v)); }

static inline float m2_siluf(float v) { return v / (1.0f + m2_expf(-v)); }

/* softplus(v) = log(1 + e^v) as max(v, 0) + log1p(t), t = e^-|v| in (0, 1], with log1p(t) = log(u) - ((u - 1) -
 * t) / u, u = 1 + t (the second term cancels the rounding of u, so small t keep full relative precision). No
 * branch and no conditional division. */
static inline float m2_softplusf(float v)
{
    float t = m2_expf(-__builtin_fabsf(v)), u = 1.0f + t;
    float l = m2_logf(u) - ((u - 1.0f) - t) / u;
    return (v > 0.0f ? v : 0.0f) + l;
}

#endif
