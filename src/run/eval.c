#include "run/eval.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "stream/engine.h"
#include "core/model.h"

int m2_eval_mode_from_name(const char *name)
{
    if (strcmp(name, "stream") == 0) return M2_EVAL_STREAM;
    if (strcmp(name, "window") == 0) return M2_EVAL_WINDOW;
    return -1;
}

const char *m2_eval_mode_name(int mode) { return mode == M2_EVAL_WINDOW ? "window" : "stream"; }

/* Split names, local so that the core does not call into the io library (m2_split_name). */
static const char *split_name(int split)
{
    static const char *names[] = {"train", "val", "test"};
    return split >= 0 && split < 3 ? names[split] : "?";
}

/* ---- segments: the pieces the model runs on, each from a zero state --------------------------------- */

/* Walks the parts (session ∩ split) in row order and cuts each into segments of at most seg_len rows
 * (stream mode: seg_len = INT64_MAX, one segment per part). */
typedef struct {
    const m2_dataset *ds;
    int split;
    int64_t seg_len;
    int64_t s, pos, part_e;
} seg_iter;

static seg_iter seg_begin(const m2_dataset *ds, int split, int64_t seg_len)
{
    return (seg_iter){.ds = ds, .split = split, .seg_len = seg_len, .s = 0, .pos = 0, .part_e = 0};
}

static int seg_next(seg_iter *it, int64_t *begin, int64_t *len)
{
    while (it->pos >= it->part_e) {
        if (it->s >= it->ds->n_sessions) return 0;
        int64_t b, e;
        m2_dataset_session_part(it->ds, it->split, it->s++, &b, &e);
        if (b < e) {
            it->pos = b;
            it->part_e = e;
        }
    }
    int64_t left = it->part_e - it->pos;
    *begin = it->pos;
    *len = left < it->seg_len ? left : it->seg_len;
    it->pos += *len;
    return 1;
}

/* ---- the model over segments ------------------------------------------------------------------------ */

/* The chunked forward on a backend (core/ops.h): the parameters are copied to its memory once, each segment's
 * features go over as they are needed and the predictions come back. On the CPU backend the copies are memcpy's,
 * small beside the forward. */
typedef struct {
    const m2_layout *lay;
    const m2_ops *ops;
    m2_model *model;
    m2_real *params;  /* backend memory */
    m2_real *X, *P;   /* host staging [max_T, F], [max_T, O]: the model's scalar type */
    m2_real *dX, *dP; /* backend memory, same shapes */
} runner;

static int runner_init(runner *r, const m2_ops *ops, const m2_layout *lay, const m2_real *params, int max_T)
{
    memset(r, 0, sizeof *r);
    r->lay = lay;
    r->ops = ops;
    const size_t x_bytes = sizeof(m2_real) * (size_t)max_T * (size_t)lay->d.F;
    const size_t p_bytes = sizeof(m2_real) * (size_t)max_T * (size_t)lay->d.O;
    const size_t w_bytes = sizeof(m2_real) * lay->n_params;
    r->X = malloc(x_bytes);
    r->P = malloc(p_bytes);
    if (!r->X || !r->P) return m2_fail(M2_EFAIL, "eval: cannot allocate buffers for %d ticks", max_T);
    r->params = ops->alloc(ops, w_bytes);
    r->dX = ops->alloc(ops, x_bytes);
    r->dP = ops->alloc(ops, p_bytes);
    if (!r->params || !r->dX || !r->dP)
        return m2_fail(M2_EFAIL, "eval: out of %s memory for the parameters and %d ticks", ops->name, max_T);
    ops->to_device(ops, r->params, params, w_bytes);
    int rc = m2_model_create_inference(&r->model, lay, 1, max_T, ops);
    if (rc != M2_OK) return m2_fail_context(rc, "eval: model workspace for one sequence of %d ticks", max_T);
    return M2_OK;
}

static void runner_free(runner *r)
{
    if (r->model) m2_model_free(r->model);
    if (r->ops) {
        r->ops->free(r->ops, r->params);
        r->ops->free(r->ops, r->dX);
        r->ops->free(r->ops, r->dP);
    }
    free(r->X);
    free(r->P);
}

