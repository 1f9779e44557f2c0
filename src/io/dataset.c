/* Tick dataset reader/writer (docs/FORMATS.md "Tick dataset"). The reader loads features, targets and the index
 * into memory in one HDF5 call each and validates everything a sampler or trainer relies on. */
#include "io/dataset.h"

#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "io/h5util.h"

#define M2_TICKS_SCHEMA "mamba2.ticks"

static const char *const split_names[3] = {"train", "val", "test"};

int m2_split_from_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, split_names[i]) == 0) return i;
    return -1;
}

const char *m2_split_name(int split) { return split >= 0 && split < 3 ? split_names[split] : "?"; }

void m2_dataset_free(m2_dataset *ds)
{
    if (ds->map) {
        munmap(ds->map, ds->map_len);
        ds->X = NULL;
        ds->y = NULL;
    }
    void *owned[] = {ds->X,         ds->y,        ds->sessions,  ds->ts_ns,        ds->bid_px, ds->ask_px,
                     ds->bid_sz,    ds->ask_sz,   ds->trade_px,  ds->trade_sz,     ds->side,   ds->inst_name,
                     ds->inst_mean, ds->inst_std, ds->inst_tick, ds->session_inst, ds->extra,  ds->book};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
    memset(ds, 0, sizeof *ds);
}

int m2_dataset_alloc_universe(m2_dataset *ds, int n_instruments)
{
    size_t I = (size_t)n_instruments, S = (size_t)(ds->n_sessions > 0 ? ds->n_sessions : 1);
    ds->n_instruments = n_instruments;
    ds->inst_name = calloc(I, sizeof *ds->inst_name);
    ds->inst_mean = calloc(I * M2_MAX_FEATURES, sizeof *ds->inst_mean);
    ds->inst_std = calloc(I * M2_MAX_FEATURES, sizeof *ds->inst_std);
    ds->inst_tick = calloc(I, sizeof *ds->inst_tick);
    ds->session_inst = calloc(S, sizeof *ds->session_inst);
    if (n_instruments < 1 || !ds->inst_name || !ds->inst_mean || !ds->inst_std || !ds->inst_tick || !ds->session_inst)
        return m2_fail(M2_EFAIL, "universe (%d instruments): out of memory", n_instruments);
    return M2_OK;
}

int m2_dataset_find_instrument(const m2_dataset *ds, const char *name)
{
    for (int i = 0; i < ds->n_instruments; i++)
        if (strcmp(ds->inst_name[i], name) == 0) return i;
    return -1;
}

/* ---- validation ----------------------------------------------------------------------------------- */

static int check_counts(const m2_dataset *ds, const char *origin)
{
    if (ds->n_rows < 1) return m2_fail(M2_EFAIL, "/features/X (%s): no rows", origin);
    if (ds->n_features < 1 || ds->n_features > M2_MAX_FEATURES)
        return m2_fail(M2_EFAIL, "/features/X (%s): %d features, supported 1..%d", origin, ds->n_features,
                       M2_MAX_FEATURES);
    if (ds->n_targets < 1 || ds->n_targets > M2_MAX_TARGETS)
        return m2_fail(M2_EFAIL, "/targets/y (%s): %d targets, supported 1..%d", origin, ds->n_targets, M2_MAX_TARGETS);
    return M2_OK;
}

static int check_sessions(const m2_dataset *ds, const char *origin)
{
    const int64_t *s = ds->sessions;
    if (ds->n_sessions < 1) return m2_fail(M2_EFAIL, "/index/sessions (%s): no sessions", origin);
    if (s[0] != 0 || s[ds->n_sessions] != ds->n_rows)
        return m2_fail(M2_EFAIL, "/index/sessions (%s): offsets run from %lld to %lld, must cover rows 0 to %lld",
                       origin, (long long)s[0], (long long)s[ds->n_sessions], (long long)ds->n_rows);
    for (int64_t i = 1; i <= ds->n_sessions; i++)
        if (s[i] <= s[i - 1])
            return m2_fail(M2_EFAIL, "/index/sessions (%s): not increasing: offset[%lld] = %lld after %lld", origin,
                           (long long)i, (long long)s[i], (long long)s[i - 1]);
    return M2_OK;
}

