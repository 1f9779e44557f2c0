/* Inside the importers (import_csv.c, import_lobster.c): the growing event arrays both fill, and the shared line
 * reader. Not a public interface. */
#ifndef MAMBA2_IMPORT_ROWS_H
#define MAMBA2_IMPORT_ROWS_H

#include <stdint.h>
#include <sys/types.h>
#include <zlib.h>

#include "io/dataset.h"
#include "io/import_csv.h"

typedef struct rows {
    int64_t n, cap;
    int64_t *ts;
    double *bid, *ask, *bsz, *asz, *tpx, *tsz;
    int8_t *side;
    int n_extra;  /* per-row extra features (depth), 0 for none */
    float *extra; /* [cap, n_extra] */
    int64_t kept; /* rows kept so far, those handed on included */
    /* When set, called by m2_rows_keep once n reaches flush_at: it hands rows on (a piece, import_csv.c) and leaves
     * at least the last row in place, so a reader's "time goes backwards" check still sees it. */
    int (*flush)(void *ctx, struct rows *r);
    void *flush_ctx;
    int64_t flush_at;
} rows;

/* One parsed row before it is accepted. */
typedef struct {
    int64_t ts;
    double bid, ask, bsz, asz, tpx, tsz;
    int side; /* +1, -1, 0 = none given */
    int has_trade;
    float extra[M2_IMPORT_MAX_DEPTH + 1];
} event;

int m2_rows_keep(rows *r, const event *e);

/* Counts a skipped row and lists the first M2_IMPORT_LISTED; `file` names the file when there are several. */
void m2_import_note_bad(m2_import_report *rep, int64_t line, const char *why, const char *file);

/* The next line of a plain or gzip-compressed file into *buf (grown): its length, or -1 at the end or on an error
 * (gzerror says which). */
ssize_t m2_gz_line(gzFile in, char **buf, size_t *cap);

/* Reads one message file and its orderbook file (the same name with "orderbook") into r. */
int m2_lobster_read(const char *message, const m2_import_opts *o, rows *r, m2_import_report *rep);

#endif
