#include "run/backtest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

double m2_bt_scale(const float *pred, int64_t M, int ld, int col)
{
    double s = 0, s2 = 0, n = 0;
    for (int64_t i = 0; i < M; i++) {
        double p = pred[(size_t)i * ld + col];
        if (!isfinite(p)) continue;
        s += p;
        s2 += p * p;
        n += 1;
    }
    if (n < 2) return 0;
    double var = (s2 - s * s / n) / (n - 1);
    return var > 0 ? sqrt(var) : 0;
}

int64_t m2_bt_part_end(const m2_dataset *ds, const int64_t *row, int64_t M, int64_t b, int64_t *session)
{
    while (*session + 1 < ds->n_sessions && ds->sessions[*session + 1] <= row[b]) (*session)++;
    int64_t limit = ds->sessions[*session + 1], e = b + 1;
    while (e < M && row[e] == row[e - 1] + 1 && row[e] < limit) e++;
    return e;
}

typedef struct {
    double *pnl; /* per period */
    int64_t periods;
    double gross, cost, turnover, hits, trades, cum, peak, max_dd;
} tally;

/* One part: the H-row book, its PnL into the periods of the part and the running totals. */
static void run_part(tally *t, const float *pred, const float *y, const float *hs, int64_t b, int64_t e, int ld,
                     int col, int H, double scale, int blocks, float *cum_net)
{
    double *opened = calloc((size_t)H, sizeof(double)); /* ring of the last H positions */
    double book = 0, prev = 0;
    int64_t len = e - b;
    for (int64_t i = b; i < e; i++) {
        size_t j = (size_t)i * ld + col;
        double pos = 0;
        if (isfinite(y[j]) && isfinite(pred[j]) && scale > 0) pos = fmax(-1.0, fmin(1.0, pred[j] / scale));
        int64_t k = (i - b) % H;
        book += (pos - (opened ? opened[k] : 0)) / H;
        if (opened) opened[k] = pos;
        double traded = fabs(book - prev) + (i == e - 1 ? fabs(book) : 0); /* the book is closed at the end */
        double cost = traded * (hs ? hs[i] : 0), gross = pos != 0 ? pos * y[j] / H : 0, net = gross - cost;
        prev = book;
        t->gross += gross;
        t->cost += cost;
        t->turnover += traded;
        if (pos != 0) {
            t->trades += 1;
            t->hits += pos * y[j] > 0;
        }
        t->pnl[t->periods + (blocks > 1 ? (i - b) * blocks / len : 0)] += net;
        t->cum += net;
        if (t->cum > t->peak) t->peak = t->cum;
        if (t->peak - t->cum > t->max_dd) t->max_dd = t->peak - t->cum;
        if (cum_net) cum_net[i] = (float)t->cum;
    }
    t->periods += blocks;
    free(opened);
}

static int64_t count_parts(const m2_dataset *ds, const int64_t *row, int64_t M)
{
    int64_t n = 0, s = 0;
    for (int64_t b = 0; b < M; b = m2_bt_part_end(ds, row, M, b, &s)) n++;
    return n;
}

int m2_backtest(const m2_dataset *ds, const int64_t *row, const float *pred, const float *y,
                const float *half_spread_bp, int64_t M, int ld, int col, int horizon, double scale, m2_bt_stats *out,
                float *cum_net)
{
    memset(out, 0, sizeof *out);
    int64_t parts = count_parts(ds, row, M);
    int blocks = parts >= M2_BT_MIN_DAYS ? 1 : M2_BT_BLOCKS;
    tally t = {.pnl = calloc((size_t)(parts * blocks + 1), sizeof(double))};
    if (!t.pnl) return m2_fail(M2_EFAIL, "backtest: out of memory");
    int64_t s = 0;
    for (int64_t b = 0, e; b < M; b = e) {
        e = m2_bt_part_end(ds, row, M, b, &s);
        run_part(&t, pred, y, half_spread_bp, b, e, ld, col, horizon > 0 ? horizon : 1, scale, blocks, cum_net);
    }
    double m = 0, v = 0;
    for (int64_t p = 0; p < t.periods; p++) m += t.pnl[p];
    m /= (double)(t.periods > 0 ? t.periods : 1);
    for (int64_t p = 0; p < t.periods; p++) v += (t.pnl[p] - m) * (t.pnl[p] - m);
    double sd = t.periods > 1 ? sqrt(v / (double)(t.periods - 1)) : NAN, days = (double)(parts > 0 ? parts : 1);
    *out = (m2_bt_stats){.sessions = parts,
                         .periods = t.periods,
                         .periods_per_day = blocks,
                         .net_bp_day = (t.gross - t.cost) / days,
                         .gross_bp_day = t.gross / days,
                         .cost_bp_day = t.cost / days,
                         .sharpe = sd > 0 ? m / sd * sqrt(252.0 * blocks) : NAN,
                         .sharpe_t = sd > 0 ? m / sd * sqrt((double)t.periods) : NAN,
                         .turnover_day = t.turnover / days,
                         .hit_rate = t.trades > 0 ? t.hits / t.trades : NAN,
                         .max_dd_bp = t.max_dd,
                         .total_net_bp = t.gross - t.cost};
    free(t.pnl);
    return M2_OK;
}

typedef struct {
    float p, y;
} pair;

static int by_prediction(const void *a, const void *b)
{
    float x = ((const pair *)a)->p, z = ((const pair *)b)->p;
    return (x > z) - (x < z);
}

int m2_bt_deciles(const float *pred, const float *y, int64_t M, int ld, int col, double mean[M2_DECILES])
{
    pair *v = malloc(sizeof(pair) * (size_t)(M > 0 ? M : 1));
    if (!v) return m2_fail(M2_EFAIL, "deciles: out of memory");
    int64_t n = 0;
    for (int64_t i = 0; i < M; i++) {
        size_t j = (size_t)i * ld + col;
        if (isfinite(pred[j]) && isfinite(y[j])) v[n++] = (pair){pred[j], y[j]};
    }
    qsort(v, (size_t)n, sizeof *v, by_prediction);
    for (int d = 0; d < M2_DECILES; d++) {
        int64_t b = n * d / M2_DECILES, e = n * (d + 1) / M2_DECILES;
        double s = 0;
        for (int64_t i = b; i < e; i++) s += v[i].y;
        mean[d] = e > b ? s / (double)(e - b) : NAN;
    }
    free(v);
    return M2_OK;
}
