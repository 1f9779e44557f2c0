/* The CUDA backend: the vtable, the context (device, stream, cuBLAS handle, workspace), memory, runtime
 * detection. The arithmetic lives in one file per concern: gemm_cuda.cu, elementwise_cuda.cu, norm_cuda.cu,
 * conv_cuda.cu, loss_cuda.cu, adamw_cuda.cu, zero_cuda.cu, ssd_cuda.cu (+ ssd_cuda_bwd.cu). */
#include "cuda_common.cuh"
#include "cuda_workspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "base/error.h"
}

/* ---- errors ---- */
void m2_cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "mamba2: fatal: CUDA %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    abort();
}

void m2_cublas_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "mamba2: fatal: cuBLAS %s: %s\n", what, cublasGetStatusString(s));
    abort();
}

/* ---- runtime detection ---- */
extern "C" int m2_cuda_available(char *why, size_t cap)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        cap = sizeof dummy;
    }
    if (cap) why[0] = '\0';
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n); /* without a driver: error 35 and n left unset */
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaGetDeviceCount: %s (%s, error %d)", cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    if (n <= 0) {
        snprintf(why, cap, "no CUDA device found");
        return 0;
    }
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaGetDeviceProperties(0): %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return 0;
    }
    if (p.major < 8) {
        snprintf(why, cap, "device 0 (%.120s) has compute capability %d.%d; this build needs 8.0 or newer", p.name,
                 p.major, p.minor);
        return 0;
    }
    return n;
}

/* ---- the context: one per process (one GPU per rank) ---- */
static m2_cuda_ctx g_ctx;
static int g_ready;

enum { BLAS_WS_BYTES = 32 << 20 }; /* cuBLAS's recommendation for Hopper */

m2_cuda_ctx *m2_cuda_ctx_of(const m2_ops *o) { return (m2_cuda_ctx *)o->ctx; }

void *m2_cuda_ws(m2_cuda_ctx *c, size_t bytes)
{
    if (bytes <= c->ws_bytes) return c->ws;
    size_t want = c->ws_bytes * 2 > bytes ? c->ws_bytes * 2 : bytes;
    m2_cuda_check(cudaStreamSynchronize(c->stream), "workspace: waiting for the stream");
    if (c->ws) m2_cuda_check(cudaFree(c->ws), "workspace: cudaFree");
    c->ws = NULL;
    c->ws_bytes = 0;
    m2_cuda_check(cudaMalloc(&c->ws, want), "workspace: cudaMalloc");
    c->ws_bytes = want;
    return c->ws;
}

extern "C" void m2_ops_cuda_release_workspace(void)
{
    if (!g_ready || (!g_ctx.ws && !g_ctx.parts)) return;
    m2_cuda_check(cudaStreamSynchronize(g_ctx.stream), "workspace: waiting for the stream");
    if (g_ctx.ws) m2_cuda_check(cudaFree(g_ctx.ws), "workspace: cudaFree");
    g_ctx.ws = NULL;
    g_ctx.ws_bytes = 0;
    if (!g_ctx.batch && g_ctx.parts) { /* a batch's pending partials stay */
        m2_cuda_check(cudaFree(g_ctx.parts), "workspace: cudaFree");
        g_ctx.parts = NULL;
        g_ctx.parts_bytes = 0;
    }
}

/* ---- column sums' final passes (cuda_common.cuh), batched per layer backward (ops.h grad_batch) ---- */
/* Thread j of the flattened columns: segment k, column j - (the columns of the segments before k). */
__global__ void m2_colsum_final_kernel(m2_colsum_segs g)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, k = 0;
    while (k < g.count && j >= g.s[k].n) j -= g.s[k++].n;
    if (k == g.count) return;
    const m2_colsum_seg &a = g.s[k];
    float s = 0.0f;
    for (int b = 0; b < a.nblk; b++) s += a.part[(size_t)b * a.ld + j];
    a.dst[j] += s;
}

