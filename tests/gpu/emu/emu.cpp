/* TEST-ONLY: the CPU emulation of the CUDA runtime and cuBLAS subset (cuda_runtime.h and cublas_v2.h here say
 * what is emulated and why). Threads of a block are fibers with their own stacks, switched by a small x86-64
 * context switch (callee-saved registers and the stack pointer: a few ns, so barrier-heavy kernels stay fast);
 * other machines fall back to ucontext. */
#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include "emu_count.h"
#include "emu_streams.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <memory>
#include <new>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace
{

/* ---- fibers ---- */
enum { STACK_BYTES = 256 * 1024 };

struct fiber {
    /* owned: freed with g_fibers at exit (a raw pointer here was LeakSanitizer's report on every emulated test) */
    std::unique_ptr<char[]> stack;
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t ctx;
#endif
    bool done = false;
};

std::vector<fiber> g_fibers;
int g_cur = -1;                    /* the fiber running now; -1: a thread run as a plain call (no barrier allowed) */
std::vector<unsigned> g_shfl_turn; /* per thread of the block: shuffles made, for __shfl_xor_sync's slots */
const std::function<void()> *g_thread = nullptr;
std::vector<unsigned char> g_dynamic_shared;

#if defined(__x86_64__)
void *g_sched_sp = nullptr;
extern "C" void m2emu_switch(void **save_sp, void *new_sp);
/* Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp, loads new_sp and
 * restores the registers saved there (System V x86-64: rbx, rbp, r12-r15 are callee-saved). */
asm(".text\n"
    ".globl m2emu_switch\n"
    ".type m2emu_switch,@function\n"
    "m2emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size m2emu_switch, .-m2emu_switch\n");
#else
ucontext_t g_sched_ctx;
#endif

void to_scheduler()
{
#if defined(__x86_64__)
    m2emu_switch(&g_fibers[g_cur].sp, g_sched_sp);
#else
    swapcontext(&g_fibers[g_cur].ctx, &g_sched_ctx);
#endif
}

void fiber_main()
{
    (*g_thread)();
    g_fibers[g_cur].done = true;
    to_scheduler(); /* never resumed */
    abort();
}

void fiber_start(fiber &f)
{
    f.done = false;
    if (!f.stack) {
        f.stack.reset(new (std::nothrow) char[STACK_BYTES]);
        if (!f.stack) {
            fprintf(stderr, "cuda emulator: out of memory for fiber stacks\n");
            abort();
        }
    }
#if defined(__x86_64__)
    /* a fresh stack that m2emu_switch "returns" into fiber_main from: 6 saved registers, the return address,
     * and one pad slot so that fiber_main starts with rsp = 8 mod 16, as after a call */
    uintptr_t top = ((uintptr_t)(f.stack.get() + STACK_BYTES)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;             /* pad */
    *--sp = (void *)&fiber_main; /* return address */
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = STACK_BYTES;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, (void (*)())fiber_main, 0);
#endif
}

void fiber_resume(int t)
{
    g_cur = t;
#if defined(__x86_64__)
    m2emu_switch(&g_sched_sp, g_fibers[t].sp);
#else
    swapcontext(&g_sched_ctx, &g_fibers[t].ctx);
#endif
    g_cur = -1;
}

void set_thread_index(unsigned t)
{
    threadIdx.x = t % blockDim.x;
    threadIdx.y = (t / blockDim.x) % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
}

[[noreturn]] void divergent(const char *how)
{
    fprintf(stderr, "cuda emulator: __syncthreads %s in block (%u,%u,%u) of a %ux%ux%u grid\n", how, blockIdx.x,
            blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z);
    abort();
}

/* Runs thread t until its next barrier or its end, and counts which it reached. */
static void resume_to_barrier(unsigned t, unsigned &waiting, unsigned &finished)
{
    set_thread_index(t);
    fiber_resume(t);
    if (g_fibers[t].done)
        finished++;
    else
        waiting++;
}

/* One block. Thread 0 runs as a fiber first; if it finishes without reaching a barrier, the block is taken to
 * have none (a barrier in only some threads would be a bug) and the other threads run as plain calls, which is
 * fast. Otherwise every thread runs as a fiber, round by round from barrier to barrier. */
void run_block(unsigned nthreads)
{
    std::fill(g_shfl_turn.begin(), g_shfl_turn.end(), 0u); /* every thread starts at the first shuffle slots */
    if (g_fibers.size() < nthreads) g_fibers.resize(nthreads);
    fiber_start(g_fibers[0]);
    set_thread_index(0);
    fiber_resume(0);
    if (g_fibers[0].done) {
        for (unsigned t = 1; t < nthreads; t++) {
            set_thread_index(t);
            (*g_thread)(); /* __syncthreads here aborts: g_cur is -1 */
        }
        return;
    }
    /* thread 0 waits at its first barrier: bring every other thread there, then go round by round */
    unsigned waiting = 1, finished = 0;
    for (unsigned t = 1; t < nthreads; t++) {
        fiber_start(g_fibers[t]);
        resume_to_barrier(t, waiting, finished);
    }
    for (;;) {
        if (finished && waiting) divergent("reached by some threads while others exited");
        if (!waiting) return;
        waiting = finished = 0;
        for (unsigned t = 0; t < nthreads; t++) {
            if (!g_fibers[t].done) resume_to_barrier(t, waiting, finished);
        }
    }
}

struct blas_ctx {
    cudaStream_t stream;
};

float round_bits(float v, int drop)
{
    /* round to nearest even, keeping 23 - drop mantissa bits; NaN and inf pass */
    if (!isfinite(v)) return v;
    uint32_t u;
    memcpy(&u, &v, 4);
    const uint32_t half = (1u << (drop - 1)) - 1 + ((u >> drop) & 1u);
    u = (u + half) & ~((1u << drop) - 1u);
    memcpy(&v, &u, 4);
    return v;
}

} // namespace

