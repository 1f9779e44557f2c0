/* The device backend a program offers to model.device (run/backend.h). Inline, like version.h, so that it sees the
 * defines of the program that includes it: MAMBA2_HAVE_CUDA is set for programs that link the CUDA library (never for
 * the core library), M2_TEST_DEVICE_API for test builds of a program that link a stand-in device
 * (tests/run/CMakeLists.txt and tests/gpu/CMakeLists.txt) defining m2_test_device_api(). */
#ifndef MAMBA2_DEVICE_API_H
#define MAMBA2_DEVICE_API_H

#include "run/backend.h"

#if defined(M2_TEST_DEVICE_API)
const m2_device_api *m2_test_device_api(void);
#elif defined(MAMBA2_HAVE_CUDA)
#include "backend_cuda.h"
#endif

/* The CUDA backend when the program was built with it (or the test stand-in), else NULL: the CPU only. */
static inline const m2_device_api *m2_program_device_api(void)
{
#if defined(M2_TEST_DEVICE_API)
    return m2_test_device_api();
#elif defined(MAMBA2_HAVE_CUDA)
    return m2_cuda_device_api();
#else
    return (const m2_device_api *)0;
#endif
}

#endif
