/* mamba2_eval: evaluates a checkpoint on a split of a tick dataset (docs/CLI.md), against a ridge baseline fitted on
 * the train split, and prints per-horizon metrics; optionally writes them as JSON and the predictions as a
 * predictions file (docs/FORMATS.md). The work is in run/eval.c; this file is the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run/backend.h"
#include "run/device_api.h"
#include "base/cli.h"
#include "core/blas_core.h"
#include "base/error.h"
#include "base/version.h"
#include "run/eval.h"
#include "run/eval_instruments.h"
#include "run/research_run.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "io/predictions.h"

#define PROG "mamba2_eval"

_Static_assert(sizeof(m2_real) == sizeof(float), "mamba2_eval runs the fp32 model on the checkpoint's fp32 parameters");

typedef struct {
    m2_checkpoint_job job; /* first: --checkpoint, --data and what runs on them */
    const char *json, *predictions, *device, *instrument, *plot;
    int split, mode, control;
    char best[4096]; /* RUN_DIR/ckpt_best.h5 when --checkpoint names a run folder */
    const char *split_name;
} options;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: " PROG " --checkpoint FILE|RUN_DIR [--data FILE] [--split val|test] [--mode stream|window]\n"
           "                   [--json OUT] [--predictions OUT] [--device auto|cpu|cuda] [--instrument NAME]\n"
           "                   [--plot OUT.png] [--control shuffle]\n"
           "\n"
           "Evaluates a checkpoint on one split of a tick dataset, per target horizon: MSE, the zero predictor's MSE,\n"
           "R^2, Pearson IC, Spearman rank IC and directional accuracy (on nonzero targets); the same for a ridge\n"
           "regression on the current tick's features fitted on the train split. Then, for both: the IC's standard\n"
           "error and t (HAC, lag = horizon) and the model-minus-ridge IC difference; a backtest net of half the\n"
           "quoted spread (Sharpe, turnover, hit rate, max drawdown); mean forward return by prediction decile.\n"
           "\n"
           "  --checkpoint PATH   checkpoint file, or a run folder: its ckpt_best.h5 (required)\n"
           "  --data FILE         tick dataset (default: [data] path in the checkpoint's config)\n"
           "  --split NAME        val | test (train is accepted too: in-sample) (default: test)\n"
           "  --mode NAME         stream: state carried from each session's first tick in the split, every row\n"
           "                      window: non-overlapping windows of train.seq_len from each session's first tick\n"
           "                      in the split, rows at window positions >= train.burn_in (default: stream)\n"
           "  --json OUT          also write the metrics as one JSON object to OUT ('-' for stdout)\n"
           "  --predictions OUT   write the model's predictions on the evaluated rows (docs/FORMATS.md)\n"
           "  --device NAME       where the model runs: auto (a GPU when this build has CUDA and one is usable,\n"
           "                      else the CPU), cpu or cuda (default: auto; the checkpoint's model.device is\n"
           "                      not used: a model trained on GPUs evaluates anywhere)\n"
           "  --instrument NAME   only this instrument's rows (a universe; default: pooled metrics, then one\n"
           "                      row per instrument and horizon)\n"
           "  --plot OUT.png      cumulative net PnL, IC by horizon with 95%% intervals, decile bars (gnuplot)\n"
           "  --control shuffle   every research metric again against targets moved between blocks of the split\n"
           "  --help              this text\n"
           "  --version           version and built-in backends\n");
}

static int parse_choice(options *o, int key, const char *value)
{
    if (key == 'd') {
        o->device = value;
        if (strcmp(value, "auto") && strcmp(value, "cpu") && strcmp(value, "cuda"))
            return m2_fail(M2_EUSAGE, "--device %s: unknown device (auto, cpu or cuda)", value);
    } else if (key == 's') {
        o->split = m2_split_from_name(value);
        o->split_name = value;
        if (o->split < 0) return m2_fail(M2_EUSAGE, "--split %s: unknown split (val, test or train)", value);
    } else {
        o->mode = m2_eval_mode_from_name(value);
        if (o->mode < 0) return m2_fail(M2_EUSAGE, "--mode %s: unknown mode (stream or window)", value);
    }
    return M2_OK;
}

