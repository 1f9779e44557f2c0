/* Streaming engine internals (the public API is stream/mamba2_stream.h): opening from a parameter buffer, the
 * packed weight layout and the per-tick kernels. Timing helpers are in stream/timing.h.
 *
 * Packed matrices. A matrix W [M,K] (row-major in the flat parameter buffer) is stored as column panels:
 * its rows, padded with zeros to a multiple of 16 (one 512-bit vector of fp32 outputs), are split into
 * n_panels groups of nv <= 8 vectors (nv as equal as possible), and each panel is stored transposed,
 * k-major: panel[k][j] = W[r0 + j][k], j < 16 nv. A GEMV then reads every weight exactly once, in address
 * order, with up to 8 independent accumulator vectors (enough to hide the FMA latency) and one broadcast of
 * x[k] per k-row; a GEMM over n streams reads each panel once per tile of streams, from L1. All matrices of
 * the model sit in one buffer in the order a tick reads them, so the hardware prefetcher sees one stream.
 * bf16 panels hold k-pairs (the operand order of vdpbf16ps): row q is 16 nv 32-bit words, word j holding
 * W[r0 + j][2q] in its low half and W[r0 + j][2q + 1] in its high half (K padded to even with a zero row). */
#ifndef MAMBA2_STREAM_H
#define MAMBA2_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/bf16.h"
#include "base/cpu.h"
#include "base/layout.h"
#include "base/vmath.h"
#include "io/features.h"
#include "stream/mamba2_stream.h"

/* Opens from a flat parameter buffer of layout `lay` (copied: the caller may free params afterwards).
 * mean/std [F] are the feature statistics for m2_stream_standardize; NULL means identity (0, 1).
 * opt NULL means m2_stream_defaults(). M2_EUSAGE on bad options, M2_EFAIL when out of memory. */
int m2_stream_open_params(const m2_layout *lay, const float *params, const double *mean, const double *std,
                          const m2_stream_options *opt, m2_stream **out);

/* Replaces the handle's feature statistics with n instruments' (names [n], mean and std rows of ld doubles; a std
 * <= 0 counts as 1; tick [n] their tick sizes, NULL: unknown), as a checkpoint holds them; at open, before any tick.
 * M2_EFAIL out of memory. */
int m2s_set_instruments(m2_stream *s, int n, const char (*names)[64], const double *mean, const double *std, int ld,
                        const double *tick);

/* Whether the model's features are the featuriser's (io/features.h: the defaults, then depth_imb_1..k and
 * depth_imb_cum), by the count alone when names is NULL; m2_stream_features refuses otherwise, saying why. */
void m2s_set_feature_names(m2_stream *s, const char (*names)[32]);

/* The model's dimensions (internal: the public API names only features, targets and streams). */
const m2_dims *m2_stream_dims(const m2_stream *s);

/* One stream's recurrent state where the engine keeps it (stream_snapshot.c reads and writes it through this view):
 * layer l's block starts layer_stride * l floats after state, with the conv ring [K-1][ldc] whose oldest row is *pos
 * (one position shared by the layers), then S [H][N][ldp]. fingerprint: m2_hash64 of the parameters the handle was
 * opened with (base/hash.h), which names the model a state belongs to. */
typedef struct {
    float *state;
    int *pos;
    size_t layer_stride;
    int ldc, ldp;
    uint64_t fingerprint;
    m2_event *last_event;         /* the featuriser's last event of the stream (m2_stream_features) */
    unsigned char *has_last;      /* 0: none (the next event starts a session) */
    const char *features_unknown; /* why m2_stream_features cannot serve the model, "" when it can */
} m2s_state_view;

/* The view of a stream, 0 <= stream < max_streams (not checked here). */
m2s_state_view m2s_state_of(const m2_stream *s, int stream);

#define M2S_VEC    16 /* fp32 lanes per vector: rows are padded to this */
#define M2S_MAX_NV 8  /* vectors per panel (accumulator registers of the GEMV) */
/* states of a tick from which m2s_ssm is given the next stream's state to prefetch (one core's L2 on the machines
 * measured: below it the states stay in L2 and prefetches only cost; BENCHMARKS.md, issue 14, fifth pass) */
#define M2S_STATE_PREFETCH_MIN ((size_t)1 << 20)

