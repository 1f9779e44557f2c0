/* Many input files → one universe (FORMATS.md "Universe import"; CLI.md `mamba2_ticks import`). Inputs are
 * files, folders (every *.csv and *.csv.gz inside) or glob patterns. A file's instrument is --instrument when
 * given, else its name without folder and extension up to an optional trailing date: NAME_YYYYMMDD or
 * NAME_YYYY-MM-DD (.csv or .csv.gz). An instrument with several files needs a date in each name: its days are
 * read in date order as one event series; when any input name has a date, all must. */
#ifndef MAMBA2_IMPORT_FILES_H
#define MAMBA2_IMPORT_FILES_H

#include "io/dataset.h"
#include "io/import_csv.h"

typedef struct {
    int n;
    char **path; /* sorted by instrument, then date, then path */
    char (*instrument)[64];
    int *date; /* YYYYMMDD, 0 when the name has none */
} m2_file_list;

/* Expands the inputs; an input that matches nothing is an error naming it. */
int m2_file_list_expand(const char *const *inputs, int n, const m2_import_opts *o, m2_file_list *list);
void m2_file_list_free(m2_file_list *list);

/* Parses NAME[_DATE].csv[.gz] into the instrument and the date (0 when none). M2_EUSAGE on a name too long. */
int m2_file_name_parse(const char *path, char instrument[64], int *date);

/* Imports every instrument of the list into the universe file `path` in bounded memory (m2_universe_write, pieces
 * of rows from m2_import_events_pieces). `rep` sums the instruments' reports; `meta` receives the index and statistics. */
int m2_import_universe(const m2_file_list *list, const m2_import_opts *o, const char *path, m2_dataset *meta,
                       m2_import_report *rep);

/* One CSV (or LOBSTER pair) of one instrument into the file `path` of version 1 (m2_universe_write_one: split at
 * row fractions, no /universe), the instrument named as by m2_import_csv; the same file m2_import_csv and
 * m2_dataset_write make of it, in bounded memory: rows go to the spool in pieces of o->piece_rows. */
int m2_import_one(const char *csv, const m2_import_opts *o, const char *path, m2_dataset *meta, m2_import_report *rep);

#endif