/* Predictions for rows [b, b+T) from a zero state into r->P [T, O]. */
static int runner_run(runner *r, const m2_dataset *ds, int64_t b, int T)
{
    const m2_ops *o = r->ops;
    const int F = r->lay->d.F, O = r->lay->d.O;
    const float *x = ds->X + b * F;
    for (size_t i = 0; i < (size_t)T * (size_t)F; i++) r->X[i] = (m2_real)x[i];
    o->to_device(o, r->dX, r->X, sizeof(m2_real) * (size_t)T * (size_t)F);
    int rc = m2_model_forward(r->model, r->params, r->dX, 1, T, r->dP);
    if (rc == M2_OK) o->to_host(o, r->P, r->dP, sizeof(m2_real) * (size_t)T * (size_t)O);
    return rc;
}

/* Rows kept from a segment of len rows: positions >= keep_from. */
static int64_t kept(int64_t len, int keep_from) { return len > keep_from ? len - keep_from : 0; }

/* Stream mode computes a part with one chunked forward when it has at most `cap` rows; a longer part goes
 * through the recurrent step (stream/mamba2_stream.h), which is the same computation (docs/MODEL.md §7; tests/stream checks
 * the two agree) in O(state) memory, on the CPU. The cap:
 * - on the CPU, M2_EVAL_MAX_CHUNKED_T, so that the model's workspace stays bounded however long a session is (an
 *   allocation there succeeds and fails later, when it is touched). The model is made for inference
 *   (m2_model_create_inference): one layer's activations, not every layer's;
 * - on a device, whatever fits: first the longest part, halved while the device cannot allocate the workspace
 *   (cudaMalloc fails cleanly), down to M2_EVAL_MAX_CHUNKED_T. A GPU thus runs sessions of hundreds of thousands
 *   of ticks in one forward instead of sending them to the CPU's recurrent step (the CUDA kernels index rows in
 *   size_t and stride over grids, so sequences whose activations pass 2^31 elements are fine). */
#define M2_EVAL_MAX_CHUNKED_T 16384

static int chunked(int64_t len, int mode, int64_t cap) { return mode == M2_EVAL_WINDOW || len <= cap; }

/* Output rows M, the longest chunked part max_T under cap, and the longest part of all. */
static void plan(const m2_dataset *ds, int split, int mode, int64_t seg_len, int keep_from, int64_t cap, int64_t *M,
                 int64_t *max_T, int64_t *longest)
{
    seg_iter it = seg_begin(ds, split, seg_len);
    int64_t b, len;
    *M = *max_T = *longest = 0;
    while (seg_next(&it, &b, &len)) {
        *M += kept(len, keep_from);
        if (chunked(len, mode, cap) && len > *max_T) *max_T = len;
        if (len > *longest) *longest = len;
    }
}

/* The runner for the split's chunked parts, with the largest cap the backend can hold (see above); *cap is the
 * one chosen. No runner (r->model NULL) when no part is chunked. */
static int open_runner(runner *r, const m2_ops *ops, const m2_layout *lay, const m2_real *params, const m2_dataset *ds,
                       int split, int mode, int64_t seg_len, int keep_from, int64_t *cap)
{
    const int device = ops->lanes == NULL; /* ops.h: only a device backend has no lanes */
    int64_t M, max_T, longest;
    plan(ds, split, mode, seg_len, keep_from, INT64_MAX, &M, &max_T, &longest);
    *cap = M2_EVAL_MAX_CHUNKED_T;
    if (device && longest > *cap) *cap = longest < INT_MAX ? longest : INT_MAX; /* the model's T is an int */
    for (;;) {
        plan(ds, split, mode, seg_len, keep_from, *cap, &M, &max_T, &longest);
        if (max_T > INT_MAX)
            return m2_fail(M2_EFAIL, "eval: a window of %lld rows is too long for one forward", (long long)max_T);
        if (max_T == 0) return M2_OK;
        int rc = runner_init(r, ops, lay, params, (int)max_T);
        if (rc == M2_OK || *cap <= M2_EVAL_MAX_CHUNKED_T) return rc;
        runner_free(r); /* out of device memory, most likely: try half the length */
        memset(r, 0, sizeof *r);
        *cap = max_T / 2 > M2_EVAL_MAX_CHUNKED_T ? max_T / 2 : M2_EVAL_MAX_CHUNKED_T;
    }
}

/* Long parts of stream mode, each with the place of its first row in the output. They go through the recurrent
 * step together, M2_EVAL_STREAMS at a time (m2_stream_step_batch): one read of the weights serves a tick of every
 * part in the group. Why 8: bench_stream on the build machine gives the docs/MODEL.md default model 1.78x the ticks/s
 * at S = 8 but 1.22x at S = 64 (64 states of 274 KB no longer stay in cache), and a 14 MB model 1.25x and 1.28x. */
typedef struct {
    int64_t b, len, at;
} long_part;

