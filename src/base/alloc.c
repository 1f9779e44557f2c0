#include "base/alloc.h"

#include "base/error.h"

#include <stdlib.h>

int m2_mul_count(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return -1;
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

void *m2_alloc_array(int64_t n, size_t size, const char *what)
{
    size_t bytes;
    if (n < 0 || __builtin_mul_overflow((size_t)n, size, &bytes)) {
        m2_fail(M2_EFAIL, "%s: %lld x %zu bytes overflow", what, (long long)n, size);
        return NULL;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (!p) m2_fail(M2_EFAIL, "%s: out of memory for %lld x %zu bytes", what, (long long)n, size);
    return p;
}