static int evaluate(const m2_checkpoint *ck, const m2_dataset *ds, const char *data, const void *opts);

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){
        .job.task = evaluate, .split = M2_SPLIT_TEST, .mode = M2_EVAL_STREAM, .split_name = "test", .device = "auto"};
    static const struct option opts[] = {{"checkpoint", required_argument, 0, 'c'},
                                         {"data", required_argument, 0, 'D'},
                                         {"json", required_argument, 0, 'j'},
                                         {"predictions", required_argument, 0, 'p'},
                                         {"split", required_argument, 0, 's'},
                                         {"mode", required_argument, 0, 'm'},
                                         {"device", required_argument, 0, 'd'},
                                         {"instrument", required_argument, 0, 'i'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {"plot", required_argument, 0, 'P'},
                                         {"control", required_argument, 0, 'C'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = m2_cli_next(argc, argv, opts, PROG " --help")) != -1) {
        switch (c) {
        case 'c': o->job.checkpoint = optarg; break;
        case 'D': o->job.data = optarg; break;
        case 'j': o->json = optarg; break;
        case 'p': o->predictions = optarg; break;
        case 'i': o->instrument = optarg; break;
        case 'P': o->plot = optarg; break;
        case 'C':
            if (strcmp(optarg, "shuffle") != 0)
                return m2_fail(M2_EUSAGE, "--control %s: unknown control (shuffle)", optarg);
            o->control = 1;
            break;
        case 's':
        case 'm':
        case 'd':
            if (parse_choice(o, c, optarg)) return M2_EUSAGE;
            break;
        default: return m2_cli_common(c);
        }
    }
    if (m2_cli_no_extra(argc, argv, 0)) return M2_EUSAGE;
    if (!o->job.checkpoint) return m2_fail(M2_EUSAGE, "--checkpoint FILE is required (see --help)");
    struct stat st;
    if (stat(o->job.checkpoint, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(o->best, sizeof o->best, "%s/ckpt_best.h5", o->job.checkpoint);
        if (stat(o->best, &st) != 0)
            return m2_fail(M2_EUSAGE,
                           "--checkpoint %s: a run folder without ckpt_best.h5 (trained with "
                           "train.eval_every = 0?): name a checkpoint file",
                           o->job.checkpoint);
        o->job.checkpoint = o->best;
    }
    return M2_CLI_RUN;
}

/* The dataset must be the one the model was trained for: same feature count, targets and feature names. */
static int write_json(const char *path, const m2_eval_report *rep)
{
    if (strcmp(path, "-") == 0) {
        m2_eval_write_json(stdout, rep);
        return M2_OK;
    }
    FILE *f = fopen(path, "w");
    if (!f) return m2_fail(M2_EFAIL, "--json (%s): cannot create: %s", path, strerror(errno));
    m2_eval_write_json(f, rep);
    if (ferror(f) | (fclose(f) != 0)) return m2_fail(M2_EFAIL, "--json (%s): write failed", path);
    return M2_OK;
}

static int write_predictions(const char *path, const m2_eval_rows *rows, const m2_eval_report *rep)
{
    m2_predictions p = {
        .M = rows->M, .O = rows->O, .row = rows->row, .pred = rows->pred, .target = rows->target, .step = rep->step};
    snprintf(p.split, sizeof p.split, "%s", rep->split);
    snprintf(p.mode, sizeof p.mode, "%s", rep->mode);
    snprintf(p.checkpoint, sizeof p.checkpoint, "%s", rep->checkpoint);
    memcpy(p.horizons, rep->horizons, sizeof p.horizons);
    return m2_predictions_write(path, &p);
}

static void fill_header(m2_eval_report *rep, const options *o, const m2_checkpoint *ck, const m2_dataset *ds,
                        const char *data)
{
    memset(rep, 0, sizeof *rep);
    snprintf(rep->split, sizeof rep->split, "%s", o->split_name);
    snprintf(rep->mode, sizeof rep->mode, "%s", m2_eval_mode_name(o->mode));
    snprintf(rep->checkpoint, sizeof rep->checkpoint, "%s", o->job.checkpoint);
    snprintf(rep->data, sizeof rep->data, "%s", data);
    rep->step = ck->step;
    rep->seq_len = ck->cfg.train.seq_len;
    rep->burn_in = ck->cfg.train.burn_in;
    rep->ridge_lambda = M2_RIDGE_LAMBDA;
    memcpy(rep->horizons, ds->horizons, sizeof rep->horizons);
}

/* The backend for --device (run/backend.h: one process, no collectives), named in the report. */
static int choose_backend(const options *o, const m2_checkpoint *ck, m2_backend *be, m2_eval_report *rep)
{
    m2_config cfg = ck->cfg;
    snprintf(cfg.model.device, sizeof cfg.model.device, "%s", o->device);
    int rc = m2_backend_choose(be, &cfg, NULL, m2_program_device_api());
    if (rc) return m2_fail_context(rc, "--device %s", o->device);
    if (be->api)
        snprintf(rep->backend, sizeof rep->backend, "%s (%.200s)", be->api->name, be->device_name);
    else
        snprintf(rep->backend, sizeof rep->backend, "cpu");
    return M2_OK;
}

static void json_research(FILE *f, const void *extra)
{
    const void *const *both = extra;
    m2_research_write_json(f, both[0], both[1]);
}

static int run_research(const options *o, const m2_checkpoint *ck, const m2_dataset *ds, const char *data,
                        const m2_backend *be, const m2_eval_rows *rows, const float *ridge_pred, const m2_ridge *fit,
                        m2_research *r, m2_research *control)
{
    char title[1400];
    snprintf(title, sizeof title, "%.600s (step %lld) on %.600s, %s split", o->job.checkpoint, (long long)ck->step,
             data, o->split_name);
    for (char *p = title; *p; p++)
        if (*p == '"') *p = '\''; /* the gnuplot title is a double-quoted string */
    m2_research_job job = {.ops = be->ops,
                           .lay = &ck->lay,
                           .params = ck->params,
                           .ds = ds,
                           .data_path = data,
                           .split = o->split,
                           .rows = rows,
                           .ridge_pred = ridge_pred,
                           .fit = fit,
                           .control = o->control,
                           .plot = o->plot,
                           .title = title};
    return m2_research_run(&job, stdout, r, control);
}

/* Model and ridge on the loaded inputs, then the outputs. */
static int evaluate(const m2_checkpoint *ck, const m2_dataset *ds, const char *data, const void *opts)
{
    const options *o = opts;
    m2_eval_report rep;
    fill_header(&rep, o, ck, ds, data);
    m2_backend be;
    int rc = choose_backend(o, ck, &be, &rep);
    if (rc != M2_OK) return rc;
    int inst = o->instrument ? m2_dataset_find_instrument(ds, o->instrument) : -1;
    if (o->instrument && inst < 0)
        return m2_fail(M2_EUSAGE, "--instrument %s: not in the dataset (%s, %d instruments, the first %s)",
                       o->instrument, data, ds->n_instruments, ds->inst_name[0]);
    m2_eval_rows all, rows;
    rc = m2_eval_predict(be.ops, &ck->lay, ck->params, ds, o->split, o->mode, rep.seq_len, rep.burn_in, &all);
    if (rc != M2_OK) return rc;
    int64_t b = 0, e = all.M;
    if (inst >= 0) m2_eval_instrument_range(ds, &all, inst, &b, &e);
    rows = m2_eval_rows_view(&all, b, e);
    if (inst >= 0) snprintf(rep.instrument, sizeof rep.instrument, "%s", o->instrument);
    m2_ridge fit = {0};
    float *ridge_pred = malloc(sizeof(float) * (size_t)(rows.M + 1) * (size_t)rows.O);
    m2_eval_report *per = inst < 0 && ds->n_instruments > 1 ? calloc((size_t)ds->n_instruments, sizeof *per) : NULL;
    rc = ridge_pred && (per || inst >= 0 || ds->n_instruments <= 1) ? m2_eval_ridge(ds, &rows, &fit, ridge_pred)
                                                                    : m2_fail(M2_EFAIL, "eval: out of memory");
    if (rc == M2_OK) {
        for (int h = 0; h < rows.O; h++) rep.ridge_rows[h] = fit.n_fit[h];
        rc = m2_eval_metrics(&rows, ridge_pred, &rep);
    }
    if (rc == M2_OK && per) {
        rc = m2_eval_by_instrument(ds, &rows, ridge_pred, &rep, per);
        rep.n_instruments = ds->n_instruments;
        rep.inst_name = (const char(*)[64])ds->inst_name;
        rep.per_instrument = per;
    }
    if (rc == M2_OK) m2_eval_print_table(stdout, &rep);
    if (rc == M2_OK && per) m2_eval_print_instruments(stdout, ds, per);
    m2_research research, control;
    const void *both[2] = {&research, o->control ? &control : NULL}; /* what json_research writes */
    if (rc == M2_OK) rc = run_research(o, ck, ds, data, &be, &rows, ridge_pred, &fit, &research, &control);
    if (rc == M2_OK) {
        rep.json_extra = json_research;
        rep.extra = both;
    }
    if (rc == M2_OK && o->json) rc = write_json(o->json, &rep);
    if (rc == M2_OK && o->predictions) rc = write_predictions(o->predictions, &rows, &rep);
    m2_ridge_free(&fit);
    free(ridge_pred);
    free(per);
    m2_eval_rows_free(&all);
    return rc;
}

int main(int argc, char **argv)
{
    m2_blas_core_ensure(argv); /* may run this program again with faster OpenBLAS kernels (core/blas_core.h) */
    options o;
    return m2_cli_finish(PROG, parse_args(argc, argv, &o), usage, m2_checkpoint_job_run, &o);
}