enum { M2_EVAL_STREAMS = 8 };

/* Fills the output rows of parts[0..n) (at most M2_EVAL_STREAMS), each tick by tick from a zero state. */
static int stream_parts(m2_eval_rows *out, m2_stream *s, const m2_dataset *ds, const long_part *parts, int n)
{
    const int F = ds->n_features, O = out->O;
    int ids[M2_EVAL_STREAMS];
    float *X = malloc(sizeof(float) * (size_t)n * (size_t)F), *P = malloc(sizeof(float) * (size_t)n * (size_t)O);
    int rc = X && P ? M2_OK : m2_fail(M2_EFAIL, "eval: out of memory");
    int64_t longest = 0;
    for (int i = 0; i < n; i++) longest = parts[i].len > longest ? parts[i].len : longest;
    m2_stream_reset(s, -1);
    for (int64_t t = 0; t < longest && rc == M2_OK; t++) {
        int k = 0; /* the parts still running at tick t */
        for (int i = 0; i < n; i++) {
            if (t >= parts[i].len) continue;
            ids[k] = i;
            memcpy(X + (size_t)k * F, ds->X + (parts[i].b + t) * F, sizeof(float) * (size_t)F);
            k++;
        }
        rc = m2_stream_step_batch(s, k, ids, X, P);
        for (int j = 0; j < k && rc == M2_OK; j++) {
            const long_part *p = &parts[ids[j]];
            const int64_t m = p->at + t;
            out->row[m] = p->b + t;
            memcpy(out->pred + m * O, P + (size_t)j * O, sizeof(float) * (size_t)O);
            memcpy(out->target + m * O, ds->y + (p->b + t) * O, sizeof(float) * (size_t)O);
        }
    }
    free(X);
    free(P);
    return rc;
}

/* Every long part, in groups. */
static int stream_long_parts(m2_eval_rows *out, const m2_layout *lay, const m2_real *params, const m2_dataset *ds,
                             const long_part *parts, int n)
{
    if (n == 0) return M2_OK;
    m2_stream_options opt = m2_stream_defaults();
    opt.max_streams = n < M2_EVAL_STREAMS ? n : M2_EVAL_STREAMS;
    m2_stream *s = NULL;
    int rc = m2_stream_open_params(lay, params, NULL, NULL, &opt, &s);
    for (int i = 0; i < n && rc == M2_OK; i += M2_EVAL_STREAMS)
        rc = stream_parts(out, s, ds, parts + i, n - i < M2_EVAL_STREAMS ? n - i : M2_EVAL_STREAMS);
    m2_stream_close(s);
    return rc;
}

static int check_shapes(const m2_layout *lay, const m2_dataset *ds, int split)
{
    if (ds->n_features != lay->d.F || ds->n_targets != lay->d.O)
        return m2_fail(M2_EFAIL, "eval: dataset has %d features and %d targets, the model expects %d and %d",
                       ds->n_features, ds->n_targets, lay->d.F, lay->d.O);
    if (split < 0 || split > 2) return m2_fail(M2_EUSAGE, "eval: unknown split %d", split);
    if (ds->split[split][1] <= ds->split[split][0])
        return m2_fail(M2_EFAIL, "eval: split %s is empty", split_name(split));
    return M2_OK;
}

static int alloc_rows(m2_eval_rows *out, int64_t M, int O)
{
    out->M = 0;
    out->O = O;
    out->row = malloc(sizeof(int64_t) * (size_t)(M > 0 ? M : 1));
    out->pred = malloc(sizeof(float) * (size_t)(M > 0 ? M : 1) * (size_t)O);
    out->target = malloc(sizeof(float) * (size_t)(M > 0 ? M : 1) * (size_t)O);
    if (!out->row || !out->pred || !out->target)
        return m2_fail(M2_EFAIL, "eval: cannot allocate %lld rows", (long long)M);
    return M2_OK;
}

/* Output rows [at, ...) get rows [b + keep_from, b + len) with predictions r->P[keep_from..len). */
static void put_rows(m2_eval_rows *out, int64_t at, const runner *r, const m2_dataset *ds, int64_t b, int64_t len,
                     int keep_from)
{
    int O = out->O;
    for (int64_t t = keep_from; t < len; t++) {
        int64_t m = at + t - keep_from;
        out->row[m] = b + t;
        for (int o = 0; o < O; o++) {
            out->pred[m * O + o] = (float)r->P[t * O + o];
            out->target[m * O + o] = ds->y[(b + t) * O + o];
        }
    }
}

