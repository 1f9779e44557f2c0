/* base/error.h: one message per failure, control characters from inputs escaped so the error stays one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/error.h"

static void test_controls_escaped(void **state)
{
    assert_int_equal(m2_fail(M2_EUSAGE, "bad field '%s'", "a\rb\vc\fd\ne\x7f"), M2_EUSAGE);
    assert_string_equal(m2_last_error(), "bad field 'a\\x0db\\x0bc\\x0cd\\x0ae\\x7f'");
    assert_null(strpbrk(m2_last_error(), "\r\n\v\f"));
    /* the context form escapes too, and keeps the message it wraps */
    m2_fail(M2_EFAIL, "inner\tpart");
    assert_int_equal(m2_fail_context(M2_EFAIL, "outer (%s)", "f\r.csv"), M2_EFAIL);
    assert_string_equal(m2_last_error(), "outer (f\\x0d.csv): inner\\x09part");
    /* UTF-8 is not a control character */
    m2_fail(M2_EFAIL, "caf\xc3\xa9");
    assert_string_equal(m2_last_error(), "caf\xc3\xa9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_controls_escaped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
