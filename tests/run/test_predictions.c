/* Predictions file (docs/FORMATS.md): write → read back with the plain HDF5 API (independent of our reader) →
 * bit-equal arrays including NaN targets, the schema attributes, and the metadata; our reader agrees; an
 * unwritable destination and a file of another schema give one clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/h5util.h"
#include "io/predictions.h"

enum { M = 37, O = 3 };

static void fill(m2_predictions *p)
{
    memset(p, 0, sizeof *p);
    p->M = M;
    p->O = O;
    p->row = malloc(sizeof(int64_t) * M);
    p->pred = malloc(sizeof(float) * M * O);
    p->target = malloc(sizeof(float) * M * O);
    for (int i = 0; i < M; i++) {
        p->row[i] = 1000003LL * i + 7; /* beyond 32 bits */
        for (int o = 0; o < O; o++) {
            p->pred[i * O + o] = (float)(i - 0.1 * o) / 3.0f;
            p->target[i * O + o] = (i + o) % 5 == 0 ? NAN : (float)(o - i) * 0.37f;
        }
    }
    snprintf(p->split, sizeof p->split, "test");
    snprintf(p->mode, sizeof p->mode, "stream");
    snprintf(p->checkpoint, sizeof p->checkpoint, "runs/x/ckpt_120.h5");
    p->step = 120;
    p->horizons[0] = 10, p->horizons[1] = 50, p->horizons[2] = 100;
}

static void read_raw(hid_t f, const char *name, hid_t type, void *out, int rank, const hsize_t *want)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t s = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    assert_int_equal(H5Sget_simple_extent_ndims(s), rank);
    H5Sget_simple_extent_dims(s, dims, NULL);
    for (int k = 0; k < rank; k++) assert_int_equal(dims[k], want[k]);
    assert_true(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0);
    H5Sclose(s);
    H5Dclose(d);
}

static void test_round_trip_with_plain_hdf5(void **state)
{
    char path[] = "/tmp/m2pred_XXXXXX";
    int fd = mkstemp(path); /* an existing file: the write replaces it */
    assert_true(fd >= 0);
    close(fd);
    m2_predictions p;
    fill(&p);
    assert_int_equal(m2_predictions_write(path, &p), M2_OK);

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    char schema[64] = "";
    assert_int_equal(m2_h5_attr_get_str(f, "schema", schema, sizeof schema), M2_OK);
    assert_string_equal(schema, "mamba2.predictions");
    int32_t version = 0;
    assert_int_equal(m2_h5_attr_get_i32(f, "schema_version", &version), M2_OK);
    assert_int_equal(version, 1);
    int64_t row[M];
    float pred[M * O], target[M * O];
    hsize_t d1[1] = {M}, d2[2] = {M, O};
    read_raw(f, "/row", H5T_NATIVE_INT64, row, 1, d1);
    read_raw(f, "/pred", H5T_NATIVE_FLOAT, pred, 2, d2);
    read_raw(f, "/target", H5T_NATIVE_FLOAT, target, 2, d2);
    H5Fclose(f);
    /* bit-equal, which also compares the NaN targets as NaN */
    assert_memory_equal(row, p.row, sizeof row);
    assert_memory_equal(pred, p.pred, sizeof pred);
    assert_memory_equal(target, p.target, sizeof target);

    m2_predictions q;
    assert_int_equal(m2_predictions_read(path, &q), M2_OK);
    assert_int_equal(q.M, M);
    assert_int_equal(q.O, O);
    assert_memory_equal(q.row, p.row, sizeof row);
    assert_memory_equal(q.pred, p.pred, sizeof pred);
    assert_memory_equal(q.target, p.target, sizeof target);
    assert_string_equal(q.split, "test");
    assert_string_equal(q.mode, "stream");
    assert_string_equal(q.checkpoint, p.checkpoint);
    assert_int_equal(q.step, 120);
    assert_memory_equal(q.horizons, p.horizons, sizeof(int32_t) * O);
    m2_predictions_free(&q);
    m2_predictions_free(&p);
    unlink(path);
}

static void test_errors(void **state)
{
    m2_predictions p;
    fill(&p);
    assert_int_not_equal(m2_predictions_write("/nonexistent-dir/p.h5", &p), M2_OK);
    assert_non_null(strstr(m2_last_error(), "/nonexistent-dir/p.h5"));

    /* a file with another schema */
    char path[] = "/tmp/m2pred_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, path, "mamba2.ticks", 1), M2_OK);
    assert_int_equal(m2_h5_commit(&w), M2_OK);
    m2_predictions q;
    assert_int_not_equal(m2_predictions_read(path, &q), M2_OK);
    assert_non_null(strstr(m2_last_error(), "mamba2.predictions"));
    assert_null(q.row);
    unlink(path);
    m2_predictions_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_with_plain_hdf5),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
