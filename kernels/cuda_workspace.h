/* The CUDA backend's op workspace seen from outside (kernels/ops_cuda.cu, m2_cuda_ws): for programs that measure
 * device memory (bench/bench_gpu_emu.c). The workspace only grows (doubling) and lives as long as the backend, so
 * a measurement that must not depend on what ran before frees it first. */
#ifndef MAMBA2_CUDA_WORKSPACE_H
#define MAMBA2_CUDA_WORKSPACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Frees the op workspace after the stream's work (the next op that needs one allocates it again). */
void m2_ops_cuda_release_workspace(void);

#ifdef __cplusplus
}
#endif

#endif
