#include "run/train.h"

#include "base/error.h"
#include "base/hash.h"
#include "core/flops.h"
#include "base/layout.h"
#include "core/model.h"
#include "core/ops.h"
#include "dist/zero.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "run/select.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

void m2_train_request_stop(void) { stop_requested = 1; }

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

double m2_lr_at(const m2_config *cfg, int64_t step)
{
    double lr = cfg->train.lr, lr_min = cfg->train.lr_min;
    int64_t warmup = cfg->train.warmup, total = cfg->train.steps;
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    if (total <= warmup) return lr;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    if (progress > 1.0) progress = 1.0;
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + cos(M_PI * progress));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Everything one rank holds during training. The model's buffers live in the backend's memory (the GPU's on a
 * device backend, host memory on the CPU) and are reached only through be.ops; the host keeps a copy of what it
 * reads or writes itself (the batch it samples, the predictions it scores, the parameters it checkpoints). */
typedef struct {
    const m2_config *cfg;
    m2_dist *pg;
    m2_backend be; /* where the model runs, how the step communicates (run/backend.h) */
    m2_dataset ds;
    m2_sampler train_windows, val_windows;
    m2_layout lay;
    m2_model *model;
    m2_zero *dp;           /* the data-parallel ZeRO-1 step for this backend (dist/zero.h) */
    float *params, *grads; /* backend: padded flat buffers (m2_zero_padded_len), zero tail */
    float *X, *Y, *pred;   /* backend: one micro-batch [B,T,F], [B,T,O]; predictions [B,T,O] */
    float *host_X, *host_Y, *host_pred, *host_params; /* host copies of the above ([n] for params) */
    int accum;                                        /* micro-batches per rank per step */
    int64_t step, tokens_seen;
    uint64_t data_seed;
    double flops_per_token; /* model FLOPs of one training token (core/flops.h), for MFU */
    FILE *metrics;
    m2_selection sel;     /* best validation so far (run/select.h): ckpt_best.h5, early stopping */
    int stopped_together; /* the loop ended with an error every rank met at the same step */
} trainer;

/* ---- setup ---------------------------------------------------------------------------------------- */

static int check_batch_rule(const m2_config *cfg, int world)
{
    int per_step = cfg->train.micro_batch * world;
    if (cfg->train.global_batch % per_step != 0)
        return m2_fail(M2_EUSAGE,
                       "train.global_batch: %d is not a multiple of micro_batch %d x %d ranks (accumulation steps = "
                       "global_batch / (micro_batch * ranks) must be a whole number)",
                       cfg->train.global_batch, cfg->train.micro_batch, world);
    return M2_OK;
}