static int check_splits(const m2_dataset *ds, const char *origin)
{
    for (int k = 0; k < 3; k++) {
        int64_t b = ds->split[k][0], e = ds->split[k][1];
        if (b < 0 || e < b || e > ds->n_rows)
            return m2_fail(M2_EFAIL, "/index/%s (%s): rows [%lld, %lld) are not a range inside [0, %lld)",
                           split_names[k], origin, (long long)b, (long long)e, (long long)ds->n_rows);
        if (k > 0 && b < ds->split[k - 1][1])
            return m2_fail(M2_EFAIL,
                           "/index/%s (%s): begins at row %lld, before %s ends (%lld): splits must be in "
                           "time order and not overlap",
                           split_names[k], origin, (long long)b, split_names[k - 1], (long long)ds->split[k - 1][1]);
    }
    if (ds->split[M2_SPLIT_TRAIN][1] == ds->split[M2_SPLIT_TRAIN][0])
        return m2_fail(M2_EFAIL, "/index/train (%s): empty", origin);
    return M2_OK;
}

static int check_stats(const m2_dataset *ds, const char *origin)
{
    /* the spread feature and the backtest's costs divide by it */
    if (!isfinite(ds->tick_size) || !(ds->tick_size > 0))
        return m2_fail(M2_EFAIL, "dataset (%s): tick_size %g must be finite and > 0", origin, ds->tick_size);
    for (int k = 0; k < ds->n_targets; k++)
        if (ds->horizons[k] < 1)
            return m2_fail(M2_EFAIL, "/targets/y (%s): horizon %d is %d, must be >= 1", origin, k,
                           (int)ds->horizons[k]);
    for (int j = 0; j < ds->n_features; j++)
        if (!isfinite(ds->mean[j]) || !isfinite(ds->std[j]) || !(ds->std[j] > 0))
            return m2_fail(M2_EFAIL, "/features/X (%s): feature %s has mean %g, std %g (need finite, std > 0)", origin,
                           ds->feature_names[j], ds->mean[j], ds->std[j]);
    if (!(ds->clip > 0) || !isfinite(ds->clip))
        return m2_fail(M2_EFAIL, "/features/X (%s): clip %g must be > 0", origin, (double)ds->clip);
    return M2_OK;
}

/* Features are z-scored and clipped, so a NaN or Inf can only be damage; it would poison every window that
 * touches it (one bad row turns whole training steps non-finite). Targets may be NaN (a horizon crossing a session
 * end, masked from the loss) but never infinite. */
static int check_values(const m2_dataset *ds, const char *origin)
{
    if (!ds->X || !ds->y) return M2_OK;
    size_t nx = (size_t)ds->n_rows * (size_t)ds->n_features, ny = (size_t)ds->n_rows * (size_t)ds->n_targets;
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(ds->X[i]))
            return m2_fail(M2_EFAIL, "/features/X (%s): row %lld, feature %s is %g: features must be finite", origin,
                           (long long)(i / (size_t)ds->n_features), ds->feature_names[i % (size_t)ds->n_features],
                           (double)ds->X[i]);
    for (size_t i = 0; i < ny; i++)
        if (isinf(ds->y[i]))
            return m2_fail(M2_EFAIL, "/targets/y (%s): row %lld, horizon %d is %g: targets must be finite or NaN",
                           origin, (long long)(i / (size_t)ds->n_targets), (int)ds->horizons[i % (size_t)ds->n_targets],
                           (double)ds->y[i]);
    return M2_OK;
}

/* Sessions belong to known instruments, each instrument's sessions are contiguous within a split, and every
 * instrument's statistics are usable. */
static int check_universe(const m2_dataset *ds, const char *origin)
{
    if (!ds->session_inst) return M2_OK;
    for (int64_t k = 0; k < ds->n_sessions; k++)
        if (ds->session_inst[k] < 0 || ds->session_inst[k] >= ds->n_instruments)
            return m2_fail(M2_EFAIL,
                           "/universe/session_instrument (%s): session %lld has instrument %d, the "
                           "universe has %d",
                           origin, (long long)k, (int)ds->session_inst[k], ds->n_instruments);
    for (int i = 0; i < ds->n_instruments; i++)
        for (int j = 0; j < ds->n_features; j++) {
            double m = ds->inst_mean[i * M2_MAX_FEATURES + j], sd = ds->inst_std[i * M2_MAX_FEATURES + j];
            if (!isfinite(m) || !isfinite(sd) || !(sd > 0))
                return m2_fail(M2_EFAIL,
                               "/universe/std (%s): instrument %s, feature %s has mean %g, std %g (need "
                               "finite, std > 0)",
                               origin, ds->inst_name[i], ds->feature_names[j], m, sd);
        }
    return M2_OK;
}

