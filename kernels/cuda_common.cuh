/* Internals shared by the CUDA ops files (the .cu files in kernels/); not part of the ops interface.
 *
 * - the backend context (stream, cuBLAS handle, a growable workspace for temporaries);
 * - error checks that abort with one line naming the op (the ops have no error path, ops.h);
 * - deterministic reductions: a fixed-shape block sum, and column sums over rows formed as partial sums over
 *   fixed blocks of rows, then added in block order (the figure depends only on the sizes, never on timing). */
#ifndef MAMBA2_CUDA_COMMON_CUH
#define MAMBA2_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <initializer_list>
#include <type_traits>

extern "C" {
#include "core/ops.h"
}
#include "ops_cuda.h"

static_assert(sizeof(m2_real) == sizeof(float), "the CUDA backend computes in fp32: build without MAMBA2_FP64");

/* One column sum's final pass: dst[j] += the sum over b < nblk, in b order, of part[b * ld + j], for j < n. */
struct m2_colsum_seg {
    const float *part;
    float *dst;
    int nblk, n, ld;
};
enum { M2_COLSUM_SEGS = 8 };
/* Final passes run by one launch (a kernel argument: one thread per column of every segment). */
struct m2_colsum_segs {
    m2_colsum_seg s[M2_COLSUM_SEGS];
    int count;
};

typedef struct {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws; /* cuBLAS workspace, set explicitly (reproducible GEMMs, ops on one stream) */
    m2_cuda_gemm_precision gemm_prec;
    void *ws; /* workspace for the ops' temporaries (partial sums, row statistics) */
    size_t ws_bytes;
    /* ops.h grad_batch: while open, the column sums' final passes wait in pend (their partials in parts, which
     * outlive the op, unlike ws) and run as one launch when it closes */
    int batch;
    m2_colsum_segs pend;
    void *parts;
    size_t parts_bytes, parts_used, parts_need; /* need: the bytes the open batch has taken in all */
} m2_cuda_ctx;

m2_cuda_ctx *m2_cuda_ctx_of(const m2_ops *o);

/* Aborts with "mamba2: fatal: CUDA <what>: <reason>" when e is not cudaSuccess. */
void m2_cuda_check(cudaError_t e, const char *what);
void m2_cublas_check(cublasStatus_t s, const char *what);
/* After a kernel launch: catches bad launch configurations at once (asynchronous faults surface at the next
 * synchronising call, which checks too). */
#ifndef M2EMU_NAME_LAUNCH /* the CPU emulation (tests/gpu/emu) names each launch for its counters */
#define M2EMU_NAME_LAUNCH(what) ((void)0)
#endif
#define M2_CUDA_LAUNCHED(what) (M2EMU_NAME_LAUNCH(what), m2_cuda_check(cudaGetLastError(), what))

/* Workspace of at least `bytes` (grown, never shrunk; growing waits for the stream first). The contents do not
 * survive the next call: one op uses it at a time, in stream order. */
void *m2_cuda_ws(m2_cuda_ctx *c, size_t bytes);
/* Bytes rounded up to 256 so several arrays can be carved out of one workspace, each aligned. */
static inline size_t m2_cuda_align(size_t bytes) { return (bytes + 255) / 256 * 256; }

enum { M2_CUDA_THREADS = 256 };

/* Blocks for a grid-stride loop over n elements: enough to fill a GPU, capped so indices stay cheap. */
static inline unsigned m2_cuda_blocks(size_t n)
{
    size_t b = (n + M2_CUDA_THREADS - 1) / M2_CUDA_THREADS;
    if (b > 65536) b = 65536;
    return b ? (unsigned)b : 1u;
}

#define M2_GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

/* V consecutive floats loaded or stored as one access (one 16-byte instruction when V = 4; the pointer must then be
 * 16-byte aligned: callers check their strides and pointers and fall back to V = 1). */
