/* The model and micro-batch that bench_model times and torch_export hands to the PyTorch comparison, so that both
 * are the same: docs/MODEL.md §1 defaults with F = 8, O = 3, and inputs drawn from the test stream of `seed`
 * (features uniform in [-1, 1], targets in [-0.1, 0.1]). Header-only, for the bench programs. */
#ifndef MAMBA2_BENCH_BATCH_H
#define MAMBA2_BENCH_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "base/rng.h"
#include "core/model.h"

/* The default layout and a training model for micro-batches up to B x T; M2_OK or the failing call's code. */
static inline int bench_default_model(int B, int T, m2_dims *d, m2_layout *lay, m2_model **m)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    int rc = m2_dims_init(d, &cfg, 8, 3);
    if (!rc) rc = m2_layout_init(lay, d);
    if (!rc) rc = m2_model_create(m, lay, B, T);
    return rc;
}

/* X [nx] and Y [ny] of the micro-batch (any real type: the draws are doubles). */
#define BENCH_DRAW_BATCH(seed, X, nx, Y, ny)                                                        \
    do {                                                                                            \
        uint64_t key_ = m2_rng_key((seed), M2_RNG_TEST, 0, 0);                                      \
        for (size_t i_ = 0; i_ < (nx); i_++) (X)[i_] = 2 * m2_rng_u01(key_, i_) - 1;                \
        for (size_t i_ = 0; i_ < (ny); i_++) (Y)[i_] = 0.1 * (2 * m2_rng_u01(key_, (nx) + i_) - 1); \
    } while (0)

#endif
