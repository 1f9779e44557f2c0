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

int m2_synth_instrument(const m2_synth_opts *o, int k, m2_dataset *events)
{
    m2_synth_opts one = *o;
    /* Instrument 0 keeps the seed, so a universe of one is the single-instrument simulation. */
    one.seed = k == 0 ? o->seed : m2_mix64(o->seed ^ ((uint64_t)k << 32));
    if (m2_synth_events(&one, events, NULL))
        return M2_EFAIL;
    snprintf(events->instrument, sizeof events->instrument, "SYN%03d", k);
    return M2_OK;
}

int m2_synth_universe(const m2_synth_opts *o, int K, m2_dataset *out)
{
    m2_dataset *ev = calloc((size_t)K, sizeof *ev);
    if (!ev)
        return m2_fail(M2_EFAIL, "synth (%d instruments): out of memory", K);
    int rc = M2_OK;
    for (int k = 0; rc == M2_OK && k < K; k++)
        rc = m2_synth_instrument(o, k, &ev[k]);
    if (rc == M2_OK)
        rc = m2_universe_build(ev, K, &o->feat, out);
    else
        for (int k = 0; k < K; k++)
            m2_dataset_free(&ev[k]);
    free(ev);
    if (rc == M2_OK)
        snprintf(out->source, sizeof out->source, "synth signal=%s seed=%llu instruments=%d",
                 m2_signal_name(o->signal), (unsigned long long)o->seed, K);
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
    if (!g)
        return m2_fail(M2_EFAIL, "synth (%s): cannot create: %s", tmp, strerror(errno));
    gzbuffer(g, 1 << 18);
    gzputs(g, "ts,bid,ask,bid_size,ask_size,price,size,side\n");
    for (int64_t i = ds->sessions[s]; i < ds->sessions[s + 1]; i++)
        put_row(g, ds, i);
    if (gzclose(g) != Z_OK || rename(tmp, path) != 0) {
        unlink(tmp);
        return m2_fail(M2_EFAIL, "synth (%s): cannot write: %s", path, strerror(errno));
    }
    return M2_OK;
}

int m2_synth_write_csv(const m2_synth_opts *o, int K, const char *dir, int64_t *rows)
{
    *rows = 0;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return m2_fail(M2_EFAIL, "synth (%s): cannot create the folder: %s", dir, strerror(errno));
    for (int k = 0; k < K; k++) {
        m2_dataset ev;
        if (m2_synth_instrument(o, k, &ev))
            return M2_EFAIL;
        int rc = M2_OK;
        for (int64_t s = 0; rc == M2_OK && s < ev.n_sessions; s++)
            rc = write_day(&ev, s, dir);
        *rows += ev.n_rows;
        m2_dataset_free(&ev);
        if (rc)
            return rc;
    }
    return M2_OK;
}
