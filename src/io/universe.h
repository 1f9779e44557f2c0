/* A universe of instruments in one tick dataset (FORMATS.md "Universe"): common calendar-time cuts, features
 * normalised per instrument with that instrument's train statistics, rows laid out split-major. Written in a
 * bounded-memory stream (FORMATS.md "Universe import"): what the source makes (one piece of an instrument's events)
 * and one block of rows are held at a time. */
#ifndef MAMBA2_UNIVERSE_H
#define MAMBA2_UNIVERSE_H

#include <stdint.h>

#include "io/dataset.h"
#include "io/features.h"

/* Takes one piece of an instrument's raw events (sessions, tick_size and instrument set, as
 * m2_import_events_pieces or m2_synth_each_session leave them): pieces are in time order; sessions[0..n_sessions)
 * are the sessions beginning in the piece (sessions[n_sessions] = n_rows) and rows before sessions[0] continue the
 * previous piece's last session (the first piece begins one: sessions[0] = 0), so a piece need not end at a
 * session's end; the tick size is the last piece's (the import infers it from all of an instrument's rows). */
typedef int (*m2_universe_emit)(void *sink, const m2_dataset *piece);

/* Produces instrument k's raw events through emit(sink, piece), in one piece or many (a source that makes them a
 * session at a time keeps pass 1 bounded too); called once per instrument, in order. */
typedef int (*m2_universe_source)(void *ctx, int k, m2_universe_emit emit, void *sink);

/* Builds the universe of n instruments into the file `path` (atomically): pass 1 takes each instrument's events
 * once, piece by piece, and spools them to an unlinked temporary file next to `path`, counting rows per instrument and UTC day;
 * the two calendar cuts come from those counts (the times at the pooled row quantiles f_train and f_train + f_val,
 * each moved to the UTC midnight before or after when that moves it by at most a quarter of the smaller
 * neighbouring split's pooled rows: the rule of m2_features_split in calendar time); pass 2 reads one instrument
 * back at a time in blocks of rows (universe_rows.c), cuts it, computes its features and targets, normalises them with its own train rows and writes
 * its three split parts at their places. `source` names the file's origin (NULL: instrument 0's). `meta` receives the index and statistics (X, y and raw arrays NULL; free
 * it with m2_dataset_free). An instrument without a train row is an error. */
int m2_universe_write(const char *path, int n, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                      const char *source, m2_dataset *meta);

/* The same writer for one instrument as a file of version 1 (FORMATS.md "Tick dataset"; what `mamba2_ticks import`
 * makes of one CSV file): the splits cut at row fractions of its rows (m2_features_split's rule on the spooled
 * session index) instead of calendar time, no /universe; the same bounded memory. `extra` (may be NULL) adds content
 * to the open file before the commit (synth's /synth/latent), as m2_dataset_write_with's. */
int m2_universe_write_one(const char *path, m2_universe_source get, void *ctx, const m2_feature_opts *o,
                          int (*extra)(int64_t h5file, void *ctx), void *extra_ctx, m2_dataset *meta);

/* A growing session index: the first row and the instrument of each session. */
typedef struct {
    int64_t *row;
    int32_t *inst;
    int64_t n, cap;
} m2_session_list;

int m2_session_list_add(m2_session_list *l, int64_t row, int inst);

#endif
