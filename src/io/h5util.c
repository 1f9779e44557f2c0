/* HDF5 helpers: quiet errors folded into one message, schema-checked opening, atomic creation, typed
 * attributes and whole-array datasets. See h5util.h for the contract of each function. */
#include "io/h5util.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cli.h"
#include "base/error.h"

/* ---- errors --------------------------------------------------------------------------------------- */

void m2_h5_quiet(void)
{
    static int done;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

typedef struct {
    char outer[160], inner[160];
    int damaged; /* a signature/EOF problem somewhere in the stack */
} stack_fold;

static herr_t fold_entry(unsigned n, const H5E_error2_t *e, void *arg)
{
    stack_fold *f = arg;
    char minor[160] = "";
    H5Eget_msg(e->min_num, NULL, minor, sizeof minor);
    const char *desc = e->desc && e->desc[0] ? e->desc : minor;
    if (n == 0) snprintf(f->outer, sizeof f->outer, "%s", desc);
    snprintf(f->inner, sizeof f->inner, "%s", desc);
    if (strstr(desc, "signature") || strstr(desc, "truncated") || strstr(desc, "eof") || strstr(minor, "signature") ||
        strstr(minor, "truncated"))
        f->damaged = 1;
    return 0;
}

/* Why the latest existence test failed with an HDF5 error rather than answering "absent" (a damaged object
 * header or a metadata checksum mismatch on the way; empty when it answered), so that "missing" is not said of an
 * object HDF5 could not read. */
static char g_unreadable[200];
static const char checksum_why[] = "the file is damaged (HDF5 metadata checksum mismatch)";

static void note_unreadable(void)
{
    stack_fold f = {"", "", 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, fold_entry, &f);
    H5Eclear2(H5E_DEFAULT);
    if (strstr(f.inner, "checksum"))
        snprintf(g_unreadable, sizeof g_unreadable, "%s", checksum_why);
    else
        snprintf(g_unreadable, sizeof g_unreadable, "unreadable, the file is damaged (HDF5: %s)",
                 f.inner[0] ? f.inner : "error");
}

/* "missing", or why HDF5 could not tell. */
static const char *missing_why(void) { return g_unreadable[0] ? g_unreadable : "missing"; }

int m2_h5_fail(int code, const char *what, const char *file, const char *fallback)
{
    stack_fold f = {"", "", 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, fold_entry, &f);
    H5Eclear2(H5E_DEFAULT);
    const char *why = fallback ? fallback : "HDF5 call failed";
    char buf[400];
    if (f.damaged)
        why = "not an HDF5 file or truncated";
    else if (strstr(f.inner, "checksum"))
        why = checksum_why;
    else if (f.outer[0] && strcmp(f.outer, f.inner) != 0) {
        snprintf(buf, sizeof buf, "%s: %s", f.outer, f.inner);
        why = buf;
    } else if (f.outer[0])
        why = f.outer;
    return m2_fail(code, "%s (%s): %s", what, file ? file : "?", why);
}

/* File name and object path of a location, for messages. */
static void where(hid_t obj, char *file, size_t fcap, char *path, size_t pcap)
{
    if (H5Fget_name(obj, file, fcap) < 0) snprintf(file, fcap, "?");
    if (H5Iget_name(obj, path, pcap) <= 0) snprintf(path, pcap, "/");
    H5Eclear2(H5E_DEFAULT);
}

/* "<what> <name> of <object> (<file>): <why>" for an attribute or dataset problem. */
static int fail_at(hid_t obj, const char *kind, const char *name, const char *why)
{
    char file[1024], path[512];
    hid_t stack = H5Eget_current_stack(); /* the failure's own HDF5 errors, kept across where()'s calls */
    where(obj, file, sizeof file, path, sizeof path);
    if (stack >= 0) H5Eset_current_stack(stack);
    char what[800];
    if (strcmp(path, "/") == 0 || (kind[0] == 'd' && name[0] == '/'))
        snprintf(what, sizeof what, "%s %s", kind, name);
    else
        snprintf(what, sizeof what, "%s %s of %s", kind, name, path);
    return m2_h5_fail(M2_EFAIL, what, file, why);
}

/* ---- types ---------------------------------------------------------------------------------------- */

static hid_t mem_type(m2_h5_type t)
{
    switch (t) {
    case M2_H5_F32: return H5T_NATIVE_FLOAT;
    case M2_H5_F64: return H5T_NATIVE_DOUBLE;
    case M2_H5_I64: return H5T_NATIVE_INT64;
    case M2_H5_I32: return H5T_NATIVE_INT32;
    case M2_H5_I8: return H5T_NATIVE_INT8;
    }
    return H5I_INVALID_HID;
}

/* Stored types are little-endian whatever the host (docs/FORMATS.md). */
static hid_t file_type(m2_h5_type t)
{
    switch (t) {
    case M2_H5_F32: return H5T_IEEE_F32LE;
    case M2_H5_F64: return H5T_IEEE_F64LE;
    case M2_H5_I64: return H5T_STD_I64LE;
    case M2_H5_I32: return H5T_STD_I32LE;
    case M2_H5_I8: return H5T_STD_I8LE;
    }
    return H5I_INVALID_HID;
}

size_t m2_h5_type_size(m2_h5_type t)
{
    static const size_t size[] = {4, 8, 8, 4, 1};
    return size[t];
}

static int is_float(m2_h5_type t) { return t == M2_H5_F32 || t == M2_H5_F64; }

/* Refuses silent conversions between classes (a string or an integer where floats are expected). */
static const char *class_mismatch(hid_t stored, m2_h5_type want)
{
    H5T_class_t c = H5Tget_class(stored);
    if (is_float(want) && c != H5T_FLOAT)
        return c == H5T_INTEGER ? "stored as integers, expected floating point" : "not a floating-point array";
    if (!is_float(want) && c != H5T_INTEGER)
        return c == H5T_FLOAT ? "stored as floating point, expected integers" : "not an integer array";
    /* Only the standard widths: a damaged type of, say, 60,424 bytes per integer sent HDF5 1.10's conversion past
     * its buffers (a segfault inside H5Dread, found by tests/fuzz). */
    size_t size = H5Tget_size(stored);
    if (c == H5T_FLOAT ? size != 4 && size != 8 : size != 1 && size != 2 && size != 4 && size != 8)
        return "stored with an element size that is not 1, 2, 4 or 8 bytes (damaged type?)";
    return NULL;
}

/* ---- files ---------------------------------------------------------------------------------------- */

void m2_h5_utc_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    int64_t v;
    if (sde && *sde && m2_parse_i64("SOURCE_DATE_EPOCH", sde, 0, INT64_MAX, &v) == M2_OK) t = (time_t)v;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int m2_h5_open_read(const char *path, const char *schema, int max_version, hid_t *file, int *version)
{
    m2_h5_quiet();
    *file = H5I_INVALID_HID;
    struct stat st;
    if (stat(path, &st) != 0) return m2_fail(M2_EFAIL, "open (%s): %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return m2_fail(M2_EFAIL, "open (%s): is a directory", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return m2_h5_fail(M2_EFAIL, "open", path, "not an HDF5 file or truncated");
    char stored[128];
    if (!m2_h5_attr_exists(f, "schema")) {
        H5Fclose(f);
        if (g_unreadable[0]) return m2_fail(M2_EFAIL, "open (%s): %s", path, g_unreadable);
        return m2_fail(M2_EFAIL, "open (%s): not a %s file (no schema attribute)", path, schema);
    }
    int32_t v = 0;
    if (m2_h5_attr_get_str(f, "schema", stored, sizeof stored) != M2_OK) snprintf(stored, sizeof stored, "?");
    if (strcmp(stored, schema) != 0) {
        H5Fclose(f);
        return m2_fail(M2_EFAIL, "open (%s): not a %s file (schema is \"%.60s\")", path, schema, stored);
    }
    if (m2_h5_attr_get_i32(f, "schema_version", &v) != M2_OK) {
        H5Fclose(f);
        return m2_fail(M2_EFAIL, "open (%s): %s file without a valid schema_version", path, schema);
    }
    if (v > max_version || v < 1) {
        H5Fclose(f);
        if (v < 1) return m2_fail(M2_EFAIL, "open (%s): invalid schema_version %d", path, (int)v);
        return m2_fail(M2_EFAIL, "open (%s): schema_version %d is newer than supported %d", path, (int)v, max_version);
    }
    *file = f;
    if (version) *version = v;
    return M2_OK;
}

static void split_dir(const char *path, char *dir, size_t dcap, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dcap, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dcap, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dcap, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

int m2_h5_create(m2_h5_writer *w, const char *path, const char *schema, int version)
{
    m2_h5_quiet();
    memset(w, 0, sizeof *w);
    w->file = H5I_INVALID_HID;
    char dir[4096];
    const char *base;
    split_dir(path, dir, sizeof dir, &base);
    if (!*base) return m2_fail(M2_EUSAGE, "create (%s): not a file name", path);
    if (access(dir, W_OK) != 0) return m2_fail(M2_EFAIL, "create (%s): folder %s: %s", path, dir, strerror(errno));
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path ||
        snprintf(w->tmp, sizeof w->tmp, "%s/.%s.tmp.%ld", dir, base, (long)getpid()) >= (int)sizeof w->tmp)
        return m2_fail(M2_EUSAGE, "create (%.200s): path too long", path);

    /* No object times and a close that releases everything: identical inputs give identical bytes, and
     * the fsync in commit covers the whole file. */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_obj_track_times(fcpl, 0);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    /* Large arrays start on a page, so a reader can map them (dataset.c) with naturally aligned elements. */
    H5Pset_alignment(fapl, 65536, 4096);
    /* The 1.8-and-later object formats: every metadata block (superblock, object headers, link and chunk
     * indexes) carries a checksum that HDF5 verifies on read, so a damaged file is refused before HDF5 decodes
     * it (docs/FORMATS.md, "Integrity"); readable by HDF5 1.10 and later, so by any current h5py. */
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (w->file < 0) return m2_h5_fail(M2_EFAIL, "create", w->tmp, "cannot create");
    char utc[32];
    m2_h5_utc_now(utc, sizeof utc);
    if (m2_h5_attr_put_str(w->file, "schema", schema) || m2_h5_attr_put_i32(w->file, "schema_version", version) ||
        m2_h5_attr_put_str(w->file, "created_utc", utc)) {
        m2_h5_abort(w);
        return M2_EFAIL;
    }
    return M2_OK;
}

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int m2_h5_commit(m2_h5_writer *w)
{
    if (w->file < 0) return m2_fail(M2_EFAIL, "write (%s): file is not open", w->path);
    herr_t fl = H5Fflush(w->file, H5F_SCOPE_GLOBAL);
    herr_t cl = H5Fclose(w->file);
    w->file = H5I_INVALID_HID;
    if (fl < 0 || cl < 0) {
        int rc = m2_h5_fail(M2_EFAIL, "write", w->path, "flush/close failed (disk full?)");
        unlink(w->tmp);
        return rc;
    }
    if (fsync_path(w->tmp, O_RDONLY) != 0 || rename(w->tmp, w->path) != 0) {
        int rc = m2_fail(M2_EFAIL, "write (%s): %s", w->path, strerror(errno));
        unlink(w->tmp);
        return rc;
    }
    char dir[4096];
    const char *base;
    split_dir(w->path, dir, sizeof dir, &base);
    if (fsync_path(dir, O_RDONLY | O_DIRECTORY) != 0)
        return m2_fail(M2_EFAIL, "write (%s): fsync of folder %s: %s", w->path, dir, strerror(errno));
    return M2_OK;
}

void m2_h5_abort(m2_h5_writer *w)
{
    if (w->file >= 0) H5Fclose(w->file);
    w->file = H5I_INVALID_HID;
    H5Eclear2(H5E_DEFAULT);
    if (w->tmp[0]) unlink(w->tmp);
}

/* ---- attributes ----------------------------------------------------------------------------------- */

int m2_h5_attr_exists(hid_t obj, const char *name)
{
    g_unreadable[0] = '\0';
    htri_t e = H5Aexists(obj, name);
    if (e < 0) note_unreadable();
    return e > 0;
}

/* Creates (replacing any existing one) and writes an attribute. */
static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space, const void *data)
{
    m2_h5_quiet();
    if (m2_h5_attr_exists(obj, name)) H5Adelete(obj, name);
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mtype, data);
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    return rc < 0 ? fail_at(obj, "writing attribute", name, "cannot write") : M2_OK;
}

