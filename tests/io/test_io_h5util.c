/* h5util: atomic creation (no file under the real name until commit, no temporary left behind), typed
 * attribute and array round trips, shape/class checks, and one clear message for every kind of bad file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/h5util.h"
#include "io_test_util.h"

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Files in the test folder whose name starts with a dot (temporaries). */
static int count_temporaries(void)
{
    DIR *d = opendir(test_dir());
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_atomic_create_commit(void **state)
{
    const char *p = test_path("atomic.h5");
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, p, "mamba2.test", 1), M2_OK);
    assert_false(exists(p)); /* nothing under the real name while writing */
    assert_true(exists(w.tmp));
    assert_int_equal(m2_h5_commit(&w), M2_OK);
    assert_true(exists(p));
    assert_int_equal(count_temporaries(), 0);

    /* An abandoned write leaves the previous file untouched and no temporary. */
    assert_int_equal(m2_h5_create(&w, p, "mamba2.other", 1), M2_OK);
    m2_h5_abort(&w);
    assert_int_equal(count_temporaries(), 0);
    hid_t f;
    assert_int_equal(m2_h5_open_read(p, "mamba2.test", 1, &f, NULL), M2_OK);
    H5Fclose(f);
}

static void test_create_in_missing_folder(void **state)
{
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, "/nonexistent_m2_dir/x.h5", "mamba2.test", 1), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "/nonexistent_m2_dir"));
}

static void test_attributes_round_trip(void **state)
{
    const char *p = test_path("attrs.h5");
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, p, "mamba2.test", 1), M2_OK);
    char names[3][32] = {"alpha", "b", "a_much_longer_name_of_31_chars_"};
    double v[3] = {1.5, -2.25, 1e300};
    int32_t h[2] = {10, 100};
    assert_int_equal(m2_h5_attr_put_str(w.file, "s", "hello"), M2_OK);
    assert_int_equal(m2_h5_attr_put_i32(w.file, "i32", -7), M2_OK);
    assert_int_equal(m2_h5_attr_put_i64(w.file, "i64", INT64_C(1) << 40), M2_OK);
    assert_int_equal(m2_h5_attr_put_f64(w.file, "f64", 0.1), M2_OK);
    assert_int_equal(m2_h5_attr_put_f32(w.file, "f32", 2.5f), M2_OK);
    assert_int_equal(m2_h5_attr_put_vec(w.file, "vec", M2_H5_F64, 3, v), M2_OK);
    assert_int_equal(m2_h5_attr_put_vec(w.file, "hor", M2_H5_I32, 2, h), M2_OK);
    assert_int_equal(m2_h5_attr_put_strs(w.file, "names", names[0], 32, 3), M2_OK);
    assert_int_equal(m2_h5_commit(&w), M2_OK);

    hid_t f;
    int version = 0;
    assert_int_equal(m2_h5_open_read(p, "mamba2.test", 1, &f, &version), M2_OK);
    assert_int_equal(version, 1);
    char s[16], created[32], got[3][32];
    int32_t i32, hh[4];
    int64_t i64, n;
    double f64, vv[3];
    float f32;
    int nn;
    assert_int_equal(m2_h5_attr_get_str(f, "s", s, sizeof s), M2_OK);
    assert_string_equal(s, "hello");
    assert_int_equal(m2_h5_attr_get_str(f, "created_utc", created, sizeof created), M2_OK);
    assert_int_equal(strlen(created), 20); /* YYYY-MM-DDTHH:MM:SSZ */
    assert_int_equal(m2_h5_attr_get_i32(f, "i32", &i32), M2_OK);
    assert_int_equal(i32, -7);
    assert_int_equal(m2_h5_attr_get_i64(f, "i64", &i64), M2_OK);
    assert_true(i64 == INT64_C(1) << 40);
    assert_int_equal(m2_h5_attr_get_f64(f, "f64", &f64), M2_OK);
    assert_true(f64 == 0.1);
    assert_int_equal(m2_h5_attr_get_f32(f, "f32", &f32), M2_OK);
    assert_true(f32 == 2.5f);
    assert_int_equal(m2_h5_attr_get_vec(f, "vec", M2_H5_F64, 3, vv, &n), M2_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(vv, v, sizeof v);
    assert_int_equal(m2_h5_attr_get_vec(f, "hor", M2_H5_I32, 4, hh, &n), M2_OK);
    assert_int_equal(n, 2);
    assert_int_equal(hh[1], 100);
    assert_int_equal(m2_h5_attr_get_strs(f, "names", got[0], 32, 3, &nn), M2_OK);
    assert_int_equal(nn, 3);
    for (int i = 0; i < 3; i++) assert_string_equal(got[i], names[i]);

    /* Errors name the attribute and the file and say why. */
    assert_int_equal(m2_h5_attr_get_f64(f, "nope", &f64), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "attribute nope"));
    assert_non_null(strstr(m2_last_error(), "attrs.h5"));
    assert_non_null(strstr(m2_last_error(), "missing"));
    assert_int_equal(m2_h5_attr_get_f64(f, "s", &f64), M2_EFAIL); /* a string is not a number */
    assert_non_null(strstr(m2_last_error(), "floating-point"));
    assert_int_equal(m2_h5_attr_get_vec(f, "vec", M2_H5_F64, 2, vv, &n), M2_EFAIL); /* too many values */
    /* A value that does not fit the type asked for is refused, never clipped to its limit (2^40 came back as
     * 2147483647, 1e300 as the largest float). */
    assert_int_equal(m2_h5_attr_get_i32(f, "i64", &i32), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "attribute i64 ("));
    assert_non_null(strstr(m2_last_error(), "value 1099511627776 does not fit int32"));
    float vf[3];
    assert_int_equal(m2_h5_attr_get_vec(f, "vec", M2_H5_F32, 3, vf, &n), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "value 1e+300 does not fit float32"));
    assert_int_equal(m2_h5_attr_get_i64(f, "i32", &i64), M2_OK); /* widening stays exact */
    assert_true(i64 == -7);
    assert_int_equal(m2_h5_attr_get_str(f, "s", s, 4), M2_EFAIL); /* does not fit */
    assert_int_equal(m2_h5_attr_get_strs(f, "names", got[0], 8, 3, &nn), M2_EFAIL);
    H5Fclose(f);
}

