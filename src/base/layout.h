/* Model sizes and the flat parameter layout (docs/MODEL.md §1, §7).
 *
 * All parameters live in one contiguous fp32 buffer; gradients and Adam moments use the same layout.
 * Order: embed.weight, embed.bias, then per layer i (contiguous, so a layer is one reduce-scatter bucket):
 *   layers.i.norm.weight, layers.i.mixer.{in_proj,x_proj,dt_proj}.weight (together W_in, [2Di+2GN+H, D],
 *   rows in that order, so one GEMM computes z, x, B, C, dt_raw), dt_bias, conv1d.weight, conv1d.bias,
 *   A_log, D, norm.weight, out_proj.weight,
 * then norm_f.weight, head.weight, head.bias. */
#ifndef MAMBA2_LAYOUT_H
#define MAMBA2_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

typedef struct {
    int F, O; /* features in, targets out (from the dataset) */
    int D, L, E, P, N, G, K, Q;
    int Di;  /* E * D */
    int H;   /* Di / P */
    int Cc;  /* conv channels: Di + 2 G N (x, B, C) */
    int Win; /* rows of W_in: 2 Di + 2 G N + H */
} m2_dims;

/* Dims from [model] plus the dataset's F and O; checks divisibility (M2_EUSAGE on error). */
int m2_dims_init(m2_dims *d, const m2_config *cfg, int F, int O);
/* The derived sizes (Di, H, Cc, Win) from the set ones (D, E, P, N, G); the same checks (M2_EUSAGE on error). */
int m2_dims_derive(m2_dims *d);

/* Offsets (in floats) of one layer's tensors relative to the layer's start. */
typedef struct {
    size_t norm_w, W_in, dt_bias, conv_w, conv_b, A_log, Dskip, gnorm_w, W_out, size;
} m2_layer_offsets;

typedef struct {
    char name[64];
    size_t offset, numel;
    int ndim, shape[3];
    int decay; /* AdamW weight decay applies (W_embed, W_in, W_out, W_head only) */
} m2_tensor;

typedef struct {
    m2_dims d;
    size_t n_params;
    size_t embed_w, embed_b; /* offsets in the flat buffer */
    size_t layers_begin;     /* first layer's offset; layer l starts at layers_begin + l * layer.size */
    m2_layer_offsets layer;
    size_t normf_w, head_w, head_b;
    int n_tensors;
    m2_tensor *tensors; /* checkpoint names of docs/MODEL.md §9, in buffer order */
} m2_layout;

int m2_layout_init(m2_layout *lay, const m2_dims *d);
void m2_layout_free(m2_layout *lay);

static inline size_t m2_layer_base(const m2_layout *lay, int l)
{
    return lay->layers_begin + (size_t)l * lay->layer.size;
}

/* Gradient buckets in backward order, for reduce-scatter as soon as a bucket's gradients are complete:
 * bucket 0 = norm_f + head (the tail), buckets 1..L = layers L-1..0, bucket L+1 = embed.
 * Each is a contiguous range [begin, end) of the flat buffer. */
static inline int m2_layout_n_buckets(const m2_layout *lay) { return lay->d.L + 2; }
void m2_layout_bucket(const m2_layout *lay, int bucket, size_t *begin, size_t *end);

/* Tensor by checkpoint name, or NULL. */
const m2_tensor *m2_layout_find(const m2_layout *lay, const char *name);

/* Seeded initialisation exactly as docs/MODEL.md §6 (a pure function of seed and layout). */
void m2_params_init(const m2_layout *lay, float *params, uint64_t seed);

/* 1 where weight decay applies, per element (for AdamW over a range of the flat buffer). */
void m2_layout_decay_mask(const m2_layout *lay, unsigned char *mask);

#endif
