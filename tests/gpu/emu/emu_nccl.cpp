/* TEST-ONLY: NCCL over MPI for the CPU emulation (nccl.h says what is emulated and why). */
#include "nccl.h"

#include "emu_streams.h"

#define OMPI_SKIP_MPICXX  1 /* the C API only: Open MPI's deprecated C++ bindings are not linked */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct m2emu_nccl_comm {
    MPI_Comm mpi; /* MPI_COMM_NULL for one rank */
    int rank, nranks;
    int polls_left; /* non-blocking init: ncclInProgress this many more times */
    bool nonblocking;
    char last[160];
};

namespace
{
ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *why)
{
    if (c) snprintf(c->last, sizeof c->last, "%s", why);
    return r;
}

/* Checks the arguments NCCL would reject, and whether MPI is needed. */
ncclResult_t check(ncclComm_t c, size_t count, ncclDataType_t type, const char *what)
{
    if (!c) return ncclInvalidArgument;
    if (type != ncclFloat32) return fail(c, ncclInvalidArgument, "only fp32 is emulated");
    if (count > INT_MAX) return fail(c, ncclInvalidArgument, "count over the emulation's int range");
    (void)what;
    return ncclSuccess;
}

ncclResult_t mpi_result(ncclComm_t c, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return ncclSuccess;
    return fail(c, ncclSystemError, what);
}
} // namespace

/* M2_EMU_NCCL_INPROGRESS=1: a non-blocking communicator answers ncclInProgress from every enqueue (from
 * ncclGroupEnd for the calls of a group), then from ncclCommGetAsyncError for two polls, as NCCL may: the
 * backend's polling path (kernels/nccl_comm.c, settle) is then what makes progress. */
static bool inprogress_mode()
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("M2_EMU_NCCL_INPROGRESS");
        on = v && !strcmp(v, "1");
    }
    return on == 1;
}
static int g_group_depth = 0;
static ncclComm_t g_group_comm = nullptr; /* a non-blocking communicator used in the open group */

static ncclResult_t enqueued(ncclComm_t c, ncclResult_t r)
{
    if (r != ncclSuccess || !inprogress_mode() || !c->nonblocking) return r;
    if (g_group_depth > 0) {
        g_group_comm = c;
        return ncclSuccess;
    }
    c->polls_left = 2;
    return ncclInProgress;
}

/* A collective on its stream (emu_streams.h): at once, or queued when streams are interleaved (a queued one's MPI
 * failure is only left in ncclGetLastError's message). */
template <class F> ncclResult_t on_stream(ncclComm_t c, cudaStream_t stream, F f, const char *what)
{
    if (!m2emu::interleaved()) return enqueued(c, mpi_result(c, f(), what));
    m2emu::enqueue(stream, [=]() { (void)mpi_result(c, f(), what); });
    return enqueued(c, ncclSuccess);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "m2emu-nccl");
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    *comm = nullptr;
    if (strcmp(id.internal, "m2emu-nccl") != 0) return ncclInvalidArgument; /* not broadcast from rank 0 */
    if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    ncclComm_t c = (ncclComm_t)calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->rank = rank;
    c->nranks = nranks;
    c->mpi = MPI_COMM_NULL;
    if (nranks > 1) {
        int up = 0, size = 0, me = -1;
        MPI_Initialized(&up);
        if (!up) {
            free(c);
            return ncclInvalidUsage;
        }
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        if (size != nranks || me != rank || MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) {
            free(c);
            return ncclInvalidUsage;
        }
    }
    c->nonblocking = config && !config->blocking;
    c->polls_left = c->nonblocking ? 2 : 0;
    *comm = c;
    return c->polls_left ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    if (!comm) return ncclInvalidArgument;
    *state = comm->polls_left > 0 ? ncclInProgress : ncclSuccess;
    if (comm->polls_left > 0) comm->polls_left--;
    return ncclSuccess;
}

static ncclResult_t release(ncclComm_t comm)
{
    if (!comm) return ncclInvalidArgument;
    if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
    free(comm);
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return release(comm); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release(comm); }

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclSystemError: return "unhandled system error";
    default: return "emulated NCCL error";
    }
}
const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last : ""; }

ncclResult_t ncclGroupStart(void)
{
    g_group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void)
{
    if (g_group_depth == 0) return ncclInvalidUsage;
    if (--g_group_depth > 0 || !g_group_comm) return ncclSuccess;
    ncclComm_t c = g_group_comm;
    g_group_comm = nullptr;
    return enqueued(c, ncclSuccess);
}

/* A reduction over one rank is a copy: true when comm has one rank (recv then holds send). */
static bool copy_if_alone(ncclComm_t comm, const void *send, void *recv, size_t count)
{
    if (comm->nranks != 1) return false;
    if (send != recv) memmove(recv, send, count * sizeof(float));
    return true;
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = check(comm, count, type, "reduce");
    if (r != ncclSuccess) return r;
    if (op != ncclSum || root < 0 || root >= comm->nranks)
        return fail(comm, ncclInvalidArgument, "reduce: bad op/root");
    return on_stream(
        comm, stream,
        [=]() {
            if (copy_if_alone(comm, send, recv, count)) return MPI_SUCCESS;
            const int mine = comm->rank == root;
            const void *s = mine && send == recv ? MPI_IN_PLACE : send;
            return MPI_Reduce(s, mine ? recv : nullptr, (int)count, MPI_FLOAT, MPI_SUM, root, comm->mpi);
        },
        "MPI_Reduce");
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream)
{
    ncclResult_t r = check(comm, send_count, type, "all-gather");
    if (r != ncclSuccess) return r;
    float *out = (float *)recv;
    const int in_place = send == out + (size_t)comm->rank * send_count;
    return on_stream(
        comm, stream,
        [=]() {
            if (comm->nranks == 1) {
                if (!in_place) memmove(out, send, send_count * sizeof(float));
                return MPI_SUCCESS;
            }
            return MPI_Allgather(in_place ? MPI_IN_PLACE : send, in_place ? 0 : (int)send_count,
                                 in_place ? MPI_DATATYPE_NULL : MPI_FLOAT, recv, (int)send_count, MPI_FLOAT, comm->mpi);
        },
        "MPI_Allgather");
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = check(comm, count, type, "all-reduce");
    if (r != ncclSuccess) return r;
    if (op != ncclSum) return fail(comm, ncclInvalidArgument, "all-reduce: only sums are emulated");
    return on_stream(
        comm, stream,
        [=]() {
            if (copy_if_alone(comm, send, recv, count)) return MPI_SUCCESS;
            return MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm->mpi);
        },
        "MPI_Allreduce");
}
