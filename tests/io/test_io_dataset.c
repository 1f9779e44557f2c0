/* Tick dataset files: write → read gives identical arrays and attributes (raw arrays too), and every kind of
 * invalid content is refused with one message that names the file and the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/error.h"
#include "io/h5util.h"
#include "io/synth.h"
#include "io_test_util.h"

static void assert_same_dataset(const m2_dataset *a, const m2_dataset *b, int raw)
{
    assert_int_equal(a->n_rows, b->n_rows);
    assert_int_equal(a->n_features, b->n_features);
    assert_int_equal(a->n_targets, b->n_targets);
    assert_int_equal(a->n_sessions, b->n_sessions);
    int64_t n = a->n_rows;
    /* Bitwise equality: NaN targets must come back as the same NaNs, floats must not be re-rounded. */
    assert_memory_equal(a->X, b->X, (size_t)(n * a->n_features) * sizeof(float));
    assert_memory_equal(a->y, b->y, (size_t)(n * a->n_targets) * sizeof(float));
    assert_memory_equal(a->sessions, b->sessions, (size_t)(a->n_sessions + 1) * sizeof(int64_t));
    assert_memory_equal(a->split, b->split, sizeof a->split);
    for (int j = 0; j < a->n_features; j++) {
        assert_string_equal(a->feature_names[j], b->feature_names[j]);
        assert_true(a->mean[j] == b->mean[j]);
        assert_true(a->std[j] == b->std[j]);
    }
    assert_memory_equal(a->horizons, b->horizons, (size_t)a->n_targets * sizeof(int32_t));
    assert_true(a->clip == b->clip);
    assert_true(a->tick_size == b->tick_size);
    assert_string_equal(a->instrument, b->instrument);
    assert_string_equal(a->source, b->source);
    if (!raw) return;
    assert_memory_equal(a->ts_ns, b->ts_ns, (size_t)n * sizeof(int64_t));
    const double *da[] = {a->bid_px, a->ask_px, a->bid_sz, a->ask_sz, a->trade_px, a->trade_sz};
    const double *db[] = {b->bid_px, b->ask_px, b->bid_sz, b->ask_sz, b->trade_px, b->trade_sz};
    for (int i = 0; i < 6; i++) assert_memory_equal(da[i], db[i], (size_t)n * sizeof(double));
    assert_memory_equal(a->side, b->side, (size_t)n);
}

static void test_round_trip_arrays_only(void **state)
{
    int64_t sessions[] = {0, 40, 41, 100};
    m2_dataset a, b;
    make_dataset(&a, 100, 5, 3, sessions, 3);
    const char *p = test_path("arrays.h5");
    assert_int_equal(m2_dataset_write(p, &a), M2_OK);
    assert_int_equal(m2_dataset_read(p, &b, 0), M2_OK);
    assert_same_dataset(&a, &b, 0);
    assert_null(b.ts_ns); /* raw not requested */
    m2_dataset_free(&b);
    /* Asking for raw arrays a file does not have is an error, not a crash. */
    assert_int_equal(m2_dataset_read(p, &b, 1), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "/raw/ts_ns"));
    m2_dataset_free(&a);
}

