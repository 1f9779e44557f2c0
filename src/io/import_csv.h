/* CSV of quotes or trades → tick dataset (docs/FORMATS.md "CSV import"; docs/CLI.md `mamba2_ticks import`).
 * The header names the columns (any order, case-insensitive; other columns are ignored):
 *   quotes: ts, bid, ask [, bid_size, ask_size] [, price, size, side  (an optional trade on the same row)]
 *   trades: ts, price [, size, side]       (bid = ask = price; side from the tick rule when not given)
 * ts is an integer count of nanoseconds since the epoch or ISO-8601 ("2024-01-02T09:30:00.123456789Z",
 * a space instead of T, optional fraction, Z or ±HH:MM / ±HHMM offset; no offset means UTC).
 * Bad rows (too few fields, unparsable numbers or times, non-finite or non-positive prices, prices above
 * M2_IMPORT_MAX_PRICE, negative sizes, bid > ask, time going backwards) are skipped, counted and reported with their line numbers; with `strict`
 * the first one is fatal. */
#ifndef MAMBA2_IMPORT_CSV_H
#define MAMBA2_IMPORT_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "io/dataset.h"
#include "io/features.h"
#include "io/universe.h"

#define M2_IMPORT_MAX_DEPTH 10

/* The largest price a row may carry: above any traded instrument's price in any currency unit, and low enough
 * that spreads and returns in ticks stay finite in float features (a price of 1e300 gave "feature spread_ticks has
 * mean inf" at the end of an import instead of a bad row with its line). */
#define M2_IMPORT_MAX_PRICE 1e12

typedef struct {
    const char *instrument;        /* NULL: the CSV's file name without folder and extension */
    const char *instrument_column; /* non-NULL: rows name their instrument in this column (import_demux.h) */
    int depth_levels;              /* LOBSTER: depth features from the first k book levels (0: none) */
    double tick_size;              /* 0: inferred as the smallest price change seen (0.01 if none) */
    double session_gap_s;          /* a gap longer than this starts a new session */
    int strict;
    int64_t piece_rows; /* pass 1 hands an instrument's rows on in pieces of this many (0: M2_IMPORT_PIECE_ROWS) */
    /* When set, a bad row at `line` of `file` is reported at *orig_line of the file written into name[cap]
     * (returns M2_OK; else the row is reported where it is): files split out of others (import_demux.h). */
    int (*origin)(void *ctx, const char *file, int64_t line, char *name, size_t cap, int64_t *orig_line);
    void *origin_ctx;
    m2_feature_opts feat;
} m2_import_opts;

/* Rows parsed before they go on to the spool (FORMATS.md "Universe import"): ~3.7 MB of parsed columns. */
#define M2_IMPORT_PIECE_ROWS (1 << 16)

#define M2_IMPORT_LISTED 10

typedef struct {
    int64_t lines; /* data lines read (excluding the header and blank lines) */
    int64_t rows;  /* rows kept */
    int64_t bad;   /* rows skipped */
    int n_listed;  /* the first M2_IMPORT_LISTED bad rows: */
    int64_t bad_line[M2_IMPORT_LISTED];
    char bad_why[M2_IMPORT_LISTED][128];
    int tick_inferred; /* 1 if tick_size was inferred */
} m2_import_report;

/* instrument NULL, tick_size 0 (infer), session_gap_s 3600, not strict, default feature options. */
void m2_import_defaults(m2_import_opts *o);

/* Parses the CSV into raw events and sessions (no features yet). */
int m2_import_csv_events(const char *csv, const m2_import_opts *o, m2_dataset *ds, m2_import_report *rep);

/* The same for the files of one instrument in time order (one per day, say), read one after the other into one
 * event series: time must not go backwards across files either. Files may be gzip-compressed (zlib). */
int m2_import_events_files(const char *const *csv, int n, const m2_import_opts *o, m2_dataset *ds,
                           m2_import_report *rep);

/* The same files read one after the other, holding at most o->piece_rows parsed rows: whenever that many have
 * accumulated (and at the end) they go to emit(sink, piece) as one piece (m2_universe_emit: it may continue the
 * previous piece's session), together the same rows, sessions and trade sides m2_import_events_files makes of the
 * concatenation. The tick size is inferred from all rows, so only
 * the last piece's tick_size is final (m2_universe_write takes that one; FORMATS.md "Universe import"). The report
 * is m2_import_events_files'. */
int m2_import_events_pieces(const char *const *csv, int n, const m2_import_opts *o, m2_universe_emit emit, void *sink,
                            m2_import_report *rep);

/* LOBSTER (import_lobster.c): is this a message file name (..._message_N.csv[.gz])? Such a file is read with its
 * orderbook file (the same name with "_orderbook_") wherever a CSV is accepted. */
int m2_lobster_is_message(const char *path);

/* m2_import_csv_events + m2_features_build: the dataset `mamba2_ticks import` writes. */
int m2_import_csv(const char *csv, const m2_import_opts *o, m2_dataset *ds, m2_import_report *rep);

/* "3 bad rows skipped: line 4 (bid > ask), line 7 (...), ... and 1 more" into buf; "" when none was bad. */
void m2_import_report_text(const m2_import_report *rep, char *buf, size_t cap);

/* The times a dataset holds: int64 ns since 1970-01-01T00:00:00Z, which reaches 2262-04-11; ISO-8601 years outside
 * [M2_TS_FIRST_YEAR, M2_TS_LAST_YEAR] and instants before 1970 are refused (docs/FORMATS.md "CSV import"). */
#define M2_TS_FIRST_YEAR 1970
#define M2_TS_LAST_YEAR  2261

/* Parses a timestamp (integer ns >= 0, or ISO-8601 in the range above) into ns since the epoch; M2_OK or M2_EFAIL
 * (no message). */
int m2_parse_timestamp(const char *text, int64_t *ns);

#endif
