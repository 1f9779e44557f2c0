/* Config: defaults, INI parsing, --set overrides, every kind of error (unknown section, unknown key, unparsable
 * value, out-of-range value, bad choice, cross-key rule), and a lossless round trip through the serialised form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/config_file.h"
#include "base/error.h"

static char *write_temp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/m2cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_defaults_are_valid(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    assert_int_equal(c.model.d_model, 128);
    assert_int_equal(c.model.n_layers, 4);
    assert_int_equal(c.model.d_state, 64);
    assert_int_equal(c.train.seq_len, 512);
    assert_string_equal(c.dist.backend, "auto");
    assert_int_equal(m2_config_validate(&c, "defaults"), M2_OK);
}

static void test_file_overrides_defaults(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    char *p = write_temp("; comment\n[model]\nd_model = 64\nn_layers=2\n\n[train]\nlr = 3e-4\nrun_dir = runs/x\n");
    assert_int_equal(m2_config_load_file(&c, p), M2_OK);
    assert_int_equal(c.model.d_model, 64);
    assert_int_equal(c.model.n_layers, 2);
    assert_true(c.train.lr == 3e-4);
    assert_string_equal(c.train.run_dir, "runs/x");
    assert_int_equal(c.model.headdim, 32); /* untouched key keeps its default */
    unlink(p);
}

/* Each error names the place (file:line or the --set argument) and the key. */
static void expect_file_error(const char *text, int line, const char *fragment)
{
    m2_config c;
    m2_config_defaults(&c);
    char *p = write_temp(text);
    assert_int_equal(m2_config_load_file(&c, p), M2_EUSAGE);
    char where[128];
    snprintf(where, sizeof where, "%s:%d:", p, line);
    const char *msg = m2_last_error();
    if (!strstr(msg, where) || !strstr(msg, fragment))
        fail_msg("message '%s' lacks '%s' or '%s'", msg, where, fragment);
    unlink(p);
}

static void test_file_errors(void **state)
{
    expect_file_error("[model]\nd_model = 64\n[bogus]\nx = 1\n", 3, "unknown section [bogus]");
    expect_file_error("steps = 4\n", 1, "key 'steps' outside any [section]");
    expect_file_error("[model]\nd_modle = 64\n", 2, "unknown key 'd_modle'");
    expect_file_error("[train]\n\nlr = fast\n", 3, "train.lr (fast): not a number");
    expect_file_error("[train]\nsteps = 12x\n", 2, "train.steps (12x): not an integer");
    expect_file_error("[model]\nn_layers = 0\n", 2, "model.n_layers (0): out of range");
    expect_file_error("[dist]\nbackend = gloo\n", 2, "dist.backend: 'gloo' is not one of");
    expect_file_error("[train]\nseed = -3\n", 2, "train.seed (-3): not a non-negative integer");
    expect_file_error("[model\nd_model = 64\n", 1, "syntax error");
}

/* A UTF-8 byte-order mark before a first-line [section] is accepted; a line longer than the INI reader's buffer is
 * refused with one line that names it and the way around (--set), not split into a second line. */
