/* Fast number parsing for the CSV importers (docs/FORMATS.md "CSV import"). The results are exactly those of
 * strtod and strtoll: a plain decimal whose digits fit the exact fast path is converted with one correctly rounded
 * IEEE operation, anything else (exponents, many digits, inf/nan, hex, junk) goes to strtod/strtoll. */
#ifndef MAMBA2_DECIMAL_H
#define MAMBA2_DECIMAL_H

#include <stdint.h>

/* Parses the whole of `text` ([+-]digits[.digits], or anything strtod accepts) into *out: 0, or -1 when strtod
 * would stop before the end or read nothing (*out is then unspecified). */
int m2_decimal_parse(const char *text, double *out);

/* Parses the whole of `text`, decimal digits only, into *out: 0, or -1 (empty, other characters, or beyond
 * INT64_MAX). */
int m2_decimal_parse_u63(const char *text, int64_t *out);

#endif