template <int V> struct alignas(sizeof(float) * V) m2_vec {
    float v[V];
};
template <int V> __device__ __forceinline__ m2_vec<V> m2_vload(const float *p)
{
#ifdef M2EMU_VECTOR_LOAD /* the CPU emulation: one counted access, as on the GPU (tests/gpu/emu/cuda_runtime.h) */
    return M2EMU_VECTOR_LOAD(m2_vec<V>, p);
#else
    return *reinterpret_cast<const m2_vec<V> *>(p);
#endif
}
template <int V> __device__ __forceinline__ void m2_vstore(float *p, const m2_vec<V> &x)
{
#ifdef M2EMU_VECTOR_STORE /* the CPU emulation: one counted access, as on the GPU */
    M2EMU_VECTOR_STORE(p, x);
#else
    *reinterpret_cast<m2_vec<V> *>(p) = x;
#endif
}
/* Stored activations (ops.h m2_act_type): fp32 or bf16 elements, widened to fp32 on every load and rounded to nearest
 * even on every store (docs/MODEL.md §8); the kernels that read or write them are templates on the element type. */
__device__ __forceinline__ float m2_ld(const float *p) { return *p; }
__device__ __forceinline__ float m2_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void m2_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void m2_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }
template <int V> struct alignas(2 * V) m2_bvec {
    __nv_bfloat16 v[V];
};
/* V consecutive bf16 in one access (8 bytes when V = 4), widened. */
template <int V> __device__ __forceinline__ m2_vec<V> m2_vload(const __nv_bfloat16 *p)
{
#ifdef M2EMU_VECTOR_LOAD
    const m2_bvec<V> b = M2EMU_VECTOR_LOAD(m2_bvec<V>, p);
#else
    const m2_bvec<V> b = *reinterpret_cast<const m2_bvec<V> *>(p);
#endif
    m2_vec<V> r;
    if constexpr (V % 2 == 0) {
        /* by pairs from their 32-bit word (element e in the low half): one shift or mask per element, where
         * __bfloat162float per element costs the upper halves a byte permute and a shift in sm_90 SASS; the same
         * exact values */
#pragma unroll
        for (int e = 0; e < V; e += 2) {
            uint32_t w, lo, hi;
            memcpy(&w, &b.v[e], 4);
            lo = w << 16, hi = w & 0xffff0000u;
            memcpy(&r.v[e], &lo, 4);
            memcpy(&r.v[e + 1], &hi, 4);
        }
    } else {
#pragma unroll
        for (int e = 0; e < V; e++) r.v[e] = __bfloat162float(b.v[e]);
    }
    return r;
}
/* V consecutive elements in one access in their stored type (m2_vec for fp32, m2_bvec for bf16), for callers that
 * hand bf16 on as it is (tile_gemm.cuh, tile_elem); m2_widen gives an element's fp32 value. */
template <int V> __device__ __forceinline__ m2_vec<V> m2_vload_raw(const float *p) { return m2_vload<V>(p); }
template <int V> __device__ __forceinline__ m2_bvec<V> m2_vload_raw(const __nv_bfloat16 *p)
{
#ifdef M2EMU_VECTOR_LOAD
    return M2EMU_VECTOR_LOAD(m2_bvec<V>, p);
#else
    return *reinterpret_cast<const m2_bvec<V> *>(p);
#endif
}
/* 4 consecutive bf16 in one access as their 8 bytes, for callers that move them unchanged (kernels/ssd_cuda_dcb.cu):
 * as an m2_bvec the compiler copies the four halves one by one (PRMT and LOP3 per element in sm_90 SASS). */
