#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_message[1024];

int m2_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
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
    return code;
}

const char *m2_last_error(void) { return last_message; }

int m2_report(const char *prog, int code)
{
    fprintf(stderr, "%s: error: %s\n", prog, last_message[0] ? last_message : "unknown failure");
    return code;
}
