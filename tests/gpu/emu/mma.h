/* TEST-ONLY CPU emulation of the part of <mma.h> (nvcuda::wmma, warp-level tensor-core products) that kernels/
 * uses, for the emulated runtime of cuda_runtime.h here: fragments m16n16k16 of bf16 and m16n16k8 of tf32 with fp32
 * accumulators; fill_fragment, load_matrix_sync (operands, and accumulators from fp32 memory), mma_sync,
 * store_matrix_sync.
 *
 * How: a fragment holds its whole 16x16 (or 16x8, 8x16) tile, logically row-major, as floats. On the GPU a
 * fragment is spread over the 32 lanes of a warp and every lane calls each wmma function with the same
 * arguments; here lane 0 of each warp (linear thread index % 32 == 0) does the warp's whole work and the other
 * lanes do nothing. That is exact because (1) fibers switch only at __syncthreads, so lane 0's loads, products and
 * stores happen in program order with respect to the warp's other lanes between two barriers, and (2) the kernels
 * never touch fragment elements directly (kernels/tile_gemm.cuh says so; this emulation has no x[] /
 * num_elements, so code that does would not compile here). It also keeps the emulation as fast as the fp32 path:
 * one 16x16x16 product per warp, not 32.
 *
 * Checked, with a message and abort, as a GPU would fault or misbehave: every load/store pointer 32-byte (256-bit)
 * aligned; ldm a multiple of 8 elements for 16-bit types and of 4 for 32-bit types (16 bytes). Products: fp32
 * fma along k in order (the GPU's tensor cores sum in another, fixed order: results agree to fp32 rounding).
 * tf32: __float_to_tf32 rounds to nearest, ties away from zero, keeping 10 mantissa bits (cvt.rna.tf32.f32);
 * a tf32 operand that was not converted is truncated to those bits when loaded, as the hardware ignores them. */
#ifndef MAMBA2_EMU_MMA_H
#define MAMBA2_EMU_MMA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include "emu_count.h"

namespace nvcuda
{
namespace wmma
{

struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
struct row_major {
};
struct col_major {
};
enum layout_t { mem_row_major, mem_col_major };
namespace precision
{
struct tf32 {
};
} // namespace precision

inline float __float_to_tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) { /* finite: round the magnitude half up, i.e. ties away from zero */
        u += 0x1000u;
        u &= ~0x1fffu;
    }
    memcpy(&f, &u, 4);
    return f;
}

namespace m2emu_detail
{
template <class Use, int M, int N, int K> struct dims;
template <int M, int N, int K> struct dims<matrix_a, M, N, K> {
    enum { R = M, C = K };
};
template <int M, int N, int K> struct dims<matrix_b, M, N, K> {
    enum { R = K, C = N };
};
template <int M, int N, int K> struct dims<accumulator, M, N, K> {
    enum { R = M, C = N };
};

/* the element type in memory of a fragment type */
template <class T> struct mem {
    typedef T type;
};
template <> struct mem<precision::tf32> {
    typedef float type;
};

inline float value(__nv_bfloat16 h) { return __bfloat162float(h); }
inline float tf32_value(float f) /* the bits a tf32 operand keeps */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u &= ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

inline unsigned linear_thread() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
inline bool warp_leader() { return linear_thread() % 32 == 0; }

[[noreturn]] inline void fault(const char *fn, const char *why, const void *p, unsigned ldm)
{
    fprintf(stderr,
            "cuda emulator: wmma::%s: %s (pointer %p, ldm %u) in thread %u of block (%u,%u,%u): this faults or "
            "misreads on a GPU\n",
            fn, why, p, ldm, linear_thread(), blockIdx.x, blockIdx.y, blockIdx.z);
    abort();
}

/* the rules of load_matrix_sync / store_matrix_sync, checked in every lane */
template <class E> void check(const char *fn, const E *p, unsigned ldm)
{
    if ((uintptr_t)p % 32 != 0) fault(fn, "pointer not 32-byte (256-bit) aligned", p, ldm);
    if (ldm == 0 || (ldm * sizeof(E)) % 16 != 0)
        fault(fn,
              sizeof(E) == 2 ? "ldm not a multiple of 8 elements (16-bit type)"
                             : "ldm not a multiple of 4 elements (32-bit type)",
              p, ldm);
}
} // namespace m2emu_detail

