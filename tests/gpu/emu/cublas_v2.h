/* TEST-ONLY CPU emulation of the cuBLAS subset kernels/gemm_cuda.cu uses (see cuda_runtime.h here).
 * cublasGemmEx is a column-major reference that checks its arguments as cuBLAS does (leading dimensions against
 * the stored shapes, so a wrong row-major mapping fails loudly) and rounds the operands as the compute type says
 * (bf16 or tf32, round to nearest even) before multiplying, accumulating in fp32. A, B and C may also be CUDA_R_16BF
 * (A and B of one type, CUBLAS_COMPUTE_32F, as cuBLAS's table of supported combinations has it): bf16 operands are
 * widened exactly, a bf16 C is read widened and written rounded to nearest even (as the hardware's epilogue does), and
 * the bytes counted are 2 per bf16 element. */
#ifndef MAMBA2_EMU_CUBLAS_V2_H
#define MAMBA2_EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType; /* the values of library_types.h */
typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);

#endif
