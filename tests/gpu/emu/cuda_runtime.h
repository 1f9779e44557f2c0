/* TEST-ONLY CPU emulation of the part of the CUDA runtime that kernels/ uses, so that the CUDA backend's kernels
 * run, unchanged, on a machine without a GPU (tests/gpu/CMakeLists.txt: the test_cuda_emu_* tests). The kernel sources are
 * compiled as C++ with this directory first on the include path, after emu/transform.cmake has rewritten each
 * launch `k<<<grid, block, shmem, stream>>>(args)` into `m2emu::launch(grid, block, shmem, stream)(<k>)(args)`
 * and each `extern __shared__ T name[];` into a pointer to the launch's dynamic shared memory.
 *
 * Semantics emulated: a grid runs one block at a time; a block's threads run as fibers in one OS thread, switched
 * at __syncthreads (every live thread runs up to the barrier, then all continue), so __shared__ memory (function
 * statics) is per block as on the GPU. A barrier reached by some threads of a block while others have exited is a
 * bug on the GPU too: the emulator aborts with a message. Device memory is host memory; streams are synchronous.
 * Not emulated: warps, memory-model races, timing; nothing here says anything about speed. From C, this header
 * gives the host API alone (cuda_host_api.h); NCCL has its own emulation over MPI (nccl.h). The tensor-core subset
 * (nvcuda::wmma, mma.h) and bf16 (cuda_bf16.h) have their own emulated headers here, with the alignment and ldm
 * rules of wmma checked. */
#ifndef MAMBA2_EMU_CUDA_RUNTIME_H
#define MAMBA2_EMU_CUDA_RUNTIME_H

#ifndef __cplusplus
/* C (the backend's host code): the host API alone */
#include "cuda_host_api.h"
#else

#include <math.h>
#include <stddef.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

using std::max;
using std::min;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__               static

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
void __syncthreads();
/* A warp shuffle (lane ^ lane_mask within a 32-thread warp), emulated as a block-wide step: every thread of the block
 * must call it at the same point (as a block-wide reduction does; one called by only some threads aborts like a
 * divergent __syncthreads). mask must be the full warp. */
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
/* The byte permute (PRMT): byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x (x the low 4). The
 * selector's sign-replicating bit (8) is not emulated: no kernel sets it. */
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(v >> (8 * ((s >> (4 * i)) & 7)) & 0xffu) << (8 * i);
    return r;
}

/* A vector load or store as the GPU issues it: one access of sizeof(T) bytes (one LDG.128/STG.128 for 16 bytes),
 * which the counting build's hooks then see as one access (a plain struct copy would be split by GCC into per-float
 * accesses and counted as several, emu_counters.h); kernels/cuda_common.cuh's m2_vload and m2_vstore use them. */
#define M2EMU_VECTOR_LOAD(T, p)  m2emu::vector_load<T>(p)
#define M2EMU_VECTOR_STORE(p, x) m2emu::vector_store(p, x) /* and a vector store (one STG.128) */
namespace m2emu
{
template <class T> inline T vector_load(const void *p)
{
    typedef char bytes __attribute__((vector_size(sizeof(T))));
    T r;
    const bytes v = *(const bytes *)p;
    __builtin_memcpy(&r, &v, sizeof r);
    return r;
}
template <class T> inline void vector_store(void *p, const T &x)
{
    typedef char bytes __attribute__((vector_size(sizeof(T))));
    bytes v;
    __builtin_memcpy(&v, &x, sizeof v);
    *(bytes *)p = v;
}
} // namespace m2emu

#include "cuda_host_api.h"

template <class T> cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }

namespace m2emu
{
/* Runs `thread` once per thread of every block of the grid (blockIdx/threadIdx set), blocks in order. */
void run_grid(dim3 grid, dim3 block, size_t shmem, const std::function<void()> &thread, const char *text,
              const char *enclosing);
/* False (with the error kept for cudaGetLastError) when a GPU would refuse the launch. */
bool launch_ok(dim3 grid, dim3 block, size_t shmem, const char *text);
/* Queues f on stream s (emu_streams.h: runs it at once unless streams are interleaved). */
void enqueue_on(cudaStream_t s, std::function<void()> f);
/* Names the launch just made (M2_CUDA_LAUNCHED's `what`), for the counters of emu_counters.h. */
void name_last_launch(const char *what);
/* The current launch's dynamic shared memory (its `shmem` bytes, zeroed per launch). */
void *dynamic_shared();

template <class K> struct launcher {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    const char *text; /* the kernel as the launch spells it */
    K kernel;
    template <class... A> void operator()(A &&...args) const
    {
        /* Kernel parameters are copies, shared read-only by every thread (each call copies them again). */
        if (!launch_ok(grid, block, shmem, text)) return;
        auto params = std::make_tuple(std::decay_t<A>(args)...);
        enqueue_on(stream, [g = grid, b = block, sh = shmem, t = text, k = kernel, params]() {
            run_grid(
                g, b, sh, [&]() { std::apply([&](const auto &...a) { k(a...); }, params); }, t, typeid(K).name());
        });
    }
};

struct launch {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    launch(dim3 g, dim3 b, size_t sh = 0, cudaStream_t s = nullptr) : grid(g), block(b), shmem(sh), stream(s) {}
    template <class K> launcher<K> operator()(const char *text, K k) const
    {
        return launcher<K>{grid, block, shmem, stream, text, k};
    }
};
} // namespace m2emu

/* the kernels' launch check names the launch for the counters (kernels/cuda_common.cuh) */
#define M2EMU_NAME_LAUNCH(what) m2emu::name_last_launch(what)

#endif /* __cplusplus */
#endif
