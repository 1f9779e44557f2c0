/* Tick datasets (docs/FORMATS.md "Tick dataset"): the in-memory form, the HDF5 reader/writer, and the window
 * sampler. Training reads whole splits into memory once (contiguous, uncompressed /features/X), so a
 * window costs a pointer offset, not an HDF5 call. */
#ifndef MAMBA2_DATASET_H
#define MAMBA2_DATASET_H

#include <stdint.h>

enum { M2_SPLIT_TRAIN = 0, M2_SPLIT_VAL = 1, M2_SPLIT_TEST = 2 };

#define M2_MAX_FEATURES 64
#define M2_MAX_TARGETS 16

typedef struct {
    int64_t n_rows;
    int n_features, n_targets;
    float *X;                      /* [n_rows, F] z-scored, clipped features */
    float *y;                      /* [n_rows, O] targets in bp, NaN where a horizon crosses a session end */
    int64_t n_sessions;
    int64_t *sessions;             /* [n_sessions + 1] row offsets */
    int64_t split[3][2];           /* [begin, end) rows of train, val, test */
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

/* Opens and validates (schema, version, shapes, splits in bounds, sessions monotone) and reads features,
 * targets and index into memory; with load_raw also the /raw arrays. One clear error per problem. */
int m2_dataset_read(const char *path, m2_dataset *ds, int load_raw);

/* Writes crash-safely (temporary name in the same folder, fsync, rename). */
int m2_dataset_write(const char *path, const m2_dataset *ds);

/* m2_dataset_write plus extra content: `extra` (may be NULL) is called with the open HDF5 file (an hid_t) after
 * the dataset is written and before the atomic commit; a non-zero return abandons the file. */
int m2_dataset_write_with(const char *path, const m2_dataset *ds, int (*extra)(int64_t h5file, void *ctx),
                          void *ctx);

void m2_dataset_free(m2_dataset *ds);

/* Validates an in-memory dataset as the reader validates a file (`origin` names it in the message): F and O
 * within M2_MAX_*, sessions from 0 to n_rows strictly increasing, splits inside the rows, in order and not
 * overlapping, horizons positive, finite statistics with std > 0, clip > 0. */
int m2_dataset_check(const m2_dataset *ds, const char *origin);

/* Window sampler over one split. A window is T consecutive rows inside one session and inside the split,
 * and each of its loss positions (t >= burn_in) has at least one finite target. */
typedef struct {
    const m2_dataset *ds;
    int split, T, burn_in;
    int64_t n_starts;
    int64_t *starts;               /* valid window start rows, ascending */
} m2_sampler;

int m2_sampler_init(m2_sampler *s, const m2_dataset *ds, int split, int T, int burn_in);
void m2_sampler_free(m2_sampler *s);

/* Start row of window `index` (0 <= index < global_batch) of the global batch of `step`: a pure function of
 * (seed, step, index). Within one step distinct indices give distinct windows (a keyed permutation of the valid
 * starts), so ranks that take disjoint index ranges draw disjoint windows, and the global batch is the same
 * whatever the rank count. Every valid start is equally likely. */
int64_t m2_sampler_start(const m2_sampler *s, uint64_t seed, int64_t step, int64_t index);

/* Copies window rows [start, start+T) into X [T,F] and y [T,O]. */
void m2_sampler_copy(const m2_sampler *s, int64_t start, float *X, float *y);

#endif
