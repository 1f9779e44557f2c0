/* Error convention (docs/ARCHITECTURE.md): a function that can fail returns a non-zero code and leaves one message;
 * only main() prints it (as "PROGRAM: error: <message>") and exits with the code.
 *   M2_OK     0  success
 *   M2_EFAIL  1  any runtime failure (I/O, numerics, a rank died)
 *   M2_EUSAGE 2  bad usage or bad config (docs/CLI.md exit status 2)
 * The message names the file/key/rank and says why: "<what> (<where>): <why>". */
#ifndef MAMBA2_ERROR_H
#define MAMBA2_ERROR_H

enum { M2_OK = 0, M2_EFAIL = 1, M2_EUSAGE = 2 };

/* Records a printf-style message for this thread and returns code, so call sites read
 *   if (bad) return m2_fail(M2_EUSAGE, "train.lr (%s): must be > 0", file); */
int m2_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Puts context in front of the last message: "<context>: <last message>", and returns code. */
int m2_fail_context(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" when none). */
const char *m2_last_error(void);

/* Prints "prog: error: <last message>" on stderr; returns code for `return m2_report(...)`. */
int m2_report(const char *prog, int code);

#endif
