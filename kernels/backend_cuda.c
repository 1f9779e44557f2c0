/* The CUDA backend's device API (backend_cuda.h): plain functions of ops_cuda.h and the NCCL adapter. */
#include "backend_cuda.h"

#include <stdio.h>

#include "ops_cuda.h"
#include "ssd_cuda.h"

static void device_name(char *buf, size_t cap)
{
    m2_cuda_device_info info;
    if (m2_ops_cuda_device_info(&info) == 0)
        snprintf(buf, cap, "%s", info.name);
    else
        snprintf(buf, cap, "unknown CUDA device");
}

static void keep_ssd_states(int keep)
{
    m2_ops_cuda_set_ssd_states(keep ? M2_CUDA_SSD_KEEP_STATES : M2_CUDA_SSD_RECOMPUTE_STATES);
}

static const m2_device_api g_api = {
    .name = "cuda",
    .available = m2_cuda_available,
    .init = m2_ops_cuda_init,
    .ops = m2_ops_cuda,
    .device_name = device_name,
    .set_precision = m2_ops_cuda_set_precision_named,
    .keep_ssd_states = keep_ssd_states,
    .comm_create = m2_dcomm_nccl_create,
};

const m2_device_api *m2_cuda_device_api(void) { return &g_api; }