static hid_t fixed_string_type(size_t size)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, size < 1 ? 1 : size);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

int m2_h5_attr_put_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = fixed_string_type(strlen(value) + 1);
    int rc = attr_write(obj, name, t, t, H5Screate(H5S_SCALAR), value);
    H5Tclose(t);
    return rc;
}

int m2_h5_attr_put_strs(hid_t obj, const char *name, const char *values, size_t stride, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        size_t l = strnlen(values + (size_t)i * stride, stride);
        if (l + 1 > len) len = l + 1;
    }
    /* Repack at the stored width so each string is NUL-terminated even when it filled its slot. */
    char *packed = calloc(n > 0 ? (size_t)n : 1, len);
    if (!packed) return m2_fail(M2_EFAIL, "attribute %s: out of memory", name);
    for (int i = 0; i < n; i++)
        memcpy(packed + (size_t)i * len, values + (size_t)i * stride, strnlen(values + (size_t)i * stride, stride));
    hid_t t = fixed_string_type(len);
    hsize_t dim = (hsize_t)n;
    int rc = attr_write(obj, name, t, t, H5Screate_simple(1, &dim, NULL), packed);
    H5Tclose(t);
    free(packed);
    return rc;
}

int m2_h5_attr_put_vec(hid_t obj, const char *name, m2_h5_type type, int64_t n, const void *values)
{
    hsize_t dim = (hsize_t)n;
    return attr_write(obj, name, file_type(type), mem_type(type), H5Screate_simple(1, &dim, NULL), values);
}

