#include "base/layout.h"

#include "base/error.h"
#include "base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int m2_dims_init(m2_dims *d, const m2_config *cfg, int F, int O)
{
    memset(d, 0, sizeof *d);
    if (F <= 0 || O <= 0) return m2_fail(M2_EUSAGE, "model: dataset has %d features and %d targets", F, O);
    d->F = F;
    d->O = O;
    d->D = cfg->model.d_model;
    d->L = cfg->model.n_layers;
    d->E = cfg->model.expand;
    d->P = cfg->model.headdim;
    d->N = cfg->model.d_state;
    d->G = cfg->model.ngroups;
    d->K = cfg->model.d_conv;
    d->Q = cfg->model.chunk_size;
    return m2_dims_derive(d);
}

int m2_dims_derive(m2_dims *d)
{
    d->Di = d->E * d->D;
    if (d->Di % d->P) return m2_fail(M2_EUSAGE, "model.headdim: expand*d_model %d not a multiple of %d", d->Di, d->P);
    d->H = d->Di / d->P;
    if (d->H % d->G) return m2_fail(M2_EUSAGE, "model.ngroups: %d heads not a multiple of %d groups", d->H, d->G);
    d->Cc = d->Di + 2 * d->G * d->N;
    d->Win = 2 * d->Di + 2 * d->G * d->N + d->H;
    return M2_OK;
}

