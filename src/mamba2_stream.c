/* mamba2_stream (docs/CLI.md): feeds one split of a tick dataset through the streaming engine (stream/engine.h) one
 * tick at a time, as a trading process would, and reports the per-tick latency (p50, p99, p99.9, max; a
 * CLOCK_MONOTONIC read around each step), ticks/s, and the physical floor for this model on this core: the
 * time to read the model's weight bytes once (every tick must), measured in the same run.
 *
 * Rows of the split are cut into parts (session ∩ split, as mamba2_eval --mode stream does): a stream's state is
 * reset at each part's first row, so predictions equal mamba2_eval --mode stream's. With --batch S, parts are
 * dealt round-robin to S streams advanced together (one step = one tick of every stream that has rows left).
 * With --per-instrument, one stream per instrument and the ticks in the order they happened across instruments
 * (io/replay.h): a step is a batch of ticks of distinct instruments within --window-us of each other.
 * --evict-kb and --warm model sparse ticks: before each step, untimed, the process reads memory of its own (what the
 * rest of a trading process does between a stream's ticks) and then, with --warm, calls m2_stream_warm.
 * Memory does not grow with the split's rows: the dataset is mapped, the latencies go to a bounded histogram
 * (base/loghist.h: percentiles within 0.4%), and predictions are held per row only for --predictions and --bf16. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "base/error.h"
#include "base/loghist.h"
#include "base/version.h"
#include "stream/engine.h"
#include "stream/timing.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "io/predictions.h"
#include "io/replay.h"

#define PROG "mamba2_stream"

typedef struct {
    m2_checkpoint_job job; /* first: --checkpoint, --data and what runs on them */
    const char *predictions, *split_name;
    int split, bf16, batch, per_instrument, warm;
    double window_us; /* -1: not given */
    int evict_kb;     /* 0: none */
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: " PROG " --checkpoint FILE [--data FILE] [--split test] [--predictions OUT] [--bf16]\n"
        "                     [--batch S | --per-instrument [--window-us W]] [--evict-kb KB [--warm]]\n"
        "\n"
        "Feeds one split of a tick dataset through the model's recurrent step (docs/MODEL.md §7) one tick at a time,\n"
        "with the state reset at each session's first row inside the split, and prints the latency per step\n"
        "(p50, p99, p99.9, max), ticks/s, and the weight-streaming floor: the time to read the model's weight\n"
        "bytes once on this core, measured in the same run. Nothing is allocated per tick.\n"
        "\n"
        "  --checkpoint FILE   checkpoint to run (required)\n"
        "  --data FILE         tick dataset (default: [data] path in the checkpoint's config)\n"
        "  --split NAME        train | val | test (default: test)\n"
        "  --predictions OUT   write the predictions of every row of the split (docs/FORMATS.md)\n"
        "  --bf16              store the weights as bf16 (half the bytes per tick); also reports the max abs\n"
        "                      difference to fp32 predictions on the split\n"
        "  --batch S           advance S streams together, parts of the split dealt round-robin (default: 1)\n"
        "  --per-instrument    a universe: one stream per instrument, the ticks replayed in time order across\n"
        "                      instruments (needs /raw/ts_ns); a step is a batch of ticks of distinct instruments\n"
        "  --window-us W       with --per-instrument: a step takes the ticks within W microseconds of its first\n"
        "                      (default 0: only simultaneous ticks go together)\n"
        "  --evict-kb KB       sparse ticks: before each step, untimed, read KB kilobytes of other memory (the\n"
        "                      rest of a process between a stream's ticks; 65536 evicts a 32 MB L3)\n"
        "  --warm              with --evict-kb: then call m2_stream_warm for the step's streams, untimed, as an\n"
        "                      idle loop waiting for the tick would (mamba2_stream.h)\n"
        "  --help              this text\n"
        "  --version           version and built-in backends\n");
}

