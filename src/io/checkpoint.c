#include "io/checkpoint.h"

#include "base/error.h"
#include "io/h5util.h"
#include "mamba2_git_describe.h" /* generated at build time (cmake/git_describe.cmake) */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPT_SCHEMA  "mamba2.checkpoint"
#define CKPT_VERSION 1
#define NAME_LEN     32 /* fixed-length feature names, as in the dataset */

static int tensor_dims(const m2_tensor *t, int64_t *dims)
{
    for (int i = 0; i < t->ndim; i++) dims[i] = t->shape[i];
    return t->ndim;
}

/* /model/<name>, /optim/m/<name> or /optim/v/<name> for every tensor of the layout. */
static int write_tensors(hid_t file, const m2_layout *lay, const char *prefix, const float *buf)
{
    for (int i = 0; i < lay->n_tensors; i++) {
        const m2_tensor *t = &lay->tensors[i];
        char path[160];
        int64_t dims[3];
        snprintf(path, sizeof path, "%s/%s", prefix, t->name);
        int rc = m2_h5_write(file, path, M2_H5_F32, tensor_dims(t, dims), dims, buf + t->offset, 0);
        if (rc) return rc;
    }
    return M2_OK;
}

static int read_tensors(hid_t file, const m2_layout *lay, const char *prefix, float *buf)
{
    for (int i = 0; i < lay->n_tensors; i++) {
        const m2_tensor *t = &lay->tensors[i];
        char path[160];
        int64_t dims[3];
        snprintf(path, sizeof path, "%s/%s", prefix, t->name);
        int rc = m2_h5_read(file, path, M2_H5_F32, tensor_dims(t, dims), dims, buf + t->offset);
        if (rc) return rc;
    }
    return M2_OK;
}

/* /norm/names: a 1-D dataset of fixed-length strings. */
static int write_names(hid_t file, const char *path, const m2_checkpoint *ck)
{
    (void)path;
    return m2_h5_write_strs(file, "norm/names", ck->feature_names[0], NAME_LEN, ck->n_features);
}

static int read_names(hid_t file, const char *path, m2_checkpoint *ck)
{
    (void)path;
    return m2_h5_read_strs(file, "norm/names", ck->feature_names[0], NAME_LEN, ck->n_features);
}

/* /norm/instruments/{names, mean, std}: [I] and [I, F], the statistics the dataset's rows were z-scored with; and
 * tick_size [I], the tick the spread feature was measured in (what a live featuriser must use). */
static int write_instruments(hid_t f, const m2_checkpoint *ck)
{
    const int I = ck->n_instruments, F = ck->n_features;
    int64_t dims[2] = {I, F};
    double *buf = malloc(sizeof(double) * 2 * (size_t)I * (size_t)F);
    if (!buf) return m2_fail(M2_EFAIL, "checkpoint: out of memory");
    for (int i = 0; i < I; i++)
        for (int j = 0; j < F; j++) {
            buf[i * F + j] = ck->inst_mean[i * M2_MAX_FEATURES + j];
            buf[(size_t)I * F + i * F + j] = ck->inst_std[i * M2_MAX_FEATURES + j];
        }
    int rc = m2_h5_write_strs(f, "norm/instruments/names", ck->inst_name[0], sizeof ck->inst_name[0], I) ||
             m2_h5_write(f, "norm/instruments/mean", M2_H5_F64, 2, dims, buf, 0) ||
             m2_h5_write(f, "norm/instruments/std", M2_H5_F64, 2, dims, buf + (size_t)I * F, 0) ||
             (ck->inst_tick && m2_h5_write(f, "norm/instruments/tick_size", M2_H5_F64, 1, dims, ck->inst_tick, 0));
    free(buf);
    return rc ? M2_EFAIL : M2_OK;
}