static int make_run_dir(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return m2_fail(M2_EFAIL, "train.run_dir (%s): cannot create: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return m2_fail(M2_EFAIL, "train.run_dir (%s): cannot create: %s", path, strerror(errno));
    return M2_OK;
}

/* A checkpoint can seed this run only if it describes the same parameter tensors. */
static int check_same_shape(const m2_checkpoint *ck, const m2_layout *lay, const char *path)
{
    const m2_dims *a = &ck->lay.d, *b = &lay->d;
    const struct {
        const char *key;
        int ck, cfg;
    } keys[] = {
        {"model.d_model", a->D, b->D}, {"model.n_layers", a->L, b->L}, {"model.expand", a->E, b->E},
        {"model.headdim", a->P, b->P}, {"model.d_state", a->N, b->N},  {"model.ngroups", a->G, b->G},
        {"model.d_conv", a->K, b->K},  {"features (F)", a->F, b->F},   {"targets (O)", a->O, b->O},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (keys[i].ck != keys[i].cfg)
            return m2_fail(M2_EUSAGE, "resume (%s): the checkpoint has %s = %d but this run has %d", path, keys[i].key,
                           keys[i].ck, keys[i].cfg);
    return M2_OK;
}

static int load_resume_point(trainer *t, const char *resume)
{
    const m2_config *cfg = t->cfg;
    char path[4096];
    if (strcmp(resume, "auto") == 0) {
        if (m2_checkpoint_find_latest(cfg->train.run_dir, path, sizeof path) != M2_OK) {
            if (t->pg->rank == 0) printf("resume: no checkpoint in %s, starting fresh\n", cfg->train.run_dir);
            return M2_OK;
        }
    } else {
        snprintf(path, sizeof path, "%s", resume);
    }
    m2_checkpoint ck;
    int rc = m2_checkpoint_load(path, &ck, 1);
    if (rc) return m2_fail_context(rc, "resume");
    rc = check_same_shape(&ck, &t->lay, path);
    if (!rc) {
        memcpy(t->host_params, ck.params, t->lay.n_params * sizeof(float));
        t->step = ck.step;
        t->tokens_seen = ck.tokens_seen;
        t->data_seed = ck.data_seed;
        t->sel = (m2_selection){.best = ck.best_score, .best_step = ck.best_step, .since = ck.evals_since_best};
        rc = m2_zero_load_moments(t->dp, ck.m, ck.v, ck.optim_step);
        if (t->pg->rank == 0 && !rc)
            printf("resume: %s (step %" PRId64 ", saved on %d ranks, now %d)\n", path, ck.step, ck.world_size_at_save,
                   t->pg->world);
    }
    m2_checkpoint_free(&ck);
    return rc;
}

/* Setup runs in phases with an agreement between them (m2_train_run), so that no rank enters a collective that
 * another rank, having failed, will never join. Phase 1, local: the data, the layout, the model's workspace. */
static int setup_local(trainer *t)
{
    const m2_config *cfg = t->cfg;
    int rc;
    if ((rc = check_batch_rule(cfg, t->pg->world))) return rc;
    t->accum = cfg->train.global_batch / (cfg->train.micro_batch * t->pg->world);
    if ((rc = m2_dataset_read(cfg->data.path, &t->ds, 0))) return rc;
    if ((rc = m2_sampler_init(&t->train_windows, &t->ds, M2_SPLIT_TRAIN, cfg->train.seq_len, cfg->train.burn_in)) ||
        (rc = m2_sampler_set_mode(&t->train_windows, cfg->data.sampling)))
        return rc;
    if (t->train_windows.n_starts < cfg->train.global_batch)
        return m2_fail(M2_EUSAGE,
                       "data.path (%s): the train split has %" PRId64 " windows of %d ticks, fewer than "
                       "train.global_batch %d",
                       cfg->data.path, t->train_windows.n_starts, cfg->train.seq_len, cfg->train.global_batch);
    if ((rc = m2_sampler_init(&t->val_windows, &t->ds, M2_SPLIT_VAL, cfg->train.seq_len, cfg->train.burn_in)))
        return rc;
    if ((rc = m2_select_check(cfg->train.select_by, &t->ds))) return rc;
    m2_dims d;
    if ((rc = m2_dims_init(&d, cfg, t->ds.n_features, t->ds.n_targets))) return rc;
    if ((rc = m2_layout_init(&t->lay, &d))) return rc;
    t->flops_per_token = m2_train_flops_per_token(&d);

    const m2_ops *o = t->be.ops;
    size_t B = (size_t)cfg->train.micro_batch, T = (size_t)cfg->train.seq_len;
    size_t x_bytes = B * T * (size_t)d.F * sizeof(float), y_bytes = B * T * (size_t)d.O * sizeof(float);
    t->host_X = malloc(x_bytes);
    t->host_Y = malloc(y_bytes);
    t->host_pred = malloc(y_bytes);
    t->host_params = malloc(t->lay.n_params * sizeof(float));
    if (!t->host_X || !t->host_Y || !t->host_pred || !t->host_params) return m2_fail(M2_EFAIL, "train: out of memory");
    t->X = o->alloc(o, x_bytes);
    t->Y = o->alloc(o, y_bytes);
    t->pred = o->alloc(o, y_bytes);
    if (!t->X || !t->Y || !t->pred)
        return m2_fail(M2_EFAIL, "train (rank %d): out of %s memory for a micro-batch", t->pg->rank, o->name);
    return m2_model_create_with_ops(&t->model, &t->lay, cfg->train.micro_batch, cfg->train.seq_len, o);
}

/* Phase 2: the data-parallel step (building NCCL's communicator is collective) and the flat buffers it shapes. */
static int setup_step(trainer *t)
{
    unsigned char *mask = malloc(t->lay.n_params);
    if (!mask) return m2_fail(M2_EFAIL, "train: out of memory");
    m2_layout_decay_mask(&t->lay, mask);
    int rc = m2_backend_make_zero(&t->be, t->pg, t->lay.n_params, mask, &t->dp);
    free(mask);
    if (rc) return rc;
    const m2_ops *o = t->be.ops;
    size_t bytes = m2_zero_padded_len(t->dp) * sizeof(float);
    t->params = o->alloc(o, bytes);
    t->grads = o->alloc(o, bytes);
    if (!t->params || !t->grads)
        return m2_fail(M2_EFAIL, "train (rank %d): out of %s memory for the parameters and gradients", t->pg->rank,
                       o->name);
    o->memset0(o, t->params, bytes); /* the padded tail stays zero: the all-gather moves whole shards */
    o->memset0(o, t->grads, bytes);
    return M2_OK;
}

/* Phase 3: the starting point (fresh or resumed: collective), the run folder and the metrics log. */
static int setup_start(trainer *t, const char *resume)
{
    const m2_config *cfg = t->cfg;
    int rc;
    m2_params_init(&t->lay, t->host_params, cfg->train.seed);
    t->data_seed = cfg->train.seed;
    t->sel = (m2_selection){.best = NAN, .best_step = -1, .since = 0};
    if (resume && (rc = load_resume_point(t, resume))) return rc;
    t->be.ops->to_device(t->be.ops, t->params, t->host_params, t->lay.n_params * sizeof(float));
    if ((rc = make_run_dir(cfg->train.run_dir))) return rc;
    if (t->pg->rank == 0) {
        char path[1100];
        snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->train.run_dir);
        t->metrics = fopen(path, "a"); /* appended, never rewritten: a resumed run continues the log */
        if (!t->metrics) return m2_fail(M2_EFAIL, "metrics log (%s): cannot open: %s", path, strerror(errno));
    }
    return M2_OK;
}

static void teardown(trainer *t)
{
    if (t->metrics) fclose(t->metrics);
    m2_model_free(t->model);
    m2_zero_free(t->dp);
    const m2_ops *o = t->be.ops;
    if (o) {
        void *dev[] = {t->params, t->grads, t->X, t->Y, t->pred};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) o->free(o, dev[i]);
    }
    free(t->host_params);
    free(t->host_X);
    free(t->host_Y);
    free(t->host_pred);
    m2_layout_free(&t->lay);
    m2_sampler_free(&t->train_windows);
    m2_sampler_free(&t->val_windows);
    m2_dataset_free(&t->ds);
}