int m2_dataset_check(const m2_dataset *ds, const char *origin)
{
    if (check_counts(ds, origin) || check_sessions(ds, origin) || check_splits(ds, origin) || check_stats(ds, origin) ||
        check_universe(ds, origin) || check_values(ds, origin))
        return M2_EFAIL;
    return M2_OK;
}

/* ---- writing -------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    m2_h5_type type;
    size_t offset; /* of the pointer inside m2_dataset */
} raw_field;

static const raw_field raw_fields[] = {
    {"/raw/ts_ns", M2_H5_I64, offsetof(m2_dataset, ts_ns)},
    {"/raw/bid_px", M2_H5_F64, offsetof(m2_dataset, bid_px)},
    {"/raw/ask_px", M2_H5_F64, offsetof(m2_dataset, ask_px)},
    {"/raw/bid_sz", M2_H5_F64, offsetof(m2_dataset, bid_sz)},
    {"/raw/ask_sz", M2_H5_F64, offsetof(m2_dataset, ask_sz)},
    {"/raw/trade_px", M2_H5_F64, offsetof(m2_dataset, trade_px)},
    {"/raw/trade_sz", M2_H5_F64, offsetof(m2_dataset, trade_sz)},
    {"/raw/side", M2_H5_I8, offsetof(m2_dataset, side)},
};
enum { N_RAW = sizeof raw_fields / sizeof raw_fields[0] };

static void **raw_slot(const m2_dataset *ds, int i) { return (void **)((char *)ds + raw_fields[i].offset); }

static int write_raw(hid_t f, const m2_dataset *ds)
{
    int present = 0;
    for (int i = 0; i < N_RAW; i++) present += *raw_slot(ds, i) != NULL;
    if (present == 0) return M2_OK; /* a dataset made from arrays alone (tests) has no raw events */
    if (present != N_RAW) return m2_fail(M2_EFAIL, "/raw (dataset): some raw arrays are missing");
    for (int i = 0; i < N_RAW; i++)
        if (m2_h5_write(f, raw_fields[i].name, raw_fields[i].type, 1, &ds->n_rows, *raw_slot(ds, i), 0))
            return M2_EFAIL;
    return M2_OK;
}

static int write_index(hid_t f, const m2_dataset *ds);

static int write_arrays(hid_t f, const m2_dataset *ds)
{
    int64_t xd[2] = {ds->n_rows, ds->n_features}, yd[2] = {ds->n_rows, ds->n_targets};
    if (m2_h5_write(f, "/features/X", M2_H5_F32, 2, xd, ds->X, 0) ||
        m2_h5_write(f, "/targets/y", M2_H5_F32, 2, yd, ds->y, 0))
        return M2_EFAIL;
    return write_index(f, ds);
}

static int write_index(hid_t f, const m2_dataset *ds)
{
    int64_t sd = ds->n_sessions + 1, two = 2;
    if (m2_h5_write(f, "/index/sessions", M2_H5_I64, 1, &sd, ds->sessions, 0)) return M2_EFAIL;
    for (int k = 0; k < 3; k++) {
        char path[32];
        snprintf(path, sizeof path, "/index/%s", split_names[k]);
        if (m2_h5_write(f, path, M2_H5_I64, 1, &two, ds->split[k], 0)) return M2_EFAIL;
    }
    return M2_OK;
}

