/* Packing matrices into the streaming engine's panels (layout: stream/engine.h). Compiled once; the kernels
 * that read the panels (stream_gemm.c) are compiled per instruction-set level. */
#include "stream/engine.h"

#include <string.h>

void m2s_mat_plan(m2s_mat *m, int M, int K, int bf16, size_t *cursor)
{
    int V = (M + M2S_VEC - 1) / M2S_VEC;
    m->M = M;
    m->K = K;
    m->Kp = bf16 ? K + K % 2 : K;
    m->n_panels = (V + M2S_MAX_NV - 1) / M2S_MAX_NV;
    m->nv_base = V / m->n_panels;
    m->n_extra = V % m->n_panels;
    m->offset = *cursor;
    *cursor += (size_t)V * M2S_VEC * m->Kp;
}

/* Position of element (k, j) in a panel of nv vectors (w = 16 nv elements per k-row). fp32: row-major.
 * bf16: k-rows 2q and 2q+1 interleaved element by element (engine.h), so one 64-byte load holds 16 outputs'
 * weights for two k: the two bf16 operands of vdpbf16ps, or two fp32 vectors after a shift and an and. */
static size_t panel_at(int k, int j, int nv, int bf16)
{
    const int w = nv * M2S_VEC;
    if (!bf16) return (size_t)k * w + j;
    return (size_t)(k / 2) * 2 * w + 2 * (size_t)j + k % 2;
}

void m2s_mat_pack(const m2s_mat *m, const float *W, const float *col_scale, void *mats, int bf16)
{
    for (int p = 0; p < m->n_panels; p++) {
        int nv, r0;
        m2s_panel(m, p, &nv, &r0);
        const int w = nv * M2S_VEC;
        size_t base = m->offset + (size_t)r0 * m->Kp;
        for (int k = 0; k < m->Kp; k++)
            for (int j = 0; j < w; j++) {
                int r = r0 + j;
                float v = r < m->M && k < m->K ? W[(size_t)r * m->K + k] * (col_scale ? col_scale[k] : 1.0f) : 0.0f;
                size_t at = base + panel_at(k, j, nv, bf16);
                if (bf16)
                    ((uint16_t *)mats)[at] = (uint16_t)m2_bf16_bits(v);
                else
                    ((float *)mats)[at] = v;
            }
    }
}