typedef struct {
    int M, K;                       /* logical shape of W */
    int Kp;                         /* k-rows stored: K (fp32), K rounded up to even (bf16: k-pairs) */
    int n_panels, nv_base, n_extra; /* panels 0..n_extra-1 hold nv_base+1 vectors, the rest nv_base */
    size_t offset;                  /* first element in the matrix buffer (elements, fp32 or bf16) */
} m2s_mat;

/* Rows r0 .. r0 + 16 nv of panel p. */
static inline void m2s_panel(const m2s_mat *m, int p, int *nv, int *r0)
{
    *nv = m->nv_base + (p < m->n_extra);
    *r0 = M2S_VEC * (p * m->nv_base + (p < m->n_extra ? p : m->n_extra));
}

/* Plans a matrix of shape [M,K] at *cursor (elements; bf16 != 0: the k-pair layout) and advances it. */
void m2s_mat_plan(m2s_mat *m, int M, int K, int bf16, size_t *cursor);

/* Writes W [M,K] into its panels, column k multiplied by col_scale[k] first (NULL: by 1; the engine folds a norm's
 * weights into the matrix after it this way); bf16 != 0 stores round-to-nearest-even bf16 (uint16_t) elements. */
void m2s_mat_pack(const m2s_mat *m, const float *W, const float *col_scale, void *mats, int bf16);

/* The per-tick kernels, compiled once per instruction-set level (stream_gemm.c, stream_kernels.c; cmake/isa.cmake)
 * and reached through that level's table, which m2_stream_open picks from m2_cpu_active(). Only those sources
 * (M2_ISA_SUFFIX defined) see the kernels' own names, renamed to the level's copy. */
#ifdef M2_ISA_SUFFIX
#define m2s_gemm      M2_ISA_FN(m2s_gemm)
#define m2s_rms_scale M2_ISA_FN(m2s_rms_scale)
#define m2s_conv_silu M2_ISA_FN(m2s_conv_silu)
#define m2s_ssm       M2_ISA_FN(m2s_ssm)
#define m2s_dt_decay  M2_ISA_FN(m2s_dt_decay)
#define m2s_gate      M2_ISA_FN(m2s_gate)

/* y[s][0..16 ceil(M/16)) = scale[s] W x[s] for s < n (scale NULL: 1): x rows at stride ldx, y rows at stride ldy
 * (padding rows of y receive 0). n == 1 takes the GEMV path. bf16: x is first rounded to bf16 into xq, the bf16
 * mode's arithmetic (docs/MODEL.md, "bf16 weights"); xq holds m2s_xq_floats(n, Kp) floats. */
void m2s_gemm(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx, const float *scale,
              float *y, int ldy, void *xq);

/* rsqrt(mean(h^2) + M2_NORM_EPS) over n values: the scale of an RMSNorm, whose weights the engine folds into the
 * next matrix (m2s_mat_pack), so that the matrix product starts on h at once and the scale, computed beside it,
 * is applied to its output (m2s_gemm's scale). */
float m2s_rms_scale(const float *h, int n);

/* One tick of one layer's causal depthwise conv over [ring, new] then SiLU (docs/MODEL.md §2 step 3).
 * wT [max(K,4)][ldc] (transposed conv weight; rows K..3 zero when K < 4), ring: K-1 rows of ldc, the oldest
 * at row pos; new [C]; out [C]. Overwrites the oldest ring row with new (the caller advances pos after the
 * tick). */
void m2s_conv_silu(const float *restrict wT, const float *restrict b, float *restrict ring, int pos, int K, int C,
                   int ldc, const float *restrict xnew, float *restrict out);

/* Every stream's step sizes and decays for one layer (docs/MODEL.md §2 step 4), all at once: for n streams whose
 * dt_raw [H] rows are ld floats apart, dt[i H + h] = softplus(dt_raw + dt_bias[h]) and decay[i H + h] =
 * exp(dt A[h]). dt and decay hold pad16(n H) floats each (the padding is written). */
void m2s_dt_decay(const float *A, const float *dt_bias, int H, int n, const float *dt_raw, int ld, float *restrict dt,
                  float *restrict decay);

