/* TEST ONLY: the CUDA backend's kernels running on the CPU emulation of the CUDA runtime (tests/gpu/emu), as the
 * device for model.device = cuda, linked into builds of mamba2_train and mamba2_eval (tests/run/CMakeLists.txt and tests/gpu/CMakeLists.txt). It is
 * kernels/backend_cuda.c's table itself (compiled against the emulation, NCCL emulated over MPI, emu/nccl.h) under
 * another name, so the logs say the device is emulated. The emulation has M2_EMU_DEVICES devices (default 1): set
 * it to the ranks per node for several ranks. */
#include "backend_cuda.h"
#include "run/backend.h"

const m2_device_api *m2_test_device_api(void)
{
    static m2_device_api api;
    api = *m2_cuda_device_api();
    api.name = "cuda-emulated";
    return &api;
}
