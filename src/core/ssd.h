/* Chunked SSD (structured state space duality), CPU: docs/MODEL.md §2 step 5 computed by the chunked algorithm
 * of docs/MODEL.md §3, forward and exact analytic backward.
 *
 * Layouts (row-major, batch b, time t): a tensor "[B,T,·] with stride ld" has element (b,t,j) at
 * ptr[(b*T + t)*ld + j]. This lets x, B and C point straight into the conv output xBC [B,T,Cc]
 * (x at column 0, B at Di, C at Di+GN, all with ld = Cc) without copies.
 *   x   [B,T,H*P]  stride ld_x       head h occupies columns [h*P, (h+1)*P)
 *   Bm  [B,T,G*N]  stride ld_bc      group g occupies columns [g*N, (g+1)*N); head h uses g = h / (H/G)
 *   Cm  [B,T,G*N]  stride ld_bc
 *   dt  [B,T,H]    contiguous        already softplus'd, > 0
 *   A   [H]        negative (A = -exp(A_log))
 *   Dsk [H]        skip
 *   y   [B,T,H*P]  contiguous (ld = H*P)
 * T need not be a multiple of Q: the tail chunk behaves as if positions past T had dt = 0.
 * Decays and cumulative sums are kept within a chunk, every exponent that is mathematically <= 0 is
 * computed as exp(min(delta, 0)), and all of them stay in fp32 (or fp64 in the test build). */
#ifndef MAMBA2_SSD_H
#define MAMBA2_SSD_H

#include <stddef.h>

#include "core/real.h"

typedef struct {
    int B, T, H, P, G, N, Q;
    int ld_x, ld_bc;
} m2_ssd_shape;

/* What the forward saves for the backward (the chunk-start states, B*H*nchunks*P*N), in m2_reals. */
size_t m2_ssd_saved_size(const m2_ssd_shape *s);
/* Temporary scratch both passes need (per-thread buffers), in m2_reals. n_threads must be at least
 * omp_get_max_threads() at the time of the forward/backward calls (each pass runs that many threads). */
size_t m2_ssd_scratch_size(const m2_ssd_shape *s, int n_threads);

/* GEMM FLOPs of one forward and one backward as executed (definition in ssd.c), for GFLOP/s figures. */
void m2_ssd_flops(const m2_ssd_shape *s, double *fwd, double *bwd);

/* The forward and backward are compiled once per instruction-set level (ops_cpu.h); m2_ssd_forward and
 * m2_ssd_backward run the copy of the level in use (m2_cpu_active). */
#ifdef M2_ISA_SUFFIX
#include "base/cpu.h"
#define m2_ssd_forward  M2_ISA_FN(m2_ssd_forward)
#define m2_ssd_backward M2_ISA_FN(m2_ssd_backward)
#endif

/* y = SSD(x, dt, A, B, C) + D x. `saved` (may be NULL when no backward follows) receives what the
 * backward needs. OpenMP over (batch, chunk, group) and (batch, head); see ssd_chunk.h. */
void m2_ssd_forward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                    const m2_real *Cm, const m2_real *Dsk, m2_real *y, m2_real *saved, m2_real *scratch);

/* Given dy [B,T,H*P] (contiguous), writes dx (stride ld_x), dBm and dCm (stride ld_bc), ddt [B,T,H]
 * and dA [H] (overwrite), and ADDS into dD [H] (dA and dD summed over batch and time in a fixed order, so the
 * result is deterministic). dA is written, not added: the model hands it straight to dt_bwd (d A_log), so no
 * caller clears it first; dD lands in the gradient buffer, which accumulates. dBm/dCm sum over the heads of a group. */
void m2_ssd_backward(const m2_ssd_shape *s, const m2_real *x, const m2_real *dt, const m2_real *A, const m2_real *Bm,
                     const m2_real *Cm, const m2_real *Dsk, const m2_real *dy, const m2_real *saved, m2_real *dx,
                     m2_real *ddt, m2_real *dA, m2_real *dBm, m2_real *dCm, m2_real *dD, m2_real *scratch);

#endif
