/* Synthetic universes (synth_universe.h). */
#include "io/synth_universe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/universe.h"

/* Instrument k's options: instrument 0 keeps the seed, so a universe of one is the single-instrument simulation. */
static m2_synth_opts instrument_opts(const m2_synth_opts *o, int k)
{
    m2_synth_opts one = *o;
    one.seed = k == 0 ? o->seed : m2_mix64(o->seed ^ ((uint64_t)k << 32));
    return one;
}

int m2_synth_instrument(const m2_synth_opts *o, int k, m2_dataset *events)
{
    m2_synth_opts one = instrument_opts(o, k);
    if (m2_synth_events(&one, events, NULL)) return M2_EFAIL;
    snprintf(events->instrument, sizeof events->instrument, "SYN%03d", k);
    return M2_OK;
}

typedef struct {
    int k;
    m2_universe_emit emit;
    void *sink;
} session_out;

static int emit_session(void *ctx, m2_dataset *session)
{
    session_out *out = ctx;
    snprintf(session->instrument, sizeof session->instrument, "SYN%03d", out->k);
    return out->emit(out->sink, session);
}

/* A session at a time, so pass 1 holds one session whatever --ticks. */
static int synth_source(void *ctx, int k, m2_universe_emit emit, void *sink)
{
    m2_synth_opts one = instrument_opts(ctx, k);
    session_out out = {k, emit, sink};
    return m2_synth_each_session(&one, emit_session, &out);
}

int m2_synth_universe(const m2_synth_opts *o, int K, const char *path, m2_dataset *meta)
{
    char source[64];
    snprintf(source, sizeof source, "synth signal=%s seed=%llu instruments=%d", m2_signal_name(o->signal),
             (unsigned long long)o->seed, K);
    return m2_universe_write(path, K, synth_source, (void *)o, &o->feat, source, meta);
}

static void put_row(gzFile g, const m2_dataset *ds, int64_t i)
{
    const char *side = ds->side[i] > 0 ? "buy" : ds->side[i] < 0 ? "sell" : "";
    if (isfinite(ds->trade_px[i]))
        gzprintf(g, "%lld,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%s\n", (long long)ds->ts_ns[i], ds->bid_px[i],
                 ds->ask_px[i], ds->bid_sz[i], ds->ask_sz[i], ds->trade_px[i], ds->trade_sz[i], side);
    else
        gzprintf(g, "%lld,%.10g,%.10g,%.10g,%.10g,,,\n", (long long)ds->ts_ns[i], ds->bid_px[i], ds->ask_px[i],
                 ds->bid_sz[i], ds->ask_sz[i]);
}

/* One session of one instrument into DIR/NAME_YYYYMMDD.csv.gz. */
static int write_day(const m2_dataset *ds, int64_t s, const char *dir)
{
    time_t day = (time_t)(ds->ts_ns[ds->sessions[s]] / 1000000000LL);
    struct tm tm;
    gmtime_r(&day, &tm);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s_%04d%02d%02d.csv.gz", dir, ds->instrument, tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    gzFile g = gzopen(tmp, "wb6");
    if (!g) return m2_fail(M2_EFAIL, "synth (%s): cannot create: %s", tmp, strerror(errno));
    gzbuffer(g, 1 << 18);
    gzputs(g, "ts,bid,ask,bid_size,ask_size,price,size,side\n");
    for (int64_t i = ds->sessions[s]; i < ds->sessions[s + 1]; i++) put_row(g, ds, i);
    if (gzclose(g) != Z_OK || rename(tmp, path) != 0) {
        unlink(tmp);
        return m2_fail(M2_EFAIL, "synth (%s): cannot write: %s", path, strerror(errno));
    }
    return M2_OK;
}

static int write_days(const m2_synth_opts *o, int K, const char *dir, int64_t *rows,
                      int (*write_one)(const m2_dataset *ds, int64_t s, const char *dir));