static void test_round_trip_synth_with_raw(void **state)
{
    m2_synth_opts o;
    m2_synth_defaults(&o);
    o.ticks = 5000;
    o.sessions = 3;
    m2_dataset a, b;
    assert_int_equal(m2_synth_dataset(&o, &a, NULL), M2_OK);
    const char *p = test_path("synth.h5");
    assert_int_equal(m2_dataset_write(p, &a), M2_OK);
    assert_int_equal(m2_dataset_read(p, &b, 1), M2_OK);
    assert_same_dataset(&a, &b, 1);

    /* The stored layout is the one docs/FORMATS.md fixes: root attributes, contiguous X and /raw, unit, schema. */
    hid_t f;
    assert_int_equal(m2_h5_open_read(p, "mamba2.ticks", 1, &f, NULL), M2_OK);
    char s[64];
    assert_int_equal(m2_h5_attr_get_str(f, "created_utc", s, sizeof s), M2_OK);
    hid_t x = H5Dopen2(f, "/features/X", H5P_DEFAULT), dcpl = H5Dget_create_plist(x);
    assert_int_equal(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
    H5Pclose(dcpl);
    H5Dclose(x);
    hid_t r = H5Dopen2(f, "/raw/bid_px", H5P_DEFAULT);
    dcpl = H5Dget_create_plist(r);
    assert_int_equal(H5Pget_layout(dcpl), H5D_CONTIGUOUS); /* uncompressed: deflate was half the import's time */
    assert_int_equal(H5Pget_nfilters(dcpl), 0);
    H5Pclose(dcpl);
    H5Dclose(r);
    H5Fclose(f);
    m2_dataset_free(&a);
    m2_dataset_free(&b);
}

/* Each invalid dataset is refused by the writer with a message containing `fragment`. */
static void expect_invalid(void (*spoil)(m2_dataset *), const char *fragment)
{
    int64_t sessions[] = {0, 50, 100};
    m2_dataset d;
    make_dataset(&d, 100, 4, 2, sessions, 2);
    spoil(&d);
    assert_int_equal(m2_dataset_write(test_path("invalid.h5"), &d), M2_EFAIL);
    if (!strstr(m2_last_error(), fragment)) fail_msg("'%s' does not contain '%s'", m2_last_error(), fragment);
    m2_dataset_free(&d);
}

static void overlap(m2_dataset *d) { d->split[1][0] = d->split[0][1] - 5; }
static void reversed(m2_dataset *d) { d->split[2][0] = d->split[2][1] + 1; }
static void outside(m2_dataset *d) { d->split[2][1] = d->n_rows + 10; }
static void not_monotone(m2_dataset *d) { d->sessions[1] = 0; }
static void not_covering(m2_dataset *d) { d->sessions[2] = 90; }
static void too_many_features(m2_dataset *d) { d->n_features = M2_MAX_FEATURES + 1; }
static void too_many_targets(m2_dataset *d) { d->n_targets = M2_MAX_TARGETS + 1; }
static void zero_std(m2_dataset *d) { d->std[2] = 0; }
static void bad_horizon(m2_dataset *d) { d->horizons[1] = 0; }
static void empty_train(m2_dataset *d)
{
    d->split[0][1] = 0;
    d->split[1][0] = 0;
}

static void test_writer_validates(void **state)
{
    expect_invalid(overlap, "/index/val");
    expect_invalid(overlap, "not overlap");
    expect_invalid(reversed, "/index/test");
    expect_invalid(outside, "inside [0, 100)");
    expect_invalid(not_monotone, "not increasing");
    expect_invalid(not_covering, "must cover rows 0 to 100");
    expect_invalid(too_many_features, "65 features, supported 1..64");
    expect_invalid(too_many_targets, "17 targets");
    expect_invalid(zero_std, "std 0");
    expect_invalid(bad_horizon, "horizon 1 is 0");
    expect_invalid(empty_train, "/index/train");
}

/* Files with damaged content (written with raw HDF5 calls, as another tool might) are refused on read. */
static void rewrite_i64(const char *path, const char *name, const int64_t *v, int64_t n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    H5Ldelete(f, name, H5P_DEFAULT);
    assert_int_equal(m2_h5_write(f, name, M2_H5_I64, 1, &n, v, 0), M2_OK);
    H5Fclose(f);
}

static void expect_read_error(const char *path, const char *fragment)
{
    m2_dataset d;
    assert_int_equal(m2_dataset_read(path, &d, 0), M2_EFAIL);
    if (!strstr(m2_last_error(), fragment)) fail_msg("'%s' does not contain '%s'", m2_last_error(), fragment);
    assert_non_null(strstr(m2_last_error(), path));
    assert_null(d.X); /* nothing half-loaded is left behind */
}

static void test_reader_validates(void **state)
{
    int64_t sessions[] = {0, 50, 100};
    m2_dataset d;
    make_dataset(&d, 100, 4, 2, sessions, 2);
    const char *p = test_path("damaged.h5");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    int64_t val[2] = {80, 95};
    rewrite_i64(p, "/index/val", val, 2); /* overlaps test [90, 100) */
    expect_read_error(p, "/index/test");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    int64_t s3[] = {0, 60, 50, 100};
    rewrite_i64(p, "/index/sessions", s3, 4);
    expect_read_error(p, "not increasing");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/targets/y", H5P_DEFAULT);
    float y[99 * 2] = {0};
    int64_t yd[2] = {99, 2};
    assert_int_equal(m2_h5_write(f, "/targets/y", M2_H5_F32, 2, yd, y, 0), M2_OK);
    H5Fclose(f);
    expect_read_error(p, "shapes disagree");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/features/X", H5P_DEFAULT);
    float *wide = calloc(100 * 70, sizeof *wide);
    int64_t xd[2] = {100, 70};
    assert_int_equal(m2_h5_write(f, "/features/X", M2_H5_F32, 2, xd, wide, 0), M2_OK);
    free(wide);
    H5Fclose(f);
    expect_read_error(p, "70 features, supported 1..64");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t x = H5Dopen2(f, "/features/X", H5P_DEFAULT);
    double mean3[3] = {0, 0, 0};
    assert_int_equal(m2_h5_attr_put_vec(x, "mean", M2_H5_F64, 3, mean3), M2_OK);
    H5Dclose(x);
    H5Fclose(f);
    expect_read_error(p, "4 features but 4 names, 3 means");

    /* A 64-bit horizon of 2^40 is refused (HDF5 clipped it to 2147483647 before, silently). */
    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t yy = H5Dopen2(f, "/targets/y", H5P_DEFAULT);
    int64_t horizons64[2] = {10, INT64_C(1) << 40};
    assert_int_equal(m2_h5_attr_put_vec(yy, "horizons", M2_H5_I64, 2, horizons64), M2_OK);
    H5Dclose(yy);
    H5Fclose(f);
    expect_read_error(p, "attribute horizons of /targets/y");
    expect_read_error(p, "value 1099511627776 does not fit int32");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/index/test", H5P_DEFAULT);
    H5Fclose(f);
    expect_read_error(p, "dataset /index/test");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_int_equal(m2_h5_attr_put_i32(f, "schema_version", 3), M2_OK);
    H5Fclose(f);
    expect_read_error(p, "schema_version 3 is newer than supported 2");

    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_int_equal(m2_h5_attr_put_str(f, "schema", "mamba2.checkpoint"), M2_OK);
    H5Fclose(f);
    expect_read_error(p, "not a mamba2.ticks file");
    m2_dataset_free(&d);
}

/* A file of version 1 (no /universe) opens as a universe of one with its own statistics; X and y are mapped from
 * the file, not copied; a universe round-trips its names, statistics, session instruments and cuts. */
static void test_universe_of_one_and_round_trip(void **state)
{
    int64_t sessions[] = {0, 40, 100};
    m2_dataset d, r;
    make_dataset(&d, 100, 3, 2, sessions, 2);
    snprintf(d.instrument, sizeof d.instrument, "ABC");
    const char *p = test_path("v1.h5");
    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    assert_int_equal(m2_dataset_read(p, &r, 0), M2_OK);
    assert_int_equal(r.n_instruments, 1);
    assert_string_equal(r.inst_name[0], "ABC");
    assert_memory_equal(r.inst_mean, d.mean, 3 * sizeof(double));
    assert_memory_equal(r.inst_std, d.std, 3 * sizeof(double));
    assert_non_null(r.map); /* contiguous float32: mapped */
    assert_memory_equal(r.X, d.X, 100 * 3 * sizeof(float));
    m2_dataset_free(&r);

    assert_int_equal(m2_dataset_alloc_universe(&d, 2), M2_OK);
    snprintf(d.inst_name[0], sizeof d.inst_name[0], "ABC");
    snprintf(d.inst_name[1], sizeof d.inst_name[1], "XYZ");
    for (int j = 0; j < 3; j++) {
        d.inst_mean[j] = d.mean[j];
        d.inst_std[j] = d.std[j];
        d.inst_mean[M2_MAX_FEATURES + j] = 10.0 + j;
        d.inst_std[M2_MAX_FEATURES + j] = 2.0;
    }
    d.session_inst[1] = 1;
    d.cut_ns[0] = 123;
    d.cut_ns[1] = 456;
    assert_int_equal(m2_dataset_write(p, &d), M2_OK);
    assert_int_equal(m2_dataset_read(p, &r, 0), M2_OK);
    assert_int_equal(r.n_instruments, 2);
    assert_string_equal(r.inst_name[1], "XYZ");
    assert_int_equal(m2_dataset_find_instrument(&r, "XYZ"), 1);
    assert_int_equal(m2_dataset_find_instrument(&r, "QQQ"), -1);
    assert_true(r.inst_mean[M2_MAX_FEATURES + 2] == 12.0 && r.inst_std[M2_MAX_FEATURES] == 2.0);
    assert_int_equal(r.session_inst[0], 0);
    assert_int_equal(r.session_inst[1], 1);
    assert_true(r.cut_ns[0] == 123 && r.cut_ns[1] == 456);
    m2_dataset_free(&r);

    d.session_inst[1] = 2; /* an instrument the universe does not have */
    assert_int_equal(m2_dataset_write(p, &d), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "session 1 has instrument 2"));
    m2_dataset_free(&d);
}

static void test_split_names(void **state)
{
    assert_int_equal(m2_split_from_name("train"), M2_SPLIT_TRAIN);
    assert_int_equal(m2_split_from_name("val"), M2_SPLIT_VAL);
    assert_int_equal(m2_split_from_name("test"), M2_SPLIT_TEST);
    assert_int_equal(m2_split_from_name("validation"), -1);
    assert_string_equal(m2_split_name(M2_SPLIT_TEST), "test");
}

int main(void)
{
    m2_h5_quiet();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_arrays_only),
        cmocka_unit_test(test_round_trip_synth_with_raw),
        cmocka_unit_test(test_writer_validates),
        cmocka_unit_test(test_reader_validates),
        cmocka_unit_test(test_split_names),
        cmocka_unit_test(test_universe_of_one_and_round_trip),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_test_dir();
    return rc;
}
