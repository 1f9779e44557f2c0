/* The ticks of a universe's split in the order they happened across instruments (docs/CLI.md, mamba2_stream
 * --per-instrument): a k-way merge of the instruments' rows by timestamp, cut into batches that a trading
 * process would see together, so each batch can go through the batched streaming engine in one call.
 *
 * Order: ticks come out sorted by (timestamp, instrument index); an instrument's own rows keep their order.
 * Batches: a batch starts at the earliest tick left and takes the following ticks while their timestamp is at most
 * window_ns after the batch's first and their instrument is not in the batch yet (one tick per instrument: a
 * stream steps once per call). Window 0 batches exactly the simultaneous ticks of different instruments.
 *
 * Memory: a cursor and a small buffer of timestamps per instrument, read through a callback (a hyperslab of
 * /raw/ts_ns for a file), so the split's timestamps are never held whole. */
#ifndef MAMBA2_REPLAY_H
#define MAMBA2_REPLAY_H

#include <stdint.h>

#include "io/dataset.h"

/* Fills ts[0..n) with the timestamps (ns) of dataset rows [row, row + n). */
typedef int (*m2_replay_fetch)(void *ctx, int64_t row, int64_t n, int64_t *ts);

typedef struct m2_replay_cursor m2_replay_cursor;

typedef struct {
    const m2_dataset *ds;
    int64_t window_ns;
    m2_replay_fetch fetch;
    void *ctx;
    int n_inst;
    m2_replay_cursor *cur; /* [n_inst] */
    int64_t *parts;        /* session parts (begin, end) grouped by instrument; cursor i walks its own */
    int32_t *heap;         /* instruments with ticks left, a min-heap on (next timestamp, instrument) */
    int heap_n;
    int64_t *in_batch; /* [n_inst] number of the batch an instrument last joined */
    int64_t batch;
    int64_t *ts_buf; /* [n_inst * M2_REPLAY_BUF] */
} m2_replay;

#define M2_REPLAY_BUF 256

/* Prepares the replay of `split` of ds (its session parts, m2_dataset_session_part). Fails when window_ns < 0. */
int m2_replay_init(m2_replay *r, const m2_dataset *ds, int split, int64_t window_ns, m2_replay_fetch fetch, void *ctx);

/* The next batch: *n ticks (0 when the split is done; at most n_inst), tick i at dataset row rows[i] of
 * instrument streams[i], reset[i] = 1 when it is the first row of a session part (the stream's state must be
 * zeroed before it). Fails, naming the instrument and row, when an instrument's timestamps go back in time. */
int m2_replay_next(m2_replay *r, int64_t *rows, int *streams, unsigned char *reset, int *n);

void m2_replay_free(m2_replay *r);

/* The fetch for a tick dataset file (already validated by m2_dataset_read): rows of its /raw/ts_ns. Fails with one
 * line when the file has no timestamps (written without /raw). */
typedef struct m2_replay_file m2_replay_file;
int m2_replay_file_open(const char *path, m2_replay_file **f);
int m2_replay_file_fetch(void *f, int64_t row, int64_t n, int64_t *ts);
void m2_replay_file_close(m2_replay_file *f);

#endif