static void colsum_launch(m2_cuda_ctx *c, const m2_colsum_segs &g, const char *what)
{
    long long cols = 0;
    for (int k = 0; k < g.count; k++) cols += g.s[k].n;
    if (!cols) return;
    m2_colsum_final_kernel<<<(unsigned)((cols + M2_CUDA_THREADS - 1) / M2_CUDA_THREADS), M2_CUDA_THREADS, 0,
                             c->stream>>>(g);
    M2_CUDA_LAUNCHED(what);
}

/* The batch's pending finals, launched as one. */
static void colsum_flush(m2_cuda_ctx *c)
{
    if (c->pend.count) colsum_launch(c, c->pend, "column sums (a layer's weight gradients)");
    c->pend.count = 0;
}

/* The batch buffer at least as large as what the batch has taken in all, once nothing pending reads it. */
static void colsum_parts_fit(m2_cuda_ctx *c)
{
    if (c->parts_need <= c->parts_bytes) return;
    m2_cuda_check(cudaStreamSynchronize(c->stream), "column sums' buffer: waiting for the stream");
    if (c->parts) m2_cuda_check(cudaFree(c->parts), "column sums' buffer: cudaFree");
    c->parts = NULL;
    c->parts_bytes = 0;
    m2_cuda_check(cudaMalloc(&c->parts, c->parts_need), "column sums' buffer: cudaMalloc");
    c->parts_bytes = c->parts_need;
}

float *m2_colsum_parts(m2_cuda_ctx *c, size_t ws_off, int rows, int n)
{
    const size_t bytes = m2_colsum_ws_bytes(rows, n);
    if (!c->batch) return (float *)((char *)m2_cuda_ws(c, ws_off + bytes) + ws_off);
    c->parts_need += m2_cuda_align(bytes);
    if (c->parts_used + bytes > c->parts_bytes) {
        /* every partial taken so far has its final pending (an op takes its partials before its final): those
         * finals run now, before anything is written to the buffer again (stream order), and the buffer grows; it
         * ends each batch as large as all the batch took, so that the next batch of the same shapes fits (only the
         * first launches more than one final) */
        colsum_flush(c);
        c->parts_used = 0;
        colsum_parts_fit(c);
    }
    float *p = (float *)((char *)c->parts + c->parts_used);
    c->parts_used += m2_cuda_align(bytes);
    return p;
}

void m2_colsum_finish(m2_cuda_ctx *c, const m2_colsum_seg *segs, int count, const char *what)
{
    if (!c->batch) {
        m2_colsum_segs g = {};
        for (int k = 0; k < count; k++) g.s[g.count++] = segs[k];
        colsum_launch(c, g, what);
        return;
    }
    for (int k = 0; k < count; k++) {
        /* a full batch, or a gradient already pending (two threads would add to it), runs what is pending first */
        bool clash = c->pend.count == M2_COLSUM_SEGS;
        for (int i = 0; i < c->pend.count && !clash; i++) {
            const m2_colsum_seg &p = c->pend.s[i];
            clash = segs[k].dst < p.dst + p.n && p.dst < segs[k].dst + segs[k].n;
        }
        if (clash) colsum_flush(c);
        c->pend.s[c->pend.count++] = segs[k];
    }
}

void m2_cuda_grad_batch(const m2_ops *o, int open)
{
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    if (open == c->batch) return;
    if (!open) {
        colsum_flush(c);
        colsum_parts_fit(c);
    }
    c->parts_used = c->parts_need = 0;
    c->batch = open;
}

static int ctx_fail(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return m2_fail(M2_EFAIL, "CUDA backend (%s): %s", what, cudaGetErrorString(e));
}

