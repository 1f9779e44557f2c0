# The chunked SSD (src/core/ssd*.c) against the sequential fp64 oracle (tests/ssd/ssd_oracle.c, which other
# tests may reuse), in the product precision (fp32) and in fp64 (with the oracle's own finite-difference check).
set(_ssd ${CMAKE_CURRENT_SOURCE_DIR}/ssd)
mamba2_unit_test(test_ssd_f32 SOURCES ${_ssd}/test_ssd.c ${_ssd}/ssd_oracle.c)
mamba2_f64_test(test_ssd_f64 SOURCES ${_ssd}/test_ssd.c ${_ssd}/ssd_oracle.c)
