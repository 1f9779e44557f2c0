/* Decimal parsing (decimal.h). The fast path is Clinger's: a mantissa m < 2^53 and a power of ten 10^k with
 * |k| <= 22 are both exact doubles, so m * 10^k or m / 10^k is one IEEE operation and therefore correctly rounded
 * (the value strtod returns). Prices and sizes in tick files have at most ~15 significant digits, so nearly every
 * field takes it; the rest goes to the C library. */
#include "io/decimal.h"

#include <stdlib.h>

static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int slow(const char *text, double *out)
{
    char *end;
    *out = strtod(text, &end);
    return end == text || *end ? -1 : 0;
}

int m2_decimal_parse(const char *text, double *out)
{
    const char *p = text;
    int neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    uint64_t m = 0;
    int digits = 0, frac = 0, seen = 0;
    for (; *p >= '0' && *p <= '9'; p++, seen++)
        if (m || *p != '0') m = m * 10 + (uint64_t)(*p - '0'), digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, seen++, frac++)
            if (m || *p != '0') m = m * 10 + (uint64_t)(*p - '0'), digits++;
    /* 15 significant digits keep m below 2^53 (and the loop free of overflow); frac <= 22 keeps 10^frac exact */
    if (*p || !seen || digits > 15 || frac > 22) return slow(text, out);
    double v = frac ? (double)m / pow10[frac] : (double)m;
    *out = neg ? -v : v;
    return 0;
}

int m2_decimal_parse_u63(const char *text, int64_t *out)
{
    const char *p = text;
    if (*p < '0' || *p > '9') return -1;
    while (*p == '0') p++;
    const char *first = p;
    uint64_t v = 0; /* 19 digits stay below 10^19 < 2^64: no overflow before the range check */
    for (; *p >= '0' && *p <= '9' && p - first < 19; p++) v = v * 10 + (uint64_t)(*p - '0');
    if (*p || v > (uint64_t)INT64_MAX) return -1;
    *out = (int64_t)v;
    return 0;
}