static int stream_split(const m2_checkpoint *ck, const m2_dataset *ds, const char *data, const void *opts);

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.job.task = stream_split, .split = M2_SPLIT_TEST, .split_name = "test", .batch = 1, .window_us = -1};
    static const struct option opts[] = {{"checkpoint", required_argument, 0, 'c'},
                                         {"data", required_argument, 0, 'D'},
                                         {"split", required_argument, 0, 's'},
                                         {"predictions", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"bf16", no_argument, 0, 'f'},
                                         {"per-instrument", no_argument, 0, 'i'},
                                         {"window-us", required_argument, 0, 'w'},
                                         {"evict-kb", required_argument, 0, 'e'},
                                         {"warm", no_argument, 0, 'W'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = m2_cli_next(argc, argv, opts, PROG " --help")) != -1) {
        switch (c) {
        case 'c': o->job.checkpoint = optarg; break;
        case 'D': o->job.data = optarg; break;
        case 'p': o->predictions = optarg; break;
        case 'f': o->bf16 = 1; break;
        case 'i': o->per_instrument = 1; break;
        case 'W': o->warm = 1; break;
        case 'e':
            /* up to 4 GiB: twice the largest L3 there is, with room to spare */
            if (m2_parse_int("--evict-kb", optarg, 1, 1 << 22, &o->evict_kb)) return M2_EUSAGE;
            break;
        case 'w':
            /* up to a day: any wider window is the same as one that never closes on time */
            if (m2_parse_f64("--window-us", optarg, 0, 86400e6, 0, &o->window_us)) return M2_EUSAGE;
            break;
        case 'b':
            if (m2_parse_int("--batch", optarg, 1, 1 << 16, &o->batch)) return M2_EUSAGE;
            break;
        case 's':
            o->split = m2_split_from_name(optarg);
            o->split_name = optarg;
            if (o->split < 0) return m2_fail(M2_EUSAGE, "--split %s: unknown split (train, val or test)", optarg);
            break;
        default: return m2_cli_common(c);
        }
    }
    if (m2_cli_no_extra(argc, argv, 0)) return M2_EUSAGE;
    if (!o->job.checkpoint) return m2_fail(M2_EUSAGE, "--checkpoint FILE is required (see --help)");
    if (o->window_us >= 0 && !o->per_instrument) return m2_fail(M2_EUSAGE, "--window-us needs --per-instrument");
    if (o->warm && !o->evict_kb) return m2_fail(M2_EUSAGE, "--warm needs --evict-kb (without it every tick is warm)");
    if (o->per_instrument && o->batch != 1)
        return m2_fail(M2_EUSAGE, "--batch and --per-instrument exclude each other");
    return M2_CLI_RUN;
}

/* The dataset must be the one the model was trained for. */
/* Parts of the split: [begin, end) row ranges, session ∩ split, in row order. */
typedef struct {
    int64_t n, *begin, *end;
    int32_t *inst; /* instrument of each part (ascending: FORMATS.md "Universe") */
} parts;

static int make_parts(const m2_dataset *ds, int split, parts *p)
{
    p->begin = malloc(sizeof(int64_t) * (size_t)(ds->n_sessions + 1));
    p->end = malloc(sizeof(int64_t) * (size_t)(ds->n_sessions + 1));
    p->inst = malloc(sizeof(int32_t) * (size_t)(ds->n_sessions + 1));
    p->n = 0;
    if (!p->begin || !p->end || !p->inst) return m2_fail(M2_EFAIL, "stream: out of memory");
    for (int64_t s = 0; s < ds->n_sessions; s++) {
        int64_t b, e;
        m2_dataset_session_part(ds, split, s, &b, &e);
        if (b < e) {
            p->inst[p->n] = ds->session_inst ? ds->session_inst[s] : 0;
            p->begin[p->n] = b;
            p->end[p->n++] = e;
        }
    }
    return M2_OK;
}

static void free_parts(parts *p)
{
    free(p->begin);
    free(p->end);
    free(p->inst);
}

/* Per-stream cursor over the parts dealt to it round-robin: parts k, k+S, k+2S, ... */
typedef struct {
    int64_t part, row; /* current part index and next row in it; part >= n: done */
} cursor;

typedef struct {
    m2_stream *s;
    const m2_dataset *ds;
    const parts *pt;
    int S;
    m2_replay *replay; /* --per-instrument: the steps come from here (stream = instrument) */
    int64_t lo;        /* first row of the split: pred row r goes to pred[(r - lo) * O] */
    /* preallocated per-step buffers */
    cursor *cur;
    int *ids;
    unsigned char *reset;
    float *X, *P;
    int64_t *rows;
    /* sparse ticks (--evict-kb, --warm): read before each step, untimed; NULL: none */
    const unsigned char *evict;
    size_t evict_bytes;
    int warm;
} runner;

