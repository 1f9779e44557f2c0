/* Files that hold several instruments, one row each, told apart by a column (CLI.md `import --instrument-column`;
 * FORMATS.md "Universe import"). Before the import every such file is split once, by a streaming pass that copies
 * each line unparsed, into one plain CSV per instrument (with the original header) in a temporary folder; the
 * list then names those parts, so each instrument is imported, sessioned and normalised on its own and memory stays
 * bounded (a 64 KiB buffer per instrument). Rows of different instruments may interleave in time. */
#ifndef MAMBA2_IMPORT_DEMUX_H
#define MAMBA2_IMPORT_DEMUX_H

#include "io/import_files.h"

/* Replaces the entries of `list` by one part per instrument, written into `folder` (which must exist and be
 * empty), sorted by instrument. The files are read in date order (then path), so an instrument's rows of several
 * days join its part in time order; all files must have the same header. The column is matched
 * case-insensitively; a file without it, or a row whose value is empty or longer than 63 characters, is an error
 * naming file and line. */
int m2_file_list_demux(m2_file_list *list, const char *column, const char *folder);

/* The whole import: the parts in a temporary folder next to `path` (removed afterwards, whatever the outcome),
 * then m2_import_universe. Bad rows are reported with the input file and line they came from (each part has a
 * .lines file beside it: the input and line of each of its data lines). */
int m2_import_universe_by_column(m2_file_list *list, const m2_import_opts *o, const char *path, m2_dataset *meta,
                                 m2_import_report *rep);

/* Removes the parts and the folder (what m2_file_list_demux wrote; safe on a partial one). */
void m2_demux_folder_remove(const char *folder);

#endif
