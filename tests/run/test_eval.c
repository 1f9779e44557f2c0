/* Evaluation of a split (core/eval.c) on a small in-memory dataset with a small seeded model:
 * - stream mode predicts every row of the split, in order, each part (session ∩ split) from a zero state:
 *   equal to one direct chunked forward over the part, including parts that start at a split boundary in the
 *   middle of a session (nothing leaks across the boundary);
 * - window mode keeps exactly the rows at window positions >= burn_in (tail windows included) and, on the
 *   first window of each part (which sees the whole part so far), equals stream mode; on later windows it
 *   differs (the check above can fail);
 * - the ridge baseline is fitted on the train split only;
 * - bad shapes, empty splits and bad windows are clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/error.h"
#include "run/eval.h"
#include "base/layout.h"
#include "core/model.h"
#include "base/rng.h"

enum { F = 4, O = 2, NROWS = 148, NSES = 3 };
static const int64_t SESSIONS[NSES + 1] = {0, 50, 87, 148};
/* train [0,60), val [60,100), test [100,148): val's first part [60,87) starts in the middle of session 1,
 * test's only part [100,148) in the middle of session 2 */
static const int64_t SPLITS[3][2] = {{0, 60}, {60, 100}, {100, 148}};
enum { SEQ = 16, BURN = 4 };

typedef struct {
    m2_dataset ds;
    m2_layout lay;
    float *params;
} fixture;

