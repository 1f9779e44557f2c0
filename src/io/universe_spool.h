/* The universe writer's spool (universe.c; FORMATS.md "Universe import"), shared with its per-instrument pass
 * (universe_rows.c): one unlinked file per column, each instrument's rows contiguous in each, written in pieces and
 * read back a block of rows at a time. Internal to src/io. */
#ifndef MAMBA2_UNIVERSE_SPOOL_H
#define MAMBA2_UNIVERSE_SPOOL_H

#include <stdint.h>

#include "io/dataset.h"
#include "io/features.h"
#include "io/universe.h"

typedef struct {
    int64_t first, rows, sessions; /* first: the instrument's first row in the column files */
    int64_t extra_at, sessions_at; /* where its extra features and session offsets begin in their files */
    int n_extra;
    double tick;
    char name[64], source[64];
} m2_spooled;

typedef struct {
    int64_t day;      /* UTC day number */
    int64_t rows, at; /* the instrument's rows of that day, and where their times start in the spool */
    int inst;         /* the instrument: a part holds one instrument's rows, in time order */
} m2_day_part;

enum { M2_SPOOL_FILES = 10 }; /* the 8 raw columns, the extra features, the session offsets */

typedef struct {
    int fd[M2_SPOOL_FILES];
    int64_t end[M2_SPOOL_FILES];
    m2_spooled *inst;
    m2_day_part *parts;
    int64_t n_parts, cap_parts;
} m2_spool;

/* Rows [lo, hi) of instrument k into the raw arrays and `extra` of *blk (sized for them by the caller). */
int m2_spool_rows(const m2_spool *sp, int k, int64_t lo, int64_t hi, m2_dataset *blk);

/* Instrument k's session offsets [sessions + 1], allocated. */
int m2_spool_sessions(const m2_spool *sp, int k, int64_t **sessions);

/* *count = the rows with time < t among n time-ordered times starting at spool offset `at` (a binary search that
 * reads one time per step: no column is held in memory). */
int m2_spool_count_before(const m2_spool *sp, int64_t at, int64_t n, int64_t t, int64_t *count);

/* Pass 2 for instrument i with `count` rows in train, val and test: its sessions (cut at the splits) are read back
 * in blocks of rows, the features computed, normalised with its train statistics, checked and written at at[k]
 * (advanced), their sessions listed in l[k], and its statistics recorded in meta (universe.c's describe). */
int m2_universe_put_instrument(const m2_spool *sp, int i, const int64_t count[3], const m2_feature_opts *o,
                               m2_dataset_writer *dw, int64_t at[3], m2_session_list l[3], m2_dataset *meta, int n);

#endif