static int read_instruments(hid_t f, const char *path, m2_checkpoint *ck)
{
    if (!m2_h5_exists(f, "norm/instruments")) return M2_OK;
    int64_t dims[2];
    if (m2_h5_shape(f, "norm/instruments/mean", 2, dims)) return M2_EFAIL;
    if (dims[0] < 1 || dims[0] > INT32_MAX || dims[1] != ck->n_features)
        return m2_fail(M2_EFAIL, "checkpoint (%s): /norm/instruments/mean: shape [%lld, %lld], want [I, %d]", path,
                       (long long)dims[0], (long long)dims[1], ck->n_features);
    const int I = (int)dims[0], F = ck->n_features;
    ck->n_instruments = I;
    ck->inst_name = calloc((size_t)I, sizeof *ck->inst_name);
    ck->inst_mean = calloc((size_t)I * M2_MAX_FEATURES, sizeof(double));
    ck->inst_std = calloc((size_t)I * M2_MAX_FEATURES, sizeof(double));
    double *buf = malloc(sizeof(double) * 2 * (size_t)I * (size_t)F);
    int rc = !ck->inst_name || !ck->inst_mean || !ck->inst_std || !buf
                 ? m2_fail(M2_EFAIL, "checkpoint: out of memory")
                 : m2_h5_read_strs(f, "norm/instruments/names", ck->inst_name[0], sizeof ck->inst_name[0], I) ||
                       m2_h5_read(f, "norm/instruments/mean", M2_H5_F64, 2, dims, buf) ||
                       m2_h5_read(f, "norm/instruments/std", M2_H5_F64, 2, dims, buf + (size_t)I * F);
    for (int i = 0; !rc && i < I; i++)
        for (int j = 0; j < F; j++) {
            ck->inst_mean[i * M2_MAX_FEATURES + j] = buf[i * F + j];
            ck->inst_std[i * M2_MAX_FEATURES + j] = buf[(size_t)I * F + i * F + j];
        }
    free(buf);
    if (!rc && m2_h5_exists(f, "norm/instruments/tick_size")) { /* files written before it existed have none */
        ck->inst_tick = calloc((size_t)I, sizeof *ck->inst_tick);
        rc = !ck->inst_tick ? m2_fail(M2_EFAIL, "checkpoint: out of memory")
                            : m2_h5_read(f, "norm/instruments/tick_size", M2_H5_F64, 1, dims, ck->inst_tick);
        for (int i = 0; !rc && i < I; i++)
            if (!(ck->inst_tick[i] > 0) || !isfinite(ck->inst_tick[i]))
                rc = m2_fail(M2_EFAIL, "checkpoint (%s): /norm/instruments/tick_size: instrument %d has %g, not > 0",
                             path, i, ck->inst_tick[i]);
    }
    return rc ? M2_EFAIL : M2_OK;
}

static int write_selection(hid_t g, const m2_checkpoint *ck)
{
    int rc = m2_h5_attr_put_f64(g, "best_score", ck->best_score);
    if (!rc) rc = m2_h5_attr_put_i64(g, "best_step", ck->best_step);
    if (!rc) rc = m2_h5_attr_put_i32(g, "evals_since_best", ck->evals_since_best);
    return rc;
}

static int read_selection(hid_t g, m2_checkpoint *ck)
{
    ck->best_score = NAN;
    ck->best_step = -1;
    ck->evals_since_best = 0;
    if (!m2_h5_attr_exists(g, "best_step")) return M2_OK; /* written before model selection existed */
    int rc = m2_h5_attr_get_f64(g, "best_score", &ck->best_score);
    if (!rc) rc = m2_h5_attr_get_i64(g, "best_step", &ck->best_step);
    if (!rc) rc = m2_h5_attr_get_i32(g, "evals_since_best", &ck->evals_since_best);
    return rc;
}

