#include "run/research_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/quotes.h"
#include "run/plot.h"

/* Position scales per predictor and horizon from the val split's predictions in stream mode: the evaluated split
 * (the test split, normally) never tunes the trading rule. */
static int val_scales(const m2_research_job *j, double scale[2][M2_MAX_TARGETS])
{
    m2_eval_rows val;
    const m2_eval_rows *v = j->rows;
    if (j->split != M2_SPLIT_VAL) {
        int rc = m2_eval_predict(j->ops, j->lay, j->params, j->ds, M2_SPLIT_VAL, M2_EVAL_STREAM, 0, 0, &val);
        if (rc) return m2_fail_context(rc, "position scale (val split)");
        v = &val;
    }
    int O = v->O, F = j->ds->n_features;
    float *ridge = malloc(sizeof(float) * (size_t)(v->M > 0 ? v->M : 1) * (size_t)O);
    int rc = ridge ? M2_OK : m2_fail(M2_EFAIL, "position scale: out of memory");
    for (int64_t i = 0; i < v->M && ridge; i++)
        for (int o = 0; o < O; o++)
            ridge[(size_t)i * O + o] = (float)m2_ridge_predict_one(j->fit, j->ds->X + v->row[i] * F, o);
    for (int o = 0; o < O && !rc; o++) {
        scale[M2_WHO_MODEL][o] = m2_bt_scale(v->pred, v->M, O, o);
        scale[M2_WHO_RIDGE][o] = m2_bt_scale(ridge, v->M, O, o);
    }
    free(ridge);
    if (v == &val) m2_eval_rows_free(&val);
    return rc;
}

static int with_control(const m2_research_job *j, const float *hs, const double scale[2][M2_MAX_TARGETS],
                        m2_research *control)
{
    const m2_eval_rows *rows = j->rows;
    float *moved = malloc(sizeof(float) * (size_t)(rows->M > 0 ? rows->M : 1) * (size_t)rows->O);
    if (!moved) return m2_fail(M2_EFAIL, "--control: out of memory");
    int rc = m2_control_shuffle(j->ds, rows, moved);
    m2_eval_rows shuffled = *rows;
    shuffled.target = moved;
    if (!rc) rc = m2_research_compute(j->ds, &shuffled, j->ridge_pred, hs, scale, control, NULL);
    free(moved);
    return rc;
}

int m2_research_run(const m2_research_job *j, FILE *f, m2_research *r, m2_research *control)
{
    const m2_eval_rows *rows = j->rows;
    size_t M = (size_t)rows->M, O = (size_t)rows->O;
    double scale[2][M2_MAX_TARGETS];
    float *hs = malloc(sizeof(float) * (M > 0 ? M : 1)), *cum = j->plot ? malloc(sizeof(float) * 2 * O * M + 1) : NULL;
    int found = 0, rc = hs && (cum || !j->plot) ? M2_OK : m2_fail(M2_EFAIL, "eval: out of memory");
    if (!rc) rc = val_scales(j, scale);
    if (!rc) rc = m2_quotes_half_spread_bp(j->data_path, rows->row, rows->M, hs, &found);
    if (!rc) rc = m2_research_compute(j->ds, rows, j->ridge_pred, found ? hs : NULL, scale, r, cum);
    if (!rc && j->control) rc = with_control(j, found ? hs : NULL, scale, control);
    if (!rc) m2_research_print(f, r, j->control ? control : NULL);
    if (!rc && j->plot) rc = m2_plot_write(j->plot, r, cum, rows->M, j->title);
    free(hs);
    free(cum);
    return rc;
}
