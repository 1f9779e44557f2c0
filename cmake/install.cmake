# cmake --install: the programs, libmamba2_stream (shared) with mamba2_stream.h, a CMake package
# (find_package(mamba2) -> mamba2::stream) and a pkg-config file (mamba2_stream.pc). The streaming library needs no
# MPI, OpenMP or inih: its one dependency is HDF5, linked into it (a consumer's link line names only the library).
include(CMakePackageConfigHelpers)

install(TARGETS ${MAMBA2_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS mamba2_streaming_shared EXPORT mamba2Targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(mamba2_streaming_shared PROPERTIES EXPORT_NAME stream)

set(_pkg_dir ${CMAKE_INSTALL_LIBDIR}/cmake/mamba2)
install(EXPORT mamba2Targets NAMESPACE mamba2:: DESTINATION ${_pkg_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/mamba2Config.cmake.in
                              ${PROJECT_BINARY_DIR}/mamba2Config.cmake INSTALL_DESTINATION ${_pkg_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mamba2ConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mamba2Config.cmake ${PROJECT_BINARY_DIR}/mamba2ConfigVersion.cmake
        DESTINATION ${_pkg_dir})

# The .pc file names the prefix relative to itself (pkg-config's ${pcfiledir}): up from LIBDIR/pkgconfig.
file(RELATIVE_PATH MAMBA2_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mamba2_stream.pc.in ${PROJECT_BINARY_DIR}/mamba2_stream.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mamba2_stream.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