static int put_scalar(hid_t obj, const char *name, m2_h5_type type, const void *v)
{
    return attr_write(obj, name, file_type(type), mem_type(type), H5Screate(H5S_SCALAR), v);
}

int m2_h5_attr_put_i32(hid_t obj, const char *name, int32_t v) { return put_scalar(obj, name, M2_H5_I32, &v); }
int m2_h5_attr_put_i64(hid_t obj, const char *name, int64_t v) { return put_scalar(obj, name, M2_H5_I64, &v); }
int m2_h5_attr_put_f64(hid_t obj, const char *name, double v) { return put_scalar(obj, name, M2_H5_F64, &v); }
int m2_h5_attr_put_f32(hid_t obj, const char *name, float v) { return put_scalar(obj, name, M2_H5_F32, &v); }

/* Opens an attribute and reports its element count (1 for a scalar); fails on a missing attribute or one
 * that is not a scalar or a vector. */
static int attr_open(hid_t obj, const char *name, hid_t *attr, hid_t *ftype, int64_t *count)
{
    m2_h5_quiet();
    if (!m2_h5_attr_exists(obj, name)) return fail_at(obj, "attribute", name, missing_why());
    *attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (*attr < 0) return fail_at(obj, "attribute", name, "cannot open");
    hid_t space = H5Aget_space(*attr);
    int rank = H5Sget_simple_extent_ndims(space);
    *count = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    *ftype = H5Aget_type(*attr);
    if (rank > 1) {
        H5Tclose(*ftype);
        H5Aclose(*attr);
        return fail_at(obj, "attribute", name, "has more than one dimension");
    }
    return M2_OK;
}

