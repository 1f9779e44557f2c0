#include "io/predictions.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/h5util.h"

static int has_horizons(const m2_predictions *p)
{
    for (int o = 0; o < p->O; o++)
        if (p->horizons[o] != 0) return 1;
    return 0;
}

/* The optional root attributes: only the ones whose value is known. */
static int write_meta(hid_t f, const m2_predictions *p)
{
    int rc = M2_OK;
    if (rc == M2_OK && p->split[0]) rc = m2_h5_attr_put_str(f, "split", p->split);
    if (rc == M2_OK && p->mode[0]) rc = m2_h5_attr_put_str(f, "mode", p->mode);
    if (rc == M2_OK && p->checkpoint[0]) rc = m2_h5_attr_put_str(f, "checkpoint", p->checkpoint);
    if (rc == M2_OK && p->step >= 0) rc = m2_h5_attr_put_i64(f, "step", p->step);
    if (rc == M2_OK && has_horizons(p)) rc = m2_h5_attr_put_vec(f, "horizons", M2_H5_I32, p->O, p->horizons);
    return rc;
}

int m2_predictions_write(const char *path, const m2_predictions *p)
{
    if (p->O < 1 || p->O > M2_MAX_TARGETS)
        return m2_fail(M2_EFAIL, "predictions (%s): %d targets per row, expected 1..%d", path, p->O, M2_MAX_TARGETS);
    m2_h5_writer w;
    int rc = m2_h5_create(&w, path, M2_PREDICTIONS_SCHEMA, M2_PREDICTIONS_VERSION);
    if (rc != M2_OK) return rc;
    int64_t dims[2] = {p->M, p->O};
    rc = write_meta(w.file, p);
    if (rc == M2_OK) rc = m2_h5_write(w.file, "row", M2_H5_I64, 1, dims, p->row, 0);
    if (rc == M2_OK) rc = m2_h5_write(w.file, "pred", M2_H5_F32, 2, dims, p->pred, 0);
    if (rc == M2_OK) rc = m2_h5_write(w.file, "target", M2_H5_F32, 2, dims, p->target, 0);
    if (rc != M2_OK) {
        m2_h5_abort(&w);
        return rc;
    }
    return m2_h5_commit(&w);
}

/* Reads the optional attributes back; absent ones keep their "unknown" values. */
static int read_meta(hid_t f, m2_predictions *p)
{
    int rc = M2_OK;
    if (rc == M2_OK && m2_h5_attr_exists(f, "split")) rc = m2_h5_attr_get_str(f, "split", p->split, sizeof p->split);
    if (rc == M2_OK && m2_h5_attr_exists(f, "mode")) rc = m2_h5_attr_get_str(f, "mode", p->mode, sizeof p->mode);
    if (rc == M2_OK && m2_h5_attr_exists(f, "checkpoint"))
        rc = m2_h5_attr_get_str(f, "checkpoint", p->checkpoint, sizeof p->checkpoint);
    if (rc == M2_OK && m2_h5_attr_exists(f, "step")) rc = m2_h5_attr_get_i64(f, "step", &p->step);
    if (rc == M2_OK && m2_h5_attr_exists(f, "horizons")) {
        int64_t n = 0;
        rc = m2_h5_attr_get_vec(f, "horizons", M2_H5_I32, M2_MAX_TARGETS, p->horizons, &n);
        if (rc == M2_OK && n != p->O)
            rc = m2_fail(M2_EFAIL, "predictions: %lld horizons for %d targets", (long long)n, p->O);
    }
    return rc;
}

static int read_arrays(hid_t f, const char *path, m2_predictions *p)
{
    int64_t rdims[1] = {-1}, pdims[2] = {-1, -1};
    int rc = m2_h5_read_alloc(f, "row", M2_H5_I64, 1, rdims, (void **)&p->row);
    if (rc == M2_OK) rc = m2_h5_read_alloc(f, "pred", M2_H5_F32, 2, pdims, (void **)&p->pred);
    if (rc != M2_OK) return rc;
    if (pdims[0] != rdims[0] || pdims[1] < 1 || pdims[1] > M2_MAX_TARGETS)
        return m2_fail(M2_EFAIL, "predictions (%s): /pred is [%lld,%lld] for %lld rows", path, (long long)pdims[0],
                       (long long)pdims[1], (long long)rdims[0]);
    p->M = rdims[0];
    p->O = (int)pdims[1];
    return m2_h5_read_alloc(f, "target", M2_H5_F32, 2, pdims, (void **)&p->target);
}

int m2_predictions_read(const char *path, m2_predictions *p)
{
    memset(p, 0, sizeof *p);
    p->step = -1;
    hid_t f;
    int rc = m2_h5_open_read(path, M2_PREDICTIONS_SCHEMA, M2_PREDICTIONS_VERSION, &f, NULL);
    if (rc != M2_OK) return rc;
    rc = read_arrays(f, path, p);
    if (rc == M2_OK) rc = read_meta(f, p);
    H5Fclose(f);
    if (rc != M2_OK) m2_predictions_free(p);
    return rc;
}

void m2_predictions_free(m2_predictions *p)
{
    free(p->row);
    free(p->pred);
    free(p->target);
    p->row = NULL;
    p->pred = p->target = NULL;
}