void __syncthreads()
{
    if (g_cur < 0) divergent("reached by a thread of a block whose thread 0 exited without it");
    to_scheduler();
}

/* Each thread writes its value, all reach the barrier, each reads its partner's. Two slot arrays used in turn: a
 * thread writes the next shuffle's value only after the barrier that all threads pass after reading this one's. */
float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
    static std::vector<float> slots[2];
    if (mask != 0xffffffffu) {
        fprintf(stderr, "cuda emulator: __shfl_xor_sync with a partial mask (0x%x) is not emulated\n", mask);
        abort();
    }
    const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (nthreads % 32 || nthreads > 1024 || lane_mask < 0 || lane_mask > 31) {
        fprintf(stderr, "cuda emulator: __shfl_xor_sync in a block of %u threads (lane mask %d)\n", nthreads,
                lane_mask);
        abort();
    }
    if (g_shfl_turn.size() < nthreads) g_shfl_turn.resize(nthreads, 0);
    std::vector<float> &slot = slots[g_shfl_turn[t]++ & 1u];
    if (slot.size() < nthreads) slot.resize(nthreads);
    slot[t] = v;
    __syncthreads();
    return slot[t ^ (unsigned)lane_mask];
}

/* The last launch error, as the runtime keeps it: returned and cleared by cudaGetLastError. */
static cudaError_t g_last_error = cudaSuccess;

namespace m2emu
{
bool launch_ok(dim3 grid, dim3 block, size_t shmem, const char *text)
{
    /* A GPU refuses these launches without running anything and reports them at the next cudaGetLastError
     * (the backend checks after every launch, kernels/cuda_common.cuh: M2_CUDA_LAUNCHED): the block and grid
     * limits of compute capability 9.0, and more than 48 KiB of dynamic shared memory (the emulated kernels have
     * no cudaFuncSetAttribute opt-in). */
    const unsigned nthreads = block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.y > 65535 || grid.z > 65535 || shmem > 48 * 1024) {
        fprintf(stderr,
                "cuda emulator: invalid launch of %s: %ux%ux%u blocks of %ux%ux%u threads, %zu bytes of "
                "dynamic shared memory\n",
                text, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem);
        g_last_error = cudaErrorInvalidConfiguration;
        return false;
    }
    return true;
}

void run_grid(dim3 grid, dim3 block, size_t shmem, const std::function<void()> &thread, const char *text,
              const char *enclosing)
{
    const unsigned nthreads = block.x * block.y * block.z;
    const std::function<void()> *saved = g_thread;
    g_thread = &thread;
    gridDim = grid;
    blockDim = block;
    g_dynamic_shared.assign(shmem ? shmem : 1, 0);
    launch_begin(text, enclosing, grid.x * grid.y * grid.z, nthreads);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx.x = x;
                blockIdx.y = y;
                blockIdx.z = z;
                run_block(nthreads);
            }
    launch_end();
    g_thread = saved;
}

void *dynamic_shared() { return g_dynamic_shared.data(); }
void enqueue_on(cudaStream_t s, std::function<void()> f) { enqueue(s, std::move(f)); }

/* A device operation the emulation performs itself, counted as one launch with its bytes. */
static void counted_call(const char *name, double read, double write)
{
    launch_begin(name, nullptr, 0, 0);
    count_bytes(read, write);
    launch_end();
    name_last_launch(name);
}
} // namespace m2emu

/* ---- runtime ---- */
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNotReady: return "device not ready";
    default: return "emulated CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
