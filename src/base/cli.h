/* Command-line helpers every program shares (docs/CLI.md "Common rules"): getopt_long with one error line of our
 * own instead of getopt's, and strict number parsers, so that every option and config value is read one way.
 *
 * Strict means: the whole text is the number (no leading or trailing blanks, nothing after it), it is finite, it
 * does not wrap (an integer out of int64's range is "out of range", never a wrapped value; "-1" for an unsigned
 * field is refused, not 2^64-1), and it lies in the stated range. */
#ifndef MAMBA2_CLI_H
#define MAMBA2_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* The next option of argv (getopt_long with an empty short-option string, so every option is --long): its `val`,
 * -1 after the last one, or M2_CLI_BAD with one message naming the argument ("PROGRAM --help" in `help` says where to
 * look). Sets optarg as getopt_long does. Call with the same argv until it returns -1 or M2_CLI_BAD. */
#define M2_CLI_BAD (-2)
int m2_cli_next(int argc, char **argv, const struct option *opts, const char *help);

/* After the options: M2_EUSAGE with a message when argv holds more than `max_positional` non-option arguments. */
int m2_cli_no_extra(int argc, char **argv, int max_positional);

/* What a program's option parser returns besides an error code: run, or print the help or the version. */
enum { M2_CLI_RUN = 0, M2_CLI_HELP = -1, M2_CLI_VERSION = -2 };

/* The end of a program's main, given what its parser returned: the help (usage(stdout)) or the version, exit 0; a
 * parse error, its one line and exit 2; else run(opts), then its error line if it failed. Returns the exit status. */
int m2_cli_finish(const char *prog, int parsed, void (*usage)(FILE *), int (*run)(const void *opts), const void *opts);

/* text -> *out in [lo, hi]; M2_EUSAGE "WHAT (TEXT): ..." otherwise. `what` names the option or key in the message. */
int m2_parse_i64(const char *what, const char *text, int64_t lo, int64_t hi, int64_t *out);
int m2_parse_u64(const char *what, const char *text, uint64_t lo, uint64_t hi, uint64_t *out);
int m2_parse_int(const char *what, const char *text, int lo, int hi, int *out);
/* A finite double in [lo, hi]; with lo_open the lower bound is excluded ("must be > lo"). */
int m2_parse_f64(const char *what, const char *text, double lo, double hi, int lo_open, double *out);

#endif
