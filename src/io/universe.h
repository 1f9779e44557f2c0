/* A universe of instruments in one tick dataset (FORMATS.md "Universe"): common calendar-time cuts, features
 * normalised per instrument with that instrument's train statistics, rows laid out split-major. */
#ifndef MAMBA2_UNIVERSE_H
#define MAMBA2_UNIVERSE_H

#include <stdint.h>

#include "io/dataset.h"
#include "io/features.h"

/* The two calendar cuts (ns since the epoch) of the pooled event times: the times at the pooled row quantiles
 * f_train and f_train + f_val, each moved to the UTC midnight before or after when that moves it by at most a
 * quarter of the smaller neighbouring split's pooled rows (the rule of m2_features_split, in calendar time). */
int m2_universe_cuts(const m2_dataset *events, int n, const double fractions[3], int64_t cut_ns[2]);

/* Builds the universe from n instruments' raw events (each with sessions, tick_size and instrument set, as
 * m2_import_csv_events or m2_synth_events leave them): cuts every instrument at the common cuts, computes its
 * features and targets, normalises with its own train rows, and lays everything out split-major in `out`. The
 * events are consumed (freed) whatever the result. An instrument without a train row is an error. */
int m2_universe_build(m2_dataset *events, int n, const m2_feature_opts *o, m2_dataset *out);

#endif