__device__ __forceinline__ uint64_t m2_vload_bits4(const __nv_bfloat16 *p)
{
#ifdef M2EMU_VECTOR_LOAD
    return M2EMU_VECTOR_LOAD(uint64_t, p);
#else
    return *reinterpret_cast<const uint64_t *>(p);
#endif
}
__device__ __forceinline__ float m2_widen(float v) { return v; }
__device__ __forceinline__ float m2_widen(__nv_bfloat16 v) { return __bfloat162float(v); }
/* V consecutive floats stored as V bf16 in one access (8 bytes when V = 4), each rounded to nearest even. */
template <int V> __device__ __forceinline__ void m2_vstore(__nv_bfloat16 *p, const m2_vec<V> &x)
{
    m2_bvec<V> b;
#pragma unroll
    for (int e = 0; e < V; e++) b.v[e] = __float2bfloat16(x.v[e]);
#ifdef M2EMU_VECTOR_STORE
    M2EMU_VECTOR_STORE(p, b);
#else
    *reinterpret_cast<m2_bvec<V> *>(p) = b;
#endif
}
/* Calls f with a null `const T *` of the element type t names, for the kernel templates on it (m2_elem_t of the
 * argument's type is T). */
template <class P> using m2_elem_t = std::remove_cv_t<std::remove_pointer_t<P>>;
template <class F> static void m2_act_dispatch(m2_act_type t, F f)
{
    if (t == M2_ACT_BF16)
        f((const __nv_bfloat16 *)nullptr);
    else
        f((const float *)nullptr);
}

/* Whether every pointer is 16-byte aligned and every stride a multiple of 4 floats (the V = 4 paths). */
static inline bool m2_vec4_ok(std::initializer_list<const void *> ptrs, std::initializer_list<long long> strides)
{
    for (const void *p : ptrs)
        if ((uintptr_t)p % 16) return false;
    for (long long s : strides)
        if (s % 4) return false;
    return true;
}

/* sigma(a) = 1 / (1 + e^-a). On the GPU the reciprocal is the fast path of nvcc's IEEE division written out: rcp.approx
 * and one Newton step (MUFU.RCP and 2 FFMA), which is the correctly rounded 1/x that `1.0f / x` gives for every
 * x = 1 + e^-a below 2^126 (a > -87.3), without the division's range test, branch and slow-path call (~7 issued
 * instructions per sigmoid of ~20; the conv and gated-norm kernels were bound by instruction issue, BENCHMARKS.md
 * issue 16). Above (a < -87.3, sigma < 2^-126) the approximate reciprocal flushes to 0, x clamped to FLT_MAX so that
 * e^-a = inf gives 0 and not NaN (a NaN a still gives NaN): sigma is 0 where the division gave a subnormal, a change
 * below 2^-126 in absolute value. The CPU emulation (no __CUDA_ARCH__) divides as before. */
__device__ __forceinline__ float m2_dev_sigmoid(float a)
{
#ifdef __CUDA_ARCH__
    float x = 1.0f + expf(-a), r;
    asm("min.NaN.f32 %0, %0, 0f7F7FFFFF;" : "+f"(x)); /* FLT_MAX; a NaN stays NaN (fminf would return FLT_MAX) */
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return fmaf(r, -fmaf(x, r, -1.0f), r);
#else
    return 1.0f / (1.0f + expf(-a));
#endif
}

/* Sum of v over the block's M2_CUDA_THREADS threads in a fixed tree order (deterministic). Every thread of the
 * block must call it; all get the sum. sh: M2_CUDA_THREADS elements of shared memory. */
template <typename T> __device__ T m2_block_sum(T v, T *sh)
{
    const int tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = M2_CUDA_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] += sh[tid + s];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

/* ---- deterministic column sums: dst[j] += sum over rows r of f(r, j), for j < n ----
 * Stage 1: partial sums over blocks of `per` consecutive rows (thread per column, coalesced over j), by
 * m2_colsum_partial_kernel or by an op's own kernel that reads the rows anyway (the norms', conv's and dt's backwards).
 * Stage 2: one thread per column adds the partials in block order and adds the total to dst (m2_colsum_seg). An op
 * hands its stage 2 to m2_colsum_finish, which launches it at once, or, inside a grad_batch (ops.h), leaves it
 * pending with the batch's others: one launch per layer backward for all of them (each was a launch of ~3 us for a
 * few thousand columns), the same sums in the same order either way. */