static int write_body(m2_h5_writer *w, const m2_checkpoint *ck)
{
    hid_t f = w->file;
    const m2_dims *d = &ck->lay.d;
    char *config = m2_config_to_string(&ck->cfg);
    if (!config) return m2_fail(M2_EFAIL, "checkpoint (%s): out of memory", w->path);
    int rc = m2_h5_attr_put_str(f, "config", config);
    free(config);
    if (rc) return rc;
    if ((rc = m2_h5_attr_put_i64(f, "step", ck->step)) ||
        (rc = m2_h5_attr_put_i64(f, "tokens_seen", ck->tokens_seen)) ||
        (rc = m2_h5_attr_put_i32(f, "world_size_at_save", ck->world_size_at_save)) ||
        (rc = m2_h5_attr_put_str(f, "git_describe", MAMBA2_GIT_DESCRIBE)) ||
        (rc = m2_h5_attr_put_i32(f, "n_features", d->F)) || (rc = m2_h5_attr_put_i32(f, "n_targets", d->O)))
        return rc;
    if ((rc = write_tensors(f, &ck->lay, "model", ck->params))) return rc;
    if (ck->m && ck->v) {
        if ((rc = write_tensors(f, &ck->lay, "optim/m", ck->m)) || (rc = write_tensors(f, &ck->lay, "optim/v", ck->v)))
            return rc;
        hid_t g = H5Gopen2(f, "optim", H5P_DEFAULT);
        if (g < 0) return m2_h5_fail(M2_EFAIL, "checkpoint /optim", w->path, "cannot open group");
        if (!(rc = m2_h5_attr_put_i64(g, "step", ck->optim_step)) && !(rc = m2_h5_attr_put_f64(g, "beta1", 0.9)) &&
            !(rc = m2_h5_attr_put_f64(g, "beta2", 0.95)))
            rc = m2_h5_attr_put_f64(g, "eps", 1e-8);
        H5Gclose(g);
        if (rc) return rc;
    }
    /* The sampler is a pure function of (seed, step): its whole state is the seed and the next step to draw. */
    int64_t seed_bits;
    memcpy(&seed_bits, &ck->data_seed, sizeof seed_bits);
    hid_t g = H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return m2_h5_fail(M2_EFAIL, "checkpoint /data", w->path, "cannot create group");
    if (!(rc = m2_h5_attr_put_i64(g, "rng_seed", seed_bits))) rc = m2_h5_attr_put_i64(g, "cursor_step", ck->data_step);
    if (!rc) rc = write_selection(g, ck);
    H5Gclose(g);
    if (rc) return rc;
    int64_t nf = ck->n_features;
    if ((rc = m2_h5_write(f, "norm/mean", M2_H5_F64, 1, &nf, ck->mean, 0)) ||
        (rc = m2_h5_write(f, "norm/std", M2_H5_F64, 1, &nf, ck->std, 0)))
        return rc;
    if ((rc = write_names(f, w->path, ck))) return rc;
    return ck->n_instruments > 0 ? write_instruments(f, ck) : M2_OK;
}

int m2_checkpoint_save(const char *dir, const m2_checkpoint *ck, char *out_path, size_t out_cap)
{
    char name[64];
    snprintf(name, sizeof name, "ckpt_%" PRId64 ".h5", ck->step);
    return m2_checkpoint_save_as(dir, name, ck, out_path, out_cap);
}

int m2_checkpoint_save_as(const char *dir, const char *name, const m2_checkpoint *ck, char *out_path, size_t out_cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    m2_h5_writer w;
    int rc = m2_h5_create(&w, path, CKPT_SCHEMA, CKPT_VERSION);
    if (rc) return rc;
    rc = write_body(&w, ck);
    if (rc) {
        m2_h5_abort(&w);
        return rc;
    }
    if ((rc = m2_h5_commit(&w))) return rc;
    if (out_path) snprintf(out_path, out_cap, "%s", path);
    return M2_OK;
}

static int read_body(hid_t f, const char *path, m2_checkpoint *ck, int with_optim)
{
    char *config = malloc(1 << 16);
    if (!config) return m2_fail(M2_EFAIL, "checkpoint (%s): out of memory", path);
    int rc = m2_h5_attr_get_str(f, "config", config, 1 << 16);
    if (!rc) {
        m2_config_defaults(&ck->cfg);
        rc = m2_config_from_text(&ck->cfg, config, path);
    }
    free(config);
    if (rc) return rc;
    int32_t F, O;
    if ((rc = m2_h5_attr_get_i64(f, "step", &ck->step)) ||
        (rc = m2_h5_attr_get_i64(f, "tokens_seen", &ck->tokens_seen)) ||
        (rc = m2_h5_attr_get_i32(f, "world_size_at_save", &ck->world_size_at_save)) ||
        (rc = m2_h5_attr_get_i32(f, "n_features", &F)) || (rc = m2_h5_attr_get_i32(f, "n_targets", &O)))
        return rc;
    if (F > M2_MAX_FEATURES)
        return m2_fail(M2_EFAIL, "checkpoint (%s): %d features is more than the supported %d", path, F,
                       M2_MAX_FEATURES);
    m2_dims d;
    if ((rc = m2_dims_init(&d, &ck->cfg, F, O))) return m2_fail_context(rc, "checkpoint (%s)", path);
    if ((rc = m2_layout_init(&ck->lay, &d))) return rc;
    ck->params = malloc(ck->lay.n_params * sizeof(float));
    if (!ck->params) return m2_fail(M2_EFAIL, "checkpoint (%s): out of memory", path);
    if ((rc = read_tensors(f, &ck->lay, "model", ck->params))) return rc;
    if (with_optim) {
        ck->m = malloc(ck->lay.n_params * sizeof(float));
        ck->v = malloc(ck->lay.n_params * sizeof(float));
        if (!ck->m || !ck->v) return m2_fail(M2_EFAIL, "checkpoint (%s): out of memory", path);
        if ((rc = read_tensors(f, &ck->lay, "optim/m", ck->m)) || (rc = read_tensors(f, &ck->lay, "optim/v", ck->v)))
            return rc;
        hid_t g = H5Gopen2(f, "optim", H5P_DEFAULT);
        if (g < 0) return m2_h5_fail(M2_EFAIL, "checkpoint /optim", path, "missing");
        rc = m2_h5_attr_get_i64(g, "step", &ck->optim_step);
        H5Gclose(g);
        if (rc) return rc;
    }
    hid_t g = H5Gopen2(f, "data", H5P_DEFAULT);
    if (g < 0) return m2_h5_fail(M2_EFAIL, "checkpoint /data", path, "missing");
    int64_t seed_bits = 0;
    if (!(rc = m2_h5_attr_get_i64(g, "rng_seed", &seed_bits)))
        rc = m2_h5_attr_get_i64(g, "cursor_step", &ck->data_step);
    if (!rc) rc = read_selection(g, ck);
    H5Gclose(g);
    if (rc) return rc;
    memcpy(&ck->data_seed, &seed_bits, sizeof seed_bits);
    ck->n_features = F;
    int64_t nf = F;
    if ((rc = m2_h5_read(f, "norm/mean", M2_H5_F64, 1, &nf, ck->mean)) ||
        (rc = m2_h5_read(f, "norm/std", M2_H5_F64, 1, &nf, ck->std)))
        return rc;
    if ((rc = read_names(f, path, ck))) return rc;
    return read_instruments(f, path, ck);
}

