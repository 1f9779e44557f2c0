#include "run/research.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int m2_research_compute(const m2_dataset *ds, const m2_eval_rows *rows, const float *ridge_pred,
                        const float *half_spread_bp, const double scale[2][M2_MAX_TARGETS], m2_research *out,
                        float *cum)
{
    memset(out, 0, sizeof *out);
    out->O = rows->O;
    out->costs = half_spread_bp != NULL;
    memcpy(out->horizons, ds->horizons, sizeof out->horizons);
    memcpy(out->scale, scale, sizeof out->scale);
    const float *pred[2] = {rows->pred, ridge_pred};
    int64_t M = rows->M;
    int O = rows->O, rc = M2_OK;
    for (int o = 0; o < O && !rc; o++) {
        int H = ds->horizons[o];
        rc = m2_ic_significance(rows->pred, ridge_pred, rows->target, M, O, o, H, &out->ic[o]);
        for (int w = 0; w < 2 && !rc; w++) {
            float *c = cum ? cum + ((size_t)w * O + o) * (size_t)M : NULL;
            rc = m2_metrics_compute(pred[w], rows->target, M, O, o, &out->metrics[w][o]);
            if (!rc)
                rc = m2_backtest(ds, rows->row, pred[w], rows->target, half_spread_bp, M, O, o, H, scale[w][o],
                                 &out->bt[w][o], c);
            if (!rc) rc = m2_bt_deciles(pred[w], rows->target, M, O, o, out->deciles[w][o]);
        }
    }
    return rc;
}

/* ---- the block-shuffle control ----------------------------------------------------------------------- */

typedef struct {
    int64_t b, len;
} block;

static int64_t cut_blocks(const m2_dataset *ds, const m2_eval_rows *rows, block *out)
{
    int64_t parts = 0, s = 0, n = 0;
    for (int64_t b = 0; b < rows->M; b = m2_bt_part_end(ds, rows->row, rows->M, b, &s)) parts++;
    int pieces = parts >= M2_BT_MIN_DAYS ? 1 : M2_BT_BLOCKS;
    s = 0;
    for (int64_t b = 0, e; b < rows->M; b = e) {
        e = m2_bt_part_end(ds, rows->row, rows->M, b, &s);
        for (int k = 0; k < pieces; k++) {
            int64_t lo = b + (e - b) * k / pieces, hi = b + (e - b) * (k + 1) / pieces;
            if (hi > lo && out) out[n] = (block){lo, hi - lo};
            n += hi > lo;
        }
    }
    return n;
}

int m2_control_shuffle(const m2_dataset *ds, const m2_eval_rows *rows, float *out)
{
    int64_t n = cut_blocks(ds, rows, NULL);
    if (n < 2)
        return m2_fail(M2_EUSAGE,
                       "--control shuffle: the split has %lld rows in %lld block(s), too few to "
                       "move targets between blocks",
                       (long long)rows->M, (long long)n);
    block *bl = malloc(sizeof(block) * (size_t)n);
    if (!bl) return m2_fail(M2_EFAIL, "--control: out of memory");
    cut_blocks(ds, rows, bl);
    int O = rows->O;
    for (int64_t i = 0; i < n; i++) {
        const block *to = &bl[i], *from = &bl[(i + n / 2) % n];
        for (int64_t r = 0; r < to->len; r++)
            for (int o = 0; o < O; o++)
                out[(size_t)(to->b + r) * O + o] = r < from->len ? rows->target[(size_t)(from->b + r) * O + o] : NAN;
    }
    free(bl);
    return M2_OK;
}

/* ---- output ------------------------------------------------------------------------------------------ */

static const char *who_name[2] = {"mamba2", "ridge"};

static void print_significance(FILE *f, const m2_research *r, const m2_research *c)
{
    fprintf(f,
            "significance: IC standard error by HAC (truncated kernel, lag = horizon: overlapping targets; "
            "docs/MODEL.md §11)%s\n",
            c ? "; control: targets block-shuffled" : "");
    fprintf(f, "%8s  %-6s %9s %8s %8s %8s %8s %8s%s\n", "horizon", "model", "ic", "se", "t", "diff", "diff_se",
            "diff_t", c ? "  ctrl_ic   ctrl_t" : "");
    for (int o = 0; o < r->O; o++)
        for (int w = 0; w < 2; w++) {
            const m2_ic_pair *p = &r->ic[o];
            const m2_ic_stat *s = w ? &p->b : &p->a;
            fprintf(f, "%8d  %-6s %9.4f %8.4f %8.2f", (int)r->horizons[o], who_name[w], s->ic, s->se, s->t);
            if (w == 0)
                fprintf(f, " %8.4f %8.4f %8.2f", p->diff, p->diff_se, p->diff_t);
            else
                fprintf(f, " %8s %8s %8s", "", "", "");
            if (c) fprintf(f, " %8.4f %8.2f", w ? c->ic[o].b.ic : c->ic[o].a.ic, w ? c->ic[o].b.t : c->ic[o].a.t);
            fputc('\n', f);
        }
}