/* ---- one step ------------------------------------------------------------------------------------- */

/* Fills X, Y (host, then the backend's copies) with micro-batch `micro` of this rank's part of the global batch of
 * `step`. Window indices are global (rank r takes [r * per_rank, (r+1) * per_rank)), so the global batch does not
 * depend on the rank count. */
static void load_micro_batch(trainer *t, const m2_sampler *s, uint64_t seed, int64_t step, int micro, int per_rank)
{
    const m2_dims *d = &t->lay.d;
    const m2_ops *o = t->be.ops;
    int B = t->cfg->train.micro_batch, T = t->cfg->train.seq_len;
    for (int b = 0; b < B; b++) {
        int64_t index = (int64_t)t->pg->rank * per_rank + (int64_t)micro * B + b;
        int64_t start = m2_sampler_start(s, seed, step, index);
        m2_sampler_copy(s, start, t->host_X + (size_t)b * T * d->F, t->host_Y + (size_t)b * T * d->O);
    }
    o->to_device(o, t->X, t->host_X, (size_t)B * T * d->F * sizeof(float));
    o->to_device(o, t->Y, t->host_Y, (size_t)B * T * d->O * sizeof(float));
}

typedef struct {
    double loss, grad_norm, seconds;
    double data_s; /* of which waiting for windows (copied from the mapped file) */
    int skipped;
} step_result;

