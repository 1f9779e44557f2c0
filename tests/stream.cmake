# Streaming inference (issue 7): the engine against an fp64 oracle and the chunked forward, batch == single
# streams, reset, bf16, zero allocations per tick, the mamba2_stream command line; and the documented example.
set(_s ${CMAKE_CURRENT_SOURCE_DIR}/stream)
mamba2_unit_test(test_stream SOURCES ${_s}/test_stream.c ${_s}/ref_stream.c)
mamba2_unit_test(test_stream_chunked SOURCES ${_s}/test_stream_chunked.c)
mamba2_unit_test(test_stream_alloc SOURCES ${_s}/test_stream_alloc.c
                 LIBS -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=aligned_alloc,--wrap=posix_memalign)

# The example program of the public API (examples/stream_example.c): built with the tests, and run on a
# checkpoint by test_stream_cli.
add_executable(stream_example ${CMAKE_SOURCE_DIR}/examples/stream_example.c)
target_link_libraries(stream_example PRIVATE mamba2)

# End to end on the eval fixture (tests/eval.cmake: a small dataset and checkpoint written without the trainer).
if(TARGET eval_fixture)
  mamba2_script_test(test_stream_cli stream/test_stream_cli.sh $<TARGET_FILE:eval_fixture>
                     $<TARGET_FILE:stream_example>)
endif()