/* The next tick of every round-robin stream that has rows left; reset[i] at a part's first row. */
static int deal(runner *r)
{
    int n = 0;
    for (int k = 0; k < r->S; k++) {
        cursor *c = &r->cur[k];
        if (c->part >= r->pt->n) continue;
        r->ids[n] = k;
        r->reset[n] = c->row == r->pt->begin[c->part];
        r->rows[n++] = c->row;
        if (++c->row == r->pt->end[c->part]) {
            c->part += r->S;
            if (c->part < r->pt->n) c->row = r->pt->begin[c->part];
        }
    }
    return n;
}

/* Gathers the next step's ticks (*n, 0 at the end), resetting a stream at each part's first row. */
static int gather(runner *r, int *n)
{
    const int F = r->ds->n_features;
    if (r->replay) {
        if (m2_replay_next(r->replay, r->rows, r->ids, r->reset, n)) return M2_EFAIL;
    } else {
        *n = deal(r);
    }
    for (int i = 0; i < *n; i++) {
        if (r->reset[i]) m2_stream_reset(r->s, r->ids[i]);
        memcpy(r->X + (size_t)i * F, r->ds->X + (size_t)r->rows[i] * F, sizeof(float) * (size_t)F);
    }
    return M2_OK;
}

/* Runs the whole split; pred (may be NULL) receives every row's predictions, lat (may be NULL) each step's
 * latency in a bounded histogram, *steps their count. */
static int run_split(runner *r, float *pred, m2_loghist *lat, int64_t *steps, double *seconds)
{
    const int O = r->ds->n_targets;
    for (int64_t k = 0; k < r->S; k++) {
        r->cur[k].part = k;
        r->cur[k].row = k < r->pt->n ? r->pt->begin[k] : 0;
    }
    *steps = 0;
    double t_start = m2_now_ns();
    for (int n;; ++*steps) {
        if (gather(r, &n)) return M2_EFAIL;
        if (n == 0) break;
        if (r->evict) {
            volatile unsigned char sink = 0;
            for (size_t j = 0; j < r->evict_bytes; j += 64) sink += r->evict[j];
            if (r->warm) m2_stream_warm(r->s, n, r->ids);
        }
        double t0 = m2_now_ns();
        if (n == 1 && r->S == 1)
            m2_stream_step(r->s, 0, r->X, r->P);
        else
            m2_stream_step_batch(r->s, n, r->ids, r->X, r->P);
        if (lat) m2_loghist_add(lat, m2_now_ns() - t0);
        for (int i = 0; pred && i < n; i++)
            memcpy(pred + (size_t)(r->rows[i] - r->lo) * O, r->P + (size_t)i * O, sizeof(float) * (size_t)O);
    }
    *seconds = (m2_now_ns() - t_start) * 1e-9;
    return M2_OK;
}

static int runner_init(runner *r, m2_stream *s, const m2_dataset *ds, const parts *pt, int split, int S,
                       m2_replay *replay)
{
    *r = (runner){.s = s, .ds = ds, .pt = pt, .S = S, .replay = replay, .lo = ds->split[split][0]};
    r->cur = calloc((size_t)S, sizeof *r->cur);
    r->ids = calloc((size_t)S, sizeof *r->ids);
    r->reset = calloc((size_t)S, sizeof *r->reset);
    r->rows = calloc((size_t)S, sizeof *r->rows);
    r->X = calloc((size_t)S * ds->n_features, sizeof *r->X);
    r->P = calloc((size_t)S * ds->n_targets, sizeof *r->P);
    if (!r->cur || !r->ids || !r->reset || !r->rows || !r->X || !r->P)
        return m2_fail(M2_EFAIL, "stream: out of memory");
    return M2_OK;
}

static void runner_free(runner *r)
{
    free(r->cur);
    free(r->ids);
    free(r->reset);
    free(r->rows);
    free(r->X);
    free(r->P);
}

static int open_engine(const m2_checkpoint *ck, int bf16, int S, m2_stream **s)
{
    m2_stream_options opt = m2_stream_defaults();
    opt.bf16 = bf16;
    opt.max_streams = S;
    return m2_stream_open_params(&ck->lay, ck->params, ck->mean, ck->std, &opt, s);
}

