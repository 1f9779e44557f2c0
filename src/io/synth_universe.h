/* Synthetic universes (CLI.md `mamba2_ticks synth --instruments`): K independent simulated markets, instrument k
 * named SYNkkk and seeded from (seed, k), with the same options otherwise. Written as one universe file or as
 * per-instrument, per-day CSV files (gzip), the input `mamba2_ticks import` reads. */
#ifndef MAMBA2_SYNTH_UNIVERSE_H
#define MAMBA2_SYNTH_UNIVERSE_H

#include "io/dataset.h"
#include "io/synth.h"

/* The raw events of instrument k (0 <= k < K), as m2_synth_events leaves them, named SYNkkk. */
int m2_synth_instrument(const m2_synth_opts *o, int k, m2_dataset *events);

/* Writes the universe of K instruments to `path` in bounded memory (m2_universe_write): one session is
 * simulated and held at a time (m2_synth_each_session). `meta` receives the index and statistics. */
int m2_synth_universe(const m2_synth_opts *o, int K, const char *path, m2_dataset *meta);

/* The one-instrument file `mamba2_ticks synth` writes (version 1, split at row fractions: m2_universe_write_one),
 * the same as m2_synth_dataset + m2_dataset_write, with /synth/latent, in bounded memory: a session is simulated
 * at a time, the planted variable spooled to an unlinked file next to `path`. */
int m2_synth_one(const m2_synth_opts *o, const char *path, m2_dataset *meta);

/* Writes (creating DIR when missing) DIR/SYNkkk_YYYYMMDD.csv.gz, one per instrument and session (each session is one trading day), columns
 * ts,bid,ask,bid_size,ask_size,price,size,side (ts in ns; price/size/side empty without a trade). Each file is
 * written under a temporary name and renamed. `rows` receives the rows written. */
int m2_synth_write_csv(const m2_synth_opts *o, int K, const char *dir, int64_t *rows);

/* Writes LOBSTER pairs DIR/SYNkkk_YYYY-MM-DD_34200000_57600000_{message,orderbook}_L.csv per instrument and session
 * (L = o->levels, at least 1): a message per row (type 4, an execution, with the trade's size, price and the resting
 * side as direction; else type 1 at the best bid), the book of o->levels levels after it. */
int m2_synth_write_lobster(const m2_synth_opts *o, int K, const char *dir, int64_t *rows);

#endif