static void test_arrays_round_trip_and_shape_checks(void **state)
{
    const char *p = test_path("arrays.h5");
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, p, "mamba2.test", 1), M2_OK);
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t big[5000];
    int8_t s8[3] = {-1, 0, 1};
    for (int i = 0; i < 5000; i++) big[i] = (int64_t)i * 1000003;
    int64_t d2[2] = {2, 3}, d1 = 5000, d3 = 3, d0 = 0;
    assert_int_equal(m2_h5_write(w.file, "/a/b/x", M2_H5_F32, 2, d2, x, 0), M2_OK);
    assert_int_equal(m2_h5_write(w.file, "/raw/big", M2_H5_I64, 1, &d1, big, 1), M2_OK); /* chunked+deflate */
    assert_int_equal(m2_h5_write(w.file, "/raw/s8", M2_H5_I8, 1, &d3, s8, 1), M2_OK);
    assert_int_equal(m2_h5_write(w.file, "/empty", M2_H5_F64, 1, &d0, NULL, 0), M2_OK);
    assert_int_equal(m2_h5_commit(&w), M2_OK);

    hid_t f;
    assert_int_equal(m2_h5_open_read(p, "mamba2.test", 1, &f, NULL), M2_OK);
    float xr[6];
    assert_int_equal(m2_h5_read(f, "/a/b/x", M2_H5_F32, 2, d2, xr), M2_OK);
    assert_memory_equal(xr, x, sizeof x);
    int64_t dims[1] = {-1};
    void *bigr;
    assert_int_equal(m2_h5_read_alloc(f, "/raw/big", M2_H5_I64, 1, dims, &bigr), M2_OK);
    assert_int_equal(dims[0], 5000);
    assert_memory_equal(bigr, big, sizeof big);
    free(bigr);
    int8_t s8r[3];
    assert_int_equal(m2_h5_read(f, "/raw/s8", M2_H5_I8, 1, &d3, s8r), M2_OK);
    assert_memory_equal(s8r, s8, 3);
    double dd[6]; /* float → double is a conversion within a class: allowed */
    assert_int_equal(m2_h5_read(f, "/a/b/x", M2_H5_F64, 2, d2, dd), M2_OK);
    assert_true(dd[5] == 6.0);
    int32_t narrow[5000]; /* values up to 5e9: int32 would clip them */
    assert_int_equal(m2_h5_read(f, "/raw/big", M2_H5_I32, 1, &d1, narrow), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "do not fit the expected type"));
    int64_t wrong[2] = {2, 4};
    assert_int_equal(m2_h5_read(f, "/a/b/x", M2_H5_F32, 2, wrong, xr), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "shape [2,3], expected [2,4]"));
    assert_int_equal(m2_h5_shape(f, "/a/b/x", 1, wrong), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "2 dimensions, expected 1"));
    assert_int_equal(m2_h5_read(f, "/raw/s8", M2_H5_F32, 1, &d3, xr), M2_EFAIL); /* integers as floats */
    assert_non_null(strstr(m2_last_error(), "integers"));
    assert_int_equal(m2_h5_read(f, "/no/such", M2_H5_F32, 1, &d3, xr), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "dataset /no/such ("));
    assert_non_null(strstr(m2_last_error(), "missing"));
    assert_true(m2_h5_exists(f, "/a/b"));
    assert_false(m2_h5_exists(f, "/a/c/x"));
    H5Fclose(f);
}

/* Every bad file gives one message with the file name and the reason. */
static void expect_open_error(const char *path, const char *schema, const char *fragment)
{
    hid_t f;
    assert_int_equal(m2_h5_open_read(path, schema, 1, &f, NULL), M2_EFAIL);
    const char *msg = m2_last_error();
    if (!strstr(msg, fragment)) fail_msg("'%s' does not contain '%s'", msg, fragment);
    assert_non_null(strstr(msg, path));
    assert_null(strchr(msg, '\n'));
}