/* Weights of a trained fp32 model are far below this; a larger one is a corrupted or hostile file, not a model. */
#define M2_CKPT_MAX_ABS 1e6f

/* The first element of buf (layout lay) that is not finite, above M2_CKPT_MAX_ABS in magnitude or (nonneg) negative,
 * named by its tensor: M2_EFAIL "checkpoint (PATH): /GROUP/NAME[i] is VALUE: WHY". */
static int check_values(const m2_layout *lay, const float *buf, const char *group, int nonneg, const char *path)
{
    for (int t = 0; t < lay->n_tensors; t++) {
        const m2_tensor *ts = &lay->tensors[t];
        for (size_t i = 0; i < ts->numel; i++) {
            const float x = buf[ts->offset + i];
            const char *why = !isfinite(x)                 ? "not finite"
                              : fabsf(x) > M2_CKPT_MAX_ABS ? "larger in magnitude than any trained weight"
                              : nonneg && x < 0            ? "negative (a second moment is a mean of squares)"
                                                           : NULL;
            if (why)
                return m2_fail(M2_EFAIL, "checkpoint (%s): /%s/%s[%zu] is %g: %s", path, group, ts->name, i, x, why);
        }
    }
    return M2_OK;
}

/* Everything read from the file that the trainer, eval or stream would trust: counters in range and consistent,
 * finite weights and moments, usable feature statistics. */
static int validate(const m2_checkpoint *ck, const char *path, int with_optim)
{
    const m2_config *c = &ck->cfg;
    /* tokens per step: global_batch * seq_len, each at most 2^24, so the bound below cannot overflow for steps <= 1e15
     * only when computed in double */
    const double max_tokens = (double)ck->step * (double)c->train.global_batch * (double)c->train.seq_len;
    if (ck->step < 0 || ck->step > (int64_t)1e15)
        return m2_fail(M2_EFAIL, "checkpoint (%s): step %lld is outside [0, 1e15]", path, (long long)ck->step);
    if (ck->tokens_seen < 0 || (double)ck->tokens_seen > max_tokens)
        return m2_fail(M2_EFAIL,
                       "checkpoint (%s): tokens_seen %lld is outside [0, step x global_batch x seq_len = %.0f]", path,
                       (long long)ck->tokens_seen, max_tokens);
    if (ck->world_size_at_save < 1)
        return m2_fail(M2_EFAIL, "checkpoint (%s): world_size_at_save %d is not a rank count", path,
                       (int)ck->world_size_at_save);
    if (ck->data_step < 0 || ck->data_step > ck->step)
        return m2_fail(M2_EFAIL, "checkpoint (%s): /data cursor_step %lld is outside [0, step %lld]", path,
                       (long long)ck->data_step, (long long)ck->step);
    for (int j = 0; j < ck->n_features; j++)
        if (!isfinite(ck->mean[j]) || !isfinite(ck->std[j]) || !(ck->std[j] > 0))
            return m2_fail(M2_EFAIL,
                           "checkpoint (%s): /norm feature %d has mean %g and std %g: std must be finite and > 0", path,
                           j, ck->mean[j], ck->std[j]);
    int rc = check_values(&ck->lay, ck->params, "model", 0, path);
    if (rc || !with_optim) return rc;
    if (ck->optim_step < 0 || ck->optim_step > ck->step)
        return m2_fail(M2_EFAIL, "checkpoint (%s): /optim step %lld is outside [0, step %lld]", path,
                       (long long)ck->optim_step, (long long)ck->step);
    if ((rc = check_values(&ck->lay, ck->m, "optim/m", 0, path))) return rc;
    return check_values(&ck->lay, ck->v, "optim/v", 1, path);
}

