#include "run/select.h"

#include <math.h>
#include <string.h>

#include "base/config.h"
#include "base/error.h"
#include "run/eval.h"

int m2_validate(const m2_ops *ops, const m2_layout *lay, const float *params, const m2_dataset *ds, int64_t max_rows,
                m2_val_result *out)
{
    memset(out, 0, sizeof *out);
    out->loss = NAN;
    /* A shallow copy that ends the val split at the row limit: the arrays are shared, only the bounds differ. */
    m2_dataset view = *ds;
    int64_t *val = view.split[M2_SPLIT_VAL];
    if (max_rows > 0 && val[1] - val[0] > max_rows) val[1] = val[0] + max_rows;
    if (val[1] <= val[0]) return M2_OK;
    m2_eval_rows rows;
    int rc = m2_eval_predict(ops, lay, params, &view, M2_SPLIT_VAL, M2_EVAL_STREAM, 0, 0, &rows);
    if (rc) return m2_fail_context(rc, "validation");
    out->rows = rows.M;
    out->O = rows.O;
    memcpy(out->horizons, ds->horizons, sizeof out->horizons);
    double sse = 0, n = 0;
    for (int64_t i = 0; i < rows.M * rows.O; i++) {
        if (!isfinite(rows.target[i])) continue;
        double d = (double)rows.pred[i] - rows.target[i];
        sse += d * d;
        n += 1;
    }
    out->loss = n > 0 ? sse / n : NAN;
    for (int o = 0; o < rows.O && !rc; o++)
        rc = m2_metrics_compute(rows.pred, rows.target, rows.M, rows.O, o, &out->m[o]);
    m2_eval_rows_free(&rows);
    return rc;
}

static int horizon_index(const int32_t *horizons, int O, int horizon)
{
    for (int o = 0; o < O; o++)
        if (horizons[o] == horizon) return o;
    return -1;
}

double m2_select_score(const m2_val_result *v, int horizon)
{
    if (horizon == 0) return isfinite(v->loss) ? -v->loss : NAN;
    int o = horizon_index(v->horizons, v->O, horizon);
    return o >= 0 && isfinite(v->m[o].ic) ? v->m[o].ic : NAN;
}

int m2_select_check(const char *select_by, const m2_dataset *ds)
{
    int h = m2_select_by_horizon(select_by);
    if (h == 0 || horizon_index(ds->horizons, ds->n_targets, h) >= 0) return M2_OK;
    return m2_fail(M2_EUSAGE, "train.select_by (%s): the dataset has no target at horizon %d", select_by, h);
}

int m2_selection_update(m2_selection *s, double score, int64_t step)
{
    if (isfinite(score) && (s->best_step < 0 || score > s->best)) {
        s->best = score;
        s->best_step = step;
        s->since = 0;
        return 1;
    }
    s->since++;
    return 0;
}

int m2_selection_exhausted(const m2_selection *s, int patience) { return patience > 0 && s->since >= patience; }

static void json_member(FILE *f, const char *name, int32_t horizon, double v)
{
    if (horizon > 0)
        fprintf(f, ", \"%s@%d\": ", name, (int)horizon);
    else
        fprintf(f, ", \"%s\": ", name);
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

void m2_val_write_json(FILE *f, const m2_val_result *v, const m2_selection *s)
{
    json_member(f, "val_loss", 0, v->loss);
    fprintf(f, ", \"val_rows\": %lld", (long long)v->rows);
    for (int o = 0; o < v->O; o++) {
        const m2_metrics *m = &v->m[o];
        json_member(f, "val_mse", v->horizons[o], m->mse);
        json_member(f, "val_r2", v->horizons[o], m->r2);
        json_member(f, "val_ic", v->horizons[o], m->ic);
        json_member(f, "val_rank_ic", v->horizons[o], m->rank_ic);
        json_member(f, "val_dir_acc", v->horizons[o], m->dir_acc);
    }
    fprintf(f, ", \"best_step\": %lld, \"evals_since_best\": %d", (long long)s->best_step, s->since);
}

void m2_val_status(char *buf, size_t cap, const m2_val_result *v, int horizon, const m2_selection *s)
{
    int n = snprintf(buf, cap, " | val %.4f", v->loss);
    if (horizon > 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " ic@%d %.4f", horizon, m2_select_score(v, horizon));
    if (n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " | best @%lld", (long long)s->best_step);
}
