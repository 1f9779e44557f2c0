/* base/cli.h: the strict number parsers every option and config value goes through, and getopt_long's one-line
 * error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <string.h>

#include "base/cli.h"
#include "base/error.h"

static void expect_i64_error(const char *text, const char *fragment)
{
    int64_t v = 42;
    assert_int_equal(m2_parse_i64("--n", text, -5, 1000, &v), M2_EUSAGE);
    assert_int_equal(v, 42); /* untouched on error */
    assert_non_null(strstr(m2_last_error(), fragment));
}

static void test_integers(void **state)
{
    int64_t v;
    assert_int_equal(m2_parse_i64("--n", "17", -5, 1000, &v), M2_OK);
    assert_int_equal(v, 17);
    assert_int_equal(m2_parse_i64("--n", "-5", -5, 1000, &v), M2_OK);
    assert_int_equal(v, -5);
    expect_i64_error(" 17", "--n ( 17): not an integer"); /* strtoll would skip the blank */
    expect_i64_error("17 ", "not an integer");
    expect_i64_error("1e3", "not an integer");
    expect_i64_error("", "not an integer");
    expect_i64_error("-6", "out of range [-5, 1000]");
    expect_i64_error("99999999999999999999", "out of range"); /* ERANGE, not a clamped value */
    uint64_t u;
    assert_int_equal(m2_parse_u64("seed", "18446744073709551615", 0, UINT64_MAX, &u), M2_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(m2_parse_u64("seed", "-1", 0, UINT64_MAX, &u), M2_EUSAGE); /* strtoull would wrap it */
    assert_int_equal(m2_parse_u64("seed", "18446744073709551616", 0, UINT64_MAX, &u), M2_EUSAGE);
    int i;
    assert_int_equal(m2_parse_int("--b", "65537", 1, 65536, &i), M2_EUSAGE);
}

static void test_floats(void **state)
{
    double v;
    assert_int_equal(m2_parse_f64("--clip", "5", 0, FLT_MAX, 1, &v), M2_OK);
    assert_true(v == 5.0);
    assert_int_equal(m2_parse_f64("--clip", ".5", 0, FLT_MAX, 1, &v), M2_OK);
    assert_int_equal(m2_parse_f64("--clip", "0", 0, FLT_MAX, 1, &v), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "must be > 0"));
    assert_int_equal(m2_parse_f64("--clip", "1e39", 0, FLT_MAX, 1, &v), M2_EUSAGE); /* would be inf as a float */
    assert_non_null(strstr(m2_last_error(), "out of range"));
    assert_int_equal(m2_parse_f64("x", "0", 0, 1, 0, &v), M2_OK); /* closed lower bound */
    const char *bad[] = {"nan", "inf", "-inf", "1e999", " 1", "1 ", "1x", "", "0x10", "."};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        assert_int_equal(m2_parse_f64("x", bad[k], -1e300, 1e300, 0, &v), M2_EUSAGE);
}

static void test_getopt_error_line(void **state)
{
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    char *argv[] = {"prog", "--out", "f", "--bogus", NULL};
    optind = 1;
    assert_int_equal(m2_cli_next(4, argv, opts, "prog --help"), 'o');
    assert_string_equal(optarg, "f");
    assert_int_equal(m2_cli_next(4, argv, opts, "prog --help"), M2_CLI_BAD);
    assert_non_null(
        strstr(m2_last_error(), "command line (--bogus): unknown option or missing value (see prog --help)"));
    char *argv2[] = {"prog", "--out", NULL};
    optind = 1;
    assert_int_equal(m2_cli_next(2, argv2, opts, "prog --help"), M2_CLI_BAD); /* missing value */
    char *argv3[] = {"prog", "extra", NULL};
    optind = 1;
    assert_int_equal(m2_cli_next(2, argv3, opts, "prog --help"), -1);
    assert_int_equal(m2_cli_no_extra(2, argv3, 0), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "(extra): unexpected argument"));
    assert_int_equal(m2_cli_no_extra(2, argv3, 1), M2_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_integers), cmocka_unit_test(test_floats),
                                       cmocka_unit_test(test_getopt_error_line)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
