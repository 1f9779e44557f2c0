/* Shared by the GPU tests (tests/gpu): the skip rule, device buffers, seeded inputs and error measures.
 *
 * Skip rule: without a usable GPU each test prints exactly one line "SKIP: no CUDA GPU (<reason>)" and exits 0,
 * so CI (no GPU) passes visibly. Every comparison prints its measured error and tolerance, so a GPU run's log
 * (tests/gpu/check.sh) holds the figures, and fails the test when the error is above the tolerance. */
#ifndef MAMBA2_TEST_GPU_UTIL_H
#define MAMBA2_TEST_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/ops.h"
#include "ops_cuda.h"

/* 1 (after printing the SKIP line) when there is no usable GPU; the caller's main returns 0 then. */
int m2_gpu_skip(void);
/* The CUDA ops (fails the test when they cannot be created). */
const m2_ops *m2_gpu_ops(void);

/* Host buffers of n floats: U(lo, hi) from (seed, stream), or a constant. Freed with free(). */
float *m2_host_uniform(size_t n, float lo, float hi, uint64_t seed, uint64_t stream);
float *m2_host_fill(size_t n, float v);

/* Device copy of a host buffer / host copy of a device buffer (malloc'd). */
float *m2_dev_from(const m2_ops *g, const float *host, size_t n);
float *m2_host_from(const m2_ops *g, const float *dev, size_t n);

/* ||a - ref||_2 / ||ref||_2 (0/0 = 0, x/0 = inf) and max |a - ref|, in double. */
double m2_rel_err(const float *a, const float *ref, size_t n);
double m2_max_abs_err(const float *a, const float *ref, size_t n);

/* Prints "  <what>: rel err E (tol T)" and fails the test when E > tol or E is not finite. */
void m2_expect_close(const char *what, const float *got, const float *ref, size_t n, double tol);
/* The same for one double. */
void m2_expect_close_scalar(const char *what, double got, double ref, double tol);

/* A host buffer and its device copy on backend g: the CPU op works on h, the CUDA op on d. */
typedef struct {
    float *h, *d;
    size_t n;
} m2_pair;
m2_pair m2_pair_of(const m2_ops *g, float *host, size_t n); /* takes host */
m2_pair m2_pair_uniform(const m2_ops *g, size_t n, float lo, float hi, uint64_t seed, uint64_t stream);
m2_pair m2_pair_fill(const m2_ops *g, size_t n, float v);
/* m2_expect_close of the device copy (brought back) against the host one. */
void m2_pair_expect(const m2_ops *g, const char *what, m2_pair p, double tol);
void m2_pair_free(const m2_ops *g, m2_pair *p);

#endif
