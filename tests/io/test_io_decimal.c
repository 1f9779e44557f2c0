/* The importers' number parser (io/decimal.h) against the C library: every string gives strtod's value bit for
 * bit (or is refused exactly when strtod stops early), and integers match strtoll. Random strings cover the shapes
 * a price or size field takes (integer and fraction digits, signs, leading and trailing zeros); fixed edge cases
 * cover the fast path's limits and everything that must fall back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "io/decimal.h"

/* Bitwise equality with strtod (the same double, -0.0 and NaN payloads included), or both refuse. */
static void same_as_strtod(const char *s)
{
    char *end;
    double want = strtod(s, &end), got = 0;
    int want_ok = end != s && *end == '\0', ok = m2_decimal_parse(s, &got) == 0;
    if (ok != want_ok)
        fail_msg("\"%s\": parse %s, strtod %s", s, ok ? "accepts" : "refuses", want_ok ? "accepts" : "refuses");
    if (ok && memcmp(&got, &want, sizeof got) != 0) fail_msg("\"%s\": %.17g, strtod %.17g", s, got, want);
}

static void test_edges(void **state)
{
    (void)state;
    const char *cases[] = {
        "0",
        "-0",
        "+0",
        "0.0",
        "-0.0",
        ".5",
        "5.",
        "-.5",
        "+5.25",
        "00012.3400",
        "1",
        "9",
        "123456789012345",
        "1234567890123456",
        "12345678901234567890",
        "0.1",
        "0.2",
        "0.3",
        "1.1",
        "100.01",
        "4.35",
        "0.000001",
        "0.0000000000000000000001",
        "0.00000000000000000000001",
        "1.0000000000000000000000",
        "999999999999999",
        "9007199254740993",
        "0.1234567890123456789",
        "123.456e2",
        "1e5",
        "1E-3",
        "inf",
        "-inf",
        "nan",
        "NaN",
        "infinity",
        "0x1p3",
        "0x10",
        "",
        "-",
        "+",
        ".",
        "-.",
        "1.2.3",
        "1,5",
        "12abc",
        "abc",
        " 5",
        "5 ",
        "1e",
        "1e+",
        "--1",
        "+-1",
        "1e400",
        "1e-400",
        "2.2250738585072011e-308",
        "179769313486231570000000000000",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) same_as_strtod(cases[i]);
}

/* Random decimals: up to 20 integer and 25 fraction digits (so both the fast path and the fallback run), random
 * signs, zeros and points. 200000 strings take well under a second. */
static void test_random(void **state)
{
    (void)state;
    m2_rng r = {m2_rng_key(12, 0, 0, 0), 0};
    char s[64];
    for (int t = 0; t < 200000; t++) {
        int n = 0, ni = (int)(m2_rng_next_u64(&r) % 21), nf = (int)(m2_rng_next_u64(&r) % 26);
        uint64_t u = m2_rng_next_u64(&r);
        if (u % 4 == 0) s[n++] = '-';
        if (u % 16 == 1) s[n++] = '+';
        for (int i = 0; i < ni; i++) s[n++] = (char)('0' + (m2_rng_next_u64(&r) % (u % 8 == 2 ? 2 : 10)));
        if (nf || u % 8 == 3) s[n++] = '.';
        for (int i = 0; i < nf; i++) s[n++] = (char)('0' + m2_rng_next_u64(&r) % 10);
        s[n] = '\0';
        same_as_strtod(s);
        /* prices as a feed prints them: a random double with 0 to 9 decimals */
        snprintf(s, sizeof s, "%.*f", (int)(u % 10), m2_rng_next_u01(&r) * 1e5);
        same_as_strtod(s);
    }
}

static void test_integers(void **state)
{
    (void)state;
    const char *ok[] = {"0", "7", "1704187800000000001", "9223372036854775807", "000000000000000000000042"};
    const char *bad[] = {"", "-1", "+1", "12a", "9223372036854775808", "99999999999999999999", " 1", "1.0"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -1;
        assert_int_equal(m2_decimal_parse_u63(ok[i], &v), 0);
        assert_true(v == strtoll(ok[i], NULL, 10));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v;
        if (m2_decimal_parse_u63(bad[i], &v) == 0) fail_msg("\"%s\" accepted as %lld", bad[i], (long long)v);
    }
    m2_rng r = {m2_rng_key(13, 0, 0, 0), 0};
    for (int t = 0; t < 100000; t++) {
        char s[32];
        uint64_t u = m2_rng_next_u64(&r) >> (m2_rng_next_u64(&r) % 64);
        snprintf(s, sizeof s, "%llu", (unsigned long long)u);
        int64_t v;
        int rc = m2_decimal_parse_u63(s, &v);
        assert_int_equal(rc, u <= INT64_MAX ? 0 : -1);
        if (rc == 0) assert_true((uint64_t)v == u);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_edges), cmocka_unit_test(test_random),
                                       cmocka_unit_test(test_integers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
