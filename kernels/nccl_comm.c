/* NCCL communicator with a watchdog (nccl_comm.h says what and why). Host code only: compiled as C in the
 * mamba2_cuda library, against the CUDA runtime and NCCL (never libcuda). */
#include "nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "dist/grad_ranges.h"

struct m2_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready; /* recorded on the compute stream by m2_nccl_after */
    int rank, world, device;
    double timeout_s;
    int broken; /* aborted after an error or a timeout: every later call fails at once */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 100 * 1000}; /* 100 us: the poll costs little, and NCCL needs no help to progress */
    nanosleep(&ts, NULL);
}

static int cuda_fail(const m2_nccl *c, int rank, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return m2_fail(M2_EFAIL, "NCCL %s (rank %d): CUDA: %s", what, c ? c->rank : rank, cudaGetErrorString(e));
}

/* Aborts the communicator (no further collective can hang on it) and leaves the message. */
static int abort_with(m2_nccl *c, const char *what, const char *why)
{
    if (c->comm && !c->broken) ncclCommAbort(c->comm);
    c->comm = NULL;
    c->broken = 1;
    return m2_fail(M2_EFAIL, "NCCL %s (rank %d): %s; communicator aborted", what, c->rank, why);
}

/* Polls until the communicator's asynchronous state leaves ncclInProgress (non-blocking initialisation and
 * enqueues), within the timeout. */
static int settle(m2_nccl *c, ncclResult_t rc, const char *what)
{
    const double t0 = now_s();
    while (rc == ncclInProgress) {
        if (c->timeout_s > 0 && now_s() - t0 > c->timeout_s) {
            char why[96];
            snprintf(why, sizeof why, "no progress within %.0f s (a rank is missing or stuck)", c->timeout_s);
            return abort_with(c, what, why);
        }
        pause_briefly();
        ncclResult_t q = ncclCommGetAsyncError(c->comm, &rc);
        if (q != ncclSuccess) rc = q;
    }
    if (rc != ncclSuccess) {
        char why[512];
        snprintf(why, sizeof why, "%s (%s)", ncclGetErrorString(rc), ncclGetLastError(c->comm));
        return abort_with(c, what, why);
    }
    return M2_OK;
}

static int usable(m2_nccl *c, const char *what)
{
    if (c->broken) return m2_fail(M2_EFAIL, "NCCL %s (rank %d): the communicator was aborted earlier", what, c->rank);
    return M2_OK;
}