static int write_attrs(hid_t f, const m2_dataset *ds)
{
    if (m2_h5_attr_put_str(f, "instrument", ds->instrument) || m2_h5_attr_put_str(f, "source", ds->source) ||
        m2_h5_attr_put_f64(f, "tick_size", ds->tick_size))
        return M2_EFAIL;
    hid_t x = H5Dopen2(f, "/features/X", H5P_DEFAULT), y = H5Dopen2(f, "/targets/y", H5P_DEFAULT);
    int rc = x < 0 || y < 0 ||
             m2_h5_attr_put_strs(x, "names", ds->feature_names[0], sizeof ds->feature_names[0], ds->n_features) ||
             m2_h5_attr_put_vec(x, "mean", M2_H5_F64, ds->n_features, ds->mean) ||
             m2_h5_attr_put_vec(x, "std", M2_H5_F64, ds->n_features, ds->std) ||
             m2_h5_attr_put_f32(x, "clip", ds->clip) ||
             m2_h5_attr_put_vec(y, "horizons", M2_H5_I32, ds->n_targets, ds->horizons) ||
             m2_h5_attr_put_str(y, "unit", "bp");
    if (x >= 0) H5Dclose(x);
    if (y >= 0) H5Dclose(y);
    return rc ? M2_EFAIL : M2_OK;
}

/* /universe (FORMATS.md "Universe"): names, per-instrument statistics and tick sizes, the instrument of each
 * session and the calendar cuts. */
static int write_universe(hid_t f, const m2_dataset *ds)
{
    const int I = ds->n_instruments, F = ds->n_features;
    int64_t i1 = I, st[2] = {I, F}, ns = ds->n_sessions, two = 2;
    double *mean = malloc(sizeof(double) * (size_t)I * (size_t)F), *sd = malloc(sizeof(double) * (size_t)I * (size_t)F);
    int rc = mean && sd ? M2_OK : m2_fail(M2_EFAIL, "/universe: out of memory");
    for (int i = 0; rc == M2_OK && i < I; i++)
        for (int j = 0; j < F; j++) {
            mean[i * F + j] = ds->inst_mean[i * M2_MAX_FEATURES + j];
            sd[i * F + j] = ds->inst_std[i * M2_MAX_FEATURES + j];
        }
    if (rc == M2_OK)
        rc = m2_h5_write_strs(f, "/universe/names", ds->inst_name[0], sizeof ds->inst_name[0], I) ||
             m2_h5_write(f, "/universe/mean", M2_H5_F64, 2, st, mean, 0) ||
             m2_h5_write(f, "/universe/std", M2_H5_F64, 2, st, sd, 0) ||
             m2_h5_write(f, "/universe/tick_size", M2_H5_F64, 1, &i1, ds->inst_tick, 0) ||
             m2_h5_write(f, "/universe/session_instrument", M2_H5_I32, 1, &ns, ds->session_inst, 0) ||
             m2_h5_write(f, "/universe/cut_ns", M2_H5_I64, 1, &two, ds->cut_ns, 0);
    free(mean);
    free(sd);
    return rc ? M2_EFAIL : M2_OK;
}

int m2_dataset_write_with(const char *path, const m2_dataset *ds, int (*extra)(int64_t h5file, void *ctx), void *ctx)
{
    if (m2_dataset_check(ds, path)) return M2_EFAIL;
    m2_h5_writer w;
    if (m2_h5_create(&w, path, M2_TICKS_SCHEMA, ds->session_inst ? M2_TICKS_VERSION : 1)) return M2_EFAIL;
    if (write_raw(w.file, ds) || write_arrays(w.file, ds) || write_attrs(w.file, ds) ||
        (ds->session_inst && write_universe(w.file, ds)) || (extra && extra(w.file, ctx))) {
        m2_h5_abort(&w);
        return M2_EFAIL;
    }
    return m2_h5_commit(&w);
}

int m2_dataset_write(const char *path, const m2_dataset *ds) { return m2_dataset_write_with(path, ds, NULL, NULL); }

/* ---- writing in pieces ---------------------------------------------------------------------------- */

struct m2_dataset_writer {
    m2_h5_writer w;
    int64_t n_rows;
    int n_features, n_targets, version;
};

