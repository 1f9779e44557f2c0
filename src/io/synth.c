/* A zero-intelligence limit-order book (in the spirit of Smith, Farmer, Gillemot & Krishnamurthy 2003) on a
 * tick grid, simulated event by event in continuous time (Gillespie: the next event is drawn in proportion to
 * the rates):
 *   - limit orders arrive at rate ALPHA per side; with probability P_IMPROVE (when the spread is wider than one
 *     tick) one tick better than the own best quote, otherwise at a geometric distance behind it;
 *   - each resting lot is cancelled at rate DELTA, except the last lot of a best queue;
 *   - market orders arrive at rate MU per side and take the whole best queue of the other side.
 * Those last choices keep the ZI mid price a martingale: whether and by how much it moves never depends on the
 * visible queue sizes, and an improvement is undone by exactly one sweep, so with no signal the current features
 * predict nothing (a book where small queues get eaten first would plant a queue-imbalance signal everywhere).
 * Noise traders buy or sell with probability 1/2. With a planted signal a fraction INFORMED of market orders
 * come from informed traders whose buy probability is 1/2 + 1/2·tanh(KAPPA·pressure):
 *   linear: pressure = current L1 queue imbalance (visible in the current row's features);
 *   memory: pressure = I / I_SCALE, where I_t = exp(-1/TAU)·I_{t-1} + (side of the noise-trader trade at row t),
 *           reset to 0 at each session open: order flow integrated over hundreds of rows, which no single row
 *           reveals. Informed trades are left out of I so the planted process has no feedback loop.
 * Only events that change the top of the book or trade become rows. The book is kept as lot counts per price
 * level with a Fenwick tree per side, so cancelling a uniformly chosen lot and finding the best quote after a
 * sweep cost O(log levels). */
#include "io/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"

/* ---- parameters (rates per unit of simulated time) ------------------------------------------------ */
#define LEVELS         (1 << 14) /* price levels held in memory; the book is recentred near an edge */
#define ALPHA          1.0       /* limit orders per side */
#define MU             0.25      /* market orders per side */
#define DELTA          0.04      /* cancellations per resting lot */
#define PLACE_MEAN     3.0       /* mean distance of a limit order behind the own best, in ticks */
#define P_IMPROVE      0.6       /* share of limit orders that improve the quote when the spread allows */
#define PLACE_MAX      40
#define LOT            100.0 /* shares per lot */
#define INFORMED       0.5   /* share of market orders from informed traders (linear, memory) */
#define KAPPA_LINEAR   6.0   /* informed buy probability 1/2 + 1/2·tanh(KAPPA · pressure) */
#define KAPPA_MEMORY   0.5
#define I_SCALE        6.0 /* typical |I| for the memory signal */
#define TICK_SIZE      0.01
#define START_TICKS    10000        /* 100.00 */
#define SESSION_OPEN_S (9.5 * 3600) /* 09:30 UTC */
#define SESSION_LEN_S  (6.5 * 3600)
#define FIRST_DAY      19724 /* 2024-01-02, days since 1970-01-01 (a Tuesday) */

typedef struct {
    int32_t depth[2][LEVELS];    /* lots per level; side 0 = bids, 1 = asks */
    int32_t tree[2][LEVELS + 1]; /* Fenwick sums of depth */
    int64_t total[2];
    int64_t offset; /* absolute tick of level 0 */
    m2_rng rng;
} book;

typedef struct {
    double vwap;
    int64_t lots;
    int side;
} fill;

/* ---- the book ------------------------------------------------------------------------------------- */

static void fen_add(book *b, int s, int level, int32_t d)
{
    b->depth[s][level] += d;
    b->total[s] += d;
    for (int i = level + 1; i <= LEVELS; i += i & -i) b->tree[s][i] += d;
}

/* Level holding the k-th lot (1-based) counted from the lowest price. */
static int fen_find(const book *b, int s, int64_t k)
{
    int pos = 0;
    for (int step = LEVELS; step; step >>= 1)
        if (pos + step <= LEVELS && b->tree[s][pos + step] < k) {
            pos += step;
            k -= b->tree[s][pos];
        }
    return pos;
}

static int best_bid(const book *b) { return fen_find(b, 0, b->total[0]); }
static int best_ask(const book *b) { return fen_find(b, 1, 1); }

