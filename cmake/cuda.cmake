# CUDA backend: kernels/*.cu (device code) and kernels/*.c (host-only modules such as the NCCL communicator)
# compiled whenever nvcc exists (also in CI without a GPU: a failure to compile is a failure), linked against the
# CUDA runtime, cuBLAS and NCCL from the toolkit, never libcuda (the stub links, then the program cannot start
# without a driver; ENVIRONMENT.md "CUDA without a GPU").
set(CMAKE_CUDA_ARCHITECTURES "80;90")   # before enable_language; never "native" (CI has no GPU)
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${MAMBA2_NVCC})
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
find_library(MAMBA2_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
             /usr/lib/x86_64-linux-gnu)
find_path(MAMBA2_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
if(NOT MAMBA2_NCCL_LIBRARY OR NOT MAMBA2_NCCL_INCLUDE)
  message(FATAL_ERROR "MAMBA2_CUDA is ON but NCCL was not found (nccl.h, libnccl); configure with "
                      "-DMAMBA2_CUDA=OFF to build without the GPU backend")
endif()

file(GLOB MAMBA2_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.cu ${CMAKE_SOURCE_DIR}/kernels/*.c)
if(MAMBA2_CUDA_SOURCES)
  add_library(mamba2_cuda STATIC ${MAMBA2_CUDA_SOURCES})
  set_target_properties(mamba2_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON
                        CUDA_RUNTIME_LIBRARY Shared)
  # The directory's options (-Wall -Wextra -Wno-unused-parameter, -Werror, -march=native) are gcc flags: nvcc
  # takes them for the host compiler through -Xcompiler, so they are restated per language here.
  get_target_property(_m2_opts mamba2_cuda COMPILE_OPTIONS)
  set(_m2_cuda_opts "")
  foreach(_o ${_m2_opts})
    list(APPEND _m2_cuda_opts "$<$<COMPILE_LANGUAGE:C>:${_o}>")
  endforeach()
  set_target_properties(mamba2_cuda PROPERTIES COMPILE_OPTIONS "${_m2_cuda_opts}")
  set(_m2_host_warn "-Wall,-Wextra,-Wno-unused-parameter")
  if(MAMBA2_WERROR)
    set(_m2_host_warn "${_m2_host_warn},-Werror")
    # nvcc's own diagnostics (deprecations, device-code warnings) are errors too
    target_compile_options(mamba2_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
  target_compile_options(mamba2_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Xcompiler=${_m2_host_warn} --expt-relaxed-constexpr -lineinfo>)
  target_include_directories(mamba2_cuda PUBLIC ${CMAKE_SOURCE_DIR}/kernels ${MAMBA2_NCCL_INCLUDE}
                             ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(mamba2_cuda PUBLIC mamba2_core mamba2_dist CUDA::cudart CUDA::cublas
                        ${MAMBA2_NCCL_LIBRARY})
  target_compile_definitions(mamba2_cuda PUBLIC MAMBA2_HAVE_CUDA=1)
  target_link_libraries(mamba2 INTERFACE mamba2_cuda)
endif()
