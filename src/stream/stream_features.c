/* m2_stream_features (mamba2_stream.h): the training featuriser (io/features.c, m2_event_features and
 * m2_depth_imbalance) applied to live events, one stream at a time, with the stream's previous event kept in the
 * handle, so that a trading process feeds the model the numbers it was trained on without re-implementing them. */
#include "stream/engine.h"

#include <math.h>

#include "base/error.h"

/* What is wrong with an event (a field named), or NULL. prev: the stream's last event, or NULL. */
static const char *bad_event(const m2_stream_event *ev, const m2_event *prev)
{
    const double v[4] = {ev->bid_px, ev->ask_px, ev->bid_sz, ev->ask_sz};
    static const char *const name[4] = {"bid_px", "ask_px", "bid_sz", "ask_sz"};
    for (int i = 0; i < 4; i++)
        if (!isfinite(v[i]) || v[i] < 0) return name[i];
    if (!(ev->bid_px > 0) || !(ev->ask_px > 0)) return ev->bid_px > 0 ? "ask_px" : "bid_px";
    if (ev->side < -1 || ev->side > 1) return "side";
    if (prev && ev->ts_ns < prev->ts_ns) return "ts_ns (before the stream's previous event)";
    return NULL;
}

int m2_stream_features(m2_stream *s, int stream, const m2_stream_event *ev, double tick_size, const double *book,
                       double *raw)
{
    const char *fn = "m2_stream_features";
    if (stream < 0 || stream >= m2_stream_max_streams(s))
        return m2_fail(M2_EUSAGE, "%s (stream): %d is not in [0, %d)", fn, stream, m2_stream_max_streams(s));
    const m2s_state_view v = m2s_state_of(s, stream);
    if (v.features_unknown[0]) return m2_fail(M2_EUSAGE, "%s: %s", fn, v.features_unknown);
    if (!(tick_size > 0)) return m2_fail(M2_EUSAGE, "%s (tick_size): %g is not > 0", fn, tick_size);
    const int F = m2_stream_n_features(s), depth = F - M2_N_FEATURES - 1;
    if (depth > 0 && !book)
        return m2_fail(M2_EUSAGE, "%s (book): the model has depth features of %d levels; pass the event's book", fn,
                       depth);
    const m2_event *prev = *v.has_last ? v.last_event : NULL;
    const char *bad = ev ? bad_event(ev, prev) : "the event (NULL)";
    if (bad) return m2_fail(M2_EUSAGE, "%s (stream %d): %s is not valid", fn, stream, bad);
    const m2_event cur = {.ts_ns = ev->ts_ns,
                          .bid_px = ev->bid_px,
                          .ask_px = ev->ask_px,
                          .bid_sz = ev->bid_sz,
                          .ask_sz = ev->ask_sz,
                          .trade_sz = ev->trade_sz,
                          .side = ev->side};
    float x[M2_MAX_FEATURES];
    m2_event_features(&cur, prev, tick_size, x);
    if (depth > 0) m2_depth_imbalance(book, depth, x + M2_N_FEATURES);
    for (int f = 0; f < F; f++) raw[f] = x[f];
    *v.last_event = cur;
    *v.has_last = 1;
    return M2_OK;
}
