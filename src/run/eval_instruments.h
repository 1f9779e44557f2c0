/* Per-instrument evaluation of a universe (CLI.md mamba2_eval --instrument): the evaluated rows of one instrument
 * are one contiguous range of m2_eval_rows (rows are laid out split-major, then by instrument: FORMATS.md
 * "Universe"), so each instrument's metrics are those of a view, computed as the pooled ones are. */
#ifndef MAMBA2_EVAL_INSTRUMENTS_H
#define MAMBA2_EVAL_INSTRUMENTS_H

#include <stdio.h>

#include "io/dataset.h"
#include "run/eval.h"

/* The instrument of dataset row r (by its session). */
int m2_eval_instrument_of_row(const m2_dataset *ds, int64_t r);

/* [*begin, *end): the range of `rows` that belongs to instrument i. */
void m2_eval_instrument_range(const m2_dataset *ds, const m2_eval_rows *rows, int i, int64_t *begin, int64_t *end);

/* The view of rows [begin, end) (no copy). */
m2_eval_rows m2_eval_rows_view(const m2_eval_rows *rows, int64_t begin, int64_t end);

/* Metrics of every instrument with evaluated rows into out[i] (header fields copied from `pooled`);
 * ridge_pred is the pooled ridge prediction array. */
int m2_eval_by_instrument(const m2_dataset *ds, const m2_eval_rows *rows, const float *ridge_pred,
                          const m2_eval_report *pooled, m2_eval_report *out);

/* One line per instrument and horizon: n, model MSE / R² / IC / dir_acc, ridge R² / IC. */
void m2_eval_print_instruments(FILE *f, const m2_dataset *ds, const m2_eval_report *per);

#endif
