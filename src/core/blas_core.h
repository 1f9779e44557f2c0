/* Which OpenBLAS kernels run the matrix products (docs/ARCHITECTURE.md, "CPU dispatch").
 *
 * OpenBLAS chooses its kernels once, in a constructor that runs before main(), from a table of CPU models; a CPU
 * newer than the library falls back to its oldest x86-64 kernels. Debian's OpenBLAS 0.3.21 on an Intel Emerald
 * Rapids (family 6, model 207) picks "Prescott" (SSE3): sgemm at 65 instead of 304 GFLOP/s on two cores, and the
 * model's CPU step 2.5x slower (BENCHMARKS.md, "Intel Emerald Rapids", part 1). Its only switch is the
 * environment variable OPENBLAS_CORETYPE, read by that constructor, so a program that finds the kernels below
 * the instruction-set level it runs its own loops at (base/cpu.h) sets the variable and executes itself again,
 * once, before it does anything else. A user's own OPENBLAS_CORETYPE is always left as it is. */
#ifndef MAMBA2_BLAS_CORE_H
#define MAMBA2_BLAS_CORE_H

#include <stddef.h>

#include "base/cpu.h"

/* The OpenBLAS core to ask for when OpenBLAS chose `detected` and this process runs its own loops at `active`:
 * NULL when the detected core's kernels are at that level or above, or are a core this table does not know
 * (left to OpenBLAS); otherwise "SkylakeX" (avx512) or "Haswell" (avx2). Pure: the tests call it directly. */
const char *m2_blas_core_wanted(const char *detected, m2_cpu_level active);

/* First thing in main() of a program that multiplies matrices on the CPU: when OPENBLAS_CORETYPE is unset and
 * m2_blas_core_wanted(OpenBLAS's core, m2_cpu_active()) names a core, sets OPENBLAS_CORETYPE to it (and
 * MAMBA2_OPENBLAS_DETECTED to the core OpenBLAS chose, for m2_blas_core_describe) and replaces the process with a
 * fresh run of the same executable and arguments, so it must run before MPI_Init, threads or open files. Returns
 * only when nothing is to be done, or when the exec failed (a warning line on stderr; the slow kernels stay). */
void m2_blas_core_ensure(char **argv);

/* Whether OpenBLAS's core `core` (a name as openblas_get_corename() gives it) does a beta = 0 product at vector
 * speed: its AVX-512 cores (SkylakeX and those that run its sgemm) zero C in a vectorised pass, and their
 * small-matrix kernels have beta-0 variants that never read C; the others (Haswell, Zen, ...) zero C with a scalar
 * store per element. Pure: the tests call it directly. */
int m2_blas_core_beta0_fast(const char *core);

/* m2_blas_core_beta0_fast of the core in use, looked up once a process (the chunked SSD asks before each GEMM). */
int m2_blas_beta0_fast(void);

/* "OpenBLAS SkylakeX", or "OpenBLAS SkylakeX (chosen by mamba2; OpenBLAS detected Prescott)", into buf. */
void m2_blas_core_describe(char *buf, size_t cap);

#endif
