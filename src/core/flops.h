/* Model FLOPs and GPU peaks, for MFU (model FLOPs utilisation): shared by the trainer's metrics and the GPU
 * benchmark (tests/gpu/bench_gpu.c), so both report the same figure for the same speed. */
#ifndef MAMBA2_FLOPS_H
#define MAMBA2_FLOPS_H

#include "base/layout.h"

/* Model FLOPs of one training token (forward + backward = 3 x forward), counted per layer as
 * GEMMs 2(D Win + Di D), SSD G Q N + H (Q P + 4 N P) (causal halves of the intra-chunk products, states and state
 * outputs), plus embed and head 2 F D + 2 D O. Recomputation in the backward is not counted (it is not model work). */
double m2_train_flops_per_token(const m2_dims *d);

/* bf16 dense tensor-core peak (FLOP/s) of a GPU by its CUDA device name: H100 SXM and H200 989e12, H100 PCIe 756e12,
 * A100 312e12; 0 when unknown (then no MFU is reported). */
double m2_gpu_bf16_peak(const char *device_name);

#endif