static double gauss(m2_rng *r)
{
    double u = m2_rng_next_u01(r), v = m2_rng_next_u01(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

/* Features N(0,1); target 0 = 1.5 x0 − x3 + noise on every row; target 1 NaN on each session's last 3 rows
 * (a horizon crossing the session end), noise elsewhere. */
static void make_dataset(m2_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    ds->n_rows = NROWS;
    ds->n_features = F;
    ds->n_targets = O;
    ds->X = malloc(sizeof(float) * NROWS * F);
    ds->y = malloc(sizeof(float) * NROWS * O);
    ds->n_sessions = NSES;
    ds->sessions = malloc(sizeof SESSIONS);
    memcpy(ds->sessions, SESSIONS, sizeof SESSIONS);
    memcpy(ds->split, SPLITS, sizeof SPLITS);
    ds->horizons[0] = 1;
    ds->horizons[1] = 3;
    m2_rng r = {m2_rng_key(3, M2_RNG_TEST, 7, 0), 0};
    for (int i = 0; i < NROWS; i++) {
        float *x = ds->X + i * F;
        for (int j = 0; j < F; j++) x[j] = (float)gauss(&r);
        ds->y[i * O] = (float)(1.5 * x[0] - x[3] + 0.05 * gauss(&r));
        int last = 0;
        for (int s = 1; s <= NSES; s++) last |= i >= SESSIONS[s] - 3 && i < SESSIONS[s];
        ds->y[i * O + 1] = last ? NAN : (float)gauss(&r);
    }
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    make_dataset(&fx->ds);
    m2_config cfg;
    m2_config_defaults(&cfg);
    cfg.model.d_model = 16;
    cfg.model.n_layers = 2;
    cfg.model.headdim = 8;
    cfg.model.d_state = 8;
    cfg.model.chunk_size = 8;
    m2_dims d;
    assert_int_equal(m2_dims_init(&d, &cfg, F, O), M2_OK);
    assert_int_equal(m2_layout_init(&fx->lay, &d), M2_OK);
    fx->params = malloc(sizeof(float) * fx->lay.n_params);
    m2_params_init(&fx->lay, fx->params, 42);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    free(fx->ds.X);
    free(fx->ds.y);
    free(fx->ds.sessions);
    free(fx->params);
    m2_layout_free(&fx->lay);
    free(fx);
    return 0;
}

/* Direct chunked forward over rows [b, e) of the dataset from a zero state. */
static float *direct_forward(const fixture *fx, int64_t b, int64_t e)
{
    int T = (int)(e - b);
    m2_model *m;
    assert_int_equal(m2_model_create(&m, &fx->lay, 1, T), M2_OK);
    float *p = malloc(sizeof(float) * (size_t)T * O);
    assert_int_equal(m2_model_forward(m, fx->params, fx->ds.X + b * F, 1, T, p), M2_OK);
    m2_model_free(m);
    return p;
}

static m2_eval_rows predict(const fixture *fx, int split, int mode)
{
    m2_eval_rows r;
    assert_int_equal(m2_eval_predict(NULL, &fx->lay, fx->params, &fx->ds, split, mode, SEQ, BURN, &r), M2_OK);
    return r;
}

/* The parts of each split, by hand from SESSIONS and SPLITS. */
static const int64_t PARTS[3][3][2] = {
    {{0, 50}, {50, 60}, {0, 0}},
    {{60, 87}, {87, 100}, {0, 0}},
    {{100, 148}, {0, 0}, {0, 0}},
};

static void test_stream_is_one_forward_per_part(void **state)
{
    fixture *fx = *state;
    for (int split = 0; split < 3; split++) {
        m2_eval_rows r = predict(fx, split, M2_EVAL_STREAM);
        assert_int_equal(r.M, SPLITS[split][1] - SPLITS[split][0]);
        assert_int_equal(r.O, O);
        for (int64_t i = 0; i < r.M; i++) {
            assert_int_equal(r.row[i], SPLITS[split][0] + i);
            assert_memory_equal(&r.target[i * O], &fx->ds.y[r.row[i] * O], sizeof(float) * O); /* NaN too */
        }
        for (int k = 0; k < 3 && PARTS[split][k][1] > 0; k++) {
            int64_t b = PARTS[split][k][0], e = PARTS[split][k][1];
            float *want = direct_forward(fx, b, e);
            /* the same call on the same inputs: bit-identical */
            assert_memory_equal(&r.pred[(b - SPLITS[split][0]) * O], want, sizeof(float) * (size_t)(e - b) * O);
            free(want);
        }
        m2_eval_rows_free(&r);
    }
}

/* Window mode keeps rows at positions >= BURN of consecutive SEQ-row windows of each part. */
static int64_t window_offset(int split, int64_t row, int64_t *part_b)
{
    for (int k = 0; k < 3; k++)
        if (row >= PARTS[split][k][0] && row < PARTS[split][k][1]) {
            *part_b = PARTS[split][k][0];
            return row - *part_b;
        }
    fail_msg("row %lld is in no part", (long long)row);
    return -1;
}

static void test_window_rows_and_equality_with_stream(void **state)
{
    fixture *fx = *state;
    /* fp32 rounding: the window's GEMMs run over SEQ rows, the stream's over the whole part, and BLAS may
     * block (and so sum) them differently; outputs are O(1) after 2 layers, so a few ulps of 1e-7 each
     * stay far below 1e-4, while a state that leaked or was lost changes outputs by ~1e-2 or more. */
    const double tol = 1e-4;
    for (int split = 1; split < 3; split++) {
        m2_eval_rows s = predict(fx, split, M2_EVAL_STREAM), w = predict(fx, split, M2_EVAL_WINDOW);
        int64_t expect = 0, first = 0;
        double max_later = 0;
        for (int64_t row = SPLITS[split][0]; row < SPLITS[split][1]; row++) {
            int64_t pb, off = window_offset(split, row, &pb);
            if (off % SEQ >= BURN) expect++;
        }
        assert_int_equal(w.M, expect);
        for (int64_t i = 0; i < w.M; i++) {
            int64_t pb, off = window_offset(split, w.row[i], &pb);
            assert_true(off % SEQ >= BURN);
            if (i > 0) assert_true(w.row[i] > w.row[i - 1]);
            int64_t si = w.row[i] - SPLITS[split][0];
            for (int o = 0; o < O; o++) {
                double d = fabs((double)w.pred[i * O + o] - s.pred[si * O + o]);
                if (off < SEQ) {
                    if (d > tol)
                        fail_msg("row %lld: window %g vs stream %g", (long long)w.row[i], w.pred[i * O + o],
                                 s.pred[si * O + o]);
                    first++;
                } else if (d > max_later) {
                    max_later = d;
                }
            }
        }
        assert_true(first > 0);
        /* later windows start from a zero state, the stream does not: they must differ somewhere */
        if (!(max_later > 10 * tol))
            fail_msg("split %d: later windows equal the stream (max diff %g)", split, max_later);
        m2_eval_rows_free(&s);
        m2_eval_rows_free(&w);
    }
}

static void test_ridge_fits_train_split(void **state)
{
    fixture *fx = *state;
    m2_eval_rows r = predict(fx, M2_SPLIT_TEST, M2_EVAL_STREAM);
    m2_ridge fit;
    float *p = malloc(sizeof(float) * (size_t)r.M * O);
    assert_int_equal(m2_eval_ridge(&fx->ds, &r, &fit, p), M2_OK);
    /* horizon 1 has NaN on the last 3 rows of session 0 (47..49), all inside train [0,60) */
    assert_int_equal(fit.n_fit[0], 60);
    assert_int_equal(fit.n_fit[1], 57);
    /* 60 rows, noise 0.05: weight standard errors ~0.05/√60 ≈ 0.007; 0.05 is 7 of them */
    assert_true(fabs(fit.w[0] - 1.5) < 0.05 && fabs(fit.w[3] + 1.0) < 0.05);
    for (int64_t i = 0; i < r.M; i++)
        assert_true(p[i * O] == (float)m2_ridge_predict_one(&fit, fx->ds.X + r.row[i] * F, 0));
    m2_eval_report rep;
    memset(&rep, 0, sizeof rep);
    assert_int_equal(m2_eval_metrics(&r, p, &rep), M2_OK);
    assert_int_equal(rep.ridge[1].n, 45); /* test rows 100..147 minus session 2's last 3 */
    assert_true(rep.ridge[0].ic > 0.99);  /* the planted relation out of sample */
    m2_ridge_free(&fit);
    free(p);
    m2_eval_rows_free(&r);
}

/* The fixture's model on a dataset of random ticks cut into n_sessions sessions (sessions[0..n_sessions], kept by
 * the caller); the first is split into train [0, 100) and val, the others are the test split. Free X and y. */
static fixture sessions_fixture(const fixture *fx, int64_t *sessions, int n_sessions)
{
    const int64_t rows = sessions[n_sessions];
    fixture big = *fx;
    m2_dataset *ds = &big.ds;
    memset(ds, 0, sizeof *ds);
    ds->n_rows = rows;
    ds->n_features = F;
    ds->n_targets = O;
    ds->X = malloc(sizeof(float) * (size_t)rows * F);
    ds->y = malloc(sizeof(float) * (size_t)rows * O);
    assert_true(ds->X && ds->y);
    ds->n_sessions = n_sessions;
    ds->sessions = sessions;
    int64_t splits[3][2] = {{0, 100}, {100, sessions[1]}, {sessions[1], rows}};
    memcpy(ds->split, splits, sizeof splits);
    m2_rng r = {m2_rng_key(5, M2_RNG_TEST, 9, 0), 0};
    for (int64_t i = 0; i < rows * F; i++) ds->X[i] = (float)gauss(&r);
    for (int64_t i = 0; i < rows * O; i++) ds->y[i] = (float)gauss(&r);
    return big;
}

/* Largest |eval - chunked forward| over the test-split part [b, e) of the output, and the part's output scale. */
static double part_error(const fixture *big, const m2_eval_rows *got, int64_t b, int64_t e, double *scale)
{
    const int64_t at = b - big->ds.split[M2_SPLIT_TEST][0];
    float *want = direct_forward(big, b, e);
    double worst = 0;
    *scale = 0;
    for (int64_t i = 0; i < (e - b) * O; i++) *scale = fmax(*scale, fabs(want[i]));
    for (int64_t i = 0; i < (e - b) * O; i++) worst = fmax(worst, fabs((double)got->pred[at * O + i] - want[i]));
    free(want);
    return worst;
}

/* Parts longer than the chunked forward's cap (16384 rows, eval.c) are computed tick by tick by the streaming
 * engine, a split's long parts stepped together in groups of 8; each must agree with one chunked forward over the
 * whole part, and the rows must come out in ascending order with the short part among them chunked as usual
 * (bitwise the direct forward). Nine long parts of different lengths: two groups, parts ending at different ticks.
 * Tolerance: the two sum in different orders over up to 17,200 recurrent steps in fp32; tests/stream measures 7e-7
 * of the output scale between them, and 1e-4 of the scale leaves two orders of magnitude while a wrong state carry
 * (a reset mid-part, parts swapping streams) moves outputs by more than 1e-2. */
static void test_long_sessions_stream(void **state)
{
    fixture *fx = *state;
    enum { TEST_BEGIN = 200, N_PARTS = 10, SHORT = 4 };
    int64_t sessions[N_PARTS + 2] = {0, TEST_BEGIN};
    for (int k = 0; k < N_PARTS; k++) /* part SHORT has 500 rows, the others 16,400 + 100 k */
        sessions[k + 2] = sessions[k + 1] + (k == SHORT ? 500 : 16400 + 100 * k);
    const int64_t rows = sessions[N_PARTS + 1];
    fixture big = sessions_fixture(fx, sessions, N_PARTS + 1);
    m2_dataset *ds = &big.ds;

    m2_eval_rows got;
    assert_int_equal(m2_eval_predict(NULL, &big.lay, big.params, ds, M2_SPLIT_TEST, M2_EVAL_STREAM, SEQ, BURN, &got),
                     M2_OK);
    assert_int_equal(got.M, rows - TEST_BEGIN);
    for (int64_t i = 0; i < got.M; i++) assert_true(got.row[i] == TEST_BEGIN + i);
    double worst_rel = 0;
    for (int k = 0; k < N_PARTS; k++) {
        const int64_t b = sessions[k + 1], e = sessions[k + 2], at = b - TEST_BEGIN;
        double scale;
        const double worst = part_error(&big, &got, b, e, &scale);
        assert_true(scale > 0.1);
        if (k == SHORT)
            assert_true(worst == 0.0); /* chunked: the same call on the same inputs */
        else
            assert_true(worst <= 1e-4 * scale);
        worst_rel = fmax(worst_rel, worst / scale);
        assert_memory_equal(&got.target[at * O], ds->y + b * O, sizeof(float) * (size_t)(e - b) * O);
    }
    printf("9 long parts streamed in groups + 1 chunked: max |eval - chunked| = %.3g of the output scale\n", worst_rel);
    m2_eval_rows_free(&got);
    free(ds->X);
    free(ds->y);
}

/* A stand-in device for the cap rule of eval.c: the CPU ops without lanes (what marks a device backend, ops.h)
 * whose alloc refuses anything larger than alloc_limit bytes, as a GPU out of memory would. */
static size_t alloc_limit, alloc_largest;
static m2_ops small_device;
static void *limited_alloc(const m2_ops *o, size_t bytes)
{
    if (bytes > alloc_limit) return NULL;
    if (bytes > alloc_largest) alloc_largest = bytes;
    return m2_ops_cpu()->alloc(m2_ops_cpu(), bytes);
}

/* On a device the chunked forward takes parts as long as its memory allows: the cap starts at the longest part
 * and halves while the workspace cannot be allocated. Parts: A 40,000 rows, B 17,000, C 500; the device holds a
 * workspace for 20,000 rows but not 40,000, so the cap settles at 20,000: B (over the CPU's 16,384) and C run
 * chunked, exactly the direct forward, and A goes through the recurrent step (1e-4 of the scale, as above). */
static void test_device_cap(void **state)
{
    fixture *fx = *state;
    int64_t sessions[5] = {0, 200, 40200, 57200, 57700};
    fixture big = sessions_fixture(fx, sessions, 4);
    small_device = *m2_ops_cpu();
    small_device.lanes = NULL;
    small_device.alloc = limited_alloc;
    alloc_limit = SIZE_MAX; /* measure the largest allocation of a 20,000-row inference workspace */
    alloc_largest = 0;
    m2_model *m;
    assert_int_equal(m2_model_create_inference(&m, &big.lay, 1, 20000, &small_device), M2_OK); /* as eval.c */
    m2_model_free(m);
    alloc_limit = alloc_largest;

    m2_eval_rows got;
    assert_int_equal(
        m2_eval_predict(&small_device, &big.lay, big.params, &big.ds, M2_SPLIT_TEST, M2_EVAL_STREAM, SEQ, BURN, &got),
        M2_OK);
    assert_int_equal(got.M, 57500);
    double scale, worst[3];
    for (int k = 0; k < 3; k++) {
        worst[k] = part_error(&big, &got, sessions[k + 1], sessions[k + 2], &scale);
        assert_true(scale > 0.1);
        assert_true(worst[k] <= 1e-4 * scale);
    }
    printf("device cap: A streamed (%.3g), B and C chunked (%.3g, %.3g)\n", worst[0], worst[1], worst[2]);
    assert_true(worst[0] > 0 && worst[1] == 0 && worst[2] == 0);
    m2_eval_rows_free(&got);
    free(big.ds.X);
    free(big.ds.y);
}

static void test_bad_inputs(void **state)
{
    fixture *fx = *state;
    m2_eval_rows r;
    fx->ds.n_features = F + 1;
    assert_int_equal(m2_eval_predict(NULL, &fx->lay, fx->params, &fx->ds, 1, M2_EVAL_STREAM, SEQ, BURN, &r), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "5 features"));
    fx->ds.n_features = F;
    fx->ds.split[2][1] = fx->ds.split[2][0];
    assert_int_equal(m2_eval_predict(NULL, &fx->lay, fx->params, &fx->ds, 2, M2_EVAL_STREAM, SEQ, BURN, &r), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "split test is empty"));
    fx->ds.split[2][1] = SPLITS[2][1];
    assert_int_equal(m2_eval_predict(NULL, &fx->lay, fx->params, &fx->ds, 1, M2_EVAL_WINDOW, 8, 8, &r), M2_EUSAGE);
    assert_int_equal(m2_eval_mode_from_name("stream"), M2_EVAL_STREAM);
    assert_int_equal(m2_eval_mode_from_name("window"), M2_EVAL_WINDOW);
    assert_int_equal(m2_eval_mode_from_name("batch"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_is_one_forward_per_part),
        cmocka_unit_test(test_window_rows_and_equality_with_stream),
        cmocka_unit_test(test_ridge_fits_train_split),
        cmocka_unit_test(test_long_sessions_stream),
        cmocka_unit_test(test_device_cap),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
