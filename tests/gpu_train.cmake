# The trainer and the evaluator on a device backend (issue 6): model.device / dist.backend choice, the device ZeRO-1
# step, checkpoints, resume, validation and MFU on the device path, mamba2_eval --device. Without a GPU the device
# path runs on stand-ins, each a second build of src/mamba2_train.c / src/mamba2_eval.c with another device API
# (M2_TEST_DEVICE_API; the program's code is the same):
#   mamba2_{train,eval}_cpudev: the CPU ops dressed as a device; must match the CPU path bit for bit (1 to 3 ranks);
#   mamba2_{train,eval}_emu:    the CUDA kernels on the CPU emulation of the CUDA runtime (tests/gpu/emu; needs C++),
#                               one rank; must track the CPU path.
# On a GPU, tests/gpu/check.sh trains with the real backend (CUDA, NCCL).
set(_gt ${CMAKE_CURRENT_SOURCE_DIR}/gpu_train)

# The choice of backend (model.device, dist.backend, device = local rank, errors) with a fake device API; flops.h.
mamba2_unit_test(test_backend SOURCES ${_gt}/test_backend.c)

# The device ZeRO-1 step against the host one, op by op (sharding rule, buckets, step, moments), at 1 to 4 ranks.
mamba2_unit_test(test_zero_dev SOURCES ${_gt}/test_zero_dev.c)
foreach(_r 2 3 4)
  add_test(NAME test_zero_dev_${_r} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_r} --oversubscribe
           ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_zero_dev> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(test_zero_dev_${_r} PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV}" TIMEOUT 120)
endforeach()

foreach(_prog train eval)
  add_executable(mamba2_${_prog}_cpudev ${CMAKE_SOURCE_DIR}/src/mamba2_${_prog}.c ${_gt}/cpu_device_api.c)
  target_compile_definitions(mamba2_${_prog}_cpudev PRIVATE M2_TEST_DEVICE_API=1)
  target_link_libraries(mamba2_${_prog}_cpudev PRIVATE mamba2)
endforeach()
mamba2_script_test(test_train_device_path gpu_train/test_device_path.sh ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_train_device_path PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

if(TARGET mamba2_cuda_emu)
  foreach(_prog train eval)
    add_executable(mamba2_${_prog}_emu ${CMAKE_SOURCE_DIR}/src/mamba2_${_prog}.c ${_gt}/emu_device_api.c)
    target_compile_definitions(mamba2_${_prog}_emu PRIVATE M2_TEST_DEVICE_API=1)
    target_link_libraries(mamba2_${_prog}_emu PRIVATE mamba2_io mamba2_dist mamba2_core mamba2_cuda_emu)
  endforeach()
  mamba2_script_test(test_train_emu gpu_train/test_emu_train.sh ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_train_emu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
