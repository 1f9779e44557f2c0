/* Tick datasets (docs/FORMATS.md "Tick dataset", "Universe"): the in-memory form, the HDF5 reader/writer, and the window
 * sampler. The reader maps the contiguous, uncompressed /features/X and /targets/y read-only (the page cache is
 * shared by the ranks of a node and a rank's private memory does not grow with the rows), so a window costs a
 * pointer offset, not an HDF5 call. A dataset is a universe of one or more instruments laid out split-major
 * (all train rows, then val, then test; inside a split instrument by instrument, in time order), so every split
 * stays one row range and no session crosses an instrument. */
#ifndef MAMBA2_DATASET_H
#define MAMBA2_DATASET_H

#include <stddef.h>
#include <stdint.h>

enum { M2_SPLIT_TRAIN = 0, M2_SPLIT_VAL = 1, M2_SPLIT_TEST = 2 };

#define M2_TICKS_VERSION 2 /* 2 adds /universe; a file without it is written as version 1 */
#define M2_MAX_FEATURES  64
#define M2_MAX_TARGETS   16

typedef struct {
    int64_t n_rows;
    int n_features, n_targets;
    float *X; /* [n_rows, F] z-scored, clipped features */
    float *y; /* [n_rows, O] targets in bp, NaN where a horizon crosses a session end */
    int64_t n_sessions;
    int64_t *sessions;   /* [n_sessions + 1] row offsets */
    int64_t split[3][2]; /* [begin, end) rows of train, val, test */
    char feature_names[M2_MAX_FEATURES][32];
    double mean[M2_MAX_FEATURES], std[M2_MAX_FEATURES];
    float clip;
    int32_t horizons[M2_MAX_TARGETS];
    char instrument[64], source[64];
    double tick_size;
    /* raw event arrays (optional in memory: NULL unless loaded with raw = 1 or made by synth/import) */
    int64_t *ts_ns;
    double *bid_px, *ask_px, *bid_sz, *ask_sz, *trade_px, *trade_sz;
    int8_t *side;
    /* extra per-row features appended after the defaults (LOBSTER depth imbalance, features.h), [n_rows, n_extra];
     * held from import until the features are computed */
    int n_extra;
    float *extra;
    /* optional book depth, LOBSTER orderbook order per row: ask px, ask size, bid px, bid size for levels 1..L
     * (an empty level has size 0), [n_rows, 4 L]; synth --levels fills it */
    int book_levels;
    double *book;
    /* the universe: n_instruments >= 1 (a file without /universe is a universe of one) */
    int n_instruments;
    char (*inst_name)[64];        /* [I] */
    double *inst_mean, *inst_std; /* [I, F] each instrument's train-split statistics (raw units) */
    double *inst_tick;            /* [I] tick size */
    int32_t *session_inst;        /* [n_sessions] instrument of each session */
    int64_t cut_ns[2];            /* calendar cuts: train < cut_ns[0] <= val < cut_ns[1] <= test (ns, UTC) */
    /* set by the reader when X and y point into a read-only mapping of the file (not malloc'd) */
    void *map;
    size_t map_len;
} m2_dataset;

/* Parses "train" / "val" / "test"; -1 otherwise. */
int m2_split_from_name(const char *name);
const char *m2_split_name(int split);

/* The part of session s inside a split: rows [*begin, *end), empty when *begin >= *end. Windows, evaluation and
 * streaming all work on such parts, so that nothing crosses a session or a split boundary. */
static inline void m2_dataset_session_part(const m2_dataset *ds, int split, int64_t s, int64_t *begin, int64_t *end)
{
    int64_t lo = ds->split[split][0], hi = ds->split[split][1];
    *begin = ds->sessions[s] > lo ? ds->sessions[s] : lo;
    *end = ds->sessions[s + 1] < hi ? ds->sessions[s + 1] : hi;
}

/* Allocates the universe arrays for I instruments (inst_* and, when n_sessions > 0, session_inst zeroed). */
int m2_dataset_alloc_universe(m2_dataset *ds, int n_instruments);

/* Index of the instrument named `name`, -1 if none. */
int m2_dataset_find_instrument(const m2_dataset *ds, const char *name);

/* Opens and validates (schema, version, shapes, splits in bounds, sessions monotone) and reads features,
 * targets and index into memory; with load_raw also the /raw arrays. One clear error per problem. */
int m2_dataset_read(const char *path, m2_dataset *ds, int load_raw);

/* Writes crash-safely (temporary name in the same folder, fsync, rename). */
int m2_dataset_write(const char *path, const m2_dataset *ds);

