/* mamba2_eval --plot (CLI.md): one PNG drawn by gnuplot (launch/setup.sh installs gnuplot-nox) with three panels:
 * cumulative net PnL of the model and the ridge at the longest horizon, IC by horizon with 95% error bars
 * (± 1.96 HAC standard errors, run/significance.h), and the decile bars at the longest horizon. */
#ifndef MAMBA2_PLOT_H
#define MAMBA2_PLOT_H

#include <stdint.h>

#include "run/research.h"

/* cum: [2][O][M] as m2_research_compute fills it. title: one line above the panels. Written to a temporary name
 * beside png and renamed. M2_EFAIL when gnuplot is missing or fails. */
int m2_plot_write(const char *png, const m2_research *r, const float *cum, int64_t M, const char *title);

#endif