static void test_bom_and_long_lines(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    assert_int_equal(m2_config_load_string(&c, "\xef\xbb\xbf[train]\nsteps = 33\n", "bom.ini"), M2_OK);
    assert_int_equal(c.train.steps, 33);
    char text[1200];
    int n = snprintf(text, sizeof text, "[data]\npath = /");
    memset(text + n, 'p', 600);
    snprintf(text + n + 600, sizeof text - (size_t)n - 600, ".h5\n[train]\nsteps = 5\n");
    assert_int_equal(m2_config_load_string(&c, text, "long.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "long.ini:2: line longer than"));
    assert_non_null(strstr(m2_last_error(), "--set"));
}

static void test_missing_file(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    assert_int_equal(m2_config_load_file(&c, "/nonexistent/x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "/nonexistent/x.ini"));
}

static void test_set_overrides_and_errors(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    assert_int_equal(m2_config_set(&c, "train.steps=77"), M2_OK);
    assert_int_equal(c.train.steps, 77);
    assert_int_equal(m2_config_set(&c, "data.path=/a=b.h5"), M2_OK); /* '=' inside the value is kept */
    assert_string_equal(c.data.path, "/a=b.h5");
    assert_int_equal(m2_config_set(&c, "train.steps"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "--set train.steps"));
    assert_int_equal(m2_config_set(&c, "train.nope=1"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "unknown key 'nope'"));
    assert_int_equal(m2_config_set(&c, "nope.x=1"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "unknown section [nope]"));
    assert_int_equal(m2_config_set(&c, "train.lr=-1"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "out of range"));
    /* numbers are strict (base/cli.h): no blanks, no wrap, no float for an integer */
    assert_int_equal(m2_config_set(&c, "train.seed= -1"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "train.seed ( -1): not a non-negative integer"));
    assert_int_equal(m2_config_set(&c, "train.seed=-1"), M2_EUSAGE);
    assert_int_equal(m2_config_set(&c, "train.steps=99999999999999999999"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "out of range"));
    assert_int_equal(m2_config_set(&c, "train.steps=1e3"), M2_EUSAGE);
    assert_int_equal(m2_config_set(&c, "train.lr=nan"), M2_EUSAGE);
    assert_int_equal(m2_config_set(&c, "train.lr=1e999"), M2_EUSAGE);
    assert_int_equal(c.train.steps, 77); /* a failed --set changes nothing */
}

static void test_cross_key_rules(void **state)
{
    m2_config c;
    m2_config_defaults(&c);
    c.model.headdim = 48; /* 256 % 48 != 0 */
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "model.headdim"));
    m2_config_defaults(&c);
    c.model.ngroups = 3; /* 8 heads */
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "model.ngroups"));
    m2_config_defaults(&c);
    c.train.burn_in = c.train.seq_len;
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "train.burn_in"));
    m2_config_defaults(&c);
    c.train.global_batch = 12;
    c.train.micro_batch = 8;
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "train.global_batch"));
    m2_config_defaults(&c);
    assert_int_equal(m2_config_set(&c, "train.select_by=ic@50"), M2_OK);
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_OK);
    assert_int_equal(m2_config_set(&c, "train.select_by=sharpe"), M2_OK); /* free text, checked by validate */
    assert_int_equal(m2_config_validate(&c, "x.ini"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "train.select_by"));
}

static void test_round_trip(void **state)
{
    m2_config a, b;
    m2_config_defaults(&a);
    a.train.lr = 1.0 / 3.0; /* needs all 17 digits to survive */
    a.train.seed = 18446744073709551615ull;
    a.train.steps = 123456789012345;
    snprintf(a.train.run_dir, sizeof a.train.run_dir, "runs/with spaces");
    char *text = m2_config_to_string(&a);
    assert_non_null(text);
    m2_config_defaults(&b);
    assert_int_equal(m2_config_load_string(&b, text, "stored"), M2_OK);
    assert_memory_equal(&a, &b, sizeof a);
    m2_config_defaults(&b);
    assert_int_equal(m2_config_from_text(&b, text, "stored"), M2_OK); /* the checkpoint reader's way */
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
}

/* The canonical reader (checkpoints): a value longer than inih's 200-byte line buffer survives; malformed lines
 * and unknown keys name their line. */
static void test_canonical_text(void **state)
{
    m2_config a, b;
    m2_config_defaults(&a);
    memset(a.train.run_dir, 'r', 900);
    a.train.run_dir[900] = '\0';
    char *text = m2_config_to_string(&a);
    m2_config_defaults(&b);
    assert_int_equal(m2_config_from_text(&b, text, "ck.h5"), M2_OK);
    assert_string_equal(a.train.run_dir, b.train.run_dir);
    free(text);
    assert_int_equal(m2_config_from_text(&b, "[train]\nsteps = 5\r\n\nlr 3\n", "ck.h5"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "ck.h5:4: syntax error"));
    assert_int_equal(b.train.steps, 5);
    assert_int_equal(m2_config_from_text(&b, "[train]\nbogus = 1\n", "ck.h5"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "ck.h5:2: unknown key 'bogus'"));
    assert_int_equal(m2_config_from_text(&b, "[nosuch]\nx = 1\n", "ck.h5"), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "unknown section [nosuch]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_valid),
        cmocka_unit_test(test_file_overrides_defaults),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_set_overrides_and_errors),
        cmocka_unit_test(test_cross_key_rules),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_canonical_text),
        cmocka_unit_test(test_bom_and_long_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