int m2_checkpoint_load(const char *path, m2_checkpoint *ck, int with_optim)
{
    memset(ck, 0, sizeof *ck);
    hid_t f;
    int rc = m2_h5_open_read(path, CKPT_SCHEMA, CKPT_VERSION, &f, NULL);
    if (rc) return rc;
    rc = read_body(f, path, ck, with_optim);
    H5Fclose(f);
    if (!rc) rc = validate(ck, path, with_optim);
    if (rc) m2_checkpoint_free(ck);
    return rc;
}

void m2_checkpoint_free(m2_checkpoint *ck)
{
    free(ck->params);
    free(ck->m);
    free(ck->v);
    free(ck->inst_name);
    free(ck->inst_mean);
    free(ck->inst_std);
    free(ck->inst_tick);
    ck->params = ck->m = ck->v = NULL;
    ck->inst_name = NULL;
    ck->inst_mean = ck->inst_std = ck->inst_tick = NULL;
    ck->n_instruments = 0;
    m2_layout_free(&ck->lay);
}

/* The model learnt on rows z-scored with these statistics: a dataset that normalised a known instrument
 * otherwise would feed it different numbers for the same market. */
static int check_instruments(const m2_checkpoint *ck, const char *ck_path, const m2_dataset *ds, const char *data_path)
{
    for (int i = 0; i < ck->n_instruments; i++) {
        int k = m2_dataset_find_instrument(ds, ck->inst_name[i]);
        for (int j = 0; k >= 0 && j < ck->n_features; j++) {
            size_t a = (size_t)i * M2_MAX_FEATURES + j, b = (size_t)k * M2_MAX_FEATURES + j;
            if (ck->inst_mean[a] != ds->inst_mean[b] || ck->inst_std[a] != ds->inst_std[b])
                return m2_fail(M2_EFAIL,
                               "dataset (%s): instrument %s, feature %s is normalised with mean %.17g, std "
                               "%.17g, but the checkpoint (%s) was trained with %.17g, %.17g",
                               data_path, ck->inst_name[i], ck->feature_names[j], ds->inst_mean[b], ds->inst_std[b],
                               ck_path, ck->inst_mean[a], ck->inst_std[a]);
        }
    }
    return M2_OK;
}

int m2_checkpoint_check_dataset(const m2_checkpoint *ck, const char *ck_path, const m2_dataset *ds,
                                const char *data_path)
{
    if (ds->n_features != ck->lay.d.F)
        return m2_fail(M2_EFAIL, "dataset (%s): %d features per tick, but the checkpoint (%s) was trained on %d",
                       data_path, ds->n_features, ck_path, ck->lay.d.F);
    if (ds->n_targets != ck->lay.d.O)
        return m2_fail(M2_EFAIL, "dataset (%s): %d targets per tick, but the checkpoint (%s) predicts %d", data_path,
                       ds->n_targets, ck_path, ck->lay.d.O);
    for (int j = 0; j < ck->n_features; j++)
        if (ck->feature_names[j][0] && strcmp(ck->feature_names[j], ds->feature_names[j]) != 0)
            return m2_fail(M2_EFAIL, "dataset (%s): feature %d is '%s', but the checkpoint (%s) was trained on '%s'",
                           data_path, j, ds->feature_names[j], ck_path, ck->feature_names[j]);
    return check_instruments(ck, ck_path, ds, data_path);
}