/* Max |pred - fp32 pred| over the split: the split run again, untimed, with fp32 weights. */
static int bf16_difference(const m2_checkpoint *ck, const m2_dataset *ds, const parts *pt, int split, const float *pred,
                           int64_t M, double *diff)
{
    m2_stream *s;
    int rc = open_engine(ck, 0, 1, &s);
    if (rc) return rc;
    float *ref = malloc(sizeof(float) * (size_t)M * ds->n_targets);
    runner r;
    rc = ref ? runner_init(&r, s, ds, pt, split, 1, NULL) : m2_fail(M2_EFAIL, "stream: out of memory");
    int64_t steps;
    double secs;
    if (rc == M2_OK) rc = run_split(&r, ref, NULL, &steps, &secs);
    if (rc == M2_OK) {
        *diff = 0;
        for (int64_t i = 0; i < M * ds->n_targets; i++) {
            double d = (double)pred[i] - ref[i];
            if (d < 0) d = -d;
            if (d > *diff) *diff = d;
        }
    }
    if (ref) runner_free(&r);
    free(ref);
    m2_stream_close(s);
    return rc;
}

static int write_predictions(const options *o, const m2_checkpoint *ck, const m2_dataset *ds, float *pred, int64_t M)
{
    const int O = ds->n_targets;
    const int64_t lo = ds->split[o->split][0];
    m2_predictions p = {.M = M, .O = O, .pred = pred, .step = ck->step};
    p.row = malloc(sizeof(int64_t) * (size_t)M);
    p.target = malloc(sizeof(float) * (size_t)M * O);
    int rc = M2_OK;
    if (!p.row || !p.target) rc = m2_fail(M2_EFAIL, "stream: out of memory");
    if (rc == M2_OK) {
        for (int64_t i = 0; i < M; i++) p.row[i] = lo + i;
        memcpy(p.target, ds->y + (size_t)lo * O, sizeof(float) * (size_t)M * O);
        snprintf(p.split, sizeof p.split, "%s", o->split_name);
        snprintf(p.mode, sizeof p.mode, "stream");
        snprintf(p.checkpoint, sizeof p.checkpoint, "%s", o->job.checkpoint);
        memcpy(p.horizons, ds->horizons, sizeof p.horizons);
        rc = m2_predictions_write(o->predictions, &p);
    }
    free(p.row);
    free(p.target);
    return rc;
}

static void report(const options *o, const m2_stream *s, int64_t ticks, int64_t steps, double secs,
                   const m2_loghist *lat, int cpu)
{
    const m2_dims *d = m2_stream_dims(s);
    const size_t wb = m2_stream_weight_bytes(s);
    m2_latency l = {m2_loghist_quantile(lat, 0.5), m2_loghist_quantile(lat, 0.99), m2_loghist_quantile(lat, 0.999),
                    lat->max, lat->n ? lat->sum / (double)lat->n : 0};
    double hot = m2_stream_floor_ns(wb, 0, 2001), cold = m2_stream_floor_ns(wb, 1, 301);
    printf("model: F=%d O=%d D=%d L=%d E=%d P=%d N=%d G=%d K=%d; weights %.1f KB (%s), state %.1f KB per stream\n",
           d->F, d->O, d->D, d->L, d->E, d->P, d->N, d->G, d->K, wb / 1024.0, o->bf16 ? "bf16 matrices" : "fp32",
           m2_stream_state_bytes(s) / 1024.0);
    char mode[96] = "";
    if (o->per_instrument)
        snprintf(mode, sizeof mode, " (one per instrument, in time order, window %g us; %.2f ticks per step)",
                 o->window_us > 0 ? o->window_us : 0, (double)ticks / (double)(steps > 0 ? steps : 1));
    printf("run: %lld ticks in %lld steps of up to %d stream(s)%s, one thread%s%d, %s kernels\n", (long long)ticks,
           (long long)steps, o->per_instrument ? m2_stream_max_streams(s) : o->batch, mode,
           cpu >= 0 ? " pinned to cpu " : " (not pinned)", cpu, m2_stream_cpu(s));
    if (o->evict_kb)
        printf("sparse ticks: %d KB of other memory read before each step%s (untimed)\n", o->evict_kb,
               o->warm ? ", then m2_stream_warm" : "");
    printf("latency per %s (ns): p50 %.0f  p99 %.0f  p99.9 %.0f  max %.0f  mean %.0f\n",
           o->batch == 1 && !o->per_instrument ? "tick" : "step", l.p50, l.p99, l.p999, l.max, l.mean);
    printf("throughput: %.0f ticks/s (wall, including the split's bookkeeping); %.0f ticks/s in steps\n",
           (double)ticks / secs, (double)ticks / (l.mean * (double)steps * 1e-9));
    printf("floor: reading the %.1f KB of weights once takes %.0f ns hot (cache-resident, as for back-to-back "
           "ticks; %.1f GB/s) and %.0f ns cold (from DRAM; %.1f GB/s)\n",
           wb / 1024.0, hot, wb / hot, cold, wb / cold);
    printf("ratio to the hot floor: p50 %.2fx  p99 %.2fx\n", l.p50 / hot, l.p99 / hot);
    if (o->batch == 1 && !o->per_instrument) {
        /* a tick also reads and writes its stream's state: both memory streams, one after the other, are its floor
         * (docs/ARCHITECTURE.md, "What a tick costs") */
        const double st = m2_stream_state_floor_ns(m2_stream_state_bytes(s));
        if (st >= 0) /* < 0: no memory for the measurement's buffer, and the line is left out */
            printf("hot floor + the stream's state read and written once (%.0f ns): %.0f ns; p50 %.2fx of it\n", st,
                   hot + st, l.p50 / (hot + st));
    }
}

