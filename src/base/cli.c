#include "base/cli.h"

#include "base/error.h"
#include "base/version.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int m2_cli_next(int argc, char **argv, const struct option *opts, const char *help)
{
    opterr = 0; /* getopt's own complaint would be a second line on stderr */
    int c = getopt_long(argc, argv, "", opts, NULL);
    if (c != '?' && c != ':') return c;
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    m2_fail(M2_EUSAGE, "command line (%s): unknown option or missing value (see %s)", arg, help);
    return M2_CLI_BAD;
}

int m2_cli_common(int c)
{
    if (c == 'h') return M2_CLI_HELP;
    if (c == 'V') return M2_CLI_VERSION;
    return M2_EUSAGE; /* M2_CLI_BAD from m2_cli_next: its message is set */
}

int m2_cli_finish(const char *prog, int parsed, void (*usage)(FILE *), int (*run)(const void *opts), const void *opts)
{
    if (parsed == M2_CLI_HELP) {
        usage(stdout);
        return 0;
    }
    if (parsed == M2_CLI_VERSION) {
        m2_print_version(prog);
        return 0;
    }
    int rc = parsed == M2_CLI_RUN ? run(opts) : parsed;
    fflush(stdout); /* the report before any error line */
    return rc == M2_OK ? 0 : m2_report(prog, rc);
}

int m2_cli_no_extra(int argc, char **argv, int max_positional)
{
    if (argc - optind <= max_positional) return M2_OK;
    return m2_fail(M2_EUSAGE, "command line (%s): unexpected argument", argv[optind + max_positional]);
}

/* The text starts a number: a digit or a sign followed by a digit (or '.' for a float). */
static int starts_number(const char *t, int allow_point)
{
    if (*t == '-' || *t == '+') t++;
    return isdigit((unsigned char)*t) || (allow_point && *t == '.' && isdigit((unsigned char)t[1]));
}

int m2_parse_i64(const char *what, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = starts_number(text, 0) ? strtoll(text, &end, 10) : 0;
    if (!starts_number(text, 0) || *end) return m2_fail(M2_EUSAGE, "%s (%s): not an integer", what, text);
    if (errno == ERANGE || v < lo || v > hi)
        return m2_fail(M2_EUSAGE, "%s (%s): out of range [%lld, %lld]", what, text, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return M2_OK;
}

int m2_parse_u64(const char *what, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (text[0] == '-' || !starts_number(text, 0))
        return m2_fail(M2_EUSAGE, "%s (%s): not a non-negative integer", what, text);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end) return m2_fail(M2_EUSAGE, "%s (%s): not a non-negative integer", what, text);
    if (errno == ERANGE || v < lo || v > hi)
        return m2_fail(M2_EUSAGE, "%s (%s): out of range [%llu, %llu]", what, text, (unsigned long long)lo,
                       (unsigned long long)hi);
    *out = (uint64_t)v;
    return M2_OK;
}

int m2_parse_int(const char *what, const char *text, int lo, int hi, int *out)
{
    int64_t v;
    int rc = m2_parse_i64(what, text, lo, hi, &v);
    if (!rc) *out = (int)v;
    return rc;
}

int m2_parse_f64(const char *what, const char *text, double lo, double hi, int lo_open, double *out)
{
    char *end;
    errno = 0;
    /* decimal only: strtod also takes hexadecimal floats ("0x1p3"), which no config or option means */
    const int decimal = starts_number(text, 1) && !strpbrk(text, "xX");
    double v = decimal ? strtod(text, &end) : 0;
    if (!decimal || *end) return m2_fail(M2_EUSAGE, "%s (%s): not a number", what, text);
    if (!isfinite(v) || errno == ERANGE) return m2_fail(M2_EUSAGE, "%s (%s): out of the range of a double", what, text);
    if (lo_open && !(v > lo)) return m2_fail(M2_EUSAGE, "%s (%s): must be > %g", what, text, lo);
    if (v < lo || v > hi) return m2_fail(M2_EUSAGE, "%s (%s): out of range [%g, %g]", what, text, lo, hi);
    *out = v;
    return M2_OK;
}
