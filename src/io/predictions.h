/* Predictions file (docs/FORMATS.md "Predictions", schema "mamba2.predictions", version 1), written by
 * `mamba2_eval --predictions` (and by `mamba2_stream --predictions`):
 *   /row     int64[M]      dataset row of each prediction
 *   /pred    float32[M,O]  model output at that row
 *   /target  float32[M,O]  the dataset's target at that row (NaN where the horizon crosses a session end)
 * plus root attributes describing where the rows come from (split, mode, checkpoint, step, horizons), so a file
 * says what it is without its command line. Written crash-safely (temporary name, fsync, rename). */
#ifndef MAMBA2_PREDICTIONS_H
#define MAMBA2_PREDICTIONS_H

#include <stdint.h>

#include "io/dataset.h"

#define M2_PREDICTIONS_SCHEMA  "mamba2.predictions"
#define M2_PREDICTIONS_VERSION 1

typedef struct {
    int64_t M;
    int O;
    int64_t *row;             /* [M] */
    float *pred, *target;     /* [M, O] */
    char split[16], mode[16]; /* "" when unknown */
    char checkpoint[1024];
    int64_t step;                     /* checkpoint step, -1 when unknown */
    int32_t horizons[M2_MAX_TARGETS]; /* [O] in events; 0 when unknown */
} m2_predictions;

/* Writes p to path atomically. Attributes with unknown values ("" / -1 / all-zero horizons) are left out. */
int m2_predictions_write(const char *path, const m2_predictions *p);

/* Reads a predictions file (schema checked; shapes must agree): allocates row, pred, target. */
int m2_predictions_read(const char *path, m2_predictions *p);

void m2_predictions_free(m2_predictions *p);

#endif