/* The range of each type a value may be narrowed to. */
static int in_range(m2_h5_type t, double v)
{
    switch (t) {
    case M2_H5_F32: return !isfinite(v) || fabs(v) <= FLT_MAX;
    case M2_H5_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case M2_H5_I8: return v >= INT8_MIN && v <= INT8_MAX;
    default: return 1;
    }
}

/* Reads an attribute's values at full width (double, int64 or uint64 hold every stored value of their class
 * exactly) and narrows them only when each fits: HDF5's own conversion clips an out-of-range value to the type's
 * limit without an error (a horizon of 2^40 read as int32 became 2147483647). NULL, or why not (in buf). */
static const char *attr_read_in_range(hid_t a, hid_t ft, m2_h5_type type, int64_t count, void *values, char *buf,
                                      size_t cap)
{
    int unsigned_ints = !is_float(type) && H5Tget_sign(ft) == H5T_SGN_NONE;
    hid_t wide = is_float(type) ? H5T_NATIVE_DOUBLE : unsigned_ints ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64;
    union {
        double f;
        int64_t i;
        uint64_t u;
    } *w = m2_alloc_array(count > 0 ? count : 1, sizeof *w, "attribute values");
    const char *why = !w ? "out of memory" : H5Aread(a, wide, w) < 0 ? "cannot read" : NULL;
    for (int64_t k = 0; k < count && !why; k++) {
        int fits = is_float(type)  ? in_range(type, w[k].f)
                   : unsigned_ints ? w[k].u <= INT64_MAX && in_range(type, (double)w[k].u)
                                   : in_range(type, (double)w[k].i);
        if (!fits) {
            if (is_float(type))
                snprintf(buf, cap, "value %g does not fit float32", w[k].f);
            else if (unsigned_ints)
                snprintf(buf, cap, "value %llu does not fit int%d", (unsigned long long)w[k].u,
                         (int)m2_h5_type_size(type) * 8);
            else
                snprintf(buf, cap, "value %lld does not fit int%d", (long long)w[k].i, (int)m2_h5_type_size(type) * 8);
            why = buf;
        }
    }
    for (int64_t k = 0; k < count && !why; k++) switch (type) {
        case M2_H5_F32: ((float *)values)[k] = (float)w[k].f; break;
        case M2_H5_F64: ((double *)values)[k] = w[k].f; break;
        case M2_H5_I64: ((int64_t *)values)[k] = w[k].i; break;
        case M2_H5_I32: ((int32_t *)values)[k] = (int32_t)w[k].i; break;
        case M2_H5_I8: ((int8_t *)values)[k] = (int8_t)w[k].i; break;
        }
    free(w);
    return why;
}