int m2_eval_predict(const m2_ops *ops, const m2_layout *lay, const m2_real *params, const m2_dataset *ds, int split,
                    int mode, int seq_len, int burn_in, m2_eval_rows *out)
{
    if (!ops) ops = m2_ops_cpu();
    memset(out, 0, sizeof *out);
    int rc = check_shapes(lay, ds, split);
    if (rc != M2_OK) return rc;
    if (mode == M2_EVAL_WINDOW && (seq_len < 1 || burn_in < 0 || burn_in >= seq_len))
        return m2_fail(M2_EUSAGE, "eval: window mode needs 0 <= burn_in (%d) < seq_len (%d)", burn_in, seq_len);
    int64_t seg_len = mode == M2_EVAL_WINDOW ? seq_len : INT64_MAX;
    int keep_from = mode == M2_EVAL_WINDOW ? burn_in : 0;
    int64_t M, max_T, longest, cap = M2_EVAL_MAX_CHUNKED_T;
    plan(ds, split, mode, seg_len, keep_from, cap, &M, &max_T, &longest);
    if (M == 0)
        rc = m2_fail(M2_EFAIL, "eval: split %s has no row past burn_in %d in any window", split_name(split), burn_in);
    if (rc == M2_OK) rc = alloc_rows(out, M, lay->d.O);
    runner r;
    memset(&r, 0, sizeof r);
    if (rc == M2_OK) rc = open_runner(&r, ops, lay, params, ds, split, mode, seg_len, keep_from, &cap);
    /* Short parts (and windows) now, each into its place; long parts (stream mode only, keep_from 0) afterwards,
     * together. Rows stay in ascending order either way. */
    long_part *longs = NULL;
    int n_long = 0, cap_long = 0;
    seg_iter it = seg_begin(ds, split, seg_len);
    int64_t b, len;
    while (rc == M2_OK && seg_next(&it, &b, &len)) {
        const int64_t at = out->M;
        out->M += kept(len, keep_from);
        if (at == out->M) continue;
        if (!chunked(len, mode, cap)) {
            if (n_long == cap_long) {
                cap_long = cap_long ? 2 * cap_long : 16;
                long_part *p = realloc(longs, sizeof *p * (size_t)cap_long);
                if (!p) {
                    rc = m2_fail(M2_EFAIL, "eval: out of memory");
                    break;
                }
                longs = p;
            }
            longs[n_long++] = (long_part){b, len, at};
            continue;
        }
        rc = runner_run(&r, ds, b, (int)len);
        if (rc == M2_OK) put_rows(out, at, &r, ds, b, len, keep_from);
    }
    runner_free(&r); /* before the streaming engine's weights are allocated */
    if (rc == M2_OK) rc = stream_long_parts(out, lay, params, ds, longs, n_long);
    free(longs);
    if (rc != M2_OK) m2_eval_rows_free(out);
    return rc;
}

void m2_eval_rows_free(m2_eval_rows *r)
{
    free(r->row);
    free(r->pred);
    free(r->target);
    memset(r, 0, sizeof *r);
}

/* ---- ridge baseline and metrics --------------------------------------------------------------------- */

int m2_eval_ridge(const m2_dataset *ds, const m2_eval_rows *rows, m2_ridge *fit, float *pred)
{
    int F = ds->n_features, O = ds->n_targets;
    int64_t b = ds->split[M2_SPLIT_TRAIN][0], e = ds->split[M2_SPLIT_TRAIN][1];
    if (e <= b) return m2_fail(M2_EFAIL, "ridge baseline: the dataset's train split is empty");
    int rc = m2_ridge_fit(fit, ds->X + b * F, ds->y + b * O, e - b, F, O, M2_RIDGE_LAMBDA);
    if (rc != M2_OK) return rc;
    for (int64_t i = 0; i < rows->M; i++)
        for (int o = 0; o < O; o++) pred[i * O + o] = (float)m2_ridge_predict_one(fit, ds->X + rows->row[i] * F, o);
    return M2_OK;
}

int m2_eval_metrics(const m2_eval_rows *rows, const float *ridge_pred, m2_eval_report *rep)
{
    rep->rows = rows->M;
    rep->O = rows->O;
    int rc = M2_OK;
    for (int o = 0; o < rows->O && rc == M2_OK; o++) {
        rc = m2_metrics_compute(rows->pred, rows->target, rows->M, rows->O, o, &rep->model[o]);
        if (rc == M2_OK) rc = m2_metrics_compute(ridge_pred, rows->target, rows->M, rows->O, o, &rep->ridge[o]);
    }
    return rc;
}

