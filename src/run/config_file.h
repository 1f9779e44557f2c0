/* Config files: INI text (docs/CLI.md) parsed with inih over the key table of base/config.h. */
#ifndef MAMBA2_CONFIG_FILE_H
#define MAMBA2_CONFIG_FILE_H

#include "base/config.h"

/* Parses an INI file over the current values. Unknown section/key, unparsable or out-of-range value:
 * returns M2_EUSAGE with "file:line: section.key: why". */
int m2_config_load_file(m2_config *cfg, const char *path);

/* Parses INI text; `origin` names it in errors. */
int m2_config_load_string(m2_config *cfg, const char *text, const char *origin);

#endif
