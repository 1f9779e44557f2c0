/* Runtime instruction-set choice (base/cpu.h). */
#include "base/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static const char *const NAMES[M2_CPU_N_LEVELS] = {"scalar", "avx2", "avx512"};

/* The cap of m2_cpu_set_cap (none by default) and the level in use (-1: not yet decided). */
static int g_cap = M2_CPU_N_LEVELS - 1;
static int g_active = -1;
static int g_bf16_dot_allowed = 1;

m2_cpu_level m2_cpu_supported(void)
{
    /* __builtin_cpu_supports checks the CPUID bits and that the OS saves the wider registers (XCR0). */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return M2_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return M2_CPU_AVX2;
    return M2_CPU_SCALAR;
}

const char *m2_cpu_name(m2_cpu_level level) { return (int)level >= 0 && level < M2_CPU_N_LEVELS ? NAMES[level] : "?"; }

int m2_cpu_parse(const char *name, m2_cpu_level *out)
{
    for (int i = 0; i < M2_CPU_N_LEVELS; i++)
        if (!strcmp(name, NAMES[i])) {
            *out = (m2_cpu_level)i;
            return M2_OK;
        }
    return M2_EUSAGE;
}

static m2_cpu_level env_cap(void)
{
    const char *v = getenv("MAMBA2_CPU");
    m2_cpu_level cap = M2_CPU_N_LEVELS - 1;
    if (v && *v && m2_cpu_parse(v, &cap)) cap = M2_CPU_SCALAR;
    return cap;
}

int m2_cpu_check_env(void)
{
    const char *v = getenv("MAMBA2_CPU");
    m2_cpu_level l;
    if (v && *v && m2_cpu_parse(v, &l))
        return m2_fail(M2_EUSAGE, "MAMBA2_CPU (environment): '%s' is not one of scalar, avx2, avx512", v);
    return M2_OK;
}

static m2_cpu_level min_level(m2_cpu_level a, m2_cpu_level b) { return a < b ? a : b; }

m2_cpu_level m2_cpu_active(void)
{
    if (g_active < 0) g_active = min_level(min_level(m2_cpu_supported(), env_cap()), (m2_cpu_level)g_cap);
    return (m2_cpu_level)g_active;
}

m2_cpu_level m2_cpu_set_cap(m2_cpu_level cap)
{
    g_cap = cap;
    g_active = -1;
    return m2_cpu_active();
}

int m2_cpu_bf16_dot(void)
{
    __builtin_cpu_init();
    return g_bf16_dot_allowed && m2_cpu_active() >= M2_CPU_AVX512 && __builtin_cpu_supports("avx512bf16");
}

void m2_cpu_set_bf16_dot(int allow) { g_bf16_dot_allowed = allow != 0; }
