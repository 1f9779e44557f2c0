/* Streaming engine internals (the public API is core/m2stream.h): the packed weight layout, the per-tick
 * kernels, and the timing helpers that mamba2_stream and bench_stream share (latency percentiles and the
 * weight-streaming floor).
 *
 * Packed matrices. A matrix W [M,K] (row-major in the flat parameter buffer) is stored as column panels:
 * its rows, padded with zeros to a multiple of 16 (one 512-bit vector of fp32 outputs), are split into
 * n_panels groups of nv <= 8 vectors (nv as equal as possible), and each panel is stored transposed,
 * k-major: panel[k][j] = W[r0 + j][k], j < 16 nv. A GEMV then reads every weight exactly once, in address
 * order, with up to 8 independent accumulator vectors (enough to hide the FMA latency) and one broadcast of
 * x[k] per k-row; a GEMM over n streams reads each panel once per tile of streams, from L1. All matrices of
 * the model sit in one buffer in the order a tick reads them, so the hardware prefetcher sees one stream. */
#ifndef MAMBA2_STREAM_H
#define MAMBA2_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/layout.h"
#include "core/m2stream.h"

#define M2S_VEC 16          /* fp32 lanes per vector: rows are padded to this */
#define M2S_MAX_NV 8        /* vectors per panel (accumulator registers of the GEMV) */

typedef struct {
    int M, K;               /* logical shape of W */
    int n_panels, nv_base, n_extra;  /* panels 0..n_extra-1 hold nv_base+1 vectors, the rest nv_base */
    size_t offset;          /* first element in the matrix buffer (elements, fp32 or bf16) */
} m2s_mat;

/* Rows r0 .. r0 + 16 nv of panel p. */
static inline void m2s_panel(const m2s_mat *m, int p, int *nv, int *r0)
{
    *nv = m->nv_base + (p < m->n_extra);
    *r0 = M2S_VEC * (p * m->nv_base + (p < m->n_extra ? p : m->n_extra));
}

/* Plans a matrix of shape [M,K] at *cursor (elements) and advances it. */
void m2s_mat_plan(m2s_mat *m, int M, int K, size_t *cursor);

/* Writes W [M,K] into its panels; bf16 != 0 stores round-to-nearest-even bf16 (uint16_t) elements. */
void m2s_mat_pack(const m2s_mat *m, const float *W, void *mats, int bf16);

/* y[s][0..16 ceil(M/16)) = W x[s] for s < n: x rows at stride ldx, y rows at stride ldy (padding rows of y
 * receive 0). n == 1 takes the GEMV path. */
void m2s_gemm(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx, float *y, int ldy);

/* u = h * rsqrt(mean(h^2) + 1e-5) * w, over n values. */
void m2s_rmsnorm(const float *restrict h, const float *restrict w, int n, float *restrict u);

/* One tick of one layer's causal depthwise conv over [ring, new] then SiLU (MODEL.md §2 step 2).
 * wT [max(K,4)][ldc] (transposed conv weight; rows K..3 zero when K < 4), ring: K-1 rows of ldc, the oldest
 * at row pos; new [C]; out [C]. Overwrites the oldest ring row with new (the caller advances pos after the
 * tick). */
void m2s_conv_silu(const float *restrict wT, const float *restrict b, float *restrict ring, int pos, int K, int C,
                   int ldc, const float *restrict xnew, float *restrict out);

/* One tick of the SSM for one layer (MODEL.md §2 steps 3-4): S [H][N][pad16(P)] (P fastest), xbc = [x (H P),
 * B (G N), C (G N)] after the conv, dt_raw [H]; y [H P] = S C + D x. scratch: 2 pad16(H) floats; dt_raw,
 * dt_bias and A are read up to pad16(H) (the padding of the last two must be zero). */
void m2s_ssm(const m2_dims *d, const float *A, const float *dt_bias, const float *Dskip, float *S, const float *xbc,
             const float *dt_raw, float *y, float *scratch);

/* Gated RMSNorm in G groups (MODEL.md §2 step 5), in place: y <- (y * silu(z)) * rsqrt(mean_g(.^2) + 1e-5) * w. */
void m2s_gated_norm(float *y, const float *restrict z, const float *restrict w, int Di, int G);

/* exp(x) in plain arithmetic (Cephes-style: range reduction by ln 2, degree-6 polynomial, 2^n through the
 * exponent bits), so that loops calling it vectorise; within 2 ulp of expf on [-87, 88], clamped outside
 * (the arguments here are -dt A and activations, never near the range ends in a trained model). */
