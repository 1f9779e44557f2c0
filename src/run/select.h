/* Model selection during training (CLI.md train.select_by, train.patience; MODEL.md §10 "Validation and
 * selection"): a validation pass over the val split in stream mode (the evaluation path of run/eval.h, so the
 * figures are the ones mamba2_eval --split val prints), a score from it, and the best-so-far / patience rule that
 * decides which step becomes ckpt_best.h5 and when training stops early. */
#ifndef MAMBA2_SELECT_H
#define MAMBA2_SELECT_H

#include <stdint.h>
#include <stdio.h>

#include "base/layout.h"
#include "core/ops.h"
#include "io/dataset.h"
#include "run/metrics.h"

/* One validation pass. loss: MSE pooled over every finite target of every horizon (the training loss's
 * definition); per horizon the metrics of run/metrics.h. */
typedef struct {
    int64_t rows; /* val rows evaluated */
    double loss;
    int O;
    int32_t horizons[M2_MAX_TARGETS];
    m2_metrics m[M2_MAX_TARGETS];
} m2_val_result;

/* Runs the model (host params in lay's layout; ops: the backend, NULL for the CPU) over the val split's first
 * max_rows rows (0: all of it; a session cut by the limit counts up to the limit) in stream mode. */
int m2_validate(const m2_ops *ops, const m2_layout *lay, const float *params, const m2_dataset *ds, int64_t max_rows,
                m2_val_result *out);

/* The score train.select_by asks for, as "higher is better": -loss for val_loss, the IC at horizon H for ic@H.
 * horizon: m2_select_by_horizon(select_by). NaN when the pass gave no finite value. */
double m2_select_score(const m2_val_result *v, int horizon);

/* Is H one of the dataset's horizons? (0, val_loss, always is.) M2_EUSAGE naming train.select_by otherwise. */
int m2_select_check(const char *select_by, const m2_dataset *ds);

/* Best so far: score, step (-1: none yet), evaluations since it last improved. */
typedef struct {
    double best;
    int64_t best_step;
    int since;
} m2_selection;

/* Takes one evaluation's score at `step`. Returns 1 when it is a new best (strictly higher; a NaN score never
 * is), 0 otherwise (then `since` grows by one). */
int m2_selection_update(m2_selection *s, double score, int64_t step);

/* Should training stop? patience > 0 evaluations in a row without a new best. */
int m2_selection_exhausted(const m2_selection *s, int patience);

/* Appends the pass as JSON members to an open object of metrics.jsonl: ', "val_loss": x, "val_rows": n' and per
 * horizon H ', "val_mse@H", "val_r2@H", "val_ic@H", "val_rank_ic@H", "val_dir_acc@H"', then the selection state
 * ', "best_step": s, "evals_since_best": k' (non-finite numbers as null). */
void m2_val_write_json(FILE *f, const m2_val_result *v, const m2_selection *s);

/* The status line's part: " | val LOSS" (and " ic@H X" when selecting by IC), then " | best @STEP". */
void m2_val_status(char *buf, size_t cap, const m2_val_result *v, int horizon, const m2_selection *s);

#endif