static void test_bad_files(void **state)
{
    const char *good = test_path("good.h5"), *newer = test_path("newer.h5"), *garbage = test_path("garbage.h5"),
               *trunc = test_path("trunc.h5"), *empty = test_path("empty.h5");
    m2_h5_writer w;
    assert_int_equal(m2_h5_create(&w, good, "mamba2.test", 1), M2_OK);
    float x[4096] = {0};
    int64_t n = 4096;
    assert_int_equal(m2_h5_write(w.file, "/x", M2_H5_F32, 1, &n, x, 0), M2_OK);
    assert_int_equal(m2_h5_commit(&w), M2_OK);
    assert_int_equal(m2_h5_create(&w, newer, "mamba2.test", 3), M2_OK);
    assert_int_equal(m2_h5_commit(&w), M2_OK);
    char junk[3000];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 7919 % 251);
    FILE *g = fopen(garbage, "wb");
    fwrite(junk, 1, sizeof junk, g);
    fclose(g);
    /* The first half of a good file: the superblock is intact, the end of file is not. */
    FILE *in = fopen(good, "rb"), *out = fopen(trunc, "wb");
    char buf[8192];
    size_t got = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, got / 2, out);
    fclose(in);
    fclose(out);
    write_text(empty, "");

    expect_open_error(good, "mamba2.ticks", "not a mamba2.ticks file");
    expect_open_error(newer, "mamba2.test", "schema_version 3 is newer than supported 1");
    expect_open_error(garbage, "mamba2.test", "not an HDF5 file or truncated");
    expect_open_error(trunc, "mamba2.test", "not an HDF5 file or truncated");
    expect_open_error(empty, "mamba2.test", "not an HDF5 file or truncated");
    expect_open_error(test_path("missing.h5"), "mamba2.test", "No such file");
    expect_open_error(test_dir(), "mamba2.test", "is a directory");
}

/* Flips one byte `at` bytes after the k-th "OHDR" (a version-2 object header's signature) of a file. */
static void flip_in_object_header(const char *path, int k, long at)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    static unsigned char b[1 << 20];
    size_t n = fread(b, 1, sizeof b, f);
    long pos = -1;
    for (size_t i = 0; i + 4 <= n && pos < 0; i++)
        if (memcmp(b + i, "OHDR", 4) == 0 && k-- == 0) pos = (long)i + at;
    if (pos < 0) fail_msg("%s: no object header #%d with a checksum", path, k);
    fseek(f, pos, SEEK_SET);
    fputc(b[pos] ^ 0x5a, f);
    fclose(f);
}

/* Files we write carry HDF5's metadata checksums (superblock version 2 or later, version-2 object headers), so
 * one damaged byte in an object header is refused as damage, with the file named, before HDF5 decodes it. */
static void test_metadata_checksums(void **state)
{
    const char *root = test_path("sum_root.h5"), *data = test_path("sum_data.h5");
    for (int i = 0; i < 2; i++) {
        m2_h5_writer w;
        assert_int_equal(m2_h5_create(&w, i ? data : root, "mamba2.test", 1), M2_OK);
        float x[64] = {1};
        int64_t n = 64;
        assert_int_equal(m2_h5_write(w.file, "/x", M2_H5_F32, 1, &n, x, 0), M2_OK);
        assert_int_equal(m2_h5_commit(&w), M2_OK);
    }
    FILE *f = fopen(root, "rb");
    unsigned char head[9];
    assert_int_equal(fread(head, 1, 9, f), 9);
    fclose(f);
    assert_memory_equal(head, "\x89HDF\r\n\x1a\n", 8);
    assert_true(head[8] >= 2); /* superblock version: 2 and later carry a checksum */

    flip_in_object_header(root, 0, 8); /* the root group's header (it holds the schema attribute) */
    expect_open_error(root, "mamba2.test", "damaged (HDF5 metadata checksum mismatch)");

    flip_in_object_header(data, 1, 8); /* the dataset's header */
    const int64_t n64 = 64;
    hid_t h;
    assert_int_equal(m2_h5_open_read(data, "mamba2.test", 1, &h, NULL), M2_OK);
    float back[64];
    assert_int_equal(m2_h5_read(h, "/x", M2_H5_F32, 1, &n64, back), M2_EFAIL);
    H5Fclose(h);
    const char *msg = m2_last_error();
    if (!strstr(msg, "damaged (HDF5 metadata checksum mismatch)") || !strstr(msg, data))
        fail_msg("'%s' does not name the damaged file", msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_create_commit),
        cmocka_unit_test(test_create_in_missing_folder),
        cmocka_unit_test(test_attributes_round_trip),
        cmocka_unit_test(test_arrays_round_trip_and_shape_checks),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_metadata_checksums),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_test_dir();
    return rc;
}
