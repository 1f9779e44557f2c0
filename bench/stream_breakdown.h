/* bench_stream --breakdown (stream_breakdown.c): a tick's time by part, for one model shape. */
#ifndef MAMBA2_BENCH_STREAM_BREAKDOWN_H
#define MAMBA2_BENCH_STREAM_BREAKDOWN_H

#include "stream/engine.h"

/* Prints, for fp32 and bf16 weights at 1 and 64 streams, the whole tick and each part's cost. X: n_inputs rows of
 * the model's F features; ticks caps the single-stream ticks of one measurement. M2_OK, or the error of opening
 * the model (M2_EFAIL out of memory), recorded for m2_report. */
int stream_breakdown(const m2_layout *lay, const float *params, const float *X, int n_inputs, long ticks);

#endif
