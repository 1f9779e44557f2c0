/* Streaming inference: one tick in, one prediction out (docs/MODEL.md, "Recurrent form"). The public C API for embedding a
 * trained model in a trading process.
 *
 *   m2_stream *s;
 *   m2_stream_options opt = m2_stream_defaults();
 *   opt.max_streams = 1;                                  (one instrument)
 *   if (m2_stream_open("runs/small/ckpt_1500.h5", &opt, &s)) { puts(m2_last_error()); return 1; }
 *   float x[F], pred[O];
 *   for each tick:
 *       if (first tick of a session) m2_stream_reset(s, 0);
 *       m2_stream_features(s, 0, &event, tick_size, NULL, raw);   (the training featuriser, from the event)
 *       m2_stream_standardize(s, raw, x);                 (or feed already z-scored rows, e.g. /features/X)
 *       m2_stream_step(s, 0, x, pred);                   pred[0..O) = the model's output for this tick
 *   while idle between ticks: m2_stream_warm(s, 1, NULL);  (sparse ticks: keeps the next step cached)
 *   to restart mid-session: m2_stream_snapshot(s, 0, buf, m2_stream_snapshot_bytes(s)) now, m2_stream_restore later
 *   m2_stream_close(s);
 *
 * A handle owns read-only weights packed for sequential access and, per stream (instrument), the recurrent
 * cache of every layer: the last K-1 conv inputs and the SSM state S [H,P,N]. Each stream starts at zero
 * (the state before a session's first tick).
 *
 * Guarantees: after open, step / step_batch / warm / reset / features / standardize / snapshot / restore allocate
 * nothing, take no lock and make no system call (tests/stream/test_stream_alloc.c checks the first). Outputs equal the chunked forward
 * (m2_model_forward) over the same session up to fp32 rounding.
 *
 * Threads: a handle is not thread-safe; use one handle per thread, or give threads disjoint streams and
 * serialise the calls. Streams of one handle share the weights, so S instruments cost one copy of them. */
#ifndef MAMBA2_STREAM_API_H
#define MAMBA2_STREAM_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The functions of the installed shared library (libmamba2_stream.so): everything else in it is hidden. */
#if defined(__GNUC__)
#define M2_STREAM_API __attribute__((visibility("default")))
#else
#define M2_STREAM_API
#endif

/* Error codes of every call that returns int: 0 success, 1 failure (out of memory, unreadable file), 2 bad
 * arguments or options. */
#define M2_STREAM_OK 0

/* The last error's message, one line (thread-local): what failed and why, naming the file or argument. */
M2_STREAM_API const char *m2_last_error(void);


typedef struct m2_stream m2_stream;

typedef struct {
    int max_streams; /* independent states allocated (instruments); step_batch advances up to this many */
    int bf16;        /* store the matrices as bf16 (half the bytes per tick; converted to fp32 as they are read) */
    float clip;      /* m2_stream_standardize clips z-scores to +-clip (the dataset's clip); 0: no clip */
} m2_stream_options;

/* max_streams 1, fp32 weights, clip 5. */
M2_STREAM_API m2_stream_options m2_stream_defaults(void);

/* Opens from a checkpoint (docs/FORMATS.md): parameters plus the feature statistics stored with them. */
M2_STREAM_API int m2_stream_open(const char *checkpoint, const m2_stream_options *opt, m2_stream **out);

M2_STREAM_API void m2_stream_close(m2_stream *s);

/* Zeroes the cache of one stream (0 <= stream < max_streams), or of every stream when stream < 0.
 * Call it at each session boundary: the state must not carry over from one session into the next. */
M2_STREAM_API void m2_stream_reset(m2_stream *s, int stream);

/* Advances one stream by one tick: x [F] z-scored features in, pred [O] out. M2_EUSAGE (with a message)
 * only when stream is out of range. */
M2_STREAM_API int m2_stream_step(m2_stream *s, int stream, const float *x, float *pred);

/* Advances n distinct streams by one tick each, together, so every weight read serves n ticks.
 * streams [n] names them (NULL: streams 0..n-1); X [n,F] row i is stream streams[i]'s tick, pred [n,O].
 * Same results as n calls of m2_stream_step (up to fp32 rounding). M2_EUSAGE when n or an index is out of
 * range; repeated indices are not detected (each stream must appear at most once per call). */
M2_STREAM_API int m2_stream_step_batch(m2_stream *s, int n, const int *streams, const float *X, float *pred);

/* Keeps a step's path in this core's caches while the process waits for the next tick, changing nothing a step
 * would see: a tick of the model on a private state (the instructions, weights and buffers a step of one stream
 * uses), then a read of the states of the n streams named (as in step_batch; n = 0: code and weights only).
 * Between sparse ticks the rest of a trading process evicts all of these, and a step then waits on DRAM for each,
 * several times its cached time (BENCHMARKS.md, "cold steps"); called from the idle loop, or when a tick is known
 * to be on its way, it costs about one cold step and leaves the next step near its cached speed. Like step: no
 * allocation, lock or system call; not thread-safe. M2_EUSAGE when n or an index is out of range. */
M2_STREAM_API int m2_stream_warm(m2_stream *s, int n, const int *streams);

