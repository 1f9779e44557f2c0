/* stream_example: the streaming C API (mamba2_stream.h, installed with libmamba2_stream) embedded in a minimal "trading process".
 *
 *   stream_example CHECKPOINT [--instruments N] [--raw] [--tick-size T] [--state FILE]
 *
 * Reads ticks from stdin, one per line, and writes one prediction line per tick to stdout:
 *   in:  "<instrument> <x_1> ... <x_F>"   instrument in [0, N); x = the tick's F features
 *   in:  "reset <instrument>"             the instrument's next tick starts a new session
 *   in:  "event <instrument> <ts_ns> <bid_px> <ask_px> <bid_sz> <ask_sz> <trade_sz> <side>"
 *                                         a market event: its features computed by the training featuriser
 *                                         (m2_stream_features; the tick size: --tick-size T, else
 *                                         the training data's, m2_stream_tick_size), then standardised as --raw
 *   out: "<instrument> <pred_1> ... <pred_O>"
 * By default x are already z-scored (like the dataset's /features/X); with --raw they are the featuriser's raw
 * values and are standardised with the statistics stored in the checkpoint (m2_stream_standardize_instrument: for a
 * model trained on a universe, instrument i takes the universe's i-th instrument's statistics).
 * With --state FILE the instruments' states outlive the process: restored from FILE at start-up when it exists, and
 * written back at the end of input (atomically: a temporary file renamed over it), so that a process restarted
 * mid-session continues each instrument's session where the last one stopped instead of replaying its ticks.
 *
 * The calls a real process makes, in order:
 *   m2_stream_open          once, at start-up: reads the checkpoint, packs the weights, allocates N states
 *   m2_stream_reset         at each session boundary of an instrument (states start at zero after open)
 *   m2_stream_features      per event, for "event" lines: the features the model was trained on, from the event
 *   m2_stream_standardize_instrument   per tick, if the feed gives raw features (and after m2_stream_features)
 *   m2_stream_step          per tick: allocation-free, lock-free, no system call
 *   m2_stream_warm          in the idle branch of the event loop: when no tick has come for IDLE_MS, this example
 *                           warms the last instrument that ticked (the rest of a process evicts the model between
 *                           sparse ticks; warm brings the next step back to its cached time, and changes no output)
 *   m2_stream_restore       at start-up, each instrument's state from the last run's m2_stream_snapshot (--state)
 *   m2_stream_snapshot      at shutdown (or periodically, or on a hand-over to a standby process)
 *   m2_stream_close         at shutdown
 * When ticks of many instruments arrive together, m2_stream_step_batch advances them in one call (each weight
 * read then serves all of them).
 *
 * Build against an installed mamba2 (cmake --install build --prefix PREFIX), with CMake (examples/CMakeLists.txt):
 *   cmake -S examples -B build-example -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build-example
 * or with pkg-config:
 *   cc stream_example.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs mamba2_stream)
 * The project's own build also makes it (target stream_example, tests/stream). */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mamba2_stream.h>

enum { MAX_F = 256, MAX_O = 64, LINE_MAX_BYTES = 16384, IDLE_MS = 1 };

static int usage(void)
{
    fprintf(stderr,
            "usage: stream_example CHECKPOINT [--instruments N] [--raw] [--tick-size T] [--state FILE]   (ticks "
            "on stdin, see the source)\n");
    return 2;
}

/* The checkpoint's instrument whose statistics and tick size apply to this program's instrument id: a universe's
 * checkpoint holds each instrument's, and id i is its i-th (a real process would map its symbols once at start-up
 * with m2_stream_instrument); a single instrument's checkpoint holds one. */
static int instrument_of(const m2_stream *s, long id) { return m2_stream_n_instruments(s) > 1 ? (int)id : 0; }

/* Standardises (raw != 0) or takes as they are the F values v of instrument id, steps its stream and prints the
 * prediction line. */
