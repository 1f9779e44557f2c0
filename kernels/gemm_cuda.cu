/* The ops GEMM on cuBLAS: C [m,n] = alpha op(A) op(B) + beta C, all row-major fp32 buffers.
 *
 * cuBLAS is column-major. A row-major matrix with leading dimension ld is, read column-major, its transpose with
 * the same ld. So the row-major product C = op(A) op(B) is computed as the column-major product
 * C^T = op(B)^T op(A)^T: swap the operands (B first), swap m and n, and keep each operand's own transpose flag
 * (a row-major B stored [k,n] is, column-major, exactly op(B)^T = B^T [n,k]; stored [n,k] it needs a transpose).
 *
 * Precision (ops_cuda.h): fp32 buffers in and out; the compute type decides what the tensor cores see:
 * CUBLAS_COMPUTE_32F_FAST_16BF rounds the operands to bf16 inside cuBLAS and accumulates in fp32 (the default,
 * docs/MODEL.md §8), _FAST_TF32 rounds to tf32, CUBLAS_COMPUTE_32F is plain fp32.
 * With one stream and an explicit workspace, cuBLAS gives bitwise-identical results run to run on one GPU.
 *
 * gemm_act (the projections and their gradients' GEMMs at bf16, docs/MODEL.md §8): bf16 A and B (e.g. the rmsnorm
 * output and a bf16 copy of W_in: the same operands the _FAST_16BF path rounds to) and a bf16 or fp32 C,
 * CUBLAS_COMPUTE_32F: fp32 accumulation, one rounding of the output. cublasGemmEx has no fp32-in/bf16-out
 * combination and takes A and B of one type, hence the bf16 inputs (and the model's bf16 copy of dh). */
#include "cuda_common.cuh"

static cublasComputeType_t compute_type(m2_cuda_gemm_precision p)
{
    switch (p) {
    case M2_CUDA_GEMM_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case M2_CUDA_GEMM_FP32: return CUBLAS_COMPUTE_32F;
    case M2_CUDA_GEMM_BF16: break;
    }
    return CUBLAS_COMPUTE_32F_FAST_16BF;
}

void m2_cuda_gemm(const m2_ops *o, int ta, int tb, int m, int n, int k, m2_real alpha, const m2_real *A, int lda,
                  const m2_real *B, int ldb, m2_real beta, m2_real *C, int ldc)
{
    if (m <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const float al = alpha, be = beta;
    m2_cublas_check(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &al,
                                 B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &be, C, CUDA_R_32F, ldc,
                                 compute_type(c->gemm_prec), CUBLAS_GEMM_DEFAULT),
                    "gemm (cublasGemmEx)");
}

static cudaDataType cuda_type(m2_act_type t) { return t == M2_ACT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

void m2_cuda_gemm_act(const m2_ops *o, int ta, int tb, int m, int n, int k, m2_real alpha, const void *A, int lda,
                      const void *B, int ldb, m2_act_type ab, m2_real beta, void *C, int ldc, m2_act_type ct)
{
    if (ab == M2_ACT_REAL && ct == M2_ACT_REAL) {
        m2_cuda_gemm(o, ta, tb, m, n, k, alpha, (const float *)A, lda, (const float *)B, ldb, beta, (float *)C, ldc);
        return;
    }
    if (m <= 0 || n <= 0) return;
    m2_cuda_ctx *c = m2_cuda_ctx_of(o);
    const float al = alpha, be = beta;
    m2_cublas_check(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &al,
                                 B, cuda_type(ab), ldb, A, cuda_type(ab), lda, &be, C, cuda_type(ct), ldc,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "gemm_act (cublasGemmEx, bf16)");
}