static void rebuild(book *b)
{
    for (int s = 0; s < 2; s++) {
        memset(b->tree[s], 0, sizeof b->tree[s]);
        b->total[s] = 0;
        for (int l = 0; l < LEVELS; l++) {
            int32_t d = b->depth[s][l];
            b->depth[s][l] = 0;
            if (d) fen_add(b, s, l, d);
        }
    }
}

/* Moves the book so the mid sits in the middle of the array (orders shifted off the end are dropped: they are
 * thousands of ticks away and would be cancelled long before the price came back). */
static void recentre(book *b)
{
    int mid = (best_bid(b) + best_ask(b)) / 2, shift = mid - LEVELS / 2;
    for (int s = 0; s < 2; s++) {
        int32_t tmp[LEVELS] = {0};
        for (int l = 0; l < LEVELS; l++)
            if (l + shift >= 0 && l + shift < LEVELS) tmp[l] = b->depth[s][l + shift];
        memcpy(b->depth[s], tmp, sizeof tmp);
    }
    b->offset += shift;
    rebuild(b);
}

static double u01(book *b) { return m2_rng_next_u01(&b->rng); }
static double expo(book *b) { return -log1p(-u01(b)); }
static int32_t lots(book *b) { return 1 + (int32_t)floor(expo(b) * 1.2); } /* mean ≈ 1.8 lots */

/* Distance behind the own best quote (0 = join the best queue). */
static int placement(book *b)
{
    int d = (int)floor(expo(b) * PLACE_MEAN);
    return d > PLACE_MAX ? PLACE_MAX : d;
}

/* A limit order on side s (0 = buy): with probability P_IMPROVE, when the spread allows, one tick better than
 * the own best (improvements are always one tick, so the level behind a new best is the old best and a later
 * sweep undoes exactly what the improvement did: no mechanical reversal); otherwise at or behind the own best. */
static void limit_order(book *b, int s)
{
    int bid = best_bid(b), ask = best_ask(b), level;
    if (ask - bid > 1 && u01(b) < P_IMPROVE)
        level = s == 0 ? bid + 1 : ask - 1;
    else
        level = s == 0 ? bid - placement(b) : ask + placement(b);
    if (level < 0 || level >= LEVELS) return;
    fen_add(b, s, level, lots(b));
}

/* Cancels one uniformly chosen resting lot, except the last lot of a best queue: quotes move only through
 * trades and improvements, both of which are blind to the queue sizes. */
static void cancel_lot(book *b)
{
    int64_t n = b->total[0] + b->total[1];
    int64_t k = 1 + (int64_t)(u01(b) * (double)n);
    if (k > n) k = n;
    int s = k > b->total[0];
    if (s) k -= b->total[0];
    int level = fen_find(b, s, k), best = s ? best_ask(b) : best_bid(b);
    if (level != best || b->depth[s][level] > 1) fen_add(b, s, level, -1);
}

/* Executes a market order of side `side` (+1 buy: takes asks): it takes the whole best queue, so whether the
 * price moves never depends on the queue sizes (no mechanical queue-imbalance effect; see the file comment). */
static void market_order(book *b, int side, fill *f)
{
    int s = side > 0 ? 1 : 0, level = s ? best_ask(b) : best_bid(b);
    int32_t take = b->depth[s][level];
    fen_add(b, s, level, -take);
    f->lots = take;
    f->side = take ? side : 0;
    f->vwap = (double)(b->offset + level);
}

/* A side left empty by a sweep or cancels gets one order near the other side, as a market maker would. */
static void refill(book *b)
{
    for (int s = 0; s < 2; s++)
        if (b->total[s] == 0) {
            int other = s ? best_bid(b) : best_ask(b);
            int level = s ? other + 1 + placement(b) : other - 1 - placement(b);
            fen_add(b, s, level, lots(b));
        }
}

static void init_book(book *b, uint64_t seed)
{
    memset(b, 0, sizeof *b);
    b->rng.key = m2_rng_key(seed, M2_RNG_SYNTH, 0, 0);
    b->offset = START_TICKS - LEVELS / 2;
    for (int d = 1; d <= 20; d++) {
        fen_add(b, 0, LEVELS / 2 - d, lots(b));
        fen_add(b, 1, LEVELS / 2 + d, lots(b));
    }
}

/* ---- the traders ---------------------------------------------------------------------------------- */