static const char *run_tick(m2_stream *s, long id, const double *v, int raw, int *ticked)
{
    const int F = m2_stream_n_features(s), O = m2_stream_n_targets(s);
    float x[MAX_F], pred[MAX_O];
    if (raw) {
        if (m2_stream_standardize_instrument(s, instrument_of(s, id), v, x) != M2_STREAM_OK) return m2_last_error();
    } else
        for (int f = 0; f < F; f++) x[f] = (float)v[f];
    if (m2_stream_step(s, (int)id, x, pred) != M2_STREAM_OK) return m2_last_error();
    *ticked = (int)id;
    printf("%ld", id);
    for (int o = 0; o < O; o++) printf(" %.9g", pred[o]);
    printf("\n");
    return NULL;
}

/* "event i ts bid ask bid_sz ask_sz trade_sz side" (after the word): the event's features, then the tick. The tick
 * size: --tick-size, else the one the instrument's training data had (kept in the checkpoint). */
static const char *handle_event(m2_stream *s, char *p, double tick_size, int *ticked)
{
    char *end;
    long id = strtol(p, &end, 10);
    if (end == p) return "event line: no instrument";
    if (!(tick_size > 0)) tick_size = m2_stream_tick_size(s, instrument_of(s, id));
    if (!(tick_size > 0)) return "event lines need --tick-size (the checkpoint keeps no tick size)";
    m2_stream_event ev;
    p = end;
    ev.ts_ns = strtoll(p, &end, 10);
    double *field[5] = {&ev.bid_px, &ev.ask_px, &ev.bid_sz, &ev.ask_sz, &ev.trade_sz};
    for (int i = 0; i < 5 && end != p; i++) {
        p = end;
        *field[i] = strtod(p, &end);
    }
    if (end == p) return "event line: expected ts_ns bid_px ask_px bid_sz ask_sz trade_sz side";
    p = end;
    ev.side = (int)strtol(p, &end, 10);
    if (end == p) return "event line: no side";
    if (id < 0 || id >= m2_stream_max_streams(s)) return "event line: instrument out of range";
    double v[MAX_F];
    if (m2_stream_features(s, (int)id, &ev, tick_size, NULL, v) != M2_STREAM_OK) return m2_last_error();
    return run_tick(s, id, v, 1, ticked);
}

/* One input line: a reset, an event or a tick; a tick is run through the model and printed (*ticked = its
 * instrument). Returns NULL, or what was wrong with the line (a problem of this program's input, not of the
 * library). */
static const char *handle_line(m2_stream *s, char *line, int raw, double tick_size, int *ticked)
{
    const int F = m2_stream_n_features(s);
    char *p = line, *end;
    if (strncmp(p, "event", 5) == 0) return handle_event(s, p + 5, tick_size, ticked);
    if (strncmp(p, "reset", 5) == 0) {
        long id = strtol(p + 5, &end, 10);
        if (end == p + 5 || id < 0 || id >= m2_stream_max_streams(s)) return "bad reset line";
        m2_stream_reset(s, (int)id);
        return NULL;
    }
    long id = strtol(p, &end, 10);
    if (end == p) return NULL; /* blank line */
    double v[MAX_F];
    for (int f = 0; f < F; f++) {
        p = end;
        v[f] = strtod(p, &end);
        if (end == p) return "tick line: fewer features than the model has";
    }
    return run_tick(s, id, v, raw, ticked);
}

/* --state FILE holds one snapshot per instrument, back to back. Restores them; a missing file is a first run (0).
 * Otherwise returns what was wrong (the library's message names it: another checkpoint, a truncated file, ...). */
static const char *load_states(m2_stream *s, const char *path, unsigned char *snap, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? NULL : strerror(errno);
    const char *why = NULL;
    for (int i = 0; i < m2_stream_max_streams(s) && !why; i++) {
        size_t got = fread(snap, 1, bytes, f);
        if (m2_stream_restore(s, i, snap, got) != M2_STREAM_OK) why = m2_last_error();
    }
    if (!why && fgetc(f) != EOF) why = "more states than --instruments";
    fclose(f);
    return why;
}