template <class F> __global__ void m2_colsum_partial_kernel(F f, int rows, int n, int per, float *part)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int blk = blockIdx.y;
    if (j >= n) return;
    const int r0 = blk * per, r1 = min(rows, r0 + per);
    float s = 0.0f;
    for (int r = r0; r < r1; r++) s += f(r, j);
    part[(size_t)blk * n + j] = s;
}

/* Rows per partial block: 64, or more so that there are at most 4096 blocks (grid.y and the final loop). */
static inline int m2_colsum_rows_per_block(int rows)
{
    int per = 64;
    while ((rows + per - 1) / per > 4096) per *= 2;
    return per;
}

/* Workspace bytes the column sum's partials take. */
static inline size_t m2_colsum_ws_bytes(int rows, int n)
{
    const int per = m2_colsum_rows_per_block(rows > 0 ? rows : 1);
    const size_t nblk = rows > 0 ? (size_t)(rows + per - 1) / per : 1;
    return nblk * (size_t)(n > 0 ? n : 0) * sizeof(float);
}

/* Where an op puts the partials [nblk][n] of a column sum over rows: the workspace at byte offset ws_off (aligned;
 * an op that keeps its own temporaries at the start of the workspace reserves m2_cuda_ws(c, ws_off +
 * m2_colsum_ws_bytes(rows, n)) BEFORE writing them: a growing workspace does not keep its contents), or, inside a
 * grad_batch, the batch's own buffer (they must outlive the op). Call it once per column sum, before
 * m2_colsum_finish of the same sum. */
float *m2_colsum_parts(m2_cuda_ctx *c, size_t ws_off, int rows, int n);
/* Stage 2 of count segments (at most M2_COLSUM_SEGS), over partials from m2_colsum_parts: one launch named what, or
 * pending in the open grad_batch. */
void m2_colsum_finish(m2_cuda_ctx *c, const m2_colsum_seg *segs, int count, const char *what);

/* The whole column sum of f into dst (partials placed by m2_colsum_parts at ws_off). */
template <class F> void m2_colsum(m2_cuda_ctx *c, size_t ws_off, int rows, int n, F f, float *dst, const char *what)
{
    if (n <= 0) return;
    const int per = m2_colsum_rows_per_block(rows > 0 ? rows : 1);
    const int nblk = rows > 0 ? (rows + per - 1) / per : 1;
    float *part = m2_colsum_parts(c, ws_off, rows, n);
    dim3 grid((n + M2_CUDA_THREADS - 1) / M2_CUDA_THREADS, nblk);
    m2_colsum_partial_kernel<<<grid, M2_CUDA_THREADS, 0, c->stream>>>(f, rows, n, per, part);
    M2_CUDA_LAUNCHED(what);
    const m2_colsum_seg seg = {part, dst, nblk, n, n};
    m2_colsum_finish(c, &seg, 1, what);
}

/* The ops, one file per concern (names as in ops.h). */
void m2_cuda_gemm(const m2_ops *o, int ta, int tb, int m, int n, int k, m2_real alpha, const m2_real *A, int lda,
                  const m2_real *B, int ldb, m2_real beta, m2_real *C, int ldc);
void m2_cuda_bias_add(const m2_ops *o, m2_real *Y, int ldy, const m2_real *bias, int rows, int n);
void m2_cuda_bias_grad(const m2_ops *o, const m2_real *dY, int ldy, int rows, int n, m2_real *db);
void m2_cuda_add(const m2_ops *o, m2_real *y, const m2_real *x, size_t n);
void m2_cuda_grad_batch(const m2_ops *o, int open);
void m2_cuda_dt_fwd(const m2_ops *o, const void *dt_raw, int ld, m2_act_type rt, const m2_real *dt_bias,
                    const m2_real *A_log, int rows, int H, m2_real *dt, m2_real *A);