/* Snapshots of one stream's recurrent state, for a process that restarts mid-session or hands a stream to a standby
 * process without replaying the session's ticks (docs/FORMATS.md, "Stream state snapshots"). A snapshot is
 * m2_stream_snapshot_bytes(s) bytes in native byte order: a header naming the model (its shape and a fingerprint of
 * its parameters) and a checksum, then the state in a canonical order and the stream's last event (m2_stream_features'
 * memory). It restores into any handle opened from the same parameters, with fp32 or bf16 weights and at any CPU
 * level (the state is fp32 in all), into any stream index; the next step then continues exactly as the saved stream
 * would have. Neither call allocates.
 * m2_stream_snapshot: M2_EUSAGE when stream is out of range or bytes < m2_stream_snapshot_bytes(s).
 * m2_stream_restore: M2_EUSAGE, with a message naming the reason, for a buffer that is not a snapshot, another format
 * version, a model of another shape or other parameters, the wrong size (truncated), a checksum mismatch, a
 * non-finite value or an invalid last event; the stream is then left as it was. */
M2_STREAM_API size_t m2_stream_snapshot_bytes(const m2_stream *s);
M2_STREAM_API int m2_stream_snapshot(const m2_stream *s, int stream, void *buf, size_t bytes);
M2_STREAM_API int m2_stream_restore(m2_stream *s, int stream, const void *buf, size_t bytes);

/* One market event of an instrument, as the training data's raw columns hold it (docs/FORMATS.md "Tick dataset"):
 * an event that changed the best quotes or traded. */
typedef struct {
    int64_t ts_ns;                         /* ns since the Unix epoch, UTC */
    double bid_px, ask_px, bid_sz, ask_sz; /* the best quotes after the event (an empty side: size 0) */
    double trade_sz;                       /* the event's trade size; 0 (or NaN) when it did not trade */
    int side;                              /* the trade's aggressor: +1 buy, -1 sell, 0 none */
} m2_stream_event;

/* The featuriser of the training data, live: raw [F] = the features of event ev of this stream, computed by the very
 * code that made the dataset's rows from the same columns (so they match /features/X's before z-scoring bit for
 * bit), given the stream's previous event, which the handle keeps (none after open, m2_stream_reset or a restore of a
 * snapshot taken before any: the event then starts a session, as a session's first row does). tick_size: the
 * instrument's. book: for a model with depth features (F > 8: trained on LOBSTER data with --depth k), the
 * event's book in LOBSTER order, ask price, ask size, bid price, bid size for levels 1..k, an empty level of size
 * 0; NULL otherwise. Then m2_stream_standardize (or _instrument) and m2_stream_step. M2_EUSAGE, the stream's
 * memory unchanged, for: stream out of range; a model whose features are not the featuriser's (the checkpoint's
 * names say so); tick_size <= 0; a non-finite or negative price or size (named); time going back; a missing book. */
M2_STREAM_API int m2_stream_features(m2_stream *s, int stream, const m2_stream_event *ev, double tick_size,
                                     const double *book, double *raw);

/* raw [F] features as computed by the featuriser (docs/FORMATS.md) -> x [F] z-scored with the training
 * statistics and clipped, bit for bit the dataset's /features/X row. For a checkpoint of one instrument's data. A
 * model trained on a universe (docs/FORMATS.md "Universe") z-scored each instrument with its own statistics, all in
 * the checkpoint: m2_stream_standardize_instrument takes the instrument (m2_stream_instrument finds it by name), and
 * m2_stream_standardize on such a handle fills x with NaN (and sets m2_last_error) rather than guess. */
M2_STREAM_API void m2_stream_standardize(const m2_stream *s, const double *raw, float *x);
M2_STREAM_API int m2_stream_standardize_instrument(const m2_stream *s, int instrument, const double *raw, float *x);
/* Instruments whose statistics the checkpoint holds (1 for one instrument's data, I for a universe). */
M2_STREAM_API int m2_stream_n_instruments(const m2_stream *s);
/* The index of the instrument of that name in the checkpoint, or -1 (m2_last_error says so). */
M2_STREAM_API int m2_stream_instrument(const m2_stream *s, const char *name);
/* The tick size the instrument's training data was featurised with (the tick_size m2_stream_features wants), or 0
 * when the checkpoint predates keeping it (2026-12-04) or the index is out of range. */
M2_STREAM_API double m2_stream_tick_size(const m2_stream *s, int instrument);

M2_STREAM_API int m2_stream_n_features(const m2_stream *s);
M2_STREAM_API int m2_stream_n_targets(const m2_stream *s);
M2_STREAM_API int m2_stream_max_streams(const m2_stream *s);

/* Bytes of weights one tick reads (the packed matrices and vectors; bf16 halves the matrices' share). */
M2_STREAM_API size_t m2_stream_weight_bytes(const m2_stream *s);

/* Bytes of recurrent state per stream (conv tails and S of every layer). */
M2_STREAM_API size_t m2_stream_state_bytes(const m2_stream *s);

/* The instruction set of this handle's kernels, chosen at open from the CPU and capped by the environment
 * variable MAMBA2_CPU=scalar|avx2|avx512: "scalar", "avx2" or "avx512", or "avx512+bf16" when bf16 weights
 * take the AVX-512-BF16 dot product (at the avx512 level on a CPU that has it), "avx512+bf16/avx512" when
 * batches of streams take the widening AVX-512 kernel instead because it measured faster at open on this core
 * (the same outputs either way). */
M2_STREAM_API const char *m2_stream_cpu(const m2_stream *s);

#ifdef __cplusplus
}
#endif

#endif
