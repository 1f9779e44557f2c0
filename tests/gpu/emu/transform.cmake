# TEST-ONLY: rewrites one CUDA source of kernels/ into C++ for the CPU emulation (cuda_runtime.h here):
#   cmake -DIN=<kernels/x.cu> -DOUT=<file> -P transform.cmake
#   k<<<grid, block, shmem, stream>>>(args)  ->  m2emu::launch(grid, block, shmem, stream)("k", [](auto &&...a) { k(a...); })(args)
#   extern __shared__ T name[];              ->  T *name = (T *)m2emu::dynamic_shared();
# The kernel name may carry template arguments (k<Op> or k<Cfg, T>) and be followed by blanks or a line break (clang-format puts
# long launches so); a launch configuration may contain "->" but no other '>'.
file(READ "${IN}" text)
string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*(<[A-Za-z0-9_, ]+>)?)[ \t\n]*<<<(([^>]|->)*)>>>"
       "m2emu::launch(\\3)(\"\\1\", [](auto &&...m2a) { \\1(m2a...); })" text "${text}")
string(REGEX REPLACE "extern __shared__ ([A-Za-z_][A-Za-z0-9_]*) ([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
       "\\1 *\\2 = (\\1 *)m2emu::dynamic_shared();" text "${text}")
if(text MATCHES "<<<|extern __shared__")
  message(FATAL_ERROR "${IN}: a launch or dynamic shared array the emulation transform does not understand")
endif()
file(WRITE "${OUT}" "// generated from ${IN} by tests/gpu/emu/transform.cmake: do not edit\n#line 1 \"${IN}\"\n${text}")
