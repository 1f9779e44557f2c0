/* Packing matrices into the streaming engine's panels (layout: stream/engine.h). Compiled once; the kernels
 * that read the panels (stream_gemm.c) are compiled per instruction-set level. */
#include "stream/engine.h"

#include <string.h>

void m2s_mat_plan(m2s_mat *m, int M, int K, size_t *cursor)
{
    int V = (M + M2S_VEC - 1) / M2S_VEC;
    m->M = M;
    m->K = K;
    m->n_panels = (V + M2S_MAX_NV - 1) / M2S_MAX_NV;
    m->nv_base = V / m->n_panels;
    m->n_extra = V % m->n_panels;
    m->offset = *cursor;
    *cursor += (size_t)V * M2S_VEC * K;
}

/* Round to nearest even; weights are finite, so no NaN case is needed. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Position of element (k, j) in a panel of nv vectors (w = 16 nv elements per k-row). fp32: row-major.
 * bf16: vectors 2q and 2q+1 are interleaved lane by lane, so one 64-byte load holds 16 lanes of both and two
 * cheap integer ops (shift, mask) turn it into two fp32 vectors (with AVX2: two 32-byte loads, 8 lanes of both
 * each); an odd last vector stays plain. */
static size_t panel_at(int k, int j, int nv, int bf16)
{
    const int w = nv * M2S_VEC, v = j / M2S_VEC, lane = j % M2S_VEC;
    if (!bf16 || (v % 2 == 0 && v + 1 == nv)) return (size_t)k * w + j;
    return (size_t)k * w + (size_t)M2S_VEC * (v - v % 2) + 2 * lane + v % 2;
}

void m2s_mat_pack(const m2s_mat *m, const float *W, void *mats, int bf16)
{
    for (int p = 0; p < m->n_panels; p++) {
        int nv, r0;
        m2s_panel(m, p, &nv, &r0);
        const int w = nv * M2S_VEC;
        size_t base = m->offset + (size_t)r0 * m->K;
        for (int k = 0; k < m->K; k++)
            for (int j = 0; j < w; j++) {
                int r = r0 + j;
                float v = r < m->M ? W[(size_t)r * m->K + k] : 0.0f;
                size_t at = base + panel_at(k, j, nv, bf16);
                if (bf16)
                    ((uint16_t *)mats)[at] = to_bf16(v);
                else
                    ((float *)mats)[at] = v;
            }
    }
}