/* Writes every instrument's snapshot to FILE.tmp, flushed to disk, then renames it over FILE: a crash at any point
 * leaves the last complete file in place. */
static const char *save_states(const m2_stream *s, const char *path, unsigned char *snap, size_t bytes)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return "state file name too long";
    FILE *f = fopen(tmp, "wb");
    if (!f) return strerror(errno);
    int ok = 1;
    for (int i = 0; i < m2_stream_max_streams(s) && ok; i++)
        ok = m2_stream_snapshot(s, i, snap, bytes) == M2_STREAM_OK && fwrite(snap, 1, bytes, f) == bytes;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        const char *why = strerror(errno);
        remove(tmp);
        return why;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') return usage();
    m2_stream_options opt = m2_stream_defaults();
    int raw = 0;
    double tick_size = 0;
    const char *state_file = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--raw"))
            raw = 1;
        else if (!strcmp(argv[i], "--instruments") && i + 1 < argc)
            opt.max_streams = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tick-size") && i + 1 < argc)
            tick_size = atof(argv[++i]);
        else if (!strcmp(argv[i], "--state") && i + 1 < argc)
            state_file = argv[++i];
        else
            return usage();
    }
    m2_stream *s;
    int rc = m2_stream_open(argv[1], &opt, &s);
    if (rc != M2_STREAM_OK) {
        fprintf(stderr, "stream_example: error: %s\n", m2_last_error());
        return rc;
    }
    if (m2_stream_n_features(s) > MAX_F || m2_stream_n_targets(s) > MAX_O) {
        m2_stream_close(s);
        fprintf(stderr, "stream_example: error: model too wide for this example\n");
        return 2;
    }
    const size_t snap_bytes = m2_stream_snapshot_bytes(s);
    unsigned char *snap = state_file ? malloc(snap_bytes) : NULL; /* at start-up: nothing allocates in the loop */
    const char *state_why = state_file && !snap ? "out of memory" : NULL;
    if (state_file && !state_why) state_why = load_states(s, state_file, snap, snap_bytes);
    if (state_why) {
        fprintf(stderr, "stream_example: error: --state %s: %s\n", state_file, state_why);
        free(snap);
        m2_stream_close(s);
        return 1;
    }
    /* The event loop: wait for input; a whole line is a tick (or a reset); no input for IDLE_MS is idle time */
    static char buf[LINE_MAX_BYTES + 1];
    size_t len = 0;
    long lineno = 0;
    int last = -1, eof = 0;
    const char *why = NULL;
    while (!why && !eof) {
        struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
        int ready = poll(&in, 1, IDLE_MS);
        if (ready == 0) { /* idle: show what is done, keep the next step cached */
            fflush(stdout);
            m2_stream_warm(s, last >= 0 ? 1 : 0, last >= 0 ? &last : NULL);
            continue;
        }
        ssize_t got = ready < 0 ? -1 : read(STDIN_FILENO, buf + len, LINE_MAX_BYTES - len);
        if (got < 0) {
            if (errno == EINTR) continue;
            why = strerror(errno);
            break;
        }
        eof = got == 0;
        len += (size_t)got;
        if (eof && len > 0 && buf[len - 1] != '\n') buf[len++] = '\n'; /* a last line without its newline */
        size_t start = 0;
        for (char *nl; !why && (nl = memchr(buf + start, '\n', len - start)); start = (size_t)(nl - buf) + 1) {
            *nl = '\0';
            lineno++;
            why = handle_line(s, buf + start, raw, tick_size, &last);
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        if (!why && len == LINE_MAX_BYTES) {
            lineno++;
            why = "line too long";
        }
    }
    if (why) fprintf(stderr, "stream_example: error: stdin line %ld: %s\n", lineno, why);
    /* the states as they stand, also after a bad line: the ticks before it were taken */
    if (state_file && (state_why = save_states(s, state_file, snap, snap_bytes)))
        fprintf(stderr, "stream_example: error: --state %s: %s\n", state_file, state_why);
    free(snap);
    m2_stream_close(s);
    return why || state_why ? 1 : 0;
}
