/* Small HDF5 helpers shared by every HDF5 file of the product (tick datasets, checkpoints, predictions).
 * Generic on purpose: nothing here knows about ticks or models.
 *
 * Conventions
 * - Every function that can fail returns M2_OK or an error code and leaves ONE message (base/error.h)
 *   "<what> (<file>): <why>", where <why> is folded from HDF5's error stack when HDF5 reported the problem.
 * - HDF5's automatic error printing is switched off the first time any helper runs (m2_h5_quiet), so a
 *   failing call never spams stderr.
 * - Files are little-endian; strings are fixed-length, NUL-terminated ASCII (docs/FORMATS.md). Readers also accept
 *   variable-length strings, which is what h5py writes by default.
 * - `obj` arguments are any location: a file, a group or a dataset id. Attribute names and dataset paths are
 *   relative to it. Messages name the file (H5Fget_name) and the object path. */
#ifndef MAMBA2_H5UTIL_H
#define MAMBA2_H5UTIL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* Element types of the arrays and attributes the product stores. */
typedef enum { M2_H5_F32, M2_H5_F64, M2_H5_I64, M2_H5_I32, M2_H5_I8 } m2_h5_type;

/* Switches off HDF5's automatic error printing for the default stack (idempotent, cheap). */
void m2_h5_quiet(void);

/* Records "<what> (<file>): <why>" and returns code. <why> is folded from the current HDF5 error stack
 * (the outermost and innermost descriptions; signature/EOF problems become "not an HDF5 file or truncated"),
 * or is `fallback` when the stack is empty. The stack is cleared afterwards. */
int m2_h5_fail(int code, const char *what, const char *file, const char *fallback);

/* ---- files -------------------------------------------------------------------------------------- */

/* Opens `path` read-only and checks the root attributes: `schema` must equal `schema`
 * ("not a <schema> file" otherwise) and `schema_version` must be <= max_version ("schema_version 3 is newer
 * than supported 1"). A missing file, a truncated file or garbage gives one clear message.
 * On success *file is open (close it with H5Fclose) and *version (may be NULL) holds the stored version. */
int m2_h5_open_read(const char *path, const char *schema, int max_version, hid_t *file, int *version);

/* A file being written under a temporary name in the destination's folder. */
typedef struct {
    hid_t file;      /* write into this */
    char path[4096]; /* final name */
    char tmp[4096];  /* temporary name: "<dir>/.<base>.tmp.<pid>" */
} m2_h5_writer;

/* Creates the temporary file and writes the root attributes schema, schema_version and created_utc
 * (ISO-8601 UTC; taken from $SOURCE_DATE_EPOCH when set, so generated files can be byte-identical).
 * Object modification times are not recorded, for the same reason. */
int m2_h5_create(m2_h5_writer *w, const char *path, const char *schema, int version);

/* Makes the file durable under its final name: flush, close, fsync the file, rename over `path`, fsync the
 * folder. A crash at any point leaves either the old file or the new one, never a half-written one.
 * On failure the temporary file is removed. */
int m2_h5_commit(m2_h5_writer *w);

/* Abandons a file being written: closes and removes the temporary file (safe to call after a failure). */
void m2_h5_abort(m2_h5_writer *w);

/* Writes "YYYY-MM-DDTHH:MM:SSZ" (now, or $SOURCE_DATE_EPOCH) into buf (at least 21 bytes). */
void m2_h5_utc_now(char *buf, size_t cap);

/* ---- attributes (on any object) ------------------------------------------------------------------- */

int m2_h5_attr_put_str(hid_t obj, const char *name, const char *value);
int m2_h5_attr_put_i32(hid_t obj, const char *name, int32_t value);
int m2_h5_attr_put_i64(hid_t obj, const char *name, int64_t value);
int m2_h5_attr_put_f64(hid_t obj, const char *name, double value);
int m2_h5_attr_put_f32(hid_t obj, const char *name, float value);

/* A 1-D numeric attribute of n elements of `type` (e.g. per-feature means, horizons). */
int m2_h5_attr_put_vec(hid_t obj, const char *name, m2_h5_type type, int64_t n, const void *values);

/* A 1-D string-array attribute of n fixed-length strings. The strings are read from `values` at a stride of
 * `stride` bytes (so a `char names[64][32]` array is passed as (names[0], 32, n)). */
