/* TEST ONLY: the CUDA backend's kernels running on the CPU emulation of the CUDA runtime (tests/gpu/emu), as the
 * device for model.device = cuda, linked into builds of mamba2_train and mamba2_eval (tests/gpu_train.cmake). The
 * functions are those kernels/backend_cuda.c puts in its table, NCCL included (emulated over MPI, emu/nccl.h);
 * only the name differs, so the logs say the device is emulated. The emulation has M2_EMU_DEVICES devices
 * (default 1): set it to the ranks per node for several ranks. */
#include <stdio.h>

#include "backend_cuda.h"
#include "core/backend.h"
#include "ops_cuda.h"

static void device_name(char *buf, size_t cap)
{
    m2_cuda_device_info info;
    if (m2_ops_cuda_device_info(&info) == 0) snprintf(buf, cap, "%s", info.name);
    else snprintf(buf, cap, "unknown CUDA device");
}

static const m2_device_api g_api = {
    .name = "cuda-emulated",
    .available = m2_cuda_available,
    .init = m2_ops_cuda_init,
    .ops = m2_ops_cuda,
    .device_name = device_name,
    .set_precision = m2_ops_cuda_set_precision_named,
    .comm_create = m2_dcomm_nccl_create,
};

const m2_device_api *m2_test_device_api(void) { return &g_api; }
