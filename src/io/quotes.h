/* The quoted half spread of a tick dataset's rows, in bp of the mid (FORMATS.md "Tick dataset" /raw), for the
 * cost model of the backtest (run/backtest.h). A file written without /raw has no quotes. */
#ifndef MAMBA2_QUOTES_H
#define MAMBA2_QUOTES_H

#include <stdint.h>

/* half_bp[i] = 1e4 · (ask − bid) / (ask + bid) at row rows[i] (0 where a quote is missing or crossed), for the
 * n rows (ascending). *found = 0 and half_bp untouched when the file has no /raw quotes. */
int m2_quotes_half_spread_bp(const char *path, const int64_t *rows, int64_t n, float *half_bp, int *found);

#endif