/* m2_dataset_write plus extra content: `extra` (may be NULL) is called with the open HDF5 file (an hid_t) after
 * the dataset is written and before the atomic commit; a non-zero return abandons the file. */
int m2_dataset_write_with(const char *path, const m2_dataset *ds, int (*extra)(int64_t h5file, void *ctx), void *ctx);

/* A universe file written in pieces (universe.c), so that only the index and statistics are held in memory:
 * open creates the temporary file of schema `version` (M2_TICKS_VERSION; 1: one instrument split by rows, no
 * /universe) with /features/X, /targets/y and /raw for n_rows rows (contiguous, uncompressed:
 * FORMATS.md "Universe import"); put copies rows [begin, end) of src (features, targets, raw events) to row `at`;
 * finish validates `meta` (every field but X, y and the raw arrays, which stay NULL; session_inst set exactly
 * when version > 1), writes the index, attributes and (version > 1) /universe and commits atomically; abort (also after a failed put) removes the temporary file. */
typedef struct m2_dataset_writer m2_dataset_writer;
int m2_dataset_writer_open(m2_dataset_writer **w, const char *path, int64_t n_rows, int n_features, int n_targets,
                           int version);
int m2_dataset_writer_put(m2_dataset_writer *w, int64_t at, const m2_dataset *src, int64_t begin, int64_t end);
/* Copies rows [begin, end) of the dataset `old`, read from the file `path` (its X and y in memory or mapped, its
 * /raw columns read in chunks), to row `at`. */
int m2_dataset_writer_copy(m2_dataset_writer *w, int64_t at, const char *path, const m2_dataset *old, int64_t begin,
                           int64_t end);
int m2_dataset_writer_finish(m2_dataset_writer *w, const m2_dataset *meta);
/* finish with extra content, as m2_dataset_write_with: `extra` writes into the open file before the commit. */
int m2_dataset_writer_finish_with(m2_dataset_writer *w, const m2_dataset *meta, int (*extra)(int64_t h5file, void *ctx),
                                  void *ctx);
void m2_dataset_writer_abort(m2_dataset_writer *w);

void m2_dataset_free(m2_dataset *ds);

/* Validates an in-memory dataset as the reader validates a file (`origin` names it in the message): F and O
 * within M2_MAX_*, sessions from 0 to n_rows strictly increasing, splits inside the rows, in order and not
 * overlapping, horizons positive, finite statistics with std > 0, clip > 0. */
int m2_dataset_check(const m2_dataset *ds, const char *origin);

/* Window sampler over one split. A window is T consecutive rows inside one session and inside the split,
 * and each of its loss positions (t >= burn_in) has at least one finite target. The valid starts are kept as
 * runs of consecutive rows (memory grows with the sessions, not with the rows). */
typedef struct {
    int64_t first;  /* first valid start of the run */
    int64_t before; /* valid starts in all earlier runs */
} m2_start_run;

typedef struct {
    const m2_dataset *ds;
    int split, T, burn_in;
    int64_t n_starts;
    int64_t n_runs;
    m2_start_run *runs;  /* ascending; run k covers starts [first, first + runs[k+1].before - before) */
    int64_t *inst_first; /* [I+1]: instrument i's starts are [inst_first[i], inst_first[i+1]) */
    int32_t *active;     /* the n_active instruments with at least one start */
    int n_active;
    int uniform; /* 1: draw the instrument uniformly first (m2_sampler_set_mode) */
} m2_sampler;

int m2_sampler_init(m2_sampler *s, const m2_dataset *ds, int split, int T, int burn_in);
void m2_sampler_free(m2_sampler *s);

/* "proportional" (default: every valid window equally likely, so instruments in proportion to their windows) or
 * "uniform" (each step's windows spread evenly over the instruments that have windows, then uniformly within
 * one). Both stay pure functions of (seed, step, index), distinct within a step. */
int m2_sampler_set_mode(m2_sampler *s, const char *mode);

/* The j-th valid start row (0 <= j < n_starts), in ascending order. */
int64_t m2_sampler_row(const m2_sampler *s, int64_t j);

/* Start row of window `index` (0 <= index < global_batch) of the global batch of `step`: a pure function of
 * (seed, step, index). Within one step distinct indices give distinct windows (a keyed permutation of the valid
 * starts), so ranks that take disjoint index ranges draw disjoint windows, and the global batch is the same
 * whatever the rank count. Every valid start is equally likely. */
int64_t m2_sampler_start(const m2_sampler *s, uint64_t seed, int64_t step, int64_t index);

/* Copies window rows [start, start+T) into X [T,F] and y [T,O]. */
void m2_sampler_copy(const m2_sampler *s, int64_t start, float *X, float *y);

#endif