int m2_nccl_create(m2_nccl **out, const m2_dist *pg, double timeout_s)
{
    *out = NULL;
    m2_nccl *c = calloc(1, sizeof *c);
    if (!c) return m2_fail(M2_EFAIL, "NCCL init (rank %d): out of memory", pg->rank);
    c->rank = pg->rank;
    c->world = pg->world;
    c->device = pg->device >= 0 ? pg->device : pg->local_rank;
    c->timeout_s = timeout_s > 0 ? timeout_s : pg->timeout_s;

    cudaError_t e = cudaSetDevice(c->device); /* before anything NCCL or CUDA allocates */
    if (e != cudaSuccess) {
        int rc = cuda_fail(c, pg->rank, "init: cudaSetDevice", e);
        free(c);
        return rc;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = pg->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (pg->world > 1) {
        if (r != ncclSuccess) {
            /* every other rank waits in the broadcast below: end the job rather than leave them hanging */
            char msg[256];
            snprintf(msg, sizeof msg, "NCCL init: ncclGetUniqueId: %s", ncclGetErrorString(r));
            m2_dist_abort(pg, 1, msg);
        }
        int rc = m2_dist_bcast(pg, &id, sizeof id, 0);
        if (rc) {
            free(c);
            return rc;
        }
    } else if (r != ncclSuccess) { /* one rank: nothing to share, so no MPI call at all */
        free(c);
        return m2_fail(M2_EFAIL, "NCCL init (rank 0): ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
    int rc;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) != cudaSuccess) {
        rc = cuda_fail(c, pg->rank, "init: stream", e);
        m2_nccl_free(c);
        return rc;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* init and enqueues return at once; settle() polls them under the timeout */
    r = ncclCommInitRankConfig(&c->comm, c->world, id, c->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = m2_fail(M2_EFAIL, "NCCL init (rank %d, device %d): ncclCommInitRankConfig: %s", c->rank, c->device,
                     ncclGetErrorString(r));
        if (c->comm) ncclCommAbort(c->comm);
        c->comm = NULL;
        m2_nccl_free(c);
        return rc;
    }
    if ((rc = settle(c, r, "init"))) {
        m2_nccl_free(c);
        return rc;
    }
    *out = c;
    return M2_OK;
}

void m2_nccl_free(m2_nccl *c)
{
    if (!c) return;
    if (c->comm) {
        ncclResult_t st = ncclSuccess;
        if (ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st == ncclSuccess) {
            cudaStreamSynchronize(c->stream);
            ncclCommDestroy(c->comm);
        } else {
            ncclCommAbort(c->comm);
        }
    }
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

int m2_nccl_rank(const m2_nccl *c) { return c->rank; }
int m2_nccl_world(const m2_nccl *c) { return c->world; }
void *m2_nccl_stream(const m2_nccl *c) { return (void *)c->stream; }

int m2_nccl_after(m2_nccl *c, void *compute_stream)
{
    cudaError_t e = cudaEventRecord(c->ready, (cudaStream_t)compute_stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->stream, c->ready, 0);
    return e == cudaSuccess ? M2_OK : cuda_fail(c, c->rank, "ordering after the compute stream", e);
}

int m2_nccl_reduce_range(m2_nccl *c, const float *grads, float *shard_grad, size_t shard, size_t begin, size_t end)
{
    int rc = usable(c, "reduce-scatter");
    if (rc) return rc;
    ncclResult_t r = ncclGroupStart();
    for (int q = 0; q < c->world && (r == ncclSuccess || r == ncclInProgress); q++) {
        const m2_range part = m2_shard_part(shard, q, begin, end);
        if (part.end == part.begin) continue; /* q owns nothing of this range */
        /* recvbuff is read only at the root (this rank when q == rank); elsewhere any device pointer does */
        float *recv = q == c->rank ? shard_grad + (part.begin - (size_t)q * shard) : shard_grad;
        r = ncclReduce(grads + part.begin, recv, part.end - part.begin, ncclFloat32, ncclSum, q, c->comm, c->stream);
    }
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = e;
    return settle(c, r, "reduce-scatter");
}

int m2_nccl_all_gather(m2_nccl *c, const float *send, float *recv, size_t send_count)
{
    int rc = usable(c, "all-gather");
    if (rc) return rc;
    return settle(c, ncclAllGather(send, recv, send_count, ncclFloat32, c->comm, c->stream), "all-gather");
}

int m2_nccl_all_reduce_sum(m2_nccl *c, float *buf, size_t count)
{
    int rc = usable(c, "all-reduce");
    if (rc) return rc;
    return settle(c, ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, c->comm, c->stream), "all-reduce");
}

int m2_nccl_wait(m2_nccl *c, const char *what)
{
    int rc = usable(c, what);
    if (rc) return rc;
    const double t0 = now_s();
    for (;;) {
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e == cudaSuccess) return M2_OK;
        if (e != cudaErrorNotReady) {
            (void)cudaGetLastError();
            return abort_with(c, what, cudaGetErrorString(e));
        }
        ncclResult_t st = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(c->comm, &st);
        if (q != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
            char why[512];
            snprintf(why, sizeof why, "%s (%s)", ncclGetErrorString(q != ncclSuccess ? q : st),
                     ncclGetLastError(c->comm));
            return abort_with(c, what, why);
        }
        if (c->timeout_s > 0 && now_s() - t0 > c->timeout_s) {
            char why[128];
            snprintf(why, sizeof why, "not finished after %.0f s (a rank is missing or stuck; [dist] timeout_s)",
                     c->timeout_s);
            return abort_with(c, what, why);
        }
        pause_briefly();
    }
}