/* Emulated devices: M2_EMU_DEVICES (default 1), so that several ranks of one node can each own one (all share the
 * host's memory; the emulation does not tell them apart). */
static int emu_devices()
{
    const char *v = getenv("M2_EMU_DEVICES");
    const int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}
static int g_device = 0;
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = emu_devices();
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of the CUDA backend (tests only)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    return device >= 0 && device < emu_devices() ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= emu_devices()) return cudaErrorInvalidValue;
    g_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device)
{
    *device = g_device;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!*p) return cudaErrorMemoryAllocation;
    /* device memory is not zeroed: make reads of unwritten memory visible as NaN-ish garbage */
    memset(*p, 0xff, (bytes + 255) / 256 * 256);
    m2emu::count_alloc(*p, bytes);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    m2emu::drain_all(); /* cudaFree synchronises the device */
    m2emu::count_free(p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    m2emu::enqueue(s, [=]() {
        memset(p, v, bytes);
        m2emu::counted_call("cudaMemsetAsync", 0, (double)bytes);
    });
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s)
{
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault) {
        /* to pageable host memory the copy is synchronous: it waits for the stream's earlier work */
        m2emu::drain(s);
        memmove(dst, src, bytes);
    } else if (kind == cudaMemcpyHostToDevice) { /* the host buffer is staged at once; the device write queues */
        std::shared_ptr<std::vector<unsigned char>> staged = std::make_shared<std::vector<unsigned char>>(
            (const unsigned char *)src, (const unsigned char *)src + bytes);
        m2emu::enqueue(s, [=]() { memcpy(dst, staged->data(), bytes); });
    } else {
        m2emu::enqueue(s, [=]() {
            memmove(dst, src, bytes);
            m2emu::counted_call("cudaMemcpyAsync (device to device)", (double)bytes, (double)bytes);
        });
    }
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = (size_t)1 << 34;
    *total_bytes = (size_t)1 << 35;
    return cudaSuccess;
}

/* ---- cuBLAS ---- */
const char *cublasGetStatusString(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE (emulated)";
}
cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    static blas_ctx ctx;
    *h = (cublasHandle_t)&ctx;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    ((blas_ctx *)h)->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) { return CUBLAS_STATUS_SUCCESS; }

/* An element of a cuBLAS operand of type t, widened to fp32 (bf16: exactly); a C element stored in t (bf16: rounded
 * to nearest even). */
static float blas_at(const void *p, cudaDataType t, size_t i)
{
    return t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16 *)p)[i]) : ((const float *)p)[i];
}
static void blas_put(void *p, cudaDataType t, size_t i, float v)
{
    if (t == CUDA_R_16BF)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else
        ((float *)p)[i] = v;
}
static double blas_bytes(cudaDataType t) { return t == CUDA_R_16BF ? 2.0 : 4.0; }

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    /* argument checks of the cuBLAS documentation (column-major: op(A) m x k, op(B) k x n, C m x n) */
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
    if (ldb < std::max(1, tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
    if (ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
    /* the supported combinations used here: all fp32 (any compute type), or bf16 A and B with fp32 compute */
    const bool bf16_in = at == CUDA_R_16BF;
    if (at != bt || (bf16_in ? compute != CUBLAS_COMPUTE_32F : ct != CUDA_R_32F)) return CUBLAS_STATUS_NOT_SUPPORTED;
    const int drop = compute == CUBLAS_COMPUTE_32F_FAST_16BF ? 16 : compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? 13 : 0;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    m2emu::enqueue(((blas_ctx *)h)->stream, [=]() {
        m2emu::launch_begin("cublasGemmEx", nullptr, 0, 0);
        m2emu::count_flops(drop == 16 || bf16_in ? m2emu::FLOPS_BF16
                           : drop == 13          ? m2emu::FLOPS_TF32
                                                 : m2emu::FLOPS_FP32_CUDA,
                           2.0 * m * n * k);
        const double ab = blas_bytes(at), cb = blas_bytes(ct);
        m2emu::count_bytes(ab * ((double)m * k + (double)k * n) + (be != 0.0f ? cb * m * n : 0.0), cb * m * n);
        m2emu::launch_end();
        m2emu::name_last_launch("cublasGemmEx (every GEMM)");
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float acc = 0.0f;
                for (int p = 0; p < k; p++) {
                    float x = blas_at(A, at, ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p);
                    float y = blas_at(B, bt, tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j);
                    if (drop) {
                        x = round_bits(x, drop);
                        y = round_bits(y, drop);
                    }
                    acc += x * y;
                }
                const size_t ij = (size_t)j * ldc + i; /* beta = 0: C is not read (may be garbage) */
                blas_put(C, ct, ij, al * acc + (be == 0.0f ? 0.0f : be * blas_at(C, ct, ij)));
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}
