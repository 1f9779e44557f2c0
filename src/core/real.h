/* The scalar type of the CPU ops and the model graph. fp32 in the product; the tests also build the same
 * sources with -DMAMBA2_FP64 (library mamba2_core_f64) so that finite differences are meaningful. */
#ifndef MAMBA2_REAL_H
#define MAMBA2_REAL_H

#include <math.h>

#ifdef MAMBA2_FP64
typedef double m2_real;
#define M2_GEMM  cblas_dgemm
#define M2_EXP   exp
#define M2_LOG   log
#define M2_SQRT  sqrt
#define M2_LOG1P log1p
#else
typedef float m2_real;
#define M2_GEMM  cblas_sgemm
#define M2_EXP   expf
#define M2_LOG   logf
#define M2_SQRT  sqrtf
#define M2_LOG1P log1pf
#endif

#endif