int m2_h5_attr_get_vec(hid_t obj, const char *name, m2_h5_type type, int64_t cap, void *values, int64_t *n)
{
    hid_t a, ft;
    int64_t count;
    if (attr_open(obj, name, &a, &ft, &count)) return M2_EFAIL;
    const char *why = class_mismatch(ft, type);
    char buf[96];
    if (!why && count > cap) {
        snprintf(buf, sizeof buf, "has %lld values, at most %lld allowed", (long long)count, (long long)cap);
        why = buf;
    }
    if (!why) why = attr_read_in_range(a, ft, type, count, values, buf, sizeof buf);
    herr_t rc = why ? -1 : 0;
    H5Tclose(ft);
    H5Aclose(a);
    if (rc < 0) return fail_at(obj, "attribute", name, why ? why : "cannot read");
    if (n) *n = count;
    return M2_OK;
}

static int get_scalar(hid_t obj, const char *name, m2_h5_type type, void *out)
{
    int64_t n = 0;
    unsigned char tmp[8];
    if (m2_h5_attr_get_vec(obj, name, type, 1, tmp, &n)) return M2_EFAIL;
    if (n != 1) return fail_at(obj, "attribute", name, "expected one value");
    memcpy(out, tmp, m2_h5_type_size(type));
    return M2_OK;
}

int m2_h5_attr_get_i32(hid_t obj, const char *name, int32_t *v) { return get_scalar(obj, name, M2_H5_I32, v); }
int m2_h5_attr_get_i64(hid_t obj, const char *name, int64_t *v) { return get_scalar(obj, name, M2_H5_I64, v); }
int m2_h5_attr_get_f64(hid_t obj, const char *name, double *v) { return get_scalar(obj, name, M2_H5_F64, v); }
int m2_h5_attr_get_f32(hid_t obj, const char *name, float *v) { return get_scalar(obj, name, M2_H5_F32, v); }

/* Reads count strings (fixed-length or variable-length) into out at `stride` bytes each. */
static int read_strings(hid_t obj, const char *name, hid_t a, hid_t ft, int64_t count, char *out, size_t stride)
{
    const char *why = NULL;
    if (H5Tget_class(ft) != H5T_STRING) return fail_at(obj, "attribute", name, "not a string");
    if (H5Tis_variable_str(ft) > 0) {
        char **ptrs = calloc((size_t)count + 1, sizeof *ptrs);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft)); /* h5py writes UTF-8; HDF5 converts no character sets */
        if (!ptrs || H5Aread(a, mt, ptrs) < 0) why = "cannot read";
        for (int64_t i = 0; i < count && !why; i++) {
            const char *s = ptrs[i] ? ptrs[i] : "";
            if (strlen(s) >= stride)
                why = "string too long";
            else
                memcpy(out + i * stride, s, strlen(s) + 1);
        }
        for (int64_t i = 0; ptrs && i < count; i++) H5free_memory(ptrs[i]);
        free(ptrs);
        H5Tclose(mt);
    } else {
        size_t size = H5Tget_size(ft);
        char *buf = calloc((size_t)count + 1, size + 1);
        hid_t mt = fixed_string_type(size + 1);
        H5Tset_cset(mt, H5Tget_cset(ft));
        if (!buf || H5Aread(a, mt, buf) < 0) why = "cannot read";
        for (int64_t i = 0; i < count && !why; i++) {
            const char *s = buf + i * (size + 1);
            if (strlen(s) >= stride)
                why = "string too long";
            else
                memcpy(out + i * stride, s, strlen(s) + 1);
        }
        free(buf);
        H5Tclose(mt);
    }
    return why ? fail_at(obj, "attribute", name, why) : M2_OK;
}