typedef struct {
    int signal;
    double flow; /* I: decayed sum of signed noise-trader trades, per row */
    double decay;
} traders;

static double imbalance(const book *b)
{
    double bs = b->depth[0][best_bid(b)], as = b->depth[1][best_ask(b)];
    return (bs - as) / (bs + as);
}

/* Chooses a market order's direction; *noise says whether it came from a noise trader. */
static int market_side(book *b, const traders *t, int *noise)
{
    double p_buy = 0.5;
    *noise = 1;
    if (t->signal != M2_SIGNAL_NONE && u01(b) < INFORMED) {
        double pressure = t->signal == M2_SIGNAL_LINEAR ? imbalance(b) : t->flow / I_SCALE;
        p_buy = 0.5 + 0.5 * tanh((t->signal == M2_SIGNAL_LINEAR ? KAPPA_LINEAR : KAPPA_MEMORY) * pressure);
        *noise = 0;
    }
    return u01(b) < p_buy ? 1 : -1;
}

/* ---- the simulation ------------------------------------------------------------------------------- */

typedef struct {
    int bid, ask;
    int32_t bid_lots, ask_lots;
} top;

static top top_of(const book *b)
{
    top t = {best_bid(b), best_ask(b), 0, 0};
    t.bid_lots = b->depth[0][t.bid];
    t.ask_lots = b->depth[1][t.ask];
    return t;
}

/* One event of the book; returns 1 with *f filled when it was a trade. */
static int step(book *b, const traders *t, double *clock, fill *f, int *noise)
{
    double r_lim = 2 * ALPHA, r_mkt = 2 * MU, r_can = DELTA * (double)(b->total[0] + b->total[1]);
    double r = r_lim + r_mkt + r_can, u = u01(b) * r;
    *clock += expo(b) / r;
    int traded = 0;
    if (u < r_lim)
        limit_order(b, u < ALPHA ? 0 : 1);
    else if (u < r_lim + r_mkt) {
        market_order(b, market_side(b, t, noise), f);
        traded = f->lots > 0;
    } else
        cancel_lot(b);
    refill(b);
    int bb = best_bid(b), ba = best_ask(b);
    if (bb < 64 || ba > LEVELS - 64) recentre(b);
    return traded;
}

static void store_row(m2_dataset *ds, int64_t i, const book *b, const top *q, const fill *f, int traded)
{
    ds->bid_px[i] = (double)(b->offset + q->bid) * TICK_SIZE;
    ds->ask_px[i] = (double)(b->offset + q->ask) * TICK_SIZE;
    ds->bid_sz[i] = q->bid_lots * LOT;
    ds->ask_sz[i] = q->ask_lots * LOT;
    ds->trade_px[i] = traded ? f->vwap * TICK_SIZE : NAN;
    ds->trade_sz[i] = traded ? (double)f->lots * LOT : 0;
    ds->side[i] = (int8_t)(traded ? f->side : 0);
}

/* The first `levels` non-empty price levels on each side, best first, in LOBSTER order (a side with fewer
 * gets empty levels: price 0, size 0). The search stops 4·PLACE_MAX ticks behind the best quote. */
static void store_book(m2_dataset *ds, int64_t i, const book *b, const top *q)
{
    const int L = ds->book_levels;
    double *row = ds->book + i * 4 * L;
    memset(row, 0, sizeof(double) * 4 * (size_t)L);
    for (int side = 0; side < 2; side++) {
        int best = side ? q->ask : q->bid, dir = side ? 1 : -1, n = 0;
        for (int d = 0; n < L && d <= PLACE_MAX * 4; d++) {
            int lv = best + dir * d;
            if (lv < 0 || lv >= LEVELS || b->depth[side][lv] == 0) continue;
            row[4 * n + (side ? 0 : 2)] = (double)(b->offset + lv) * TICK_SIZE;
            row[4 * n + (side ? 1 : 3)] = b->depth[side][lv] * LOT;
            n++;
        }
    }
}

/* Days since the epoch of the d-th trading day (weekdays from FIRST_DAY). */
static int64_t trading_day(int d)
{
    int64_t day = FIRST_DAY;
    for (int n = 0; n < d;) {
        day++;
        int weekday = (int)((day + 3) % 7); /* 0 = Monday; 1970-01-01 was a Thursday */
        n += weekday < 5;
    }
    return day;
}