void m2_cuda_dt_bwd(const m2_ops *o, const m2_real *ddt, const void *dt_raw, int ld, m2_act_type rt,
                    const m2_real *dt_bias, const m2_real *dA, const m2_real *A_log, int rows, int H, void *ddt_raw,
                    m2_real *ddt_bias, m2_real *dA_log);
void m2_cuda_to_act(const m2_ops *o, const m2_real *x, size_t n, void *dst, m2_act_type t);
void m2_cuda_gemm_act(const m2_ops *o, int ta, int tb, int m, int n, int k, m2_real alpha, const void *A, int lda,
                      const void *B, int ldb, m2_act_type ab, m2_real beta, void *C, int ldc, m2_act_type ct);
void m2_cuda_rmsnorm_fwd(const m2_ops *o, const m2_real *x, m2_real *x_copy, const m2_real *w, int rows, int n, void *y,
                         m2_act_type yt);
void m2_cuda_rmsnorm_bwd(const m2_ops *o, const void *dy, m2_act_type dyt, const m2_real *x, const m2_real *w, int rows,
                         int n, m2_real *dx, m2_real *dw, void *y, void *dx_act, m2_act_type yt);
void m2_cuda_gated_norm_fwd(const m2_ops *o, const void *y, const void *z, int ld_z, m2_act_type at, const m2_real *w,
                            int rows, int n, int G, void *out, m2_act_type ot);
void m2_cuda_gated_norm_bwd(const m2_ops *o, const void *dout, const void *y, const void *z, int ld_z, m2_act_type at,
                            const m2_real *w, int rows, int n, int G, void *dy, void *dz, int ld_dz, m2_real *dw,
                            void *out);
void m2_cuda_conv_silu_fwd(const m2_ops *o, const void *in, int ld_in, m2_act_type it, const m2_real *w,
                           const m2_real *b, int B, int T, int C, int K, void *out);
void m2_cuda_conv_silu_bwd(const m2_ops *o, const void *dout, const void *in, int ld_in, m2_act_type it,
                           const m2_real *w, const m2_real *b, int B, int T, int C, int K, void *din, int ld_din,
                           m2_real *dw, m2_real *db);
void m2_cuda_mse_loss(const m2_ops *o, const m2_real *pred, const m2_real *Y, int B, int T, int O, int burn_in,
                      m2_real *dpred, double *sse, int64_t *count);
void m2_cuda_adamw(const m2_ops *o, float *params, const float *grads, float *m, float *v,
                   const unsigned char *decay_mask, size_t n, float lr, float beta1, float beta2, float eps,
                   float weight_decay, int64_t step);
double m2_cuda_sumsq(const m2_ops *o, const float *x, size_t n);
void m2_cuda_scale(const m2_ops *o, float *x, size_t n, double factor);
size_t m2_cuda_ssd_saved_size(const m2_ops *o, const m2_ssd_shape *s);
size_t m2_cuda_ssd_scratch_size(const m2_ops *o, const m2_ssd_shape *s, int with_backward);
void m2_cuda_ssd_fwd(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                     const void *Bm, const void *Cm, const m2_real *Dsk, void *y, m2_act_type at, m2_real *saved,
                     m2_real *scratch);
void m2_cuda_ssd_bwd(const m2_ops *o, const m2_ssd_shape *s, const void *x, const m2_real *dt, const m2_real *A,
                     const void *Bm, const void *Cm, const m2_real *Dsk, const void *dy, m2_act_type at,
                     const m2_real *saved, void *dx, m2_real *ddt, m2_real *dA, void *dBm, void *dCm, m2_real *dD,
                     m2_real *scratch);

#endif