int m2_h5_attr_get_str(hid_t obj, const char *name, char *out, size_t cap)
{
    hid_t a, ft;
    int64_t count;
    if (cap) out[0] = '\0';
    if (attr_open(obj, name, &a, &ft, &count)) return M2_EFAIL;
    int rc = count == 1 ? read_strings(obj, name, a, ft, 1, out, cap)
                        : fail_at(obj, "attribute", name, "expected one string");
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int m2_h5_attr_get_strs(hid_t obj, const char *name, char *out, size_t stride, int cap, int *n)
{
    hid_t a, ft;
    int64_t count;
    if (attr_open(obj, name, &a, &ft, &count)) return M2_EFAIL;
    int rc;
    if (count > cap) {
        char why[96];
        snprintf(why, sizeof why, "has %lld strings, at most %d allowed", (long long)count, cap);
        rc = fail_at(obj, "attribute", name, why);
    } else
        rc = read_strings(obj, name, a, ft, count, out, stride);
    H5Tclose(ft);
    H5Aclose(a);
    if (rc == M2_OK && n) *n = (int)count;
    return rc;
}

/* ---- datasets ------------------------------------------------------------------------------------- */

int m2_h5_exists(hid_t loc, const char *path)
{
    char buf[1024];
    g_unreadable[0] = '\0';
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return 0;
    /* H5Lexists requires every intermediate link to exist, so test prefix by prefix. */
    for (char *p = buf + (buf[0] == '/');; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            htri_t e = H5Lexists(loc, buf, H5P_DEFAULT);
            if (e < 0) note_unreadable();
            if (e <= 0) return 0;
            if (saved == '\0') return 1;
            *p = saved;
        }
    }
}

/* Creates the missing groups above `path` (without object times, like every object we write). */
static int make_parents(hid_t loc, const char *path)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return fail_at(loc, "dataset", path, "path too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (!m2_h5_exists(loc, buf)) {
            hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
            H5Pset_obj_track_times(gcpl, 0);
            hid_t g = H5Gcreate2(loc, buf, H5P_DEFAULT, gcpl, H5P_DEFAULT);
            H5Pclose(gcpl);
            if (g < 0) return fail_at(loc, "group", buf, "cannot create");
            H5Gclose(g);
        }
        *p = '/';
    }
    return M2_OK;
}

