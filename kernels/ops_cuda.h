/* The CUDA backend of the ops interface (core/ops.h; docs/ARCHITECTURE.md "The ops interface"). Usable from C.
 *
 * Every pointer the ops take is device memory (cudaMalloc, never managed memory); all work runs in order on one
 * stream owned by the backend, so the model graph (model.c) runs unchanged on the GPU. Parameters, gradients,
 * Adam moments and gradients are fp32 buffers (m2_real must be float: the fp64 test build has no CUDA backend);
 * the kept activations are bf16 at bf16 precision, else fp32 (act_type, core/ops.h m2_act_type; docs/MODEL.md §8).
 *
 * Precision (docs/MODEL.md §3, §6):
 * - GEMMs (embed, in_proj, out_proj, head and their gradients) go through cublasGemmEx on the fp32 buffers with
 *   a compute type chosen by m2_ops_cuda_set_gemm_precision: bf16 (the default: operands rounded to bf16 inside
 *   cuBLAS, tensor cores, fp32 accumulation and fp32 output), tf32, or full fp32. At bf16 the in_proj and out_proj
 *   and their gradients' GEMMs run on bf16 operands (gemm_act: the norm outputs, the in_proj output's gradient and a
 *   copy of the residual stream's gradient written in bf16, bf16 copies of W_in and W_out); the in_proj, the
 *   out_proj's d(o) and the in_proj's d(u) write bf16.
 * - The chunked SSD's per-chunk products (kernels/tile_gemm.cuh) follow the same switch: bf16 (default) or tf32
 *   operands on tensor cores with fp32 accumulation, or fp32 on CUDA cores; what feeds them (cumsums, decays,
 *   masks, dt scaling), the chunk states, the state passing and every reduction stay fp32 (docs/MODEL.md §3).
 * - Norm statistics, softplus, the loss (accumulated in fp64) and AdamW are fp32 or wider.
 * - Every reduction is deterministic: parameter gradients and the loss are block partial sums reduced in a fixed
 *   order (no float atomics), so two runs on the same GPU give bitwise-identical results.
 *
 * Errors: the ops have no error path (ops.h). A CUDA or cuBLAS failure inside an op prints one line naming the
 * op and CUDA's reason on stderr and aborts the process (as the CPU backend does when scratch memory runs out);
 * alloc returns NULL when device memory runs out. */
#ifndef MAMBA2_OPS_CUDA_H
#define MAMBA2_OPS_CUDA_H

#include <stddef.h>

#include "core/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (> 0), or 0 with the reason in why (cap bytes, may be NULL): no driver (the
 * return code of cudaGetDeviceCount is checked; error 35 "insufficient driver" leaves the count unset), no
 * device, or the first device older than compute capability 8.0 (the build targets sm_80 and sm_90). */
int m2_cuda_available(char *why, size_t cap);

/* Creates the backend on `device` (cudaSetDevice first: call it before anything else touches CUDA on this
 * thread; a data-parallel rank passes its local rank). M2_OK, or M2_EFAIL with the reason (base/error.h).
 * Calling it again with the same device does nothing; with another device it fails. */
int m2_ops_cuda_init(int device);

/* The backend's ops table; creates the backend on the current device on first use. NULL (with a message, see
 * m2_last_error) when no usable GPU is present. */
const m2_ops *m2_ops_cuda(void);

/* Compute type of the model GEMMs (see above); returns the previous one. */
typedef enum { M2_CUDA_GEMM_BF16 = 0, M2_CUDA_GEMM_TF32 = 1, M2_CUDA_GEMM_FP32 = 2 } m2_cuda_gemm_precision;
m2_cuda_gemm_precision m2_ops_cuda_set_gemm_precision(m2_cuda_gemm_precision p);
const char *m2_cuda_gemm_precision_name(m2_cuda_gemm_precision p);
/* By the config's name (model.precision): "bf16", "tf32" or "fp32"; M2_EUSAGE (with a message) for another. */
int m2_ops_cuda_set_precision_named(const char *name);

/* Facts about the backend's device, for logs and the benchmark. */
typedef struct {
    int device;
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t total_bytes, free_bytes; /* device memory now (cudaMemGetInfo) */
} m2_cuda_device_info;
int m2_ops_cuda_device_info(m2_cuda_device_info *info);

/* The backend's stream (a cudaStream_t), for code that must order its own work after the ops' (NCCL). */
void *m2_ops_cuda_stream(void);

#ifdef __cplusplus
}
#endif

#endif