/* Simulates rows [row0, row1) as one session; clock times are rescaled to the session's 6.5 hours. */
static void run_session(book *b, traders *t, m2_dataset *ds, double *latent, double *when, int64_t row0, int64_t row1,
                        int day)
{
    double clock = 0;
    top prev = top_of(b);
    t->flow = 0;
    for (int64_t i = row0; i < row1;) {
        fill f = {0, 0, 0};
        int noise = 1, traded = step(b, t, &clock, &f, &noise);
        top q = top_of(b);
        if (!traded && memcmp(&q, &prev, sizeof q) == 0)
            continue; /* deep-book event: invisible in a top-of-book feed */
        prev = q;
        t->flow = t->decay * t->flow + (traded && noise ? f.side : 0);
        store_row(ds, i, b, &q, &f, traded);
        if (ds->book) store_book(ds, i, b, &q);
        if (latent) latent[i] = t->signal == M2_SIGNAL_LINEAR ? imbalance(b) : t->flow;
        when[i - row0] = clock;
        i++;
    }
    int64_t open_ns = trading_day(day) * 86400000000000LL + (int64_t)(SESSION_OPEN_S * 1e9);
    for (int64_t i = row0; i < row1; i++)
        ds->ts_ns[i] = open_ns + (int64_t)(when[i - row0] / clock * SESSION_LEN_S * 1e9);
}

/* ---- public --------------------------------------------------------------------------------------- */

void m2_synth_defaults(m2_synth_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ticks = 200000;
    o->sessions = 10;
    o->seed = 1;
    o->signal = M2_SIGNAL_MEMORY;
    m2_feature_opts_defaults(&o->feat);
}

static const char *const signal_names[] = {"none", "linear", "memory"};

int m2_signal_from_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, signal_names[i]) == 0) return i;
    return -1;
}

const char *m2_signal_name(int signal) { return signal >= 0 && signal < 3 ? signal_names[signal] : "?"; }

static int alloc_raw(m2_dataset *ds, int64_t n)
{
    size_t d = (size_t)n * sizeof(double);
    ds->ts_ns = malloc((size_t)n * sizeof *ds->ts_ns);
    ds->bid_px = malloc(d);
    ds->ask_px = malloc(d);
    ds->bid_sz = malloc(d);
    ds->ask_sz = malloc(d);
    ds->trade_px = malloc(d);
    ds->trade_sz = malloc(d);
    ds->side = malloc((size_t)n);
    ds->sessions = malloc((size_t)(ds->n_sessions + 1) * sizeof *ds->sessions);
    if (!ds->ts_ns || !ds->bid_px || !ds->ask_px || !ds->bid_sz || !ds->ask_sz || !ds->trade_px || !ds->trade_sz ||
        !ds->side || !ds->sessions)
        return m2_fail(M2_EFAIL, "synth: out of memory for %lld ticks", (long long)n);
    return M2_OK;
}

static int check_opts(const m2_synth_opts *o)
{
    if (o->sessions < 1 || o->ticks < 2 * (int64_t)o->sessions)
        return m2_fail(M2_EUSAGE, "--ticks (%lld): need at least 2 per session (%d sessions)", (long long)o->ticks,
                       o->sessions);
    if (o->signal < 0 || o->signal > 2) return m2_fail(M2_EUSAGE, "--signal (%d): unknown", o->signal);
    if (o->levels < 0 || o->levels > 10) return m2_fail(M2_EUSAGE, "--levels (%d): must be in [0, 10]", o->levels);
    return M2_OK;
}

