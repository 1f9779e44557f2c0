/* From raw events to the training arrays (docs/FORMATS.md "Tick dataset"): time splits, the default features,
 * forward-return targets and train-only z-scoring. One code path for `synth` and `import`. */
#ifndef MAMBA2_FEATURES_H
#define MAMBA2_FEATURES_H

#include <stdint.h>

#include "io/dataset.h"

/* The default features, in column order. */
enum {
    M2_FEAT_MID_RET,   /* 1e4 · log(mid_t / mid_{t-1}), 0 at a session's first row */
    M2_FEAT_SPREAD,    /* (ask - bid) / tick_size */
    M2_FEAT_QUEUE_IMB, /* (bid_sz - ask_sz) / (bid_sz + ask_sz), 0 when both are unknown */
    M2_FEAT_OFI,       /* Cont–Kukanov–Stoikov order-flow imbalance of the event, as sign · log1p(|e|) */
    M2_FEAT_TRADE,     /* side · log1p(trade_sz), 0 without a trade */
    M2_FEAT_DT,        /* log1p(seconds since the previous event), 0 at a session's first row */
    M2_FEAT_TOD_SIN,   /* sin(2π · UTC time of day / 24 h) */
    M2_FEAT_TOD_COS,   /* cos(2π · UTC time of day / 24 h) */
    M2_N_FEATURES
};

extern const char *const m2_feature_name[M2_N_FEATURES];

typedef struct {
    int n_horizons;
    int32_t horizons[M2_MAX_TARGETS]; /* in events (rows) */
    double split[3];                  /* train, val, test fractions of the rows, summing to 1 */
    float clip;                       /* |z| clip after z-scoring */
} m2_feature_opts;

/* horizons 10,50,100; split 0.8,0.1,0.1; clip 5. */
void m2_feature_opts_defaults(m2_feature_opts *o);

/* "10,50,100": positive, distinct, at most M2_MAX_TARGETS. M2_EUSAGE naming `what` on error. */
int m2_parse_horizons(const char *text, const char *what, m2_feature_opts *o);

/* "0.8,0.1,0.1": three non-negative fractions summing to 1, train > 0. */
int m2_parse_split(const char *text, const char *what, m2_feature_opts *o);

/* Sets ds->split from the fractions, cutting by time. A cut snaps to the nearest session boundary when that
 * moves it by at most a quarter of the smaller neighbouring split; otherwise the session is cut in two there
 * (ds->sessions grows), so that no window and no target ever crosses from one split into another. */
int m2_features_split(m2_dataset *ds, const double fractions[3]);

/* Sets ds->split to [0, c1), [c1, c2), [c2, n_rows) (0 <= c1 <= c2 <= n_rows), cutting a session in two where a cut
 * falls inside one (the universe's calendar cuts, universe.h). */
int m2_features_split_at(m2_dataset *ds, int64_t c1, int64_t c2);

/* One event's raw columns as the features read them (a row of the dataset's /raw arrays). */
typedef struct {
    int64_t ts_ns;                         /* ns since the Unix epoch, UTC */
    double bid_px, ask_px, bid_sz, ask_sz; /* the best quotes after the event */
    double trade_sz;                       /* the event's trade size (0 or non-finite: none) */
    int side;                              /* the trade's aggressor: +1 buy, -1 sell, 0 none */
} m2_event;

/* The default features x [M2_N_FEATURES] of event cur, given the previous event of its session (NULL: cur is the
 * session's first). The one definition of the features: the dataset's rows (m2_features_compute) and the streaming
 * engine's live ticks (m2_stream_features) both come from here. */
void m2_event_features(const m2_event *cur, const m2_event *prev, double tick_size, float *x);

/* Depth imbalance from one book row in LOBSTER order (ask px, ask size, bid px, bid size per level): x[l] for
 * levels l < k is (bid_l - ask_l)/(bid_l + ask_l) of the sizes, x[k] the same of the sizes summed over the k levels;
 * 0 where both are 0 (empty levels have size 0). */
void m2_depth_imbalance(const double *book, int k, float *x);

/* Computes the unnormalised features X [n_rows, M2_N_FEATURES + n_extra] (the extra columns, e.g. LOBSTER depth
 * imbalance depth_imb_1..k and depth_imb_cum, copied from ds->extra) and targets y [n_rows, n_horizons] from the
 * raw arrays, session by session (allocates ds->X and ds->y, sets names and horizons). */
int m2_features_compute(m2_dataset *ds, const m2_feature_opts *o);

/* Mean and standard deviation of each feature over the TRAIN split only, then X ← clip((X - mean) / std).
 * A constant feature gets std 1 (it stays 0 after centring). */
int m2_features_normalise(m2_dataset *ds, float clip);

/* X <- clip((X - mean) / std) with given statistics (kept in ds->mean, ds->std): rows appended to a universe are
 * normalised with the instrument's frozen train statistics (universe_append.c). */
void m2_features_apply(m2_dataset *ds, const double *mean, const double *std, float clip);

/* split + compute + normalise: raw events and sessions in, a complete dataset out. */
int m2_features_build(m2_dataset *ds, const m2_feature_opts *o);

#endif