static inline float m2s_expf(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float magic = 12582912.0f;                 /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = __builtin_fmaf(n, -0.693359375f, x);    /* ln 2 split in two for an exact first product */
    r = __builtin_fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = __builtin_fmaf(p, r, 1.3981999507e-3f);
    p = __builtin_fmaf(p, r, 8.3334519073e-3f);
    p = __builtin_fmaf(p, r, 4.1665795894e-2f);
    p = __builtin_fmaf(p, r, 1.6666665459e-1f);
    p = __builtin_fmaf(p, r, 5.0000001201e-1f);
    p = __builtin_fmaf(p, r * r, r + 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float m2s_silu(float v) { return v / (1.0f + m2s_expf(-v)); }

/* log(x) for finite x > 0 in plain arithmetic (Cephes-style: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * degree-9 polynomial in m - 1); within 2 ulp of logf. */
static inline float m2s_logf(float x)
{
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = (bits >> 23) - 127;
    int32_t mb = (bits & 0x007FFFFF) | 0x3F800000;
    float m;
    memcpy(&m, &mb, sizeof m);                       /* m in [1, 2) */
    int big = m > 1.41421356f;
    m *= big ? 0.5f : 1.0f;                          /* selects, not branches: the loops stay vectorisable */
    e += big;
    float f = m - 1.0f, z = f * f, fe = (float)e;
    float p = 7.0376836292e-2f;
    p = __builtin_fmaf(p, f, -1.1514610310e-1f);
    p = __builtin_fmaf(p, f, 1.1676998740e-1f);
    p = __builtin_fmaf(p, f, -1.2420140846e-1f);
    p = __builtin_fmaf(p, f, 1.4249322787e-1f);
    p = __builtin_fmaf(p, f, -1.6668057665e-1f);
    p = __builtin_fmaf(p, f, 2.0000714765e-1f);
    p = __builtin_fmaf(p, f, -2.4999993993e-1f);
    p = __builtin_fmaf(p, f, 3.3333331174e-1f);
    float y = f * z * p;
    y = __builtin_fmaf(fe, -2.12194440e-4f, y);
    y = __builtin_fmaf(z, -0.5f, y);
    return __builtin_fmaf(fe, 0.693359375f, f + y);  /* ln 2 split as in m2s_expf */
}

/* softplus(v) = log(1 + e^v) (MODEL.md §2; "v for v > 20" is what this gives in fp32) computed as
 * max(v, 0) + log1p(t), t = e^-|v| in (0, 1], with log1p(t) = log(u) - ((u - 1) - t) / u, u = 1 + t (the
 * second term cancels the rounding of u, so small t keep full relative precision). No branch and no
 * conditional division, so GCC vectorises loops over it. */
static inline float m2s_softplus(float v)
{
    float t = m2s_expf(-__builtin_fabsf(v)), u = 1.0f + t;
    float l = m2s_logf(u) - ((u - 1.0f) - t) / u;
    return (v > 0.0f ? v : 0.0f) + l;
}

/* ---- timing helpers (mamba2_stream and bench_stream) ------------------------------------------------ */

typedef struct {
    double p50, p99, p999, max, mean;   /* ns */
} m2_latency;

/* Sorts ns[0..n) in place and fills the percentiles (nearest rank). */
void m2_latency_summarize(double *ns, size_t n, m2_latency *out);

/* Nanoseconds on CLOCK_MONOTONIC (a vDSO read, no system call where the clock source allows it). */
double m2_now_ns(void);

/* The weight-streaming floor: median time (ns) to read `bytes` once with wide loads.
 *  hot:  the same buffer read again and again, so it comes from the cache level a buffer of that size
 *        settles in, as the weights do when ticks come back to back;
 *  cold: a different `bytes` slice of a 256 MiB arena each time, so every read misses the caches (weights
 *        evicted by other work between sparse ticks). */
double m2_stream_floor_ns(size_t bytes, int cold, int reps);

/* The same read loop, with the whole distribution of its reps times (the floor's own tail: a plain read of
 * the weight bytes is hit by the same interrupts and stalls as a tick). Returns 0, or -1 out of memory. */
int m2_stream_floor(size_t bytes, int cold, int reps, m2_latency *out);

/* Stalls of this core as a program sees them: spins on the monotonic clock for `seconds` and counts the gaps
 * between consecutive reads that are at least min_ns long (time in which this thread did not run: timer and
 * other interrupts, the hypervisor taking the CPU). *per_s: gaps per second; *share: fraction of the time
 * lost in them. A tick of length t is hit by one with probability about per_s * t. */
void m2_stall_census(double seconds, double min_ns, double *per_s, double *share);

/* Zeroed memory for the engine's large read-every-tick buffers (packed weights, states) and the floor's read
 * buffer, so that both get the same page policy: from M2S_HUGE_MIN bytes on, 2 MiB-aligned, rounded up to 2 MiB
 * and advised as transparent huge pages (one TLB entry instead of 512; a no-op where THP is off), otherwise
 * 64-byte aligned. Pages are touched here, so no tick takes a page fault. Release with free(). */
#define M2S_HUGE_MIN ((size_t)256 << 10)
void *m2s_alloc_pages(size_t bytes);

/* Pins the calling thread to one CPU (the one it runs on now); returns that CPU, or -1. */
int m2_pin_to_current_cpu(void);

#endif