static int train_step(trainer *t, step_result *out)
{
    const m2_config *cfg = t->cfg;
    double t0 = now_s();
    t->be.ops->memset0(t->be.ops, t->grads, t->lay.n_params * sizeof(float));
    int per_rank = cfg->train.global_batch / t->pg->world;
    double sse = 0;
    int64_t count = 0;
    out->data_s = 0;
    for (int a = 0; a < t->accum; a++) {
        double d0 = now_s();
        load_micro_batch(t, &t->train_windows, t->data_seed, t->step, a, per_rank);
        out->data_s += now_s() - d0;
        double s = 0;
        int64_t c = 0;
        m2_bucket_ready_fn on_ready = NULL;
        void *user = NULL;
        int last = a == t->accum - 1; /* only the last micro-batch completes the gradient buckets */
        if (last) m2_zero_bucket_hook(t->dp, &t->lay, t->grads, &on_ready, &user);
        int rc = m2_model_forward_backward(t->model, t->params, t->grads, t->X, t->Y, cfg->train.micro_batch,
                                           cfg->train.seq_len, cfg->train.burn_in, &s, &c, NULL, on_ready, user);
        if (rc) return rc;
        if (last && (rc = m2_zero_bucket_error(t->dp))) return rc;
        sse += s;
        count += c;
    }
    double lr = m2_lr_at(cfg, t->step);
    /* Test hook (train.nan_from_step): rank 0's loss turns NaN, which must make every rank skip the update. */
    if (cfg->train.nan_from_step >= 0 && t->step >= cfg->train.nan_from_step && t->pg->rank == 0) sse = NAN;
    int rc = m2_zero_step(t->dp, t->params, t->grads, sse, count, (float)lr, (float)cfg->train.weight_decay,
                          (float)cfg->train.grad_clip, &out->loss, &out->grad_norm, &out->skipped);
    out->seconds = now_s() - t0;
    return rc;
}

/* The validation pass of run/select.h on rank 0; the score every rank decides on is rank 0's (all-reduced), so the
 * ranks agree even if their thread counts differ. Returns in *have whether there was a val split to score. */
static int validate(trainer *t, m2_val_result *v, int *have)
{
    const m2_config *cfg = t->cfg;
    double score[2] = {0, 0}; /* score, rows */
    int rc = M2_OK;
    memset(v, 0, sizeof *v);
    if (t->pg->rank == 0) {
        t->be.ops->to_host(t->be.ops, t->host_params, t->params, t->lay.n_params * sizeof(float));
        rc = m2_validate(t->be.ops, &t->lay, t->host_params, &t->ds, cfg->train.val_max_rows, v);
        score[0] = m2_select_score(v, m2_select_by_horizon(cfg->train.select_by));
        score[1] = (double)v->rows;
    }
    if (rc) return rc; /* rank 0 alone: the job ends with its message (m2_train_run) */
    if ((rc = m2_dist_allreduce_sum_f64(t->pg, score, 2))) return rc;
    *have = score[1] > 0;
    if (*have) m2_selection_update(&t->sel, score[0], t->step + 1);
    return M2_OK;
}

/* Every rank must hold the same parameters after the all-gather. Checked at each status line (cheap: one pass over
 * the parameters and one all-reduce) so that a silent divergence stops the run instead of wasting it. */
static int check_replicas(trainer *t)
{
    if (t->pg->world == 1) return M2_OK;
    t->be.ops->to_host(t->be.ops, t->host_params, t->params, t->lay.n_params * sizeof(float));
    const uint64_t h = m2_hash64(t->host_params, t->lay.n_params * sizeof(float), 0);
    int64_t v = (int64_t)(h >> 2);
    int64_t range[2] = {v, -v}; /* max of v and max of -v: the largest and smallest hash */
    int rc = m2_dist_allreduce_max_i64(t->pg, range, 2);
    if (rc) return rc;
    if (range[0] != -range[1])
        return m2_fail(M2_EFAIL,
                       "training (step %" PRId64 ", rank %d): the ranks hold different parameters after the "
                       "all-gather",
                       t->step + 1, t->pg->rank);
    return M2_OK;
}

/* ---- checkpoints, logs ------------------------------------------------------------------------------ */