extern "C" int m2_ops_cuda_init(int device)
{
    if (g_ready) {
        if (device == g_ctx.device) return M2_OK;
        return m2_fail(M2_EUSAGE, "CUDA backend (device %d): already running on device %d", device, g_ctx.device);
    }
    char why[256];
    int n = m2_cuda_available(why, sizeof why);
    if (n == 0) return m2_fail(M2_EFAIL, "CUDA backend: no usable GPU (%s)", why);
    if (device < 0 || device >= n)
        return m2_fail(M2_EUSAGE, "CUDA backend (device %d): only %d device(s) visible", device, n);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return ctx_fail("cudaSetDevice", e);
    m2_cuda_ctx c;
    memset(&c, 0, sizeof c);
    c.device = device;
    c.gemm_prec = g_ctx.gemm_prec; /* a precision set before init is kept */
    if ((e = cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return ctx_fail("cudaStreamCreate", e);
    if ((e = cudaMalloc(&c.blas_ws, BLAS_WS_BYTES)) != cudaSuccess) {
        cudaStreamDestroy(c.stream);
        return ctx_fail("cuBLAS workspace", e);
    }
    cublasStatus_t s = cublasCreate(&c.blas);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(c.blas, c.stream);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetWorkspace(c.blas, c.blas_ws, BLAS_WS_BYTES);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (c.blas) cublasDestroy(c.blas);
        cudaFree(c.blas_ws);
        cudaStreamDestroy(c.stream);
        return m2_fail(M2_EFAIL, "CUDA backend (cuBLAS): %s", cublasGetStatusString(s));
    }
    g_ctx = c;
    g_ready = 1;
    return M2_OK;
}

extern "C" m2_cuda_gemm_precision m2_ops_cuda_set_gemm_precision(m2_cuda_gemm_precision p)
{
    m2_cuda_gemm_precision old = g_ctx.gemm_prec;
    g_ctx.gemm_prec = p;
    return old;
}

extern "C" int m2_ops_cuda_set_precision_named(const char *name)
{
    static const struct {
        const char *name;
        m2_cuda_gemm_precision p;
    } names[] = {{"bf16", M2_CUDA_GEMM_BF16}, {"tf32", M2_CUDA_GEMM_TF32}, {"fp32", M2_CUDA_GEMM_FP32}};
    for (const auto &n : names)
        if (strcmp(name, n.name) == 0) {
            m2_ops_cuda_set_gemm_precision(n.p);
            return M2_OK;
        }
    return m2_fail(M2_EUSAGE, "CUDA backend: unknown precision %s (bf16, tf32 or fp32)", name);
}

extern "C" const char *m2_cuda_gemm_precision_name(m2_cuda_gemm_precision p)
{
    switch (p) {
    case M2_CUDA_GEMM_BF16: return "bf16 operands, fp32 accumulate";
    case M2_CUDA_GEMM_TF32: return "tf32 operands, fp32 accumulate";
    case M2_CUDA_GEMM_FP32: return "fp32";
    }
    return "?";
}

extern "C" int m2_ops_cuda_device_info(m2_cuda_device_info *info)
{
    memset(info, 0, sizeof *info);
    if (!g_ready) return m2_fail(M2_EUSAGE, "CUDA backend: not initialised");
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, g_ctx.device);
    if (e != cudaSuccess) return ctx_fail("cudaGetDeviceProperties", e);
    info->device = g_ctx.device;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    if ((e = cudaMemGetInfo(&info->free_bytes, &info->total_bytes)) != cudaSuccess)
        return ctx_fail("cudaMemGetInfo", e);
    return M2_OK;
}

extern "C" void *m2_ops_cuda_stream(void) { return g_ready ? (void *)g_ctx.stream : NULL; }

/* ---- memory ---- */
static void *cuda_alloc(const m2_ops *o, size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it, the caller reports */
        return NULL;
    }
    return p;
}

static void cuda_free(const m2_ops *o, void *p)
{
    if (!p) return;
    /* cudaFree may return while kernels that use p are queued; wait so the memory is really unused. */
    m2_cuda_check(cudaStreamSynchronize(m2_cuda_ctx_of(o)->stream), "free: waiting for the stream");
    m2_cuda_check(cudaFree(p), "cudaFree");
}

static void cuda_memset0(const m2_ops *o, void *p, size_t bytes)
{
    if (bytes) m2_cuda_check(cudaMemsetAsync(p, 0, bytes, m2_cuda_ctx_of(o)->stream), "memset0");
}

