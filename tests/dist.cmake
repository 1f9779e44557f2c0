# Data-parallel layer (src/dist): process group, host collectives, ZeRO-1.
set(_d ${CMAKE_CURRENT_SOURCE_DIR}/dist)

# Sharding arithmetic for many (n, R) without launching ranks.
mamba2_unit_test(test_zero_shards SOURCES ${_d}/test_zero_shards.c)
# One process, no launcher: MPI's singleton init, R = 1 through the ZeRO-1 code path.
mamba2_unit_test(test_dist_singleton SOURCES ${_d}/test_dist_singleton.c)

# Process group and ZeRO-1 on real ranks: one program, run at 2, 3 and 4 ranks.
mamba2_mpi_test(test_dist_mpi RANKS 4 SOURCES ${_d}/test_dist_mpi.c)
target_include_directories(test_dist_mpi PRIVATE ${_d})
foreach(r 2 3)
  add_test(NAME test_dist_mpi_${r} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${r} --oversubscribe
           ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_dist_mpi> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(test_dist_mpi_${r} PROPERTIES ENVIRONMENT "${MAMBA2_TEST_ENV}")
endforeach()
set_tests_properties(test_dist_mpi test_dist_mpi_2 test_dist_mpi_3 PROPERTIES TIMEOUT 120)

# A failing rank ends the job promptly and non-zero (abort, exit, SIGKILL, hang caught by the watchdog).
add_executable(dist_fault ${_d}/dist_fault.c)
target_link_libraries(dist_fault PRIVATE mamba2)
mamba2_script_test(test_dist_fault dist/test_dist_fault.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:dist_fault>)
set_tests_properties(test_dist_fault PROPERTIES TIMEOUT 300)

# Slurm for real: a local munge + slurmctld + slurmd, launch/slurm/mamba2.sbatch with 2 tasks (sbatch --wait), then
# SIGTERM before the time limit -> checkpoint, requeue, resume. Skipped (exit 77) where Slurm cannot start.
mamba2_script_test(test_slurm slurm/test_slurm.sh)
set_tests_properties(test_slurm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# The training loop's failure hook: rank k failing at step s ends the job non-zero within 30 s with its message.
mamba2_script_test(test_train_rank_failure dist/test_train_rank_failure.sh ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_train_rank_failure PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# End to end: the same global batch at R = 1, 2, 4 trains the same model; a run saved at R = 4 resumes at R = 2 and 1.
mamba2_script_test(test_dist_equivalence dist/test_dist_equivalence.sh ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_dist_equivalence PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
