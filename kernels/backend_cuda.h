/* The CUDA backend as a device for model.device (run/backend.h): the runtime check, the device's ops, its name,
 * and NCCL for the ZeRO-1 step on device buffers (dist/zero.h). Host code, usable from C; linked into programs built with
 * the CUDA backend (MAMBA2_HAVE_CUDA), never into the core library. */
#ifndef MAMBA2_BACKEND_CUDA_H
#define MAMBA2_BACKEND_CUDA_H

#include "run/backend.h"
#include "dist/dcomm.h"
#include "dist/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

const m2_device_api *m2_cuda_device_api(void);

/* Device collectives (dist/dcomm.h) over NCCL (nccl_comm.h): each collective is queued on the communicator's stream
 * after the work queued so far on the CUDA ops' stream; wait is NCCL's watchdog. Collective over pg (the
 * communicator is built here: rank 0's unique id goes out by MPI). timeout_s <= 0 takes pg->timeout_s. */
int m2_dcomm_nccl_create(m2_dcomm **out, const m2_dist *pg, double timeout_s);

#ifdef __cplusplus
}
#endif

#endif
