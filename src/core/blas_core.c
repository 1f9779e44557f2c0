/* OpenBLAS's kernels raised to the level in use when its own CPU detection falls short (core/blas_core.h). */
#include "core/blas_core.h"

#include <cblas.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Names as openblas_get_corename() prints them (OpenBLAS's driver/others/dynamic.c), by the instruction-set level
 * of their sgemm kernels. The AMD Bulldozer family counts as avx2: its kernels are OpenBLAS's own choice for
 * those CPUs, which have no AVX-512, and a raise to Haswell's would not be a clear gain. */
static const struct {
    const char *name;
    m2_cpu_level level;
} CORES[] = {
    {"SkylakeX", M2_CPU_AVX512},
    {"Cooperlake", M2_CPU_AVX512},
    {"SapphireRapids", M2_CPU_AVX512},
    {"Haswell", M2_CPU_AVX2},
    {"Zen", M2_CPU_AVX2},
    {"Excavator", M2_CPU_AVX2},
    {"Steamroller", M2_CPU_AVX2},
    {"Piledriver", M2_CPU_AVX2},
    {"Bulldozer", M2_CPU_AVX2},
    {"Sandybridge", M2_CPU_SCALAR},
    {"Nehalem", M2_CPU_SCALAR},
    {"Dunnington", M2_CPU_SCALAR},
    {"Penryn", M2_CPU_SCALAR},
    {"Core2", M2_CPU_SCALAR},
    {"Prescott", M2_CPU_SCALAR},
    {"Atom", M2_CPU_SCALAR},
    {"Nano", M2_CPU_SCALAR},
    {"Barcelona", M2_CPU_SCALAR},
    {"Bobcat", M2_CPU_SCALAR},
    {"Opteron_SSE3", M2_CPU_SCALAR},
    {"Opteron", M2_CPU_SCALAR},
    {"Unknown", M2_CPU_SCALAR},
};

/* The core whose kernels a level asks for: SkylakeX's sgemm is also what OpenBLAS runs on Cooper Lake and
 * Sapphire Rapids (their own tables add only bf16 products, which this project does not call). */
static const char *const CORE_FOR_LEVEL[M2_CPU_N_LEVELS] = {NULL, "Haswell", "SkylakeX"};

static const char *DETECTED_ENV = "MAMBA2_OPENBLAS_DETECTED";

/* The level of a core the table names, or -1 (NULL, or a name it does not know). */
static int core_level(const char *core)
{
    for (size_t i = 0; core && i < sizeof CORES / sizeof CORES[0]; i++)
        if (strcmp(core, CORES[i].name) == 0) return (int)CORES[i].level;
    return -1;
}

const char *m2_blas_core_wanted(const char *detected, m2_cpu_level active)
{
    if (active <= M2_CPU_SCALAR || active >= M2_CPU_N_LEVELS) return NULL;
    const int level = core_level(detected);
    return level >= 0 && level < (int)active ? CORE_FOR_LEVEL[active] : NULL;
}

int m2_blas_core_beta0_fast(const char *core) { return core_level(core) == (int)M2_CPU_AVX512; }

int m2_blas_beta0_fast(void)
{
    static _Atomic int known = -1; /* OpenBLAS chose its kernels before main(); they do not change */
    int fast = atomic_load_explicit(&known, memory_order_relaxed);
    if (fast < 0) {
        fast = m2_blas_core_beta0_fast(openblas_get_corename());
        atomic_store_explicit(&known, fast, memory_order_relaxed);
    }
    return fast;
}

void m2_blas_core_ensure(char **argv)
{
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user && *user) return;
    const char *detected = openblas_get_corename();
    const char *want = m2_blas_core_wanted(detected, m2_cpu_active());
    if (!want) return;
    setenv(DETECTED_ENV, detected, 1);
    setenv("OPENBLAS_CORETYPE", want, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    fprintf(stderr,
            "%s: warning: OpenBLAS chose its %s kernels for this CPU, and running again with OPENBLAS_CORETYPE=%s"
            " failed (%s); the matrix products run on the slow kernels\n",
            argv && argv[0] ? argv[0] : "mamba2", detected, want, strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(DETECTED_ENV);
}

void m2_blas_core_describe(char *buf, size_t cap)
{
    const char *core = openblas_get_corename();
    const char *detected = getenv(DETECTED_ENV);
    const char *set = getenv("OPENBLAS_CORETYPE");
    /* the note only when this process's own exec set the variable (a user's value is theirs to know) */
    if (detected && *detected && set && strcmp(set, core) == 0 && strcmp(detected, core) != 0)
        snprintf(buf, cap, "OpenBLAS %s (chosen by mamba2; OpenBLAS detected %s)", core, detected);
    else
        snprintf(buf, cap, "OpenBLAS %s", core);
}
