mamba2_unit_test(test_config SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_config.c)