int m2_h5_write(hid_t loc, const char *path, m2_h5_type type, int rank, const int64_t *dims, const void *data,
                int compress)
{
    m2_h5_quiet();
    if (rank < 1 || rank > M2_H5_MAX_RANK) return fail_at(loc, "dataset", path, "rank must be 1 to 3");
    if (make_parents(loc, path)) return M2_EFAIL;
    hsize_t d[M2_H5_MAX_RANK], chunk[M2_H5_MAX_RANK];
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        d[i] = (hsize_t)dims[i];
        n *= (size_t)dims[i];
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    if (compress) {
        /* About 256 KiB per chunk: large enough for deflate to work, small enough to stay cheap to audit. */
        size_t row = 1;
        for (int i = 1; i < rank; i++) {
            chunk[i] = d[i] > 0 ? d[i] : 1; /* whole rows per chunk */
            row *= (size_t)chunk[i];
        }
        size_t rows = (256u << 10) / (m2_h5_type_size(type) * row);
        chunk[0] = rows < 1 ? 1 : rows;
        if (d[0] > 0 && chunk[0] > d[0]) chunk[0] = d[0];
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t space = H5Screate_simple(rank, d, NULL);
    hid_t ds = H5Dcreate2(loc, path, file_type(type), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    herr_t rc = ds < 0 ? -1 : 0;
    if (rc == 0 && n > 0 && data) rc = H5Dwrite(ds, mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(space);
    H5Pclose(dcpl);
    return rc < 0 ? fail_at(loc, "writing dataset", path, "cannot write") : M2_OK;
}

int m2_h5_write_rows(hid_t loc, const char *path, m2_h5_type type, int64_t at, int64_t n, const void *data)
{
    m2_h5_quiet();
    if (n <= 0) return M2_OK;
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    if (ds < 0) return fail_at(loc, "writing dataset", path, "cannot open");
    hid_t space = H5Dget_space(ds);
    hsize_t dims[2] = {0, 1}, start[2] = {(hsize_t)at, 0}, count[2];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    count[0] = (hsize_t)n;
    count[1] = dims[1];
    herr_t rc = (rank == 1 || rank == 2) && at >= 0 && (hsize_t)(at + n) <= dims[0]
                    ? H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL)
                    : -1;
    hid_t mem = rc < 0 ? H5I_INVALID_HID : H5Screate_simple(rank, count, NULL);
    if (mem >= 0) rc = H5Dwrite(ds, mem_type(type), mem, space, H5P_DEFAULT, data);
    if (mem >= 0) H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    return rc < 0 || mem < 0 ? fail_at(loc, "writing dataset", path, "cannot write rows") : M2_OK;
}

static void format_dims(char *buf, size_t cap, int rank, const int64_t *dims)
{
    size_t len = 0;
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "[", (long long)dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

int m2_h5_shape(hid_t loc, const char *path, int rank, int64_t *dims)
{
    m2_h5_quiet();
    if (!m2_h5_exists(loc, path)) return fail_at(loc, "dataset", path, missing_why());
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    if (ds < 0) return fail_at(loc, "dataset", path, "cannot open (not a dataset?)");
    hid_t space = H5Dget_space(ds), ft = H5Dget_type(ds);
    int r = H5Sget_simple_extent_ndims(space);
    hsize_t d[H5S_MAX_RANK];
    H5Sget_simple_extent_dims(space, d, NULL);
    H5T_class_t cls = H5Tget_class(ft);
    H5Tclose(ft);
    H5Sclose(space);
    H5Dclose(ds);
    char why[96];
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) return fail_at(loc, "dataset", path, "not a numeric array");
    if (r != rank) {
        snprintf(why, sizeof why, "has %d dimensions, expected %d", r, rank);
        return fail_at(loc, "dataset", path, why);
    }
    for (int i = 0; i < rank; i++) dims[i] = (int64_t)d[i];
    return M2_OK;
}

/* HDF5 clips a value that does not fit the memory type to its limit unless told otherwise: an int64 2^40 read
 * as int32 would become 2147483647, a float64 1e300 read as float32 the largest float. Such a read fails. */
static H5T_conv_ret_t refuse_out_of_range(H5T_conv_except_t e, hid_t src, hid_t dst, void *s, void *d, void *arg)
{
    (void)src, (void)dst, (void)s, (void)d;
    if (e != H5T_CONV_EXCEPT_RANGE_HI && e != H5T_CONV_EXCEPT_RANGE_LOW) return H5T_CONV_UNHANDLED;
    *(int *)arg = 1;
    return H5T_CONV_ABORT;
}

/* A contiguous array's storage must hold its shape and lie inside the file, a compact one's (inside its object
 * header) must be its shape's size: HDF5 1.10 trusts a damaged storage size or address and copies from outside its
 * buffers (segfaults inside H5Dread found by tests/fuzz). Chunked arrays are read chunk by chunk through the
 * filters, which check their own sizes. */
static const char *storage_mismatch(hid_t ds, size_t bytes)
{
    hid_t dcpl = H5Dget_create_plist(ds);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if ((layout != H5D_CONTIGUOUS && layout != H5D_COMPACT) || bytes == 0) return NULL;
    hsize_t stored = H5Dget_storage_size(ds), file_size = 0;
    if (layout == H5D_COMPACT) /* the values inside the object header: exactly the shape's bytes */
        return stored == bytes ? NULL : "stores another number of bytes than its shape needs (damaged?)";
    haddr_t at = H5Dget_offset(ds);
    hid_t f = H5Iget_file_id(ds);
    herr_t rc = H5Fget_filesize(f, &file_size);
    H5Fclose(f);
    if (at == HADDR_UNDEF || stored < bytes) return "stores fewer bytes than its shape needs (damaged?)";
    if (rc < 0 || at > file_size || bytes > file_size - at) return "stored past the end of the file (truncated?)";
    return NULL;
}

int m2_h5_read(hid_t loc, const char *path, m2_h5_type type, int rank, const int64_t *dims, void *data)
{
    int64_t got[M2_H5_MAX_RANK];
    if (rank < 1 || rank > M2_H5_MAX_RANK) return fail_at(loc, "dataset", path, "rank must be 1 to 3");
    if (m2_h5_shape(loc, path, rank, got)) return M2_EFAIL;
    for (int i = 0; i < rank; i++)
        if (got[i] != dims[i]) {
            char a[64], b[64], why[160];
            format_dims(a, sizeof a, rank, got);
            format_dims(b, sizeof b, rank, dims);
            snprintf(why, sizeof why, "shape %s, expected %s", a, b);
            return fail_at(loc, "dataset", path, why);
        }
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    const char *why = class_mismatch(ft, type);
    if (!why) why = storage_mismatch(ds, n * H5Tget_size(ft));
    H5Tclose(ft);
    int out_of_range = 0;
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_type_conv_cb(xfer, refuse_out_of_range, &out_of_range);
    herr_t rc = why ? -1 : n == 0 ? 0 : H5Dread(ds, mem_type(type), H5S_ALL, H5S_ALL, xfer, data);
    H5Pclose(xfer);
    H5Dclose(ds);
    if (!why && out_of_range) why = "holds values that do not fit the expected type";
    if (rc < 0) return fail_at(loc, "dataset", path, why ? why : "cannot read (file damaged?)");
    return M2_OK;
}

int m2_h5_read_alloc(hid_t loc, const char *path, m2_h5_type type, int rank, int64_t *dims, void **data)
{
    *data = NULL;
    int64_t got[M2_H5_MAX_RANK];
    if (rank < 1 || rank > M2_H5_MAX_RANK) return fail_at(loc, "dataset", path, "rank must be 1 to 3");
    if (m2_h5_shape(loc, path, rank, got)) return M2_EFAIL;
    int64_t n = 1; /* the declared shape is the file's word: the product is checked, never wrapped */
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) dims[i] = got[i];
        if (m2_mul_count(n, dims[i], &n)) return fail_at(loc, "dataset", path, "declared size overflows");
    }
    char what[600];
    snprintf(what, sizeof what, "dataset %s", path);
    void *buf = m2_alloc_array(n, m2_h5_type_size(type), what);
    if (!buf) return M2_EFAIL;
    if (m2_h5_read(loc, path, type, rank, dims, buf)) {
        free(buf);
        return M2_EFAIL;
    }
    *data = buf;
    return M2_OK;
}