int m2_dataset_writer_open(m2_dataset_writer **out, const char *path, int64_t n_rows, int n_features, int n_targets,
                           int version)
{
    m2_dataset_writer *dw = calloc(1, sizeof *dw);
    *out = NULL;
    if (!dw) return m2_fail(M2_EFAIL, "write (%s): out of memory", path);
    dw->n_rows = n_rows;
    dw->n_features = n_features;
    dw->n_targets = n_targets;
    dw->version = version;
    if (m2_h5_create(&dw->w, path, M2_TICKS_SCHEMA, version)) {
        free(dw);
        return M2_EFAIL;
    }
    int64_t xd[2] = {n_rows, n_features}, yd[2] = {n_rows, n_targets};
    int rc = m2_h5_write(dw->w.file, "/features/X", M2_H5_F32, 2, xd, NULL, 0) ||
             m2_h5_write(dw->w.file, "/targets/y", M2_H5_F32, 2, yd, NULL, 0);
    for (int i = 0; rc == M2_OK && i < N_RAW; i++)
        rc = m2_h5_write(dw->w.file, raw_fields[i].name, raw_fields[i].type, 1, &n_rows, NULL, 0);
    if (rc) {
        m2_dataset_writer_abort(dw);
        return M2_EFAIL;
    }
    *out = dw;
    return M2_OK;
}

int m2_dataset_writer_put(m2_dataset_writer *dw, int64_t at, const m2_dataset *src, int64_t begin, int64_t end)
{
    int64_t n = end - begin;
    if (n <= 0) return M2_OK;
    if (at < 0 || at + n > dw->n_rows || src->n_features != dw->n_features || src->n_targets != dw->n_targets)
        return m2_fail(M2_EFAIL, "write (%s): rows [%lld, %lld) with %d features do not fit the file's %lld x %d",
                       dw->w.path, (long long)at, (long long)(at + n), src->n_features, (long long)dw->n_rows,
                       dw->n_features);
    hid_t f = dw->w.file;
    if (m2_h5_write_rows(f, "/features/X", M2_H5_F32, at, n, src->X + begin * src->n_features) ||
        m2_h5_write_rows(f, "/targets/y", M2_H5_F32, at, n, src->y + begin * src->n_targets))
        return M2_EFAIL;
    for (int i = 0; i < N_RAW; i++) {
        const char *col = *raw_slot(src, i);
        if (m2_h5_write_rows(f, raw_fields[i].name, raw_fields[i].type, at, n,
                             col + (size_t)begin * m2_h5_type_size(raw_fields[i].type)))
            return M2_EFAIL;
    }
    return M2_OK;
}

int m2_dataset_writer_copy(m2_dataset_writer *dw, int64_t at, const char *path, const m2_dataset *old, int64_t begin,
                           int64_t end)
{
    enum { CHUNK = 1 << 16 };
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return m2_h5_fail(M2_EFAIL, "append", path, "cannot open");
    m2_dataset part = *old; /* X and y point into the old rows; the raw columns are read in chunks */
    m2_h5_rows col[N_RAW];
    int rc = M2_OK, opened = 0;
    for (int i = 0; i < N_RAW; i++) *raw_slot(&part, i) = NULL;
    for (; rc == M2_OK && opened < N_RAW; opened++) {
        rc = m2_h5_rows_open(f, raw_fields[opened].name, raw_fields[opened].type, &col[opened]);
        if (rc == M2_OK && !(*raw_slot(&part, opened) = malloc(CHUNK * m2_h5_type_size(raw_fields[opened].type))))
            rc = m2_fail(M2_EFAIL, "append (%s): out of memory", path);
    }
    for (int64_t b = begin; rc == M2_OK && b < end; b += CHUNK) {
        int64_t n = end - b < CHUNK ? end - b : CHUNK;
        part.X = old->X + b * old->n_features;
        part.y = old->y + b * old->n_targets;
        for (int i = 0; rc == M2_OK && i < N_RAW; i++) rc = m2_h5_rows_read(&col[i], b, n, *raw_slot(&part, i));
        if (rc == M2_OK) rc = m2_dataset_writer_put(dw, at + (b - begin), &part, 0, n);
    }
    for (int i = 0; i < N_RAW; i++) free(*raw_slot(&part, i));
    for (int i = 0; i < opened; i++) m2_h5_rows_close(&col[i]);
    H5Fclose(f);
    return rc;
}

int m2_dataset_writer_finish(m2_dataset_writer *dw, const m2_dataset *meta)
{
    return m2_dataset_writer_finish_with(dw, meta, NULL, NULL);
}