static void add_tensor(m2_layout *lay, const char *name, size_t offset, int decay, int ndim, int s0, int s1, int s2)
{
    m2_tensor *t = &lay->tensors[lay->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = offset;
    t->ndim = ndim;
    t->shape[0] = s0;
    t->shape[1] = s1;
    t->shape[2] = s2;
    t->numel = (size_t)s0 * (ndim > 1 ? (size_t)s1 : 1) * (ndim > 2 ? (size_t)s2 : 1);
    t->decay = decay;
}

int m2_layout_init(m2_layout *lay, const m2_dims *d)
{
    memset(lay, 0, sizeof *lay);
    lay->d = *d;
    const int D = d->D, Di = d->Di, H = d->H, GN = d->G * d->N;
    m2_layer_offsets *o = &lay->layer;
    size_t p = 0;
    o->norm_w = p;
    p += (size_t)D;
    o->W_in = p;
    p += (size_t)d->Win * D;
    o->dt_bias = p;
    p += (size_t)H;
    o->conv_w = p;
    p += (size_t)d->Cc * d->K;
    o->conv_b = p;
    p += (size_t)d->Cc;
    o->A_log = p;
    p += (size_t)H;
    o->Dskip = p;
    p += (size_t)H;
    o->gnorm_w = p;
    p += (size_t)Di;
    o->W_out = p;
    p += (size_t)D * Di;
    o->size = p;

    size_t q = 0;
    lay->embed_w = q;
    q += (size_t)D * d->F;
    lay->embed_b = q;
    q += (size_t)D;
    lay->layers_begin = q;
    q += (size_t)d->L * o->size;
    lay->normf_w = q;
    q += (size_t)D;
    lay->head_w = q;
    q += (size_t)d->O * D;
    lay->head_b = q;
    q += (size_t)d->O;
    lay->n_params = q;

    lay->tensors = calloc((size_t)(6 + 11 * d->L), sizeof *lay->tensors);
    if (!lay->tensors) return m2_fail(M2_EFAIL, "model: out of memory for the layout table");
    add_tensor(lay, "embed.weight", lay->embed_w, 1, 2, D, d->F, 0);
    add_tensor(lay, "embed.bias", lay->embed_b, 0, 1, D, 0, 0);
    for (int l = 0; l < d->L; l++) {
        size_t b = m2_layer_base(lay, l);
        char n[64];
#define T(suffix, off, decay, nd, a, bb, c)           \
    snprintf(n, sizeof n, "layers.%d.%s", l, suffix); \
    add_tensor(lay, n, b + (off), decay, nd, a, bb, c)
        T("norm.weight", o->norm_w, 0, 1, D, 0, 0);
        T("mixer.in_proj.weight", o->W_in, 1, 2, 2 * Di, D, 0);
        T("mixer.x_proj.weight", o->W_in + (size_t)2 * Di * D, 1, 2, 2 * GN, D, 0);
        T("mixer.dt_proj.weight", o->W_in + (size_t)(2 * Di + 2 * GN) * D, 1, 2, H, D, 0);
        T("mixer.dt_bias", o->dt_bias, 0, 1, H, 0, 0);
        T("mixer.conv1d.weight", o->conv_w, 0, 3, d->Cc, 1, d->K);
        T("mixer.conv1d.bias", o->conv_b, 0, 1, d->Cc, 0, 0);
        T("mixer.A_log", o->A_log, 0, 1, H, 0, 0);
        T("mixer.D", o->Dskip, 0, 1, H, 0, 0);
        T("mixer.norm.weight", o->gnorm_w, 0, 1, Di, 0, 0);
        T("mixer.out_proj.weight", o->W_out, 1, 2, D, Di, 0);
#undef T
    }
    add_tensor(lay, "norm_f.weight", lay->normf_w, 0, 1, D, 0, 0);
    add_tensor(lay, "head.weight", lay->head_w, 1, 2, d->O, D, 0);
    add_tensor(lay, "head.bias", lay->head_b, 0, 1, d->O, 0, 0);
    return M2_OK;
}

void m2_layout_free(m2_layout *lay)
{
    free(lay->tensors);
    lay->tensors = NULL;
    lay->n_tensors = 0;
}

const m2_tensor *m2_layout_find(const m2_layout *lay, const char *name)
{
    for (int i = 0; i < lay->n_tensors; i++)
        if (strcmp(lay->tensors[i].name, name) == 0) return &lay->tensors[i];
    return NULL;
}

void m2_layout_decay_mask(const m2_layout *lay, unsigned char *mask)
{
    for (int i = 0; i < lay->n_tensors; i++)
        memset(mask + lay->tensors[i].offset, lay->tensors[i].decay ? 1 : 0, lay->tensors[i].numel);
}

/* Each tensor draws from its own stream keyed by its index, so adding a layer changes no other tensor. */
static void fill_uniform(float *w, size_t n, double bound, uint64_t key)
{
    for (size_t i = 0; i < n; i++) w[i] = (float)((2.0 * m2_rng_u01(key, i) - 1.0) * bound);
}

void m2_params_init(const m2_layout *lay, float *params, uint64_t seed)
{
    const m2_dims *d = &lay->d;
    memset(params, 0, lay->n_params * sizeof *params);
    for (int i = 0; i < lay->n_tensors; i++) {
        const m2_tensor *t = &lay->tensors[i];
        float *w = params + t->offset;
        uint64_t key = m2_rng_key(seed, M2_RNG_INIT, (uint64_t)i, 0);
        if (strcmp(t->name, "embed.weight") == 0)
            fill_uniform(w, t->numel, 1.0 / sqrt(d->F), key);
        else if (strcmp(t->name, "head.weight") == 0)
            fill_uniform(w, t->numel, 1.0 / sqrt(d->D), key);
        else if (strstr(t->name, "in_proj.weight") || strstr(t->name, "x_proj.weight") ||
                 strstr(t->name, "dt_proj.weight"))
            fill_uniform(w, t->numel, 1.0 / sqrt(d->D), key);
        else if (strstr(t->name, "out_proj.weight"))
            fill_uniform(w, t->numel, 1.0 / sqrt(d->Di) / sqrt(d->L), key);
        else if (strstr(t->name, "conv1d."))
            fill_uniform(w, t->numel, 1.0 / sqrt(d->K), key);
        else if (strstr(t->name, "dt_bias")) {
            for (size_t h = 0; h < t->numel; h++) {
                double u = m2_rng_u01(key, h);
                double dt = exp(log(1e-3) + u * (log(0.1) - log(1e-3)));
                if (dt < 1e-4) dt = 1e-4;
                w[h] = (float)(dt + log(-expm1(-dt))); /* inverse softplus */
            }
        } else if (strstr(t->name, "A_log")) {
            for (size_t h = 0; h < t->numel; h++) w[h] = (float)log(1.0 + 15.0 * m2_rng_u01(key, h));
        } else if (strstr(t->name, "mixer.D") || strstr(t->name, "norm.weight") || strstr(t->name, "norm_f.weight")) {
            for (size_t k = 0; k < t->numel; k++) w[k] = 1.0f;
        }
        /* embed.bias, head.bias: zero */
    }
}

void m2_layout_bucket(const m2_layout *lay, int bucket, size_t *begin, size_t *end)
{
    int L = lay->d.L;
    if (bucket == 0) {
        *begin = lay->normf_w;
        *end = lay->n_params;
    } else if (bucket <= L) {
        *begin = m2_layer_base(lay, L - bucket);
        *end = *begin + lay->layer.size;
    } else {
        *begin = 0;
        *end = lay->layers_begin;
    }
}