/* ---- row ranges ----------------------------------------------------------------------------------- */

int m2_h5_rows_open(hid_t loc, const char *path, m2_h5_type type, m2_h5_rows *r)
{
    *r = (m2_h5_rows){.ds = H5I_INVALID_HID, .type = type};
    int64_t n;
    if (m2_h5_shape(loc, path, 1, &n)) return M2_EFAIL;
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    const char *why = class_mismatch(ft, type);
    H5Tclose(ft);
    if (why) {
        H5Dclose(ds);
        return fail_at(loc, "dataset", path, why);
    }
    r->ds = ds;
    r->n_rows = n;
    if (H5Iget_name(ds, r->path, sizeof r->path) <= 0) snprintf(r->path, sizeof r->path, "/%s", path);
    return M2_OK;
}

int m2_h5_rows_read(m2_h5_rows *r, int64_t lo, int64_t n, void *out)
{
    if (lo < 0 || n < 0 || lo > r->n_rows - n) {
        char why[128];
        snprintf(why, sizeof why, "rows [%lld, %lld) outside its %lld rows", (long long)lo, (long long)(lo + n),
                 (long long)r->n_rows);
        return fail_at(r->ds, "dataset", r->path, why);
    }
    if (n == 0) return M2_OK;
    hsize_t start = (hsize_t)lo, count = (hsize_t)n;
    hid_t file_space = H5Dget_space(r->ds), mem_space = H5Screate_simple(1, &count, NULL);
    herr_t rc = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, NULL, &count, NULL);
    if (rc >= 0) rc = H5Dread(r->ds, mem_type(r->type), mem_space, file_space, H5P_DEFAULT, out);
    H5Sclose(mem_space);
    H5Sclose(file_space);
    if (rc < 0) return fail_at(r->ds, "dataset", r->path, "cannot read (file damaged?)");
    return M2_OK;
}

void m2_h5_rows_close(m2_h5_rows *r)
{
    if (r->ds >= 0) H5Dclose(r->ds);
    r->ds = H5I_INVALID_HID;
}

/* ---- string datasets ------------------------------------------------------------------------------ */

static hid_t string_dataset_parents(void)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    return lcpl;
}

int m2_h5_write_strs(hid_t loc, const char *path, const char *values, size_t stride, int64_t n)
{
    m2_h5_quiet();
    hid_t type = fixed_string_type(stride);
    hsize_t dim = (hsize_t)n;
    hid_t space = H5Screate_simple(1, &dim, NULL), lcpl = string_dataset_parents(),
          dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t d = H5Dcreate2(loc, path, type, space, lcpl, dcpl, H5P_DEFAULT);
    herr_t st = d < 0 ? -1 : H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(space);
    H5Tclose(type);
    return st < 0 ? fail_at(loc, "writing dataset", path, "cannot write") : M2_OK;
}

int m2_h5_read_strs(hid_t loc, const char *path, char *out, size_t stride, int64_t n)
{
    m2_h5_quiet();
    hid_t d = H5Dopen2(loc, path, H5P_DEFAULT);
    if (d < 0) return fail_at(loc, "dataset", path, "missing");
    hid_t space = H5Dget_space(d);
    hssize_t count = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    herr_t st = -1;
    if (count == n) {
        hid_t type = fixed_string_type(stride);
        st = H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
        H5Tclose(type);
    }
    H5Dclose(d);
    return st < 0 ? fail_at(loc, "dataset", path, "unreadable or wrong length") : M2_OK;
}
