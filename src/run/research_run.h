/* What mamba2_eval runs after the per-horizon table (CLI.md mamba2_eval --plot, --control): the position scales
 * from the val split, the quoted spreads, the research view (run/research.h), the optional block-shuffle control
 * and the optional PNG (run/plot.h). */
#ifndef MAMBA2_RESEARCH_RUN_H
#define MAMBA2_RESEARCH_RUN_H

#include <stdio.h>

#include "core/ops.h"
#include "run/eval.h"
#include "run/research.h"
#include "run/ridge.h"

typedef struct {
    const m2_ops *ops; /* the model's backend (NULL: the CPU) */
    const m2_layout *lay;
    const float *params; /* host */
    const m2_dataset *ds;
    const char *data_path; /* for the /raw quotes */
    int split;             /* the evaluated split (its rows are rows) */
    const m2_eval_rows *rows;
    const float *ridge_pred; /* [M, O] */
    const m2_ridge *fit;
    int control;       /* 1: --control shuffle */
    const char *plot;  /* --plot OUT.png or NULL */
    const char *title; /* the plot's title line */
} m2_research_job;

/* Computes r (and *control when job->control), prints the tables to f and writes the plot. */
int m2_research_run(const m2_research_job *job, FILE *f, m2_research *r, m2_research *control);

#endif