/* "<role> <message><note>": the role in front of the last message (unless it already starts with it), a note after. */
static int with_role(int rc, const char *role, const char *note)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", m2_last_error());
    if (strncmp(msg, role, strlen(role)) == 0) return m2_fail(rc, "%s%s", msg, note);
    return m2_fail(rc, "%s %s%s", role, msg, note);
}

int m2_checkpoint_load_with_dataset(const char *ck_path, const char *data_path, m2_checkpoint *ck, m2_dataset *ds,
                                    const char **data_used)
{
    memset(ds, 0, sizeof *ds);
    int rc = m2_checkpoint_load(ck_path, ck, 0);
    if (rc != M2_OK) return with_role(rc, "checkpoint", "");
    *data_used = data_path ? data_path : ck->cfg.data.path;
    rc = m2_dataset_read(*data_used, ds, 0);
    if (rc != M2_OK) rc = with_role(rc, "dataset", data_path ? "" : " (the checkpoint's [data] path; use --data FILE)");
    if (rc == M2_OK) rc = m2_checkpoint_check_dataset(ck, ck_path, ds, *data_used);
    if (rc != M2_OK) {
        m2_dataset_free(ds);
        m2_checkpoint_free(ck);
    }
    return rc;
}

/* Steps of the files named ckpt_STEP.h5 in dir, descending. Temporary files (".ckpt_*.tmp.*") never match. */
static int list_steps(const char *dir, int64_t **steps, int *n)
{
    *steps = NULL;
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp) return m2_fail(M2_EFAIL, "checkpoints (%s): cannot open folder: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        long long step;
        char tail[8];
        if (sscanf(e->d_name, "ckpt_%lld%7s", &step, tail) != 2 || strcmp(tail, ".h5") != 0 || step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, (size_t)cap * sizeof **steps);
            if (!grown) {
                closedir(dp);
                return m2_fail(M2_EFAIL, "checkpoints (%s): out of memory", dir);
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = step;
    }
    closedir(dp);
    for (int i = 1; i < *n; i++) /* insertion sort, descending: a handful of files */
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return M2_OK;
}

int m2_checkpoint_find_latest(const char *dir, char *out_path, size_t out_cap)
{
    int64_t *steps;
    int n;
    int rc = list_steps(dir, &steps, &n);
    if (rc) return rc;
    rc = m2_fail(M2_EFAIL, "resume (%s): no complete checkpoint in this folder", dir);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%" PRId64 ".h5", dir, steps[i]);
        hid_t f;
        /* Renames are atomic, so a file under a real name is complete; still, check that it opens. */
        if (m2_h5_open_read(path, CKPT_SCHEMA, CKPT_VERSION, &f, NULL) == M2_OK) {
            H5Fclose(f);
            snprintf(out_path, out_cap, "%s", path);
            rc = M2_OK;
            break;
        }
        fprintf(stderr, "warning: skipping unreadable checkpoint: %s\n", m2_last_error());
    }
    free(steps);
    return rc;
}

/* A crash while writing leaves ".ckpt_STEP.h5.tmp.PID" behind (never under a real name); sweep those up. */
static void remove_stale_temporaries(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strncmp(e->d_name, ".ckpt_", 6) != 0 || !strstr(e->d_name, ".h5.tmp.")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dp);
}

int m2_checkpoint_prune(const char *dir, int keep)
{
    remove_stale_temporaries(dir); /* called right after our own file was committed, so no temporary is ours */
    int64_t *steps;
    int n;
    int rc = list_steps(dir, &steps, &n);
    if (rc) return rc;
    for (int i = keep; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%" PRId64 ".h5", dir, steps[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = m2_fail(M2_EFAIL, "checkpoint (%s): cannot delete: %s", path, strerror(errno));
            break;
        }
    }
    free(steps);
    return rc;
}

int m2_checkpoint_run_with_dataset(const char *ck_path, const char *data_path, m2_checkpoint_task task,
                                   const void *user)
{
    m2_checkpoint ck;
    m2_dataset ds;
    const char *data;
    int rc = m2_checkpoint_load_with_dataset(ck_path, data_path, &ck, &ds, &data);
    if (rc != M2_OK) return rc;
    rc = task(&ck, &ds, data, user);
    m2_dataset_free(&ds);
    m2_checkpoint_free(&ck);
    return rc;
}

int m2_checkpoint_job_run(const void *options)
{
    const m2_checkpoint_job *job = options; /* the first member of the program's options */
    return m2_checkpoint_run_with_dataset(job->checkpoint, job->data, job->task, options);
}
