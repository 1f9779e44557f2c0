/* Synthetic tick data: a seeded zero-intelligence limit-order-book simulator with planted predictable
 * structure (docs/CLI.md `mamba2_ticks synth`; the generating process is described in README.md). */
#ifndef MAMBA2_SYNTH_H
#define MAMBA2_SYNTH_H

#include <stdint.h>

#include "io/dataset.h"
#include "io/features.h"

/* What the informed traders act on (the planted target structure). */
typedef enum {
    M2_SIGNAL_NONE = 0,   /* no informed traders: only the book's own mechanics */
    M2_SIGNAL_LINEAR = 1, /* current L1 queue imbalance: a linear model on current features can learn it */
    M2_SIGNAL_MEMORY = 2, /* exponentially decaying integral of past noise-trader order flow */
} m2_signal;

typedef struct {
    int64_t ticks; /* rows (events that change the top of the book or trade) */
    int sessions;
    uint64_t seed;
    int signal; /* m2_signal */
    int levels; /* book levels kept per row (ds->book) and depth features (0: none), <= 10 */
    m2_feature_opts feat;
} m2_synth_opts;

/* ticks 200000, sessions 10, seed 1, signal memory, default feature options. */
void m2_synth_defaults(m2_synth_opts *o);

int m2_signal_from_name(const char *name); /* -1 if unknown */
const char *m2_signal_name(int signal);

/* Simulates the raw events: fills ds's raw arrays, n_rows, sessions, tick_size, instrument and source.
 * A pure function of the options. If latent is not NULL, *latent receives (malloc'd, [ticks]) the planted
 * variable as known after each row: the order-flow integral I_t for none/memory (for none it is computed but
 * drives nothing — a control), the queue imbalance for linear. */
int m2_synth_events(const m2_synth_opts *o, m2_dataset *ds, double **latent);

/* The events of m2_synth_events, one session at a time: fn gets a dataset holding that session's rows only
 * (sessions {0, n}, tick_size, instrument, source and the depth features set) and the planted variable of those
 * rows (m2_synth_events' latent), both valid during the call. Memory is one session, whatever o->ticks
 * (universe.c's pass 1). */
typedef int (*m2_synth_session_fn)(void *ctx, m2_dataset *session, const double *latent);
int m2_synth_each_session(const m2_synth_opts *o, m2_synth_session_fn fn, void *ctx);

/* m2_synth_events + m2_features_build: the dataset `mamba2_ticks synth` writes. */
int m2_synth_dataset(const m2_synth_opts *o, m2_dataset *ds, double **latent);

/* The decay time of the memory signal's order-flow integral, in rows. */
#define M2_SYNTH_MEMORY_TAU 300.0

#endif
