# SPDX-License-Identifier: Apache-2.0
# `cmake --install`: the public headers, the libraries, and a package configuration with exported, namespaced
# targets (crossfire::core, crossfire::harness) and a version file, so that another project can
# find_package(crossfire 0.2 CONFIG REQUIRED). tests/package_test.sh installs into a temporary prefix and builds a
# project against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_crossfire_targets crossfire crossfire_headers crossfire_plugin crossfire_warnings)
foreach(name IN LISTS CROSSFIRE_ENABLED_BACKENDS)
  list(APPEND _crossfire_targets crossfire_backend_${name})
endforeach()
set(CROSSFIRE_INSTALLED_HARNESS 0)
if(TARGET crossfire_harness)
  list(APPEND _crossfire_targets crossfire_reference crossfire_harness)
  set(CROSSFIRE_INSTALLED_HARNESS 1)
endif()
set(CROSSFIRE_INSTALLED_CUDA 0)
if(cuda IN_LIST CROSSFIRE_ENABLED_BACKENDS)
  set(CROSSFIRE_INSTALLED_CUDA 1)
endif()

install(TARGETS ${_crossfire_targets} EXPORT crossfireTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dispatch/include/crossfire DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${CROSSFIRE_GENERATED_DIR}/include/crossfire/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/crossfire)
if(CROSSFIRE_INSTALLED_HARNESS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/include/crossfire DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp")
  # The reference evaluator's header is included as "reference/reference.hpp"; installed under crossfire/, with
  # that directory on crossfire::harness's include path (its INSTALL_INTERFACE).
  install(FILES ${PROJECT_SOURCE_DIR}/harness/reference/reference.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/crossfire/reference)
endif()

set(_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/crossfire)
install(EXPORT crossfireTargets NAMESPACE crossfire:: DESTINATION ${_config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/crossfireConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/crossfireConfig.cmake INSTALL_DESTINATION ${_config_dir})
# 0.x: a minor version may break the interface, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/crossfireConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/crossfireConfig.cmake ${PROJECT_BINARY_DIR}/crossfireConfigVersion.cmake
        DESTINATION ${_config_dir})