/* name: NULL for ckpt_STEP.h5 (pruned to checkpoint.keep), else that file name (never pruned). */
static int save_checkpoint(trainer *t, const char *name)
{
    const m2_config *cfg = t->cfg;
    int rank0 = t->pg->rank == 0;
    m2_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (rank0) {
        ck.m = malloc(t->lay.n_params * sizeof(float));
        ck.v = malloc(t->lay.n_params * sizeof(float));
        if (!ck.m || !ck.v) {
            free(ck.m);
            free(ck.v);
            return m2_fail(M2_EFAIL, "checkpoint: out of memory");
        }
    }
    int rc = m2_zero_gather_moments(t->dp, ck.m, ck.v); /* collective: unsharded moments on rank 0 */
    if (!rc && rank0) {
        t->be.ops->to_host(t->be.ops, t->host_params, t->params, t->lay.n_params * sizeof(float));
        ck.cfg = *cfg;
        ck.lay = t->lay;
        ck.step = t->step;
        ck.tokens_seen = t->tokens_seen;
        ck.world_size_at_save = t->pg->world;
        ck.params = t->host_params;
        ck.optim_step = m2_zero_optim_step(t->dp);
        ck.data_seed = t->data_seed;
        ck.data_step = t->step;
        ck.best_score = t->sel.best;
        ck.best_step = t->sel.best_step;
        ck.evals_since_best = t->sel.since;
        ck.n_features = t->ds.n_features;
        memcpy(ck.feature_names, t->ds.feature_names, sizeof ck.feature_names);
        memcpy(ck.mean, t->ds.mean, sizeof ck.mean);
        memcpy(ck.std, t->ds.std, sizeof ck.std);
        ck.n_instruments = t->ds.n_instruments; /* borrowed from the dataset for the save */
        ck.inst_name = t->ds.inst_name;
        ck.inst_mean = t->ds.inst_mean;
        ck.inst_std = t->ds.inst_std;
        ck.inst_tick = t->ds.inst_tick;
        char path[4096];
        rc = name ? m2_checkpoint_save_as(cfg->train.run_dir, name, &ck, path, sizeof path)
                  : m2_checkpoint_save(cfg->train.run_dir, &ck, path, sizeof path);
        if (!rc && !name) rc = m2_checkpoint_prune(cfg->train.run_dir, cfg->checkpoint.keep);
        if (!rc) printf("checkpoint: %s\n", path);
    }
    if (rank0) {
        free(ck.m);
        free(ck.v);
    }
    /* A failure on rank 0 returns at once and aborts the job with rank 0's own message; the other ranks wait here
     * until the rename is done, so none reads or prunes a half-made checkpoint. */
    if (rc) return rc;
    return m2_dist_barrier(t->pg);
}