static void print_trading(FILE *f, const m2_research *r, const m2_research *c)
{
    const m2_bt_stats *b0 = &r->bt[0][0];
    fprintf(f,
            "trading: position clip(pred / sd(pred on val), -1, 1) held horizon ticks, %s; Sharpe annualised "
            "from %s%s\n",
            r->costs ? "net of half the quoted spread" : "no quotes in the data: NO COSTS",
            b0->periods_per_day > 1 ? "13 blocks per session" : "daily (session) PnL",
            c ? "; control: targets block-shuffled" : "");
    fprintf(f, "%8s  %-6s %10s %10s %10s %8s %7s %10s %7s %10s%s\n", "horizon", "model", "net_bp/d", "gross_bp/d",
            "cost_bp/d", "sharpe", "t", "turn/day", "hit", "max_dd_bp", c ? "  ctrl_sharpe ctrl_t" : "");
    for (int o = 0; o < r->O; o++)
        for (int w = 0; w < 2; w++) {
            const m2_bt_stats *b = &r->bt[w][o];
            fprintf(f, "%8d  %-6s %10.2f %10.2f %10.2f %8.2f %7.2f %10.1f %7.4f %10.1f", (int)r->horizons[o],
                    who_name[w], b->net_bp_day, b->gross_bp_day, b->cost_bp_day, b->sharpe, b->sharpe_t,
                    b->turnover_day, b->hit_rate, b->max_dd_bp);
            if (c) fprintf(f, " %12.2f %6.2f", c->bt[w][o].sharpe, c->bt[w][o].sharpe_t);
            fputc('\n', f);
        }
}

static void print_deciles(FILE *f, const m2_research *r)
{
    fprintf(f, "deciles: mean realised forward return (bp) by prediction decile, 1 = lowest predictions\n");
    fprintf(f, "%8s  %-6s", "horizon", "model");
    for (int d = 0; d < M2_DECILES; d++) fprintf(f, " %7d", d + 1);
    fputc('\n', f);
    for (int o = 0; o < r->O; o++)
        for (int w = 0; w < 2; w++) {
            fprintf(f, "%8d  %-6s", (int)r->horizons[o], who_name[w]);
            for (int d = 0; d < M2_DECILES; d++) fprintf(f, " %7.3f", r->deciles[w][o][d]);
            fputc('\n', f);
        }
}

void m2_research_print(FILE *f, const m2_research *r, const m2_research *control)
{
    print_significance(f, r, control);
    print_trading(f, r, control);
    print_deciles(f, r);
}

static void num(FILE *f, const char *name, double v)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.9g", name, v);
    else
        fprintf(f, "\"%s\":null", name);
}

static void json_ic(FILE *f, const m2_ic_stat *s)
{
    fprintf(f, "{\"n\":%lld,", (long long)s->n);
    num(f, "ic", s->ic);
    fputc(',', f);
    num(f, "se", s->se);
    fputc(',', f);
    num(f, "t", s->t);
    fputc('}', f);
}

static void json_bt(FILE *f, const m2_bt_stats *b)
{
    const struct {
        const char *name;
        double v;
    } kv[] = {{"net_bp_day", b->net_bp_day}, {"gross_bp_day", b->gross_bp_day}, {"cost_bp_day", b->cost_bp_day},
              {"sharpe", b->sharpe},         {"sharpe_t", b->sharpe_t},         {"turnover_day", b->turnover_day},
              {"hit_rate", b->hit_rate},     {"max_dd_bp", b->max_dd_bp},       {"total_net_bp", b->total_net_bp}};
    fprintf(f, "{\"sessions\":%lld,\"periods\":%lld", (long long)b->sessions, (long long)b->periods);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        fputc(',', f);
        num(f, kv[i].name, kv[i].v);
    }
    fputc('}', f);
}

static void json_who(FILE *f, const m2_research *r, int o, int w)
{
    fprintf(f, "\"%s\":{\"ic\":", w ? "ridge" : "model");
    json_ic(f, w ? &r->ic[o].b : &r->ic[o].a);
    fputc(',', f);
    num(f, "r2", r->metrics[w][o].r2);
    fputc(',', f);
    num(f, "position_scale", r->scale[w][o]);
    fputs(",\"trading\":", f);
    json_bt(f, &r->bt[w][o]);
    fputs(",\"deciles\":[", f);
    for (int d = 0; d < M2_DECILES; d++) {
        double v = r->deciles[w][o][d];
        if (isfinite(v))
            fprintf(f, "%s%.9g", d ? "," : "", v);
        else
            fprintf(f, "%snull", d ? "," : "");
    }
    fputs("]}", f);
}

static void json_one(FILE *f, const char *name, const m2_research *r)
{
    fprintf(f, ",\"%s\":{\"ic_method\":\"hac_truncated_lag_horizon\",\"costs\":%s,\"horizons\":[", name,
            r->costs ? "\"half_spread\"" : "\"none\"");
    for (int o = 0; o < r->O; o++) {
        fprintf(f, "%s{\"horizon\":%d,", o ? "," : "", (int)r->horizons[o]);
        json_who(f, r, o, 0);
        fputc(',', f);
        json_who(f, r, o, 1);
        fputc(',', f);
        num(f, "ic_diff", r->ic[o].diff);
        fputc(',', f);
        num(f, "ic_diff_se", r->ic[o].diff_se);
        fputc(',', f);
        num(f, "ic_diff_t", r->ic[o].diff_t);
        fputc('}', f);
    }
    fputs("]}", f);
}

void m2_research_write_json(FILE *f, const m2_research *r, const m2_research *control)
{
    json_one(f, "research", r);
    if (control) json_one(f, "control", control);
}
