/* TEST ONLY: the CPU ops dressed as a device for model.device = cuda (run/backend.h), linked into a second build
 * of mamba2_train and mamba2_eval (tests/run/CMakeLists.txt). The trainer then takes its device path on a machine
 * without a GPU: backend buffers reached only through the ops, host copies of the batch, predictions and
 * parameters, and the ZeRO-1 step (dist/zero.h) over host-staged MPI collectives. The CPU ops compute what the CPU path
 * computes, so the two paths must agree bit for bit (test_device_path.sh).
 * M2_TEST_DEVICE_NAME names the device (default: a name no peak is known for); a GPU's name from the peak table
 * (core/flops.h) turns on the MFU figures. */
#include <stdio.h>
#include <stdlib.h>

#include "run/backend.h"
#include "base/error.h"

static int available(char *why, size_t cap)
{
    (void)why;
    (void)cap;
    return 1 << 10; /* one "device" for any local rank */
}

static int init(int device) { return M2_OK; }

/* The CPU ops marked as device memory, so the collectives stage through host buffers as on a GPU. */
static const m2_ops *ops(void)
{
    static m2_ops as_device;
    as_device = *m2_ops_cpu();
    as_device.host_memory = 0;
    return &as_device;
}

static void device_name(char *buf, size_t cap)
{
    const char *name = getenv("M2_TEST_DEVICE_NAME");
    snprintf(buf, cap, "%s", name && *name ? name : "the CPU ops as a device (test)");
}

static const m2_device_api g_api = {
    .name = "cpu-as-device",
    .available = available,
    .init = init,
    .ops = ops,
    .device_name = device_name,
    .comm_create = NULL, /* no NCCL: dist.backend auto takes the host-staged MPI collectives */
};

const m2_device_api *m2_test_device_api(void) { return &g_api; }
