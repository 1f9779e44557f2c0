/* TEST-ONLY emulation of the part of NCCL that kernels/nccl_comm.c uses, over MPI, so that the NCCL collectives of
 * the device ZeRO-1 step (kernels/nccl_comm.c, dcomm_nccl.c) run unchanged on the CPU emulation of the CUDA runtime
 * (cuda_runtime.h here), at any rank count under mpirun (tests/gpu/CMakeLists.txt).
 *
 * Emulated: a communicator of nranks over MPI_COMM_WORLD (one rank: no MPI at all, as a lone process needs);
 * non-blocking initialisation (the first ncclCommGetAsyncError answers ncclInProgress, so the caller's polling is
 * exercised; with M2_EMU_NCCL_INPROGRESS=1 every enqueue and ncclGroupEnd of a non-blocking communicator does the
 * same); ncclReduce / ncclAllGather / ncclAllReduce as blocking MPI collectives, run when their stream runs them
 * (at once, or queued with interleaved streams, emu_streams.h; every rank issues the same sequence, as NCCL
 * requires, so blocking calls cannot deadlock), in place where NCCL allows it; groups (the calls inside run in
 * order). fp32 sums only.
 * Not emulated: anything about speed, topology or asynchronous failure. */
#ifndef MAMBA2_EMU_NCCL_H
#define MAMBA2_EMU_NCCL_H

#include <stddef.h>

#include "cuda_host_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct m2emu_nccl_comm *ncclComm_t;
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef enum { ncclFloat32 = 7, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct {
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER \
    {                           \
        1                       \
    }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
