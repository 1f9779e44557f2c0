/* Checkpoints are validated on load (io/checkpoint.h): a checkpoint written with a non-finite or absurd weight, a
 * negative or NaN second moment, or counters out of range or inconsistent is refused with one line naming the
 * tensor (and element) or the field; a sound one round-trips exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "io_test_util.h"

#include "base/error.h"
#include "io/checkpoint.h"

/* A small sound checkpoint: 2 layers, seeded weights, moments (v >= 0), 7 steps. */
static void make(m2_checkpoint *ck)
{
    memset(ck, 0, sizeof *ck);
    m2_config_defaults(&ck->cfg);
    ck->cfg.model.d_model = 16;
    ck->cfg.model.n_layers = 2;
    ck->cfg.model.headdim = 8;
    ck->cfg.model.d_state = 8;
    ck->cfg.train.seq_len = 32;
    ck->cfg.train.burn_in = 8;
    m2_dims d;
    assert_int_equal(m2_dims_init(&d, &ck->cfg, 3, 2), M2_OK);
    assert_int_equal(m2_layout_init(&ck->lay, &d), M2_OK);
    const size_t n = ck->lay.n_params;
    ck->params = malloc(n * sizeof(float));
    ck->m = malloc(n * sizeof(float));
    ck->v = malloc(n * sizeof(float));
    m2_params_init(&ck->lay, ck->params, 5);
    for (size_t i = 0; i < n; i++) {
        ck->m[i] = 1e-3f * (float)((int)(i % 7) - 3);
        ck->v[i] = 1e-6f * (float)(i % 5);
    }
    ck->step = 7;
    ck->tokens_seen = 7 * (int64_t)ck->cfg.train.global_batch * ck->cfg.train.seq_len;
    ck->world_size_at_save = 2;
    ck->optim_step = 6; /* one skipped step */
    ck->data_seed = 1234;
    ck->data_step = 7;
    ck->n_features = 3;
    for (int j = 0; j < 3; j++) {
        snprintf(ck->feature_names[j], sizeof ck->feature_names[j], "f%d", j);
        ck->mean[j] = 0.5 * j;
        ck->std[j] = 1.0 + j;
    }
}

/* Saves ck as it is and loads it back with the optimiser state: the load's code and message. */
static int round_trip(const m2_checkpoint *ck, m2_checkpoint *back)
{
    char path[512];
    assert_int_equal(m2_checkpoint_save(test_dir(), ck, path, sizeof path), M2_OK);
    int rc = m2_checkpoint_load(path, back, 1);
    unlink(path);
    return rc;
}

static void test_sound_round_trip(void **state)
{
    m2_checkpoint ck, back;
    make(&ck);
    assert_int_equal(round_trip(&ck, &back), M2_OK);
    assert_memory_equal(ck.params, back.params, ck.lay.n_params * sizeof(float));
    assert_memory_equal(ck.v, back.v, ck.lay.n_params * sizeof(float));
    assert_int_equal(back.optim_step, 6);
    m2_checkpoint_free(&back);
    m2_checkpoint_free(&ck);
}

/* One defect planted in a sound checkpoint: the load fails with a message containing `want`. */
typedef void (*defect_fn)(m2_checkpoint *ck);
static void expect_refused(defect_fn plant, const char *want)
{
    m2_checkpoint ck, back;
    make(&ck);
    plant(&ck);
    assert_int_equal(round_trip(&ck, &back), M2_EFAIL);
    if (!strstr(m2_last_error(), want)) fail_msg("message '%s' lacks '%s'", m2_last_error(), want);
    assert_null(back.params); /* nothing is left to free on failure */
    m2_checkpoint_free(&ck);
}

static void nan_weight(m2_checkpoint *ck)
{
    ck->params[m2_layout_find(&ck->lay, "layers.1.mixer.A_log")->offset + 2] = NAN;
}
static void inf_weight(m2_checkpoint *ck) { ck->params[0] = INFINITY; }
static void huge_weight(m2_checkpoint *ck) { ck->params[m2_layout_find(&ck->lay, "head.bias")->offset] = 1e30f; }
static void negative_v(m2_checkpoint *ck) { ck->v[m2_layout_find(&ck->lay, "norm_f.weight")->offset + 1] = -1e-9f; }
static void nan_v(m2_checkpoint *ck) { ck->v[5] = NAN; }
static void nan_m(m2_checkpoint *ck) { ck->m[9] = NAN; }
static void step_negative(m2_checkpoint *ck) { ck->step = -1; }
static void step_huge(m2_checkpoint *ck) { ck->step = INT64_MAX; }
static void tokens_huge(m2_checkpoint *ck) { ck->tokens_seen = INT64_MAX; }
static void optim_after_step(m2_checkpoint *ck) { ck->optim_step = 8; }
static void cursor_negative(m2_checkpoint *ck) { ck->data_step = -3; }
static void zero_std(m2_checkpoint *ck) { ck->std[1] = 0; }

static void test_defects_refused(void **state)
{
    expect_refused(nan_weight, "/model/layers.1.mixer.A_log[2] is nan: not finite");
    expect_refused(inf_weight, "/model/embed.weight[0] is inf");
    expect_refused(huge_weight, "/model/head.bias[0] is 1e+30: larger in magnitude");
    expect_refused(negative_v, "/optim/v/norm_f.weight[1] is -1e-09: negative");
    expect_refused(nan_v, "/optim/v/");
    expect_refused(nan_m, "/optim/m/");
    expect_refused(step_negative, "step -1 is outside");
    expect_refused(step_huge, "step 9223372036854775807 is outside");
    expect_refused(tokens_huge, "tokens_seen 9223372036854775807 is outside");
    expect_refused(optim_after_step, "/optim step 8 is outside [0, step 7]");
    expect_refused(cursor_negative, "cursor_step -3");
    expect_refused(zero_std, "/norm feature 1 has mean 0.5 and std 0");
}

static int teardown(void **state)
{
    remove_test_dir();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sound_round_trip), cmocka_unit_test(test_defects_refused)};
    return cmocka_run_group_tests(tests, NULL, teardown);
}
