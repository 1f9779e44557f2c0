#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_message[1024];

/* Control characters taken from an input (a CR or VT in a CSV field, a NUL-free binary name) would break the one
 * error line or a terminal: each becomes \xNN. Done in place, dropping what no longer fits. */
static void escape_controls(char *msg, size_t cap)
{
    char out[sizeof last_message];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n + 1 < sizeof out; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            if (n + 5 >= sizeof out) break;
            n += (size_t)snprintf(out + n, sizeof out - n, "\\x%02x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n] = '\0';
    snprintf(msg, cap, "%s", out);
}

int m2_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    escape_controls(last_message, sizeof last_message);
    return code;
}

int m2_fail_context(int code, const char *fmt, ...)
{
    char previous[sizeof last_message];
    memcpy(previous, last_message, sizeof previous);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_message)
        snprintf(last_message + n, sizeof last_message - (size_t)n, ": %s", previous);
    escape_controls(last_message, sizeof last_message);
    return code;
}

const char *m2_last_error(void) { return last_message; }

int m2_report(const char *prog, int code)
{
    fprintf(stderr, "%s: error: %s\n", prog, last_message[0] ? last_message : "unknown failure");
    return code;
}