static void format_duration(double s, char *buf, size_t cap)
{
    long total = (long)(s + 0.5);
    if (total >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", total / 3600, total % 3600 / 60);
    else
        snprintf(buf, cap, "%ldm%02lds", total / 60, total % 60);
}

static void log_step(trainer *t, const step_result *r, const m2_val_result *val, double lr, double elapsed,
                     double avg_step_s)
{
    const m2_config *cfg = t->cfg;
    double ticks = (double)cfg->train.global_batch * cfg->train.seq_len;
    double tps = ticks / r->seconds;
    /* model FLOPs per second per device over the device's peak; only where the peak is known (a GPU) */
    double mfu = t->be.peak_flops > 0 ? tps * t->flops_per_token / (t->be.peak_flops * t->pg->world) : NAN;
    if (t->metrics) {
        fprintf(t->metrics, "{\"step\": %" PRId64 ", \"loss\": %.17g", t->step + 1, r->loss);
        if (val) m2_val_write_json(t->metrics, val, &t->sel);
        fprintf(t->metrics, ", \"grad_norm\": %.6g, \"lr\": %.6g, \"ticks_per_s\": %.1f", r->grad_norm, lr, tps);
        fprintf(t->metrics, ", \"data_wait_share\": %.4g", r->data_s / r->seconds);
        if (isfinite(mfu)) fprintf(t->metrics, ", \"mfu\": %.4g", mfu);
        fprintf(t->metrics, ", \"elapsed_s\": %.3f%s}\n", elapsed, r->skipped ? ", \"skipped\": 1" : "");
        fflush(t->metrics);
    }
    int last = t->step + 1 == cfg->train.steps;
    int due = last || (t->step + 1) % cfg->train.log_every == 0 || val || r->skipped;
    if (t->pg->rank != 0 || !due) return;
    char val_text[96] = "", mfu_text[32] = "", eta[32];
    if (val) m2_val_status(val_text, sizeof val_text, val, m2_select_by_horizon(cfg->train.select_by), &t->sel);
    if (isfinite(mfu)) snprintf(mfu_text, sizeof mfu_text, " | MFU %.3g%%", 100 * mfu);
    format_duration(avg_step_s * (double)(cfg->train.steps - t->step - 1), eta, sizeof eta);
    printf("step %" PRId64 "/%" PRId64 " | loss %.4f%s | norm %.2f | lr %.2e | %.1f ms | %.1fk ticks/s%s | ETA %s%s\n",
           t->step + 1, cfg->train.steps, r->loss, val_text, r->grad_norm, lr, 1e3 * r->seconds, tps / 1e3, mfu_text,
           eta, r->skipped ? " | SKIPPED (non-finite)" : "");
    fflush(stdout);
}

static void print_plan(const trainer *t)
{
    const m2_config *cfg = t->cfg;
    const m2_dims *d = &t->lay.d;
    if (t->pg->rank != 0) return;
    size_t b, e;
    m2_zero_shard(t->dp, 0, &b, &e);
    printf("model: D=%d L=%d Di=%d H=%d P=%d N=%d G=%d K=%d Q=%d F=%d O=%d | %zu parameters (%.2f MB fp32)\n", d->D,
           d->L, d->Di, d->H, d->P, d->N, d->G, d->K, d->Q, d->F, d->O, t->lay.n_params,
           4e-6 * (double)t->lay.n_params);
    printf("memory: activations %zu bytes/token/layer saved for the backward; Adam state %.2f MB on each rank "
           "(ZeRO-1 shard of %zu of %zu parameters)\n",
           m2_model_activation_bytes_per_token(t->model), 1e-6 * (double)m2_zero_state_bytes(t->dp), e - b,
           t->lay.n_params);
    printf("data: %s | %" PRId64 " train windows, %" PRId64 " val windows of %d ticks | global batch %d = %d ranks x "
           "%d micro-batches x %d\n",
           cfg->data.path, t->train_windows.n_starts, t->val_windows.n_starts, cfg->train.seq_len,
           cfg->train.global_batch, t->pg->world, t->accum, cfg->train.micro_batch);
    fflush(stdout);
}

/* ---- the loop --------------------------------------------------------------------------------------- */

static int loop(trainer *t)
{
    const m2_config *cfg = t->cfg;
    double start = now_s(), step_time_sum = 0;
    int64_t timed_steps = 0;
    int bad_in_row = 0;
    int64_t first_step = t->step;
    while (t->step < cfg->train.steps) {
        if (cfg->dist.fail_rank == t->pg->rank && cfg->dist.fail_step == t->step)
            return m2_fail(M2_EFAIL, "training (rank %d, step %" PRId64 "): failure injected by dist.fail_rank",
                           t->pg->rank, t->step);
        step_result r;
        int rc = train_step(t, &r);
        if (rc) return rc;
        /* step < train.steps <= 1e15 cannot overflow; tokens_seen (from a checkpoint, bounded only by step x tokens per
         * step, which may pass 2^63) can. */
        const int64_t tokens = (int64_t)cfg->train.global_batch * cfg->train.seq_len;
        int64_t seen;
        if (__builtin_add_overflow(t->tokens_seen, tokens, &seen))
            return m2_fail(M2_EFAIL,
                           "training (step %" PRId64 "): tokens_seen %" PRId64 " + %" PRId64 " overflows int64",
                           t->step + 1, t->tokens_seen, tokens);
        t->tokens_seen = seen;
        if (r.skipped) {
            if (++bad_in_row >= cfg->train.max_bad_steps) {
                t->stopped_together = 1; /* every rank skipped the same steps: all stop here, none is stuck */
                return m2_fail(M2_EFAIL,
                               "training (step %" PRId64 "): loss or gradients not finite for %d steps in a "
                               "row (train.max_bad_steps); lower train.lr or check the data",
                               t->step + 1, bad_in_row);
            }
        } else {
            bad_in_row = 0;
        }
        m2_val_result val;
        int last = t->step + 1 == cfg->train.steps, have_val = 0;
        if (((t->step + 1) % cfg->train.log_every == 0 || last) && (rc = check_replicas(t))) return rc;
        if (cfg->train.eval_every > 0 && ((t->step + 1) % cfg->train.eval_every == 0 || last))
            if ((rc = validate(t, &val, &have_val))) return rc;
        if (t->step > first_step) { /* the first step pays for warm-up: keep it out of the ETA */
            step_time_sum += r.seconds;
            timed_steps++;
        }
        log_step(t, &r, have_val ? &val : NULL, m2_lr_at(cfg, t->step), now_s() - start,
                 timed_steps ? step_time_sum / (double)timed_steps : r.seconds);
        t->step++;
        int64_t stop = stop_requested;
        if ((rc = m2_dist_allreduce_max_i64(t->pg, &stop, 1))) return rc; /* any rank signalled: all stop together */
        /* stop_at ends this process early (time-sliced jobs, resume tests) with the schedule of train.steps. */
        if (cfg->train.stop_at > 0 && t->step >= cfg->train.stop_at) stop = 1;
        if (have_val && t->sel.best_step == t->step && (rc = save_checkpoint(t, "ckpt_best.h5"))) return rc;
        int patience_out = have_val && m2_selection_exhausted(&t->sel, cfg->train.patience);
        int periodic = cfg->checkpoint.every > 0 && t->step % cfg->checkpoint.every == 0;
        if (periodic || last || stop || patience_out)
            if ((rc = save_checkpoint(t, NULL))) return rc;
        if (patience_out && t->pg->rank == 0 && !stop)
            printf("early stopping (train.patience): no better %s for %d evaluations, best at step %" PRId64
                   " (ckpt_best.h5); checkpointed at step %" PRId64 "\n",
                   cfg->train.select_by, t->sel.since, t->sel.best_step, t->step);
        if (stop || patience_out) {
            if (t->pg->rank == 0 && stop)
                printf("stopping early (%s): checkpointed at step %" PRId64 "\n",
                       stop_requested ? "signal" : "train.stop_at", t->step);
            break;
        }
    }
    return M2_OK;
}

static void set_threads(const m2_config *cfg, const m2_dist *pg)
{
    int threads = cfg->train.threads;
    if (threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / (pg->local_size > 0 ? pg->local_size : 1));
        if (threads < 1) threads = 1;
    }
    omp_set_num_threads(threads);
    m2_ops_cpu_set_threads(threads); /* the CPU ops split GEMMs across their own threads (ops.h) */
}

