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
#include "io/h5util.h"
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

static int emit_session(void *ctx, m2_dataset *session, const double *latent)
{
    (void)latent;
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

/* ---- one instrument: the file `mamba2_ticks synth` writes, with /synth/latent ---------------------------- */

typedef struct {
    const m2_synth_opts *o;
    int fd;       /* unlinked: the planted variable of every row, in row order */
    int64_t rows; /* written to it */
    m2_universe_emit emit;
    void *sink;
} one_synth;

static int keep_session(void *ctx, m2_dataset *session, const double *latent)
{
    one_synth *c = ctx;
    size_t n = sizeof *latent * (size_t)session->n_rows;
    if (pwrite(c->fd, latent, n, (off_t)(8 * c->rows)) != (ssize_t)n)
        return m2_fail(M2_EFAIL, "synth: cannot write the latent spool: %s", strerror(errno));
    c->rows += session->n_rows;
    return c->emit(c->sink, session);
}

static int one_source(void *ctx, int k, m2_universe_emit emit, void *sink)
{
    (void)k;
    one_synth *c = ctx;
    c->emit = emit;
    c->sink = sink;
    return m2_synth_each_session(c->o, keep_session, c);
}

/* /synth/latent (an addition to docs/FORMATS.md that readers ignore), so the planted structure can be audited from
 * the file alone: copied from the spool in blocks. */
static int write_latent(int64_t file, void *ctx)
{
    enum { CHUNK = 1 << 16 };
    const one_synth *c = ctx;
    double *buf = malloc(sizeof *buf * CHUNK);
    int rc = buf && m2_h5_write(file, "/synth/latent", M2_H5_F64, 1, &c->rows, NULL, 1) == M2_OK
                 ? M2_OK
                 : m2_fail(M2_EFAIL, "synth: cannot write /synth/latent");
    for (int64_t at = 0; rc == M2_OK && at < c->rows; at += CHUNK) {
        int64_t n = c->rows - at < CHUNK ? c->rows - at : CHUNK;
        if (pread(c->fd, buf, sizeof *buf * (size_t)n, (off_t)(8 * at)) != (ssize_t)(sizeof *buf * (size_t)n))
            rc = m2_fail(M2_EFAIL, "synth: cannot read the latent spool: %s", strerror(errno));
        else
            rc = m2_h5_write_rows(file, "/synth/latent", M2_H5_F64, at, n, buf);
    }
    free(buf);
    hid_t d = rc == M2_OK ? H5Dopen2(file, "/synth/latent", H5P_DEFAULT) : H5I_INVALID_HID;
    if (rc == M2_OK && (d < 0 ||
                        m2_h5_attr_put_str(d, "meaning",
                                           c->o->signal == M2_SIGNAL_LINEAR
                                               ? "L1 queue imbalance after the row (drives informed traders)"
                                               : "decayed sum of signed noise-trader trades (decay time tau rows)") ||
                        m2_h5_attr_put_f64(d, "tau", M2_SYNTH_MEMORY_TAU)))
        rc = M2_EFAIL;
    if (d >= 0) H5Dclose(d);
    return rc;
}

int m2_synth_one(const m2_synth_opts *o, const char *path, m2_dataset *meta)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.latent.XXXXXX", path);
    one_synth c = {o, mkstemp(tmp), 0, NULL, NULL};
    memset(meta, 0, sizeof *meta);
    if (c.fd < 0) return m2_fail(M2_EFAIL, "synth (%s): cannot create the latent spool: %s", tmp, strerror(errno));
    unlink(tmp); /* anonymous from here on */
    int rc = m2_universe_write_one(path, one_source, &c, &o->feat, write_latent, &c, meta);
    close(c.fd);
    return rc;
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
