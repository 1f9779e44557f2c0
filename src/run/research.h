/* The research view of an evaluation (CLI.md mamba2_eval; docs/MODEL.md §11): per horizon, for the model and the
 * ridge, the IC with its overlap-aware standard error and the paired model − ridge difference
 * (run/significance.h), the cost-aware backtest and the decile table (run/backtest.h); and the block-shuffle
 * control, which recomputes all of it against targets moved to other blocks of the split. */
#ifndef MAMBA2_RESEARCH_H
#define MAMBA2_RESEARCH_H

#include <stdint.h>
#include <stdio.h>

#include "io/dataset.h"
#include "run/backtest.h"
#include "run/eval.h"
#include "run/metrics.h"
#include "run/significance.h"

enum { M2_WHO_MODEL = 0, M2_WHO_RIDGE = 1 };

typedef struct {
    int O;
    int32_t horizons[M2_MAX_TARGETS];
    int costs;                       /* 1: net of half the quoted spread; 0: the data has no quotes */
    double scale[2][M2_MAX_TARGETS]; /* position scale per predictor (val split) */
    m2_metrics metrics[2][M2_MAX_TARGETS];
    m2_ic_pair ic[M2_MAX_TARGETS]; /* a = model, b = ridge */
    m2_bt_stats bt[2][M2_MAX_TARGETS];
    double deciles[2][M2_MAX_TARGETS][M2_DECILES];
} m2_research;

/* Everything above for rows (predictions, targets) and ridge_pred [M, O]. half_spread_bp [M] may be NULL (no
 * costs). cum [2][O][M] (may be NULL): cumulative net PnL per predictor and horizon, for the plot. */
int m2_research_compute(const m2_dataset *ds, const m2_eval_rows *rows, const float *ridge_pred,
                        const float *half_spread_bp, const double scale[2][M2_MAX_TARGETS], m2_research *out,
                        float *cum);

/* Targets moved in blocks for the control: the blocks are the parts (session ∩ split), or, with fewer than
 * M2_BT_MIN_DAYS parts, M2_BT_BLOCKS equal pieces of each; block i gets the targets of block (i + n/2) mod n, as far
 * as both reach (NaN beyond). Far-apart blocks keep the targets' own overlap structure and break their link to
 * the predictions. out [M, O]. Fewer than 2 blocks: M2_EUSAGE. */
int m2_control_shuffle(const m2_dataset *ds, const m2_eval_rows *rows, float *out);

/* The tables (significance, trading, deciles); control (may be NULL) printed beside: its IC, t and Sharpe. */
void m2_research_print(FILE *f, const m2_research *r, const m2_research *control);

/* ',"research":{...}' and, with a control, ',"control":{...}' (members of the eval JSON object). */
void m2_research_write_json(FILE *f, const m2_research *r, const m2_research *control);

#endif