template <class Use, int M, int N, int K, class T, class Layout = void> class fragment
{
    static_assert(M == 16 && N == 16, "emulated wmma: only the m16n16 shapes");
    static_assert(std::is_same<Use, accumulator>::value
                      ? std::is_same<T, float>::value && std::is_void<Layout>::value
                      : (std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value) &&
                            ((std::is_same<T, __nv_bfloat16>::value && K == 16) ||
                             (std::is_same<T, precision::tf32>::value && K == 8)),
                  "emulated wmma: bf16 m16n16k16 or tf32 m16n16k8 operands, fp32 accumulators");

  public:
    enum { R = m2emu_detail::dims<Use, M, N, K>::R, C = m2emu_detail::dims<Use, M, N, K>::C };
    float m2emu_v[R * C]; /* row-major; only lane 0 of a warp keeps it (see above) */
};

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, float v)
{
    if (!m2emu_detail::warp_leader()) return;
    for (int i = 0; i < f.R * f.C; i++) f.m2emu_v[i] = v;
}

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const typename m2emu_detail::mem<T>::type *p, unsigned ldm)
{
    static_assert(!std::is_same<Use, accumulator>::value, "emulated wmma: an accumulator load names its layout");
    m2emu_detail::check("load_matrix_sync", p, ldm);
    if (!m2emu_detail::warp_leader()) return;
    const bool rowm = std::is_same<Layout, row_major>::value;
    for (int r = 0; r < f.R; r++)
        for (int c = 0; c < f.C; c++) {
            const auto e = p[rowm ? (size_t)r * ldm + c : (size_t)c * ldm + r];
            float v;
            if constexpr (std::is_same<T, precision::tf32>::value)
                v = m2emu_detail::tf32_value(e);
            else
                v = m2emu_detail::value(e);
            f.m2emu_v[r * f.C + c] = v;
        }
}

/* an accumulator from fp32 memory (layout: of the memory, as store_matrix_sync's) */
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p, unsigned ldm, layout_t layout)
{
    m2emu_detail::check("load_matrix_sync", p, ldm);
    if (!m2emu_detail::warp_leader()) return;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            f.m2emu_v[r * N + c] = p[layout == mem_row_major ? (size_t)r * ldm + c : (size_t)c * ldm + r];
}

template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, T, LA> &a,
              const fragment<matrix_b, M, N, K, T, LB> &b, const fragment<accumulator, M, N, K, float> &c)
{
    if (!m2emu_detail::warp_leader()) return;
    const bool tf32 = std::is_same<T, precision::tf32>::value;
    m2emu::count_flops(tf32 ? m2emu::FLOPS_TF32 : m2emu::FLOPS_BF16, 2.0 * M * N * K);
    float out[M * N];
    memcpy(out, c.m2emu_v, sizeof out);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const float aik = a.m2emu_v[i * K + k];
            for (int j = 0; j < N; j++) out[i * N + j] = fmaf(aik, b.m2emu_v[k * N + j], out[i * N + j]);
        }
    memcpy(d.m2emu_v, out, sizeof out);
}

template <int M, int N, int K>
void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f, unsigned ldm, layout_t layout)
{
    m2emu_detail::check("store_matrix_sync", p, ldm);
    if (!m2emu_detail::warp_leader()) return;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            p[layout == mem_row_major ? (size_t)r * ldm + c : (size_t)c * ldm + r] = f.m2emu_v[r * N + c];
}

} // namespace wmma
} // namespace nvcuda

#endif
