/* Appending days to a universe file (CLI.md `mamba2_ticks import --append`; FORMATS.md "Appending days"). The
 * calendar cuts and every instrument's statistics and tick size are frozen: the new rows are normalised with the
 * train statistics the file (and any checkpoint trained on it) already holds, and they land after the last cut,
 * in the test split, so no train or val row moves or changes. */
#ifndef MAMBA2_UNIVERSE_APPEND_H
#define MAMBA2_UNIVERSE_APPEND_H

#include "io/dataset.h"
#include "io/import_files.h"

/* Imports the list's files (days of instruments the universe at `path` already has, each starting after that
 * instrument's last row and at or after the second cut) and replaces `path` atomically by the universe with them
 * appended: every existing row is copied unchanged (bounded memory: the old X and y are mapped, /raw copied in
 * chunks) and each instrument's new sessions follow its existing test rows. On any error `path` is left as it
 * was. `meta` receives the new index and statistics; `rep` the import report. */
int m2_universe_append(const char *path, const m2_file_list *list, const m2_import_opts *o, m2_dataset *meta,
                       m2_import_report *rep);

#endif