/* ---- output ----------------------------------------------------------------------------------------- */

static void table_line(FILE *f, int32_t horizon, const char *who, const m2_metrics *m)
{
    fprintf(f, "%8d  %-6s %10lld %10.4f %10.4f %9.4f %9.4f %9.4f %9.4f\n", (int)horizon, who, (long long)m->n, m->mse,
            m->mse_zero, m->r2, m->ic, m->rank_ic, m->dir_acc);
}

void m2_eval_print_table(FILE *f, const m2_eval_report *rep)
{
    fprintf(f, "eval: checkpoint %s (step %lld), data %s, split %s, mode %s", rep->checkpoint, (long long)rep->step,
            rep->data, rep->split, rep->mode);
    if (strcmp(rep->mode, "window") == 0) fprintf(f, " (seq_len %d, burn_in %d)", rep->seq_len, rep->burn_in);
    fprintf(f, ", %lld rows%s%s\n", (long long)rep->rows, rep->backend[0] ? ", on " : "", rep->backend);
    fprintf(f, "%8s  %-6s %10s %10s %10s %9s %9s %9s %9s\n", "horizon", "model", "n", "mse", "zero_mse", "r2", "ic",
            "rank_ic", "dir_acc");
    for (int o = 0; o < rep->O; o++) {
        table_line(f, rep->horizons[o], "mamba2", &rep->model[o]);
        table_line(f, rep->horizons[o], "ridge", &rep->ridge[o]);
    }
    fprintf(f,
            "ridge: current tick's features + intercept, fit on the train split, lambda %g x rows; "
            "zero predictor: zero_mse; n: rows with a finite target\n",
            rep->ridge_lambda);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_metrics(FILE *f, const m2_metrics *m)
{
    fprintf(f, "{\"n\":%lld,\"n_dir\":%lld,\"mse\":", (long long)m->n, (long long)m->n_dir);
    json_num(f, m->mse);
    fputs(",\"mse_zero\":", f);
    json_num(f, m->mse_zero);
    fputs(",\"r2\":", f);
    json_num(f, m->r2);
    fputs(",\"ic\":", f);
    json_num(f, m->ic);
    fputs(",\"rank_ic\":", f);
    json_num(f, m->rank_ic);
    fputs(",\"dir_acc\":", f);
    json_num(f, m->dir_acc);
}

static void json_horizons(FILE *f, const m2_eval_report *rep)
{
    fputs(",\"horizons\":[", f);
    for (int o = 0; o < rep->O; o++) {
        fprintf(f, "%s{\"horizon\":%d,\"model\":", o ? "," : "", (int)rep->horizons[o]);
        json_metrics(f, &rep->model[o]);
        fputs("},\"ridge\":", f);
        json_metrics(f, &rep->ridge[o]);
        fprintf(f, ",\"train_rows\":%lld}}", (long long)rep->ridge_rows[o]);
    }
    fputs("]", f);
}

void m2_eval_write_json(FILE *f, const m2_eval_report *rep)
{
    fputs("{\"checkpoint\":", f);
    json_str(f, rep->checkpoint);
    fprintf(f, ",\"step\":%lld,\"data\":", (long long)rep->step);
    json_str(f, rep->data);
    fputs(",\"split\":", f);
    json_str(f, rep->split);
    fputs(",\"mode\":", f);
    json_str(f, rep->mode);
    if (strcmp(rep->mode, "window") == 0) fprintf(f, ",\"seq_len\":%d,\"burn_in\":%d", rep->seq_len, rep->burn_in);
    if (rep->backend[0]) {
        fputs(",\"backend\":", f);
        json_str(f, rep->backend);
    }
    fprintf(f, ",\"rows\":%lld,\"ridge_lambda\":", (long long)rep->rows);
    json_num(f, rep->ridge_lambda);
    json_horizons(f, rep);
    if (rep->instrument[0]) {
        fputs(",\"instrument\":", f);
        json_str(f, rep->instrument);
    }
    for (int i = 0; i < rep->n_instruments; i++) {
        fputs(i ? ",{\"instrument\":" : ",\"instruments\":[{\"instrument\":", f);
        json_str(f, rep->inst_name[i]);
        fprintf(f, ",\"rows\":%lld", (long long)rep->per_instrument[i].rows);
        json_horizons(f, &rep->per_instrument[i]);
        fputs(i + 1 == rep->n_instruments ? "}]" : "}", f);
    }
    if (rep->json_extra) rep->json_extra(f, rep->extra);
    fputs("}\n", f);
}