int m2_dataset_writer_finish_with(m2_dataset_writer *dw, const m2_dataset *meta,
                                  int (*extra)(int64_t h5file, void *ctx), void *ctx)
{
    hid_t f = dw->w.file;
    /* version 1 (one instrument split by rows) has no /universe, and no session_inst to write there */
    int rc = meta->n_rows != dw->n_rows || meta->X || meta->y || (dw->version > 1) != (meta->session_inst != NULL)
                 ? m2_fail(M2_EFAIL, "write (%s): the index does not describe the rows written", dw->w.path)
                 : M2_OK;
    if (rc == M2_OK && (m2_dataset_check(meta, dw->w.path) || write_index(f, meta) || write_attrs(f, meta) ||
                        (dw->version > 1 && write_universe(f, meta)) || (extra && extra(f, ctx))))
        rc = M2_EFAIL;
    if (rc == M2_OK) {
        rc = m2_h5_commit(&dw->w);
        free(dw);
        return rc;
    }
    m2_dataset_writer_abort(dw);
    return rc;
}

void m2_dataset_writer_abort(m2_dataset_writer *dw)
{
    if (!dw) return;
    m2_h5_abort(&dw->w);
    free(dw);
}

/* ---- reading -------------------------------------------------------------------------------------- */

/* Rows are stored: their features and targets (4 bytes each) take at least that many bytes of the file, even
 * compressed by a large factor (1024 leaves room for any real compression of floats, zeros included). A declared
 * shape beyond that is not a dataset, and believing it would size allocations from the file's say-so. */
static int declared_beyond_file(hid_t f, int64_t rows, int64_t columns)
{
    hsize_t file_bytes = 0;
    int64_t cells, bytes;
    if (H5Fget_filesize(f, &file_bytes) < 0) return 0; /* unknown: the reads still fail on a short file */
    if (m2_mul_count(rows, columns, &cells) || m2_mul_count(cells, 4, &bytes)) return 1;
    return (double)bytes > 1024.0 * (double)file_bytes;
}

static int read_shapes(hid_t f, m2_dataset *ds, const char *path)
{
    int64_t xd[2], yd[2], sd[1];
    if (m2_h5_shape(f, "/features/X", 2, xd) || m2_h5_shape(f, "/targets/y", 2, yd) ||
        m2_h5_shape(f, "/index/sessions", 1, sd))
        return M2_EFAIL;
    if (yd[0] != xd[0])
        return m2_fail(M2_EFAIL, "/targets/y (%s): %lld rows but /features/X has %lld: shapes disagree", path,
                       (long long)yd[0], (long long)xd[0]);
    if (sd[0] < 2)
        return m2_fail(M2_EFAIL, "/index/sessions (%s): needs at least 2 offsets, has %lld", path, (long long)sd[0]);
    if (xd[1] < 1 || xd[1] > M2_MAX_FEATURES)
        return m2_fail(M2_EFAIL, "/features/X (%s): %lld features, supported 1..%d", path, (long long)xd[1],
                       M2_MAX_FEATURES);
    if (yd[1] < 1 || yd[1] > M2_MAX_TARGETS)
        return m2_fail(M2_EFAIL, "/targets/y (%s): %lld targets, supported 1..%d", path, (long long)yd[1],
                       M2_MAX_TARGETS);
    if (sd[0] - 1 > xd[0])
        return m2_fail(M2_EFAIL, "/index/sessions (%s): %lld sessions for %lld rows (a session has at least one row)",
                       path, (long long)(sd[0] - 1), (long long)xd[0]);
    if (declared_beyond_file(f, xd[0], xd[1] + yd[1]))
        return m2_fail(M2_EFAIL,
                       "/features/X (%s): %lld rows x %lld columns declared, far more than the file's size "
                       "can hold (damaged or hostile file)",
                       path, (long long)xd[0], (long long)(xd[1] + yd[1]));
    ds->n_rows = xd[0];
    ds->n_features = (int)xd[1];
    ds->n_targets = (int)yd[1];
    ds->n_sessions = sd[0] - 1;
    return check_counts(ds, path);
}

