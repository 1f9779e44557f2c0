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

/* the 8 raw columns, the extra features, the session offsets, and pass 2's cache of one instrument's train
 * features and targets (universe_rows.c: computed once, read back for the deviations and the write) */
enum { M2_SPOOL_CACHE = 10, M2_SPOOL_FILES = 11 };

typedef struct {
    int fd[M2_SPOOL_FILES];
    int64_t end[M2_SPOOL_FILES];
    m2_spooled *inst;
    m2_day_part *parts;
    int64_t n_parts, cap_parts;
} m2_spool;

/* Opens the spool of n instruments: unlinked files next to `path`. */
int m2_spool_open(m2_spool *sp, const char *path, int n);
void m2_spool_close(m2_spool *sp);

/* The sink of instrument k's pieces: m2_spool_piece (an m2_universe_emit) appends a piece's rows and sessions. */
typedef struct {
    m2_spool *sp;
    int k;
} m2_spool_sink;
int m2_spool_piece(void *sink, const m2_dataset *piece);

/* Rows [lo, hi) of instrument k into the raw arrays and `extra` of *blk (sized for them by the caller). */
int m2_spool_rows(const m2_spool *sp, int k, int64_t lo, int64_t hi, m2_dataset *blk);

/* n bytes at byte `at` of the cache file (M2_SPOOL_CACHE), written or read back. */
int m2_spool_cache_put(const m2_spool *sp, int64_t at, const void *p, size_t n);
int m2_spool_cache_get(const m2_spool *sp, int64_t at, void *p, size_t n);

/* Instrument k's session offsets [sessions + 1], allocated. */
int m2_spool_sessions(const m2_spool *sp, int k, int64_t **sessions);

/* *count = the rows with time < t among n time-ordered times starting at spool offset `at` (a binary search that
 * reads one time per step: no column is held in memory). */
int m2_spool_count_before(const m2_spool *sp, int64_t at, int64_t n, int64_t t, int64_t *count);

/* Where pass 2 puts an instrument's rows: the writer, the next row of each split at[3] (advanced), the session
 * lists l[3] (each session listed with instrument `inst`), and the statistics: computed from its train rows and
 * recorded in meta (universe.c's describe; meta has n instruments), or, when `mean` is set, frozen (an append:
 * mean/std [M2_MAX_FEATURES], meta NULL). */
typedef struct {
    m2_dataset_writer *dw;
    int64_t *at;
    m2_session_list *l;
    m2_dataset *meta;
    int n;
    const double *mean, *std;
    int inst;
} m2_put_target;

/* Pass 2 for spooled instrument i with `count` rows in train, val and test: its sessions (cut at the splits) are
 * read back in blocks of rows, the features computed, normalised, checked and written (m2_put_target). */
int m2_universe_put_instrument(const m2_spool *sp, int i, const int64_t count[3], const m2_feature_opts *o,
                               const m2_put_target *t);

#endif
