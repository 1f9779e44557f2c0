/* The trainer's data-parallel step (dp.h): a thin dispatch to zero.h or zero_dev.h. */
#include "dist/dp.h"

#include "base/error.h"
#include "dist/zero.h"
#include "dist/zero_dev.h"

#include <stdlib.h>

struct m2_dp {
    m2_zero *host;     /* exactly one of host and dev is set */
    m2_zero_dev *dev;
    const char *name;
    /* the bucket callback's state for one backward */
    const m2_layout *lay;
    const float *grads;
    int bucket_err;
};

static int make(m2_dp **out, const m2_dist *pg)
{
    *out = calloc(1, sizeof **out);
    return *out ? M2_OK : m2_fail(M2_EFAIL, "data-parallel step (rank %d): out of memory", pg->rank);
}

int m2_dp_create_host(m2_dp **out, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask)
{
    int rc = make(out, pg);
    if (!rc) rc = m2_zero_create(&(*out)->host, pg, n_params, decay_mask);
    if (rc) {
        m2_dp_free(*out);
        *out = NULL;
        return rc;
    }
    (*out)->name = "mpi";
    return M2_OK;
}

int m2_dp_create_device(m2_dp **out, const m2_dist *pg, const m2_ops *ops, m2_dcomm *comm, size_t n_params,
                        const unsigned char *decay_mask)
{
    int rc = make(out, pg);
    if (rc) {
        comm->free(comm);
        return rc;
    }
    (*out)->name = comm->name;
    rc = m2_zero_dev_create(&(*out)->dev, pg, ops, comm, n_params, decay_mask);
    if (rc) {
        m2_dp_free(*out);
        *out = NULL;
    }
    return rc;
}

void m2_dp_free(m2_dp *dp)
{
    if (!dp) return;
    m2_zero_free(dp->host);
    m2_zero_dev_free(dp->dev);
    free(dp);
}

const char *m2_dp_name(const m2_dp *dp) { return dp->name; }

size_t m2_dp_padded_len(const m2_dp *dp)
{
    return dp->host ? m2_zero_padded_len(dp->host) : m2_zero_dev_padded_len(dp->dev);
}

void m2_dp_shard(const m2_dp *dp, int rank, size_t *begin, size_t *end)
{
    if (dp->host) m2_zero_shard(dp->host, rank, begin, end);
    else m2_zero_dev_shard(dp->dev, rank, begin, end);
}

size_t m2_dp_state_bytes(const m2_dp *dp)
{
    return dp->host ? m2_zero_state_bytes(dp->host) : m2_zero_dev_state_bytes(dp->dev);
}

int64_t m2_dp_optim_step(const m2_dp *dp)
{
    return dp->host ? m2_zero_optim_step(dp->host) : m2_zero_dev_optim_step(dp->dev);
}

/* model.h's on_ready: the bucket's range of the flat buffer to the step. The first error is kept and later
 * buckets are ignored (the trainer checks m2_dp_bucket_error after the backward). */
static void on_bucket(int bucket, void *user)
{
    m2_dp *dp = user;
    if (dp->bucket_err) return;
    size_t begin, end;
    m2_layout_bucket(dp->lay, bucket, &begin, &end);
    if (end <= begin) return;
    dp->bucket_err = dp->host ? m2_zero_bucket_ready(dp->host, dp->grads, begin, end)
                              : m2_zero_dev_bucket_ready(dp->dev, dp->grads, begin, end);
}

void m2_dp_bucket_hook(m2_dp *dp, const m2_layout *lay, const float *grads, m2_bucket_ready_fn *on_ready,
                       void **user)
{
    dp->lay = lay;
    dp->grads = grads;
    dp->bucket_err = M2_OK;
    *on_ready = on_bucket;
    *user = dp;
}

int m2_dp_bucket_error(const m2_dp *dp) { return dp->bucket_err; }

int m2_dp_step(m2_dp *dp, float *params, const float *grads, double local_sse, int64_t local_count, float lr,
               float wd, float grad_clip, double *out_loss, double *out_grad_norm, int *out_skipped)
{
    if (dp->host)
        return m2_zero_step(dp->host, params, grads, local_sse, local_count, lr, wd, grad_clip, out_loss,
                            out_grad_norm, out_skipped);
    return m2_zero_dev_step(dp->dev, params, grads, local_sse, local_count, lr, wd, grad_clip, out_loss,
                            out_grad_norm, out_skipped);
}

int m2_dp_gather_moments(const m2_dp *dp, float *m_full, float *v_full)
{
    return dp->host ? m2_zero_gather_moments(dp->host, m_full, v_full)
                    : m2_zero_dev_gather_moments(dp->dev, m_full, v_full);
}

int m2_dp_load_moments(m2_dp *dp, const float *m_full, const float *v_full, int64_t optim_step)
{
    return dp->host ? m2_zero_load_moments(dp->host, m_full, v_full, optim_step)
                    : m2_zero_dev_load_moments(dp->dev, m_full, v_full, optim_step);
}
