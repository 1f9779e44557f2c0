/* The training loop (docs/CLI.md mamba2_train; docs/MODEL.md §4-5): sample windows -> forward/backward over micro-batches with
 * gradient accumulation up to the global batch -> the data-parallel ZeRO-1 step (reduce-scatter, global norm, clip,
 * AdamW on this rank's shard, all-gather) -> LR schedule; validation, status lines, metrics.jsonl, atomic
 * checkpoints, exact resume, SIGTERM/SIGINT handling. The same code runs on 1 and on R ranks, and on every backend
 * (run/backend.h): the CPU, or a GPU per rank with parameters, gradients and Adam moments in device memory; the
 * ZeRO-1 step (dist/zero.h) is the same on both, with MPI or NCCL. Checkpoints are the same on both, so a run may
 * resume on the other backend. */
#ifndef MAMBA2_TRAIN_H
#define MAMBA2_TRAIN_H

#include <stdint.h>

#include "run/backend.h"
#include "base/config.h"
#include "dist/dist.h"

/* Learning rate at `step` (0-based): linear warm-up over train.warmup steps, then cosine to lr_min at train.steps. */
double m2_lr_at(const m2_config *cfg, int64_t step);

/* Runs training as configured. resume: NULL (fresh run), "auto" (the newest complete checkpoint in run_dir, or a
 * fresh run when there is none) or a checkpoint path. device_api: the device backend the program was built with
 * (NULL: none; model.device chooses, run/backend.h). Collective over pg; prints the chosen backend and the rank
 * table (pg->device is the rank's GPU, or -1 on the CPU). Returns M2_OK (also after a SIGTERM/SIGINT, which finishes
 * the step, checkpoints and stops), M2_EUSAGE for configuration problems found at start, M2_EFAIL otherwise; the
 * message is in m2_last_error(). */
int m2_train_run(const m2_config *cfg, const char *resume, m2_dist *pg, const m2_device_api *device_api);

/* Asks a running m2_train_run to stop after the current step (what the signal handler calls). */
void m2_train_request_stop(void);

#endif
