# Tick datasets, HDF5 helpers, CSV import, synthetic generator, window sampler (src/io, src/mamba2_ticks.c).
set(_io ${CMAKE_CURRENT_SOURCE_DIR}/io)
mamba2_unit_test(test_io_h5util SOURCES ${_io}/test_io_h5util.c)
mamba2_unit_test(test_io_dataset SOURCES ${_io}/test_io_dataset.c)
mamba2_unit_test(test_io_features SOURCES ${_io}/test_io_features.c)
mamba2_unit_test(test_io_import SOURCES ${_io}/test_io_import.c)
mamba2_unit_test(test_io_sampler SOURCES ${_io}/test_io_sampler.c)
mamba2_unit_test(test_io_synth SOURCES ${_io}/test_io_synth.c)
mamba2_script_test(test_ticks_cli io/test_ticks_cli.sh)
