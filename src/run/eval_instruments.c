/* Per-instrument evaluation (eval_instruments.h). */
#include "run/eval_instruments.h"

#include <string.h>

#include "base/error.h"

int m2_eval_instrument_of_row(const m2_dataset *ds, int64_t r)
{
    int64_t lo = 0, hi = ds->n_sessions - 1; /* the session s with sessions[s] <= r */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (ds->sessions[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    return ds->session_inst ? ds->session_inst[lo] : 0;
}

void m2_eval_instrument_range(const m2_dataset *ds, const m2_eval_rows *rows, int i, int64_t *begin, int64_t *end)
{
    /* Instruments appear in ascending order along the rows of one split: two binary searches. */
    int64_t lo = 0, hi = rows->M;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (m2_eval_instrument_of_row(ds, rows->row[mid]) < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    *begin = lo;
    hi = rows->M;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (m2_eval_instrument_of_row(ds, rows->row[mid]) <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    *end = lo;
}

m2_eval_rows m2_eval_rows_view(const m2_eval_rows *rows, int64_t begin, int64_t end)
{
    return (m2_eval_rows){.M = end - begin,
                          .O = rows->O,
                          .row = rows->row + begin,
                          .pred = rows->pred + begin * rows->O,
                          .target = rows->target + begin * rows->O};
}

int m2_eval_by_instrument(const m2_dataset *ds, const m2_eval_rows *rows, const float *ridge_pred,
                          const m2_eval_report *pooled, m2_eval_report *out)
{
    for (int i = 0; i < ds->n_instruments; i++) {
        int64_t b, e;
        m2_eval_instrument_range(ds, rows, i, &b, &e);
        out[i] = *pooled;
        out[i].rows = 0;
        if (e <= b) continue;
        m2_eval_rows view = m2_eval_rows_view(rows, b, e);
        if (m2_eval_metrics(&view, ridge_pred + b * rows->O, &out[i])) return M2_EFAIL;
    }
    return M2_OK;
}

void m2_eval_print_instruments(FILE *f, const m2_dataset *ds, const m2_eval_report *per)
{
    fprintf(f, "per instrument:\n%-12s %8s %10s %10s %9s %9s %9s %9s %9s\n", "instrument", "horizon", "n", "mse", "r2",
            "ic", "dir_acc", "ridge_r2", "ridge_ic");
    for (int i = 0; i < ds->n_instruments; i++)
        for (int o = 0; per[i].rows > 0 && o < per[i].O; o++) {
            const m2_metrics *m = &per[i].model[o], *r = &per[i].ridge[o];
            fprintf(f, "%-12s %8d %10lld %10.4g %9.4f %9.4f %9.4f %9.4f %9.4f\n", ds->inst_name[i],
                    (int)per[i].horizons[o], (long long)m->n, m->mse, m->r2, m->ic, m->dir_acc, r->r2, r->ic);
        }
}