/* After a setup phase: every rank learns whether any failed. All failed alike (a bad config, a missing dataset):
 * returns the error, which rank 0 reports once. Some failed: a failing rank ends the job with its own message (no
 * rank may be left waiting in a collective). */
static int agree_on_start(m2_dist *pg, int rc)
{
    int64_t failed = rc != M2_OK;
    if (m2_dist_allreduce_sum_i64(pg, &failed, 1) != M2_OK) m2_dist_abort(pg, M2_EFAIL, m2_last_error());
    if (failed > 0 && failed < pg->world && rc) m2_dist_abort(pg, rc, m2_last_error());
    if (failed > 0 && !rc) rc = m2_fail(M2_EFAIL, "train: another rank failed to start");
    return rc;
}

/* The backend (collective for model.device = auto), said once, and the rank table with each rank's device. */
static int choose_backend(trainer *t, const m2_device_api *device_api)
{
    int rc = m2_backend_choose(&t->be, t->cfg, t->pg, device_api);
    if (t->pg->rank == 0 && !rc) {
        char line[1024];
        m2_backend_describe(&t->be, line, sizeof line);
        printf("%s\n", line);
        fflush(stdout);
    }
    return rc;
}

int m2_train_run(const m2_config *cfg, const char *resume, m2_dist *pg, const m2_device_api *device_api)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pg->timeout_s = cfg->dist.timeout_s;
    set_threads(cfg, pg);

    trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.pg = pg;
    int rc = choose_backend(&t, device_api);
    if (!rc) rc = setup_local(&t);
    rc = agree_on_start(pg, rc);
    if (!rc && m2_dist_print_table(pg, stdout) != M2_OK) m2_dist_abort(pg, M2_EFAIL, m2_last_error());
    if (!rc) rc = agree_on_start(pg, setup_step(&t));
    if (!rc) rc = agree_on_start(pg, setup_start(&t, resume));
    if (!rc) {
        print_plan(&t);
        rc = loop(&t);
        /* A rank failing alone aborts the job (the others may wait in a collective); a stop every rank reached
         * together returns normally and rank 0 reports it once. */
        if (rc && pg->world > 1 && !t.stopped_together) m2_dist_abort(pg, rc, m2_last_error());
    }
    teardown(&t);
    return rc;
}
