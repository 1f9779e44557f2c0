/* Evaluation of a split (docs/CLI.md mamba2_eval): the model's predictions on the split's rows,
 * the ridge baseline on the same rows, per-horizon metrics (run/metrics.h), and their table / JSON forms.
 *
 * Rows of a split are cut by sessions into "parts": part = session ∩ split, so a part starts at the session's
 * first row or at the split's first row, whichever is later (a session that straddles a split boundary is
 * evaluated from the boundary on, with a fresh state: nothing crosses from one split into another).
 *
 * Modes
 * - stream: the state starts at zero at each part's first row and is carried tick by tick to its end. Computed
 *   by ONE chunked forward (m2_model_forward, B = 1, T = the part's length) per part, which is mathematically
 *   the step-by-step recurrence (docs/MODEL.md §7). Every row of the split gets a prediction. A part longer than the
 *   backend can take in one forward (on the CPU M2_EVAL_MAX_CHUNKED_T rows; on a device as many as its memory
 *   holds: eval.c) runs through that recurrence itself (stream/mamba2_stream.h, on the CPU) instead, so memory stays
 *   bounded whatever the session length; such parts step together (up to 8 at a time), so each read of the
 *   weights serves one tick of each.
 * - window: each part is cut into consecutive, non-overlapping windows of seq_len rows starting at the part's
 *   first row (the last one may be shorter); each window starts from a zero state, as in training, and
 *   predictions are kept at window positions t >= burn_in only, the positions the training loss sees
 *   (docs/MODEL.md §4). A tail window of burn_in rows or fewer contributes nothing.
 *   The first window of a part sees the whole part so far, so on its rows window mode equals stream mode.
 *
 * Rows with a NaN target are kept in the predictions (the file records them); the metrics skip them. */
#ifndef MAMBA2_EVAL_H
#define MAMBA2_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "base/layout.h"
#include "run/metrics.h"
#include "core/ops.h"
#include "core/real.h"
#include "run/ridge.h"
#include "io/dataset.h"

enum { M2_EVAL_STREAM = 0, M2_EVAL_WINDOW = 1 };

/* "stream" / "window" → mode; -1 otherwise. */
int m2_eval_mode_from_name(const char *name);
const char *m2_eval_mode_name(int mode);

/* Predictions on evaluated rows, in ascending row order. */
typedef struct {
    int64_t M;
    int O;
    int64_t *row;         /* [M] dataset rows */
    float *pred, *target; /* [M, O] */
} m2_eval_rows;

/* Runs the model (params in the flat layout of lay, host memory) over `split` of ds in `mode`
 * (seq_len and burn_in are used in window mode only). The dataset's F and O must be the layout's.
 * ops: the backend of the chunked forwards (run/backend.h chooses it; NULL: the CPU); parts that stream mode
 * runs through the recurrent step run on the CPU, whatever ops is (stream/mamba2_stream.h is a CPU engine). */
int m2_eval_predict(const m2_ops *ops, const m2_layout *lay, const m2_real *params, const m2_dataset *ds, int split,
                    int mode, int seq_len, int burn_in, m2_eval_rows *out);

void m2_eval_rows_free(m2_eval_rows *r);

/* Fits the ridge baseline (run/ridge.h, M2_RIDGE_LAMBDA) on ds's train split and predicts the rows of `rows`
 * into pred [rows->M, O]. fit receives the fitted model (free it with m2_ridge_free). */
int m2_eval_ridge(const m2_dataset *ds, const m2_eval_rows *rows, m2_ridge *fit, float *pred);

/* Everything mamba2_eval reports. */
typedef struct m2_eval_report {
    char split[16], mode[16];
    char checkpoint[1024], data[1024];
    char backend[320];                  /* where the model ran, e.g. "cuda (NVIDIA H200)", "cpu" ("": not said) */
    int64_t step;                       /* checkpoint step */
    int seq_len, burn_in;               /* window mode's window */
    int64_t rows;                       /* M */
    int64_t ridge_rows[M2_MAX_TARGETS]; /* train rows each ridge fit used */
    double ridge_lambda;
    int O;
    int32_t horizons[M2_MAX_TARGETS];
    m2_metrics model[M2_MAX_TARGETS], ridge[M2_MAX_TARGETS];
    char instrument[64]; /* the rows are this instrument's only ("": all) */
    int n_instruments;   /* > 0: per_instrument[i] holds instrument inst_name[i]'s metrics (rows 0: none) */
    const char (*inst_name)[64];
    const struct m2_eval_report *per_instrument;
    /* more members of the JSON object (run/research.h), written after "horizons" when set */
    void (*json_extra)(FILE *f, const void *extra);
    const void *extra;
} m2_eval_report;

/* Per-horizon metrics of the model's and the ridge's predictions on rows (fills model, ridge, rows, O). */
int m2_eval_metrics(const m2_eval_rows *rows, const float *ridge_pred, m2_eval_report *rep);

/* Human-readable table: a header line, then per horizon one line for the model and one for the ridge
 * (n, MSE, zero-predictor MSE, R², IC, rank IC, directional accuracy). */
void m2_eval_print_table(FILE *f, const m2_eval_report *rep);

/* One JSON object (non-finite numbers as null):
 *   {"checkpoint":..., "step":..., "data":..., "split":..., "mode":..., "seq_len":..., "burn_in":...,
 *    "rows":..., "ridge_lambda":...,
 *    "horizons":[{"horizon":10,
 *                 "model":{"n":..,"n_dir":..,"mse":..,"mse_zero":..,"r2":..,"ic":..,"rank_ic":..,"dir_acc":..},
 *                 "ridge":{... the same keys ..., "train_rows":..}}, ...]
 *    [,"instrument":NAME] [,"instruments":[{"instrument":NAME,"rows":..,"horizons":[... as above ...]}, ...]]}
 * seq_len and burn_in appear in window mode only; "instrument" with --instrument, "instruments" for a universe. */
void m2_eval_write_json(FILE *f, const m2_eval_report *rep);

#endif
