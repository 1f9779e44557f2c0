/* Models and inputs for the streaming tests and benchmark: a layout from explicit sizes, seeded parameters
 * (m2_params_init, then the tensors that init sets to constants are spread out so that a wrong index into
 * them cannot go unnoticed), and z-score-like inputs. Header-only so tests and bench_stream share it. */
#ifndef MAMBA2_TEST_STREAM_FIXTURE_H
#define MAMBA2_TEST_STREAM_FIXTURE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/layout.h"
#include "base/rng.h"

typedef struct {
    int F, O, D, L, E, P, N, G, K;
} fixture_shape;

/* docs/MODEL.md §1 defaults with F = 8 features and O = 3 horizons. */
static inline fixture_shape fixture_default(void)
{
    fixture_shape s = {8, 3, 128, 4, 2, 32, 64, 1, 4};
    return s;
}

static inline int fixture_layout(m2_layout *lay, fixture_shape s)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    cfg.model.d_model = s.D;
    cfg.model.n_layers = s.L;
    cfg.model.expand = s.E;
    cfg.model.headdim = s.P;
    cfg.model.d_state = s.N;
    cfg.model.ngroups = s.G;
    cfg.model.d_conv = s.K;
    m2_dims d;
    int rc = m2_dims_init(&d, &cfg, s.F, s.O);
    return rc ? rc : m2_layout_init(lay, &d);
}

/* m2_params_init, then (spread != 0) every norm weight in [0.5, 1.5], D in [0, 2], biases in +-0.1. */
static inline float *fixture_params(const m2_layout *lay, uint64_t seed, int spread)
{
    float *p = malloc(lay->n_params * sizeof *p);
    m2_params_init(lay, p, seed);
    if (!spread) return p;
    uint64_t key = m2_rng_key(seed, 99, 0, 0);
    for (int i = 0; i < lay->n_tensors; i++) {
        const m2_tensor *t = &lay->tensors[i];
        double lo = 0, hi = 0;
        if (strstr(t->name, "norm"))
            lo = 0.5, hi = 1.5;
        else if (strstr(t->name, "mixer.D"))
            lo = 0.0, hi = 2.0;
        else if (strstr(t->name, "bias") && !strstr(t->name, "dt_bias") && !strstr(t->name, "conv"))
            lo = -0.1, hi = 0.1;
        else
            continue;
        for (size_t j = 0; j < t->numel; j++)
            p[t->offset + j] = (float)(lo + (hi - lo) * m2_rng_u01(key, t->offset + j));
    }
    return p;
}

/* X [T,F]: roughly standard normal (sum of uniforms), clipped to +-5 as the dataset's features are. */
static inline float *fixture_inputs(int T, int F, uint64_t seed)
{
    float *X = malloc((size_t)T * F * sizeof *X);
    uint64_t key = m2_rng_key(seed, 98, 0, 0);
    for (size_t i = 0; i < (size_t)T * F; i++) {
        double z = 0;
        for (int k = 0; k < 4; k++) z += m2_rng_u01(key, 4 * i + k) - 0.5;
        z *= sqrt(3.0);
        X[i] = (float)(z > 5 ? 5 : z < -5 ? -5 : z);
    }
    return X;
}

#endif
