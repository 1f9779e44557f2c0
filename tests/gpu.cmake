# The CUDA backend (issue 6): op, SSD, model, training and NCCL tests against the CPU backend, and the GPU
# benchmark. Built only when the CUDA library exists (MAMBA2_CUDA=ON and nvcc found); each test prints
# "SKIP: no CUDA GPU (<reason>)" and passes on a machine without a GPU. tests/gpu/check.sh runs them on a GPU.
if(TARGET mamba2_cuda)
  set(_g ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
  add_library(mamba2_gpu_test_util STATIC ${_g}/gpu_util.c)
  target_link_libraries(mamba2_gpu_test_util PUBLIC mamba2 PkgConfig::CMOCKA)
  target_include_directories(mamba2_gpu_test_util PUBLIC ${_g} ${CMAKE_CURRENT_SOURCE_DIR})

  mamba2_unit_test(test_gpu_ops SOURCES ${_g}/test_gpu_ops.c LIBS mamba2_gpu_test_util)
  mamba2_unit_test(test_gpu_ssd SOURCES ${_g}/test_gpu_ssd.c LIBS mamba2_gpu_test_util)
  mamba2_unit_test(test_gpu_model SOURCES ${_g}/test_gpu_model.c ${CMAKE_CURRENT_SOURCE_DIR}/model/model_fixture.c
                   LIBS mamba2_gpu_test_util)
  mamba2_unit_test(test_gpu_train SOURCES ${_g}/test_gpu_train.c LIBS mamba2_gpu_test_util)
  mamba2_unit_test(test_gpu_nccl SOURCES ${_g}/test_gpu_nccl.c LIBS mamba2_gpu_test_util)
  set_tests_properties(test_gpu_ops test_gpu_ssd test_gpu_model test_gpu_train test_gpu_nccl PROPERTIES TIMEOUT 300)

  # The benchmark (not a test): tests/gpu/check.sh runs it.
  add_executable(bench_gpu ${_g}/bench_gpu.c)
  target_link_libraries(bench_gpu PRIVATE mamba2)
endif()

# ---- the same tests on a CPU emulation of the CUDA runtime (tests/gpu/emu: TEST ONLY) -------------------------
# kernels/*.cu rewritten into C++ (launch syntax, dynamic shared memory) and compiled by the host C++ compiler
# against emulated CUDA/cuBLAS headers, so the kernels' index arithmetic, masks, reductions and the row-major
# cuBLAS mapping run and are checked against the CPU backend on every machine, GPU or not, nvcc or not. Timing
# and the memory model are not emulated: a GPU run (check.sh) is still what says the backend works.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(_g ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
  set(_emu_out ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu)
  file(GLOB _emu_in CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.cu ${CMAKE_SOURCE_DIR}/kernels/*.cuh)
  set(_emu_src "")
  foreach(_f ${_emu_in})
    get_filename_component(_name ${_f} NAME)
    if(_name MATCHES "\\.cu$")
      set(_o ${_emu_out}/${_name}.cpp)
    else()
      set(_o ${_emu_out}/${_name})
    endif()
    add_custom_command(OUTPUT ${_o}
      COMMAND ${CMAKE_COMMAND} -DIN=${_f} -DOUT=${_o} -P ${_g}/emu/transform.cmake
      DEPENDS ${_f} ${_g}/emu/transform.cmake VERBATIM)
    list(APPEND _emu_src ${_o})
  endforeach()
  # NCCL too, over MPI (emu/nccl.h): the backend's NCCL host code, in C, compiled unchanged against the emulation
  add_library(mamba2_cuda_emu STATIC ${_emu_src} ${_g}/emu/emu.cpp ${_g}/emu/emu_nccl.cpp
              ${CMAKE_SOURCE_DIR}/kernels/nccl_comm.c ${CMAKE_SOURCE_DIR}/kernels/dcomm_nccl.c
              ${CMAKE_SOURCE_DIR}/kernels/backend_cuda.c)
  set_target_properties(mamba2_cuda_emu PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_include_directories(mamba2_cuda_emu BEFORE PUBLIC ${_g}/emu ${CMAKE_SOURCE_DIR}/kernels)
  target_link_libraries(mamba2_cuda_emu PUBLIC mamba2_dist mamba2_core)
  # #pragma unroll is for nvcc; fmaf must be an instruction, not a libm call, or the emulation crawls
  target_compile_options(mamba2_cuda_emu PRIVATE -Wno-unknown-pragmas $<IF:$<BOOL:${MAMBA2_NATIVE}>,-march=native,-mfma>)

  add_library(mamba2_gpu_test_util_emu STATIC ${_g}/gpu_util.c)
  target_link_libraries(mamba2_gpu_test_util_emu PUBLIC mamba2_io mamba2_dist mamba2_core mamba2_cuda_emu
                        PkgConfig::CMOCKA)
  target_include_directories(mamba2_gpu_test_util_emu PUBLIC ${_g} ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(_t ops ssd model train nccl)
    set(_extra "")
    if(_t STREQUAL "model")
      set(_extra ${CMAKE_CURRENT_SOURCE_DIR}/model/model_fixture.c)
    endif()
    add_executable(test_cuda_emu_${_t} ${_g}/test_gpu_${_t}.c ${_extra})
    target_link_libraries(test_cuda_emu_${_t} PRIVATE mamba2_gpu_test_util_emu)
    add_test(NAME test_cuda_emu_${_t} COMMAND test_cuda_emu_${_t})
    set_tests_properties(test_cuda_emu_${_t} PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV}" TIMEOUT 600)
  endforeach()
  # NCCL over the emulation at 2 and 3 ranks too (2 emulated devices per node... one per rank: M2_EMU_DEVICES)
  foreach(_r 2 3)
    add_test(NAME test_cuda_emu_nccl_${_r} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_r} --oversubscribe
             ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_cuda_emu_nccl> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(test_cuda_emu_nccl_${_r} PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV};M2_EMU_DEVICES=${_r}"
                         TIMEOUT 120)
  endforeach()
  # the emulation of the tensor-core subset itself: rounding, exact products, faults caught (emu/mma.h)
  add_executable(test_cuda_emu_wmma ${_g}/emu/test_emu_wmma.cpp)
  set_target_properties(test_cuda_emu_wmma PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_compile_options(test_cuda_emu_wmma PRIVATE $<IF:$<BOOL:${MAMBA2_NATIVE}>,-march=native,-mfma>)
  target_link_libraries(test_cuda_emu_wmma PRIVATE mamba2_cuda_emu PkgConfig::CMOCKA)
  add_test(NAME test_cuda_emu_wmma COMMAND test_cuda_emu_wmma)
  set_tests_properties(test_cuda_emu_wmma PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV}" TIMEOUT 60)
  # Emulated barriers are slow (a block's 256 threads are switched one by one): 10 training steps, not 50.
  set_tests_properties(test_cuda_emu_train PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV};M2_GPU_TEST_STEPS=10")
endif()
