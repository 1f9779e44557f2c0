/* Checkpoints (docs/FORMATS.md "Checkpoint"): one HDF5 file per checkpoint, written to a temporary name in the
 * run folder, fsync'd and renamed, so a crash never leaves a half-written file under a real name. */
#ifndef MAMBA2_CHECKPOINT_H
#define MAMBA2_CHECKPOINT_H

#include <stdint.h>

#include "base/config.h"
#include "base/layout.h"
#include "io/dataset.h"

typedef struct {
    m2_config cfg; /* the resolved config stored in the file */
    m2_layout lay; /* built from cfg and the stored F, O */
    int64_t step, tokens_seen;
    int32_t world_size_at_save;
    float *params; /* [lay.n_params] */
    float *m, *v;  /* Adam moments (NULL unless loaded with optimiser state) */
    int64_t optim_step;
    uint64_t data_seed; /* sampler state: (seed, next step) is the whole state of the pure sampler */
    int64_t data_step;
    int n_features;
    char feature_names[M2_MAX_FEATURES][32];
    double mean[M2_MAX_FEATURES], std[M2_MAX_FEATURES];
    /* each instrument's train statistics (/norm/instruments; 0 and NULL in a checkpoint without them), laid out as
     * in m2_dataset: [I, M2_MAX_FEATURES]. Owned when loaded; a caller saving may point them at a dataset's. */
    int n_instruments;
    char (*inst_name)[64];
    double *inst_mean, *inst_std;
    double *inst_tick; /* [I] tick sizes (/norm/instruments/tick_size; NULL in a file written before 2026-12-04) */
    /* model selection so far (train.select_by, run/select.h), so that a resumed run selects as an uninterrupted
     * one would: the best score (higher is better), its step (-1: none yet), evaluations since it improved.
     * Files written before these existed load as "none yet". */
    double best_score;
    int64_t best_step;
    int32_t evals_since_best;
} m2_checkpoint;

/* Writes DIR/ckpt_STEP.h5 atomically; returns the final path in out_path (may be NULL). */
int m2_checkpoint_save(const char *dir, const m2_checkpoint *ck, char *out_path, size_t out_cap);

/* Writes DIR/NAME atomically (NAME e.g. "ckpt_best.h5": never pruned, never taken by find_latest). */
int m2_checkpoint_save_as(const char *dir, const char *name, const m2_checkpoint *ck, char *out_path, size_t out_cap);

/* Reads a checkpoint (with_optim: also the Adam moments). Wrong schema, newer version, truncated file,
 * missing tensor, wrong shape: one clear error naming the file. */
int m2_checkpoint_load(const char *path, m2_checkpoint *ck, int with_optim);

void m2_checkpoint_free(m2_checkpoint *ck);

/* What evaluation and streaming start from: the checkpoint (without optimiser state) and the dataset to run it on,
 * data_path or, when NULL, the dataset named in the checkpoint's config; checked compatible. Errors name the role
 * ("checkpoint ...", "dataset ...") and, for the default dataset, say where its path came from. On success the
 * caller frees both; on failure nothing is left to free. *data_used points at the path that was read. */
int m2_checkpoint_load_with_dataset(const char *ck_path, const char *data_path, m2_checkpoint *ck, m2_dataset *ds,
                                    const char **data_used);

/* m2_checkpoint_load_with_dataset, then task(ck, ds, data_used, user), then both freed: the whole of a program that
 * runs a checkpoint on a dataset (evaluation, streaming). Returns the load's or the task's error. */
typedef int (*m2_checkpoint_task)(const m2_checkpoint *ck, const m2_dataset *ds, const char *data_used,
                                  const void *user);
int m2_checkpoint_run_with_dataset(const char *ck_path, const char *data_path, m2_checkpoint_task task,
                                   const void *user);

/* What a program that runs a checkpoint on a dataset (mamba2_eval, mamba2_stream) takes from its command line: its
 * options struct begins with this, and m2_checkpoint_job_run (a run callback for base/cli.h's m2_cli_finish) runs
 * task(ck, ds, data_used, options) on them. */
typedef struct {
    const char *checkpoint, *data;
    m2_checkpoint_task task;
} m2_checkpoint_job;
int m2_checkpoint_job_run(const void *options);

/* Can this checkpoint's model read this dataset? Same feature count, target count and feature names, and every
 * instrument both know normalised with the same statistics (M2_EFAIL with one line naming both files otherwise). */
int m2_checkpoint_check_dataset(const m2_checkpoint *ck, const char *ck_path, const m2_dataset *ds,
                                const char *data_path);

/* Newest complete checkpoint in dir (by step); M2_EFAIL with a message when there is none. */
int m2_checkpoint_find_latest(const char *dir, char *out_path, size_t out_cap);

/* Deletes all but the newest `keep` checkpoints in dir. */
int m2_checkpoint_prune(const char *dir, int keep);

#endif
