/* The CUDA backend's choice for the chunked SSD's chunk states (kernels/ssd_cuda.cuh, "Buffers"). Usable from C.
 *
 * The backward needs the chunk-start states S of every chunk (3,072 bytes per token and layer at configs/8gpu.ini's
 * head shape in fp32, 1,536 in bf16 at bf16 precision: ssd_cuda.cuh, ssd_states_type). Kept, the forward's S stays
 * in the SSD's saved buffer until the backward; recomputed (the default), the saved buffer holds only the cumsums, CB
 * and the decay tables and the backward runs the states product and the state passing again from them (the same
 * kernels on the same inputs: the gradients are bitwise the same either way). The choice
 * decides m2_ops::ssd_saved_size, so it is made before a model is created and left alone while it lives.
 * BENCHMARKS.md (issue 16d) gives the predicted time and memory of both. */
#ifndef MAMBA2_SSD_CUDA_H
#define MAMBA2_SSD_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { M2_CUDA_SSD_RECOMPUTE_STATES = 0, M2_CUDA_SSD_KEEP_STATES = 1 } m2_cuda_ssd_states;
/* Sets the choice; returns the previous one. */
m2_cuda_ssd_states m2_ops_cuda_set_ssd_states(m2_cuda_ssd_states mode);

#ifdef __cplusplus
}
#endif

#endif