static int read_attrs(hid_t f, m2_dataset *ds, const char *path)
{
    if (m2_h5_attr_get_str(f, "instrument", ds->instrument, sizeof ds->instrument) ||
        m2_h5_attr_get_str(f, "source", ds->source, sizeof ds->source) ||
        m2_h5_attr_get_f64(f, "tick_size", &ds->tick_size))
        return M2_EFAIL;
    hid_t x = H5Dopen2(f, "/features/X", H5P_DEFAULT), y = H5Dopen2(f, "/targets/y", H5P_DEFAULT);
    int nn = 0;
    int64_t nm = 0, ns = 0, nh = 0;
    char unit[16];
    int rc = m2_h5_attr_get_strs(x, "names", ds->feature_names[0], sizeof ds->feature_names[0], M2_MAX_FEATURES, &nn) ||
             m2_h5_attr_get_vec(x, "mean", M2_H5_F64, M2_MAX_FEATURES, ds->mean, &nm) ||
             m2_h5_attr_get_vec(x, "std", M2_H5_F64, M2_MAX_FEATURES, ds->std, &ns) ||
             m2_h5_attr_get_f32(x, "clip", &ds->clip) ||
             m2_h5_attr_get_vec(y, "horizons", M2_H5_I32, M2_MAX_TARGETS, ds->horizons, &nh) ||
             m2_h5_attr_get_str(y, "unit", unit, sizeof unit);
    H5Dclose(x);
    H5Dclose(y);
    if (rc) return M2_EFAIL;
    if (nn != ds->n_features || nm != ds->n_features || ns != ds->n_features)
        return m2_fail(M2_EFAIL, "/features/X (%s): %d features but %d names, %lld means, %lld stds", path,
                       ds->n_features, nn, (long long)nm, (long long)ns);
    if (nh != ds->n_targets)
        return m2_fail(M2_EFAIL, "/targets/y (%s): %d targets but %lld horizons", path, ds->n_targets, (long long)nh);
    if (strcmp(unit, "bp") != 0) return m2_fail(M2_EFAIL, "/targets/y (%s): unit \"%s\", expected \"bp\"", path, unit);
    return M2_OK;
}

static int read_index(hid_t f, m2_dataset *ds)
{
    int64_t sd = ds->n_sessions + 1, two = 2;
    ds->sessions = m2_alloc_array(sd, sizeof *ds->sessions, "/index/sessions");
    if (!ds->sessions || m2_h5_read(f, "/index/sessions", M2_H5_I64, 1, &sd, ds->sessions)) return M2_EFAIL;
    for (int k = 0; k < 3; k++) {
        char p[32];
        snprintf(p, sizeof p, "/index/%s", split_names[k]);
        if (m2_h5_read(f, p, M2_H5_I64, 1, &two, ds->split[k])) return M2_EFAIL;
    }
    return M2_OK;
}

static int read_raw(hid_t f, m2_dataset *ds)
{
    for (int i = 0; i < N_RAW; i++) {
        int64_t n = ds->n_rows;
        if (m2_h5_read_alloc(f, raw_fields[i].name, raw_fields[i].type, 1, &n, raw_slot(ds, i))) return M2_EFAIL;
    }
    return M2_OK;
}

/* A file without /universe is a universe of one: its root statistics, every session its instrument's. */
static int read_universe(hid_t f, m2_dataset *ds)
{
    const int F = ds->n_features;
    if (!m2_h5_exists(f, "/universe")) {
        if (m2_dataset_alloc_universe(ds, 1)) return M2_EFAIL;
        snprintf(ds->inst_name[0], sizeof ds->inst_name[0], "%s", ds->instrument);
        memcpy(ds->inst_mean, ds->mean, sizeof(double) * (size_t)F);
        memcpy(ds->inst_std, ds->std, sizeof(double) * (size_t)F);
        ds->inst_tick[0] = ds->tick_size;
        ds->cut_ns[0] = ds->cut_ns[1] = INT64_MIN; /* unknown: the file was split by rows */
        return M2_OK;
    }
    int64_t nd[1], two = 2, ns = ds->n_sessions;
    if (m2_h5_shape(f, "/universe/tick_size", 1, nd)) return M2_EFAIL;
    if (nd[0] < 1 || nd[0] > INT32_MAX)
        return m2_fail(M2_EFAIL, "/universe/tick_size: %lld instruments", (long long)nd[0]);
    const int I = (int)nd[0];
    int64_t st[2] = {I, F};
    double *mean = NULL, *sd = NULL;
    int rc = m2_dataset_alloc_universe(ds, I) ||
             m2_h5_read_strs(f, "/universe/names", ds->inst_name[0], sizeof ds->inst_name[0], I) ||
             m2_h5_read(f, "/universe/tick_size", M2_H5_F64, 1, nd, ds->inst_tick) ||
             m2_h5_read(f, "/universe/session_instrument", M2_H5_I32, 1, &ns, ds->session_inst) ||
             m2_h5_read(f, "/universe/cut_ns", M2_H5_I64, 1, &two, ds->cut_ns) ||
             m2_h5_read_alloc(f, "/universe/mean", M2_H5_F64, 2, st, (void **)&mean) ||
             m2_h5_read_alloc(f, "/universe/std", M2_H5_F64, 2, st, (void **)&sd);
    for (int i = 0; rc == M2_OK && i < I; i++)
        for (int j = 0; j < F; j++) {
            ds->inst_mean[i * M2_MAX_FEATURES + j] = mean[i * F + j];
            ds->inst_std[i * M2_MAX_FEATURES + j] = sd[i * F + j];
        }
    free(mean);
    free(sd);
    return rc ? M2_EFAIL : M2_OK;
}

