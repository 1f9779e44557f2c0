/* Runtime choice of the instruction set of the hot loops (docs/ARCHITECTURE.md, "CPU dispatch").
 *
 * The default build targets baseline x86-64; the streaming kernels and the CPU training ops are compiled once
 * per level below (separate objects with their own -m flags) and the level used is chosen at run time from
 * the CPU, capped by the environment variable MAMBA2_CPU=scalar|avx2|avx512 (as OPENBLAS_CORETYPE or
 * ONEDNN_MAX_CPU_ISA do), so that one binary runs everywhere and every path a machine supports can be tested
 * on it. A cap above what the CPU has is no error: the CPU's own level is used. */
#ifndef MAMBA2_CPU_H
#define MAMBA2_CPU_H

typedef enum {
    M2_CPU_SCALAR = 0, /* portable C, as the compiler vectorises it for the build's baseline */
    M2_CPU_AVX2 = 1,   /* AVX2 + FMA (Haswell, Zen 1-3) */
    M2_CPU_AVX512 = 2, /* AVX-512 F, BW, DQ, VL (Skylake-SP, Ice Lake, Zen 4-5) */
    M2_CPU_N_LEVELS
} m2_cpu_level;

/* The highest level this CPU (and its operating system) supports. */
m2_cpu_level m2_cpu_supported(void);

/* The level in use: min(supported, MAMBA2_CPU, m2_cpu_set_cap). An unknown MAMBA2_CPU value counts as scalar
 * (the safe reading); m2_cpu_check_env reports it as an error for programs to refuse. Cheap: read once. */
m2_cpu_level m2_cpu_active(void);

/* M2_OK, or M2_EUSAGE with a message naming MAMBA2_CPU when it is set to an unknown value. */
int m2_cpu_check_env(void);

/* Caps the level for this process from now on (tests run every path through it); returns the level in use. */
m2_cpu_level m2_cpu_set_cap(m2_cpu_level cap);

/* AVX-512-BF16 (vdpbf16ps), a capability under the avx512 level rather than a level of its own: the bf16 weight
 * mode's dot products use it when the level in use is avx512, the CPU has it (Zen 4-5, Cooper Lake, Sapphire
 * Rapids) and m2_cpu_set_bf16_dot has not turned it off. Its results equal the portable path's but for the
 * summation order (docs/MODEL.md, "bf16 weights"), so no cap name is needed to choose it. */
int m2_cpu_bf16_dot(void);

/* Allows (1, the default) or forbids (0) the bf16 dot instructions from now on (tests run both paths). */
void m2_cpu_set_bf16_dot(int allow);

/* "scalar", "avx2", "avx512". */
const char *m2_cpu_name(m2_cpu_level level);

/* Parses a name as above; M2_OK or M2_EUSAGE (no message). */
int m2_cpu_parse(const char *name, m2_cpu_level *out);

/* Inside a source compiled once per level (cmake/isa.cmake defines M2_ISA_SUFFIX as _scalar, _avx2 or _avx512):
 * M2_ISA_FN(name) is that level's copy of name, so the copies link side by side. */
#define M2_ISA_CAT2(a, b) a##b
#define M2_ISA_CAT(a, b)  M2_ISA_CAT2(a, b)
#define M2_ISA_FN(name)   M2_ISA_CAT(name, M2_ISA_SUFFIX)

#endif