static int stream_split(const m2_checkpoint *ck, const m2_dataset *ds, const char *data, const void *opts)
{
    const options *o = opts;
    parts pt;
    int rc = make_parts(ds, o->split, &pt);
    const int64_t M = ds->split[o->split][1] - ds->split[o->split][0];
    if (rc == M2_OK && M <= 0) rc = m2_fail(M2_EUSAGE, "--split %s: the split has no rows", o->split_name);
    m2_stream *s = NULL;
    const int S = o->per_instrument ? ds->n_instruments : o->batch;
    if (rc == M2_OK) rc = open_engine(ck, o->bf16, S, &s);
    /* per-row results only where they are the output (--predictions) or compared (--bf16): otherwise memory does
     * not grow with the split's rows (latencies go to a bounded histogram) */
    const int keep = o->predictions || o->bf16;
    float *pred = rc || !keep ? NULL : malloc(sizeof(float) * (size_t)M * ds->n_targets);
    m2_loghist *lat = rc ? NULL : malloc(sizeof *lat);
    runner r = {0};
    m2_replay replay = {0};
    m2_replay_file *ts = NULL;
    if (rc == M2_OK && ((keep && !pred) || !lat))
        rc = m2_fail(M2_EFAIL, "stream: out of memory for %lld rows", (long long)M);
    if (lat) m2_loghist_init(lat);
    if (rc == M2_OK && o->per_instrument) rc = m2_replay_file_open(data, &ts);
    if (rc == M2_OK && o->per_instrument)
        rc = m2_replay_init(&replay, ds, o->split, (int64_t)((o->window_us > 0 ? o->window_us : 0) * 1e3),
                            m2_replay_file_fetch, ts);
    if (rc == M2_OK) rc = runner_init(&r, s, ds, &pt, o->split, S, o->per_instrument ? &replay : NULL);
    unsigned char *evict = NULL;
    if (rc == M2_OK && o->evict_kb) {
        r.evict_bytes = (size_t)o->evict_kb << 10;
        r.evict = evict = malloc(r.evict_bytes);
        r.warm = o->warm;
        if (!evict)
            rc = m2_fail(M2_EFAIL, "stream: out of memory for --evict-kb %d", o->evict_kb);
        else
            memset(evict, 1, r.evict_bytes);
    }
    int64_t steps;
    double secs;
    int cpu = -1;
    if (rc == M2_OK) {
        cpu = m2_pin_to_current_cpu();
        printf(PROG ": checkpoint %s (step %lld), split %s: %lld rows in %lld session part(s)\n", o->job.checkpoint,
               (long long)ck->step, o->split_name, (long long)M, (long long)pt.n);
        rc = run_split(&r, pred, lat, &steps, &secs);
    }
    if (rc == M2_OK) {
        report(o, s, M, steps, secs, lat, cpu);
        if (o->bf16) {
            double diff = 0;
            rc = bf16_difference(ck, ds, &pt, o->split, pred, M, &diff);
            if (rc == M2_OK) printf("bf16: max |pred - fp32 pred| over the split = %.3g\n", diff);
        }
        if (rc == M2_OK && o->predictions) {
            rc = write_predictions(o, ck, ds, pred, M);
            if (rc == M2_OK) printf("predictions: %s (%lld rows)\n", o->predictions, (long long)M);
        }
    }
    runner_free(&r);
    free(evict);
    m2_replay_free(&replay);
    m2_replay_file_close(ts);
    free(pred);
    free(lat);
    m2_stream_close(s);
    free_parts(&pt);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    return m2_cli_finish(PROG, parse_args(argc, argv, &o), usage, m2_checkpoint_job_run, &o);
}