/* Points `*out` at the stored floats of a contiguous, unfiltered float32 dataset inside the mapping, or leaves
 * it NULL (chunked, compressed or not yet allocated data is read instead). x86-64 and aarch64 hosts are
 * little-endian like the file, so the stored bytes are the values. */
static void map_floats(hid_t f, const char *name, const m2_dataset *ds, int64_t count, float **out)
{
    *out = NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return;
    haddr_t at = H5Dget_offset(d);
    hid_t t = H5Dget_type(d);
    int f32 = t >= 0 && H5Tequal(t, H5T_IEEE_F32LE) > 0;
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    /* the address is the file's word: compared without a sum that could wrap */
    if (!f32 || at == HADDR_UNDEF || at % sizeof(float) || at > ds->map_len ||
        (size_t)count * sizeof(float) > ds->map_len - at)
        return;
    *out = (float *)((char *)ds->map + at);
}

/* Maps the whole file privately (copy-on-write, so a caller that writes X changes only its own pages). */
static void map_file(const char *path, m2_dataset *ds)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    off_t len = lseek(fd, 0, SEEK_END);
    void *p = len > 0 ? mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) return;
    ds->map = p;
    ds->map_len = (size_t)len;
}

static int read_arrays(hid_t f, m2_dataset *ds, const char *path)
{
    int64_t xd[2] = {ds->n_rows, ds->n_features}, yd[2] = {ds->n_rows, ds->n_targets};
    map_file(path, ds);
    if (ds->map) {
        float *X, *y;
        map_floats(f, "/features/X", ds, xd[0] * xd[1], &X);
        map_floats(f, "/targets/y", ds, yd[0] * yd[1], &y);
        if (X && y) {
            ds->X = X;
            ds->y = y;
            return M2_OK;
        }
        munmap(ds->map, ds->map_len);
        ds->map = NULL;
    }
    if (m2_h5_read_alloc(f, "/features/X", M2_H5_F32, 2, xd, (void **)&ds->X) ||
        m2_h5_read_alloc(f, "/targets/y", M2_H5_F32, 2, yd, (void **)&ds->y))
        return M2_EFAIL;
    return M2_OK;
}

static int read_all(hid_t f, m2_dataset *ds, const char *path, int load_raw)
{
    if (read_shapes(f, ds, path) || read_attrs(f, ds, path) || read_index(f, ds)) return M2_EFAIL;
    if (check_sessions(ds, path) || check_splits(ds, path) || check_stats(ds, path)) return M2_EFAIL;
    if (read_universe(f, ds) || check_universe(ds, path)) return M2_EFAIL;
    if (read_arrays(f, ds, path) || check_values(ds, path)) return M2_EFAIL;
    return load_raw ? read_raw(f, ds) : M2_OK;
}

int m2_dataset_read(const char *path, m2_dataset *ds, int load_raw)
{
    memset(ds, 0, sizeof *ds);
    hid_t f;
    if (m2_h5_open_read(path, M2_TICKS_SCHEMA, M2_TICKS_VERSION, &f, NULL)) return M2_EFAIL;
    int rc = read_all(f, ds, path, load_raw);
    H5Fclose(f);
    if (rc) m2_dataset_free(ds);
    return rc;
}
