# Sources compiled once per instruction-set level of base/cpu.h (runtime dispatch, docs/ARCHITECTURE.md):
#   mamba2_isa_objects(OUT NAME SOURCES... LIBS... [LEVELS ...])
# makes one OBJECT library NAME_<level> per level (default: scalar avx2 avx512), each with M2_ISA_SUFFIX=_<level>,
# M2_ISA_LEVEL=<its m2_cpu_level value> and that level's -m flags (scalar: none, the build's baseline),
# and sets OUT to their objects for add_library. The sources name their exported symbols with M2_ISA_FN and
# choose intrinsics by M2_ISA_LEVEL (not by __AVX512F__: with MAMBA2_NATIVE every level is compiled for the build
# machine, and then only the hand-written paths differ between levels).
# Every level: -fno-trapping-math. Without it GCC 12 does not vectorise base/vmath.h's exp (and so sigmoid, SiLU,
# softplus) where it has no masked instructions, i.e. below AVX-512: the float-to-int step of the exponent may
# raise an FP exception, which the if-converted clamp would then raise unconditionally. No code here reads FP
# exception flags, and the option changes no value (no reassociation, unlike -ffast-math).
set(MAMBA2_ISA_FLAGS_common -fno-trapping-math)
set(MAMBA2_ISA_FLAGS_scalar "")
set(MAMBA2_ISA_FLAGS_avx2 -mavx2 -mfma)
set(MAMBA2_ISA_FLAGS_avx512 -mavx2 -mfma -mavx512f -mavx512bw -mavx512dq -mavx512vl)
# avx512bf16: not a level of base/cpu.h but the avx512 level plus AVX-512-BF16 (vdpbf16ps), for the sources that
# have a bf16-dot variant (the streaming GEMV/GEMM); it defines M2_ISA_BF16DOT=1 and is chosen at run time by
# m2_cpu_bf16_dot().
set(MAMBA2_ISA_FLAGS_avx512bf16 ${MAMBA2_ISA_FLAGS_avx512} -mavx512bf16)
set(MAMBA2_ISA_DEFS_avx512bf16 M2_ISA_BF16DOT=1)
set(MAMBA2_ISA_ENUM_scalar 0)   # the values of m2_cpu_level, usable in #if
set(MAMBA2_ISA_ENUM_avx2 1)
set(MAMBA2_ISA_ENUM_avx512 2)
set(MAMBA2_ISA_ENUM_avx512bf16 2)

function(mamba2_isa_objects out name)
  cmake_parse_arguments(I "" "" "SOURCES;LIBS;DEFINES;LEVELS" ${ARGN})
  if(NOT I_LEVELS)
    set(I_LEVELS scalar avx2 avx512)
  endif()
  set(objs)
  foreach(level ${I_LEVELS})
    add_library(${name}_${level} OBJECT ${I_SOURCES})
    target_compile_definitions(${name}_${level} PRIVATE M2_ISA_SUFFIX=_${level} M2_ISA_LEVEL=${MAMBA2_ISA_ENUM_${level}}
                               ${MAMBA2_ISA_DEFS_${level}} ${I_DEFINES})
    target_compile_options(${name}_${level} PRIVATE ${MAMBA2_ISA_FLAGS_common} ${MAMBA2_ISA_FLAGS_${level}})
    target_link_libraries(${name}_${level} PRIVATE ${I_LIBS} mamba2_c_options)
    list(APPEND objs $<TARGET_OBJECTS:${name}_${level}>)
  endforeach()
  set(${out} ${objs} PARENT_SCOPE)
endfunction()