static void lobster_row(FILE *m, FILE *ob, const m2_dataset *ds, int64_t i, int64_t midnight)
{
    int traded = isfinite(ds->trade_px[i]);
    fprintf(m, "%.9f,%d,%lld,%.0f,%lld,%d\n", (double)(ds->ts_ns[i] - midnight) * 1e-9, traded ? 4 : 1, (long long)i,
            traded ? ds->trade_sz[i] : ds->bid_sz[i], llround((traded ? ds->trade_px[i] : ds->bid_px[i]) * 1e4),
            traded ? -ds->side[i] : 1);
    for (int l = 0; l < ds->book_levels; l++) {
        const double *lv = ds->book + (i * ds->book_levels + l) * 4;
        fprintf(ob, "%s%lld,%.0f,%lld,%.0f", l ? "," : "", lv[1] > 0 ? llround(lv[0] * 1e4) : 9999999999LL, lv[1],
                lv[3] > 0 ? llround(lv[2] * 1e4) : -9999999999LL, lv[3]);
    }
    fputc('\n', ob);
}

/* One session as a LOBSTER pair, each file under a temporary name and renamed when complete. */
static int write_lobster_day(const m2_dataset *ds, int64_t s, const char *dir)
{
    int64_t midnight = ds->ts_ns[ds->sessions[s]] / 86400000000000LL * 86400000000000LL;
    time_t day = (time_t)(midnight / 1000000000LL);
    struct tm tm;
    gmtime_r(&day, &tm);
    char path[2][4096], tmp[2][4200];
    const char *kind[2] = {"message", "orderbook"};
    FILE *f[2];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/%s_%04d-%02d-%02d_34200000_57600000_%s_%d.csv", dir, ds->instrument,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, kind[k], ds->book_levels);
        snprintf(tmp[k], sizeof tmp[k], "%s.tmp.%ld", path[k], (long)getpid());
        f[k] = fopen(tmp[k], "w");
    }
    int rc = f[0] && f[1] ? M2_OK : m2_fail(M2_EFAIL, "synth (%s): cannot create: %s", tmp[0], strerror(errno));
    for (int64_t i = ds->sessions[s]; rc == M2_OK && i < ds->sessions[s + 1]; i++)
        lobster_row(f[0], f[1], ds, i, midnight);
    for (int k = 0; k < 2; k++)
        if (f[k] && (fclose(f[k]) != 0 || rc != M2_OK || rename(tmp[k], path[k]) != 0)) {
            unlink(tmp[k]);
            if (rc == M2_OK) rc = m2_fail(M2_EFAIL, "synth (%s): cannot write: %s", path[k], strerror(errno));
        }
    return rc;
}

int m2_synth_write_lobster(const m2_synth_opts *o, int K, const char *dir, int64_t *rows)
{
    m2_synth_opts one = *o;
    one.levels = o->levels > 0 ? o->levels : 1;
    return write_days(&one, K, dir, rows, write_lobster_day);
}

/* Every session of every instrument through write_one (one day's file or files). */
static int write_days(const m2_synth_opts *o, int K, const char *dir, int64_t *rows,
                      int (*write_one)(const m2_dataset *ds, int64_t s, const char *dir))
{
    *rows = 0;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return m2_fail(M2_EFAIL, "synth (%s): cannot create the folder: %s", dir, strerror(errno));
    for (int k = 0; k < K; k++) {
        m2_dataset ev;
        if (m2_synth_instrument(o, k, &ev)) return M2_EFAIL;
        int rc = M2_OK;
        for (int64_t s = 0; rc == M2_OK && s < ev.n_sessions; s++) rc = write_one(&ev, s, dir);
        *rows += ev.n_rows;
        m2_dataset_free(&ev);
        if (rc) return rc;
    }
    return M2_OK;
}

int m2_synth_write_csv(const m2_synth_opts *o, int K, const char *dir, int64_t *rows)
{
    return write_days(o, K, dir, rows, write_day);
}