int m2_h5_attr_put_strs(hid_t obj, const char *name, const char *values, size_t stride, int n);

/* Readers: a missing attribute, a wrong class (a string where a number is expected) or a string that does
 * not fit is an error naming the object and attribute. Scalar readers accept a scalar or a 1-element vector. */
int m2_h5_attr_get_str(hid_t obj, const char *name, char *out, size_t cap);
int m2_h5_attr_get_i32(hid_t obj, const char *name, int32_t *out);
int m2_h5_attr_get_i64(hid_t obj, const char *name, int64_t *out);
int m2_h5_attr_get_f64(hid_t obj, const char *name, double *out);
int m2_h5_attr_get_f32(hid_t obj, const char *name, float *out);

/* Reads a 1-D numeric attribute of at most cap elements; *n receives the count. */
int m2_h5_attr_get_vec(hid_t obj, const char *name, m2_h5_type type, int64_t cap, void *values, int64_t *n);

/* Reads a 1-D string-array attribute of at most cap strings into `out` at `stride` bytes each
 * (each string must fit in stride - 1 characters); *n receives the count. */
int m2_h5_attr_get_strs(hid_t obj, const char *name, char *out, size_t stride, int cap, int *n);

/* 1 if the attribute exists, 0 if not. */
int m2_h5_attr_exists(hid_t obj, const char *name);

/* ---- datasets ------------------------------------------------------------------------------------- */

/* Arrays have 1 to M2_H5_MAX_RANK dimensions (conv weights are [C,1,K]). */
#define M2_H5_MAX_RANK 3

/* Writes a rank-1, 2 or 3 array at `path` (intermediate groups are created). With compress != 0 the
 * dataset is chunked with shuffle + deflate (for raw arrays kept for audits); otherwise it is contiguous and
 * uncompressed, so readers can load it in one call. */
int m2_h5_write(hid_t loc, const char *path, m2_h5_type type, int rank, const int64_t *dims, const void *data,
                int compress);

/* The shape of the dataset at `path`: fails if it is missing, is not numeric, or its rank is not `rank`. */
int m2_h5_shape(hid_t loc, const char *path, int rank, int64_t *dims);

/* Reads the whole dataset at `path` into `data` (converted to `type`); its shape must be exactly `dims`
 * ("shape [100,7], expected [100,8]"). */
int m2_h5_read(hid_t loc, const char *path, m2_h5_type type, int rank, const int64_t *dims, void *data);

/* m2_h5_shape + malloc + m2_h5_read. On entry dims[i] < 0 means "any"; on return dims holds the shape.
 * *data is malloc'd (free it); NULL on failure. */
int m2_h5_read_alloc(hid_t loc, const char *path, m2_h5_type type, int rank, int64_t *dims, void **data);

/* Rows [lo, lo + n) of a 1-D dataset, read without loading the rest (a hyperslab: for a chunked, compressed
 * array only the chunks that hold those rows are decompressed, and HDF5's chunk cache keeps the last ones).
 * For arrays too large to hold, read a window at a time. */
typedef struct {
    hid_t ds;
    m2_h5_type type;
    int64_t n_rows;
    char path[256]; /* the dataset's name in its file, for messages */
} m2_h5_rows;

/* Opens the 1-D numeric dataset at `path` to read it as `type` (fails as m2_h5_shape does, or on a class
 * mismatch). */
int m2_h5_rows_open(hid_t loc, const char *path, m2_h5_type type, m2_h5_rows *r);
/* Reads rows [lo, lo + n) into out (0 <= lo, lo + n <= n_rows, else an error naming the range). */
int m2_h5_rows_read(m2_h5_rows *r, int64_t lo, int64_t n, void *out);
void m2_h5_rows_close(m2_h5_rows *r);

/* 1 if a link (dataset or group) exists at `path` (every intermediate group must exist too), else 0. */
/* 1-D datasets of n fixed-length, NUL-terminated strings held `stride` bytes apart (attributes are limited to
 * 64 KiB, so long name lists are datasets). The reader wants exactly n strings. */
int m2_h5_write_strs(hid_t loc, const char *path, const char *values, size_t stride, int64_t n);
int m2_h5_read_strs(hid_t loc, const char *path, char *out, size_t stride, int64_t n);

int m2_h5_exists(hid_t loc, const char *path);

/* Size in bytes of one element of `type`. */
size_t m2_h5_type_size(m2_h5_type type);

#endif