/* One tick of the SSM for one layer and stream (docs/MODEL.md §2 steps 4-5): S [H][N][pad16(P)] (P fastest),
 * xbc = [x (H P), B (G N), C (G N)] after the conv, dt and decay [H] (m2s_dt_decay); y [H P] = S C + D x.
 * next (may be NULL): a state of the same layout that the SIMD levels prefetch into L2 as they go (the engine's
 * next stream), used by the engine from M2S_STATE_PREFETCH_MIN bytes of states on. */
void m2s_ssm(const m2_dims *d, const float *Dskip, float *S, const float *xbc, const float *dt, const float *decay,
             float *y, const float *next);

/* The gated RMSNorm in G groups (docs/MODEL.md §2 step 6) without its weights, which the engine folds into W_out:
 * y <- y * silu(z) in place, and r_g = rsqrt(mean_g(y^2) + M2_NORM_EPS) per group. With one group r is returned (the
 * output projection's scale, applied to its output like m2s_rms_scale's); with several each group is multiplied by
 * its r_g here and 1 is returned. */
float m2s_gate(float *y, const float *restrict z, int Di, int G);

#endif

/* The signature of m2s_gemm, each level's and the AVX-512-BF16 variant. */
typedef void (*m2s_gemm_fn)(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx,
                            const float *scale, float *y, int ldy, void *xq);

typedef struct {
    m2_cpu_level level;
    m2s_gemm_fn gemm;
    float (*rms_scale)(const float *h, int n);
    void (*conv_silu)(const float *restrict wT, const float *restrict b, float *restrict ring, int pos, int K, int C,
                      int ldc, const float *restrict xnew, float *restrict out);
    void (*dt_decay)(const float *A, const float *dt_bias, int H, int n, const float *dt_raw, int ld,
                     float *restrict dt, float *restrict decay);
    void (*ssm)(const m2_dims *d, const float *Dskip, float *S, const float *xbc, const float *dt, const float *decay,
                float *y, const float *next);
    float (*gate)(float *y, const float *restrict z, int Di, int G);
    /* reads n bytes (a multiple of 64) with the level's widest loads; returns the OR of them (the floor) */
    uint64_t (*read_bytes)(const void *buf, size_t n);
} m2s_kernels;

/* The floats m2s_gemm's xq must hold for n streams and a matrix of Kp (its K rounded up to even): n rows of
 * rounded inputs, then (AVX2, n >= 16) one column block of the weights widened to fp32 (stream_gemm.c). */
static inline size_t m2s_xq_floats(int n, int Kp) { return ((size_t)n + M2S_VEC) * (size_t)Kp; }

/* m2s_gemm with AVX-512-BF16 (the avx512bf16 object of cmake/isa.cmake), which the engine takes for bf16
 * weights when m2_cpu_bf16_dot() says so. */
void m2s_gemm_avx512bf16(const m2s_mat *m, const void *mats, int bf16, int n, const float *x, int ldx,
                         const float *scale, float *y, int ldy, void *xq);

/* The table of a level (each level is built; running one the CPU lacks is the caller's mistake). */
const m2s_kernels *m2s_kernels_for(m2_cpu_level level);

/* The kernels a handle runs, by value: its level's table with gemm the one-stream product the handle chose (the
 * AVX-512-BF16 variant where it took that), and the product for batches (choose_batch_gemm in stream.c). For
 * bench_stream --breakdown, which times ticks with one kernel replaced by a no-op (m2s_use_kernels puts a changed
 * set back); a tick without a kernel computes nothing meaningful. */
typedef struct {
    m2s_kernels k;
    m2s_gemm_fn gemm_batch;
} m2s_kernel_set;
m2s_kernel_set m2s_kernels_in_use(const m2_stream *s);
void m2s_use_kernels(m2_stream *s, const m2s_kernel_set *set);

/* Zeroed memory for the engine's large read-every-tick buffers (packed weights, states) and the floor's read
 * buffer, so that both get the same page policy: from M2S_HUGE_MIN bytes on, 2 MiB-aligned, rounded up to 2 MiB
 * and advised as transparent huge pages (one TLB entry instead of 512; a no-op where THP is off), otherwise
 * 64-byte aligned. Pages are touched here, so no tick takes a page fault. Release with free(). */
#define M2S_HUGE_MIN ((size_t)256 << 10)
void *m2s_alloc_pages(size_t bytes);

#endif
