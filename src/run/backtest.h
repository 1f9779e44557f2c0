/* A cost-aware backtest of one prediction column and the decile table (docs/MODEL.md §11 "Trading view").
 *
 * Position: pos_t = clip(p_t / scale, −1, 1), scale = the standard deviation of the same predictor's predictions
 * on the val split (chosen there, never on the evaluated split); pos_t = 0 where the target is not finite (the
 * horizon would cross the session end). Each row opens pos_t and holds it for H rows (the horizon), so the book is
 * P_t = (1/H) Σ_{k<H} pos_{t−k}, restarted at each part (session ∩ split) and closed at its end.
 * PnL, bp of notional: gross pos_t · y_t / H (y_t: the forward return over H rows, which is what the H-row
 * holding earns), cost |P_t − P_{t−1}| · half_spread_t (half the quoted spread per unit traded, from the data;
 * none when the data has no quotes).
 * Sharpe: PnL per period, mean / sd, annualised by sqrt(252 · periods per day). A period is a session when the
 * evaluated split has at least M2_BT_MIN_DAYS of them, otherwise one of M2_BT_BLOCKS equal row blocks of each
 * session (a 400k-tick synthetic test split is one session); t = mean / sd · sqrt(periods).
 * Turnover: Σ |ΔP| per session. Hit rate: of the rows with pos ≠ 0, those with pos · y > 0. Max drawdown: of
 * the cumulative net PnL. */
#ifndef MAMBA2_BACKTEST_H
#define MAMBA2_BACKTEST_H

#include <stdint.h>

#include "io/dataset.h"

#define M2_BT_MIN_DAYS 20
#define M2_BT_BLOCKS   13 /* about 30 minutes of a 6.5-hour session */
#define M2_DECILES     10

typedef struct {
    int64_t sessions, periods;
    int periods_per_day;
    double net_bp_day, gross_bp_day, cost_bp_day; /* per session */
    double sharpe, sharpe_t, turnover_day, hit_rate, max_dd_bp, total_net_bp;
} m2_bt_stats;

/* The evaluated rows [b, end) that form one part (consecutive dataset rows inside one session) and its end;
 * *session: the session of row[b], found from the previous value (start at 0, rows ascending). */
int64_t m2_bt_part_end(const m2_dataset *ds, const int64_t *row, int64_t M, int64_t b, int64_t *session);

/* Standard deviation of column col of pred [M, ld] over rows with a finite value (0 when none). */
double m2_bt_scale(const float *pred, int64_t M, int ld, int col);

/* The backtest of column col of pred / y [M, ld] on dataset rows row[M] (ascending; sessions from ds).
 * half_spread_bp [M] (may be NULL: no costs). cum_net [M] (may be NULL) receives the cumulative net PnL. */
int m2_backtest(const m2_dataset *ds, const int64_t *row, const float *pred, const float *y,
                const float *half_spread_bp, int64_t M, int ld, int col, int horizon, double scale, m2_bt_stats *out,
                float *cum_net);

/* Mean realised target by decile of the prediction (rows with finite p and y sorted by p, cut into 10 equal
 * counts; decile 1 the lowest predictions). NaN for an empty decile. */
int m2_bt_deciles(const float *pred, const float *y, int64_t M, int ld, int col, double mean[M2_DECILES]);

#endif