static void cuda_copy(const m2_ops *o, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        m2_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, m2_cuda_ctx_of(o)->stream), "copy");
}

/* Host transfers wait for the stream: the host buffer may be reused (or read) as soon as the call returns,
 * whether or not it is pinned. Inputs move once per micro-batch, so the wait costs little. */
static void cuda_to_device(const m2_ops *o, void *dst, const void *host_src, size_t bytes)
{
    if (!bytes) return;
    cudaStream_t st = m2_cuda_ctx_of(o)->stream;
    m2_cuda_check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, st), "to_device");
    m2_cuda_check(cudaStreamSynchronize(st), "to_device: waiting for the copy");
}

static void cuda_to_host(const m2_ops *o, void *host_dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    cudaStream_t st = m2_cuda_ctx_of(o)->stream;
    m2_cuda_check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, st), "to_host");
    m2_cuda_check(cudaStreamSynchronize(st), "to_host: waiting for the copy");
}

static void cuda_sync(const m2_ops *o) { m2_cuda_check(cudaStreamSynchronize(m2_cuda_ctx_of(o)->stream), "sync"); }

/* Kept activations in bf16 at bf16 precision (docs/MODEL.md §8); tf32 and fp32 keep fp32 storage. */
static m2_act_type cuda_act_type(const m2_ops *o)
{
    return m2_cuda_ctx_of(o)->gemm_prec == M2_CUDA_GEMM_BF16 ? M2_ACT_BF16 : M2_ACT_REAL;
}

/* C++20 designated initialisers: the compiler checks each name and the order against ops.h. */
static m2_ops g_cuda_ops = {
    .name = "cuda",
    .host_memory = 0, /* device memory: MPI goes through host staging (dist/dcomm_mpi.c) */
    .ctx = &g_ctx,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memset0 = cuda_memset0,
    .copy = cuda_copy,
    .to_device = cuda_to_device,
    .to_host = cuda_to_host,
    .sync = cuda_sync,
    .gemm = m2_cuda_gemm,
    .gemm_act = m2_cuda_gemm_act,
    .to_act = m2_cuda_to_act,
    .bias_add = m2_cuda_bias_add,
    .bias_grad = m2_cuda_bias_grad,
    .add = m2_cuda_add,
    .rmsnorm_fwd = m2_cuda_rmsnorm_fwd,
    .rmsnorm_bwd = m2_cuda_rmsnorm_bwd,
    .conv_silu_fwd = m2_cuda_conv_silu_fwd,
    .conv_silu_bwd = m2_cuda_conv_silu_bwd,
    .dt_fwd = m2_cuda_dt_fwd,
    .dt_bwd = m2_cuda_dt_bwd,
    .ssd_saved_size = m2_cuda_ssd_saved_size,
    .ssd_scratch_size = m2_cuda_ssd_scratch_size,
    .ssd_fwd = m2_cuda_ssd_fwd,
    .ssd_bwd = m2_cuda_ssd_bwd,
    .gated_norm_fwd = m2_cuda_gated_norm_fwd,
    .gated_norm_bwd = m2_cuda_gated_norm_bwd,
    .mse_loss = m2_cuda_mse_loss,
    .adamw = m2_cuda_adamw,
    .sumsq = m2_cuda_sumsq,
    .scale = m2_cuda_scale,
    .grad_batch = m2_cuda_grad_batch,
    .lanes = NULL, /* a device backend: every op call covers the whole micro-batch */
    .act_type = cuda_act_type,
};

extern "C" const m2_ops *m2_ops_cuda(void)
{
    if (!g_ready) {
        int dev = 0;
        char why[256];
        if (m2_cuda_available(why, sizeof why) == 0) {
            m2_fail(M2_EFAIL, "CUDA backend: no usable GPU (%s)", why);
            return NULL;
        }
        if (cudaGetDevice(&dev) != cudaSuccess) {
            (void)cudaGetLastError();
            dev = 0;
        }
        if (m2_ops_cuda_init(dev) != M2_OK) return NULL;
    }
    return &g_cuda_ops;
}