int m2_synth_events(const m2_synth_opts *o, m2_dataset *ds, double **latent)
{
    memset(ds, 0, sizeof *ds);
    if (latent) *latent = NULL;
    if (check_opts(o)) return M2_EUSAGE;
    ds->n_rows = o->ticks;
    ds->n_sessions = o->sessions;
    book *b = malloc(sizeof *b);
    double *lat = latent ? malloc((size_t)o->ticks * sizeof *lat) : NULL;
    double *when = malloc((size_t)(o->ticks / o->sessions + 1) * sizeof *when);
    ds->book_levels = o->levels;
    if (o->levels > 0) {
        ds->book = malloc(sizeof(double) * 4 * (size_t)o->levels * (size_t)o->ticks);
        ds->extra = malloc(sizeof(float) * (size_t)(o->levels + 1) * (size_t)o->ticks);
        ds->n_extra = o->levels + 1;
    }
    if (!b || !when || (latent && !lat) || alloc_raw(ds, o->ticks) || (o->levels && (!ds->book || !ds->extra))) {
        free(b);
        free(lat);
        free(when);
        m2_dataset_free(ds);
        return m2_fail(M2_EFAIL, "synth: out of memory for %lld ticks", (long long)o->ticks);
    }
    init_book(b, o->seed);
    traders t = {o->signal, 0, exp(-1.0 / M2_SYNTH_MEMORY_TAU)};
    int64_t row = 0;
    for (int s = 0; s < o->sessions; s++) {
        int64_t n = o->ticks / o->sessions + (s < o->ticks % o->sessions);
        ds->sessions[s] = row;
        run_session(b, &t, ds, lat, when, row, row + n, s);
        row += n;
    }
    ds->sessions[o->sessions] = row;
    for (int64_t i = 0; ds->book && i < row; i++) /* the depth features (features.h), as LOBSTER import makes */
        m2_depth_imbalance(ds->book + i * 4 * o->levels, o->levels, ds->extra + i * ds->n_extra);
    free(b);
    free(when);
    ds->tick_size = TICK_SIZE;
    snprintf(ds->instrument, sizeof ds->instrument, "SYNTH");
    snprintf(ds->source, sizeof ds->source, "synth signal=%s seed=%llu", m2_signal_name(o->signal),
             (unsigned long long)o->seed);
    if (latent) *latent = lat;
    return M2_OK;
}

/* The same simulation one session at a time into a dataset of one session's rows (memory: one session). */
int m2_synth_each_session(const m2_synth_opts *o, m2_synth_session_fn fn, void *ctx)
{
    if (check_opts(o)) return M2_EUSAGE;
    int64_t per = o->ticks / o->sessions + 1;
    m2_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n_sessions = 1;
    ds.book_levels = o->levels;
    ds.n_extra = o->levels ? o->levels + 1 : 0;
    ds.tick_size = TICK_SIZE;
    snprintf(ds.instrument, sizeof ds.instrument, "SYNTH");
    snprintf(ds.source, sizeof ds.source, "synth signal=%s seed=%llu", m2_signal_name(o->signal),
             (unsigned long long)o->seed);
    book *b = malloc(sizeof *b);
    double *when = malloc((size_t)per * sizeof *when), *lat = malloc((size_t)per * sizeof *lat);
    if (o->levels) {
        ds.book = malloc(sizeof(double) * 4 * (size_t)o->levels * (size_t)per);
        ds.extra = malloc(sizeof(float) * (size_t)ds.n_extra * (size_t)per);
    }
    int rc = !b || !when || !lat || alloc_raw(&ds, per) || (o->levels && (!ds.book || !ds.extra))
                 ? m2_fail(M2_EFAIL, "synth: out of memory for %lld ticks", (long long)per)
                 : M2_OK;
    if (rc == M2_OK) init_book(b, o->seed);
    traders t = {o->signal, 0, exp(-1.0 / M2_SYNTH_MEMORY_TAU)};
    for (int s = 0; rc == M2_OK && s < o->sessions; s++) {
        int64_t n = o->ticks / o->sessions + (s < o->ticks % o->sessions);
        run_session(b, &t, &ds, lat, when, 0, n, s);
        for (int64_t i = 0; ds.book && i < n; i++)
            m2_depth_imbalance(ds.book + i * 4 * o->levels, o->levels, ds.extra + i * ds.n_extra);
        ds.n_rows = n;
        ds.sessions[0] = 0;
        ds.sessions[1] = n;
        rc = fn(ctx, &ds, lat);
    }
    free(b);
    free(when);
    free(lat);
    m2_dataset_free(&ds);
    return rc;
}

int m2_synth_dataset(const m2_synth_opts *o, m2_dataset *ds, double **latent)
{
    if (m2_synth_events(o, ds, latent)) return M2_EFAIL;
    if (m2_features_build(ds, &o->feat)) {
        m2_dataset_free(ds);
        if (latent) {
            free(*latent);
            *latent = NULL;
        }
        return M2_EFAIL;
    }
    return M2_OK;
}
