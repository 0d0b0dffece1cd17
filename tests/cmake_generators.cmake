# SPDX-License-Identifier: Apache-2.0
# Both of CMake's usual generators configure this project (issue 17, item 11): the Unix Makefiles generator, CMake's
# default, once refused to ("CUDA_ARCHITECTURES is empty for target crossfire", Note [CUDA architectures are set
# before any target] in the top-level CMakeLists.txt) while Ninja, which the presets and scripts use, passed.
# Configures a scratch build with the other generator (seconds, nothing is built), the CUDA backend on AUTO so
# that a machine with the toolkit checks what broke, Vulkan off (it plays no part and its discovery is slow).
set(_generators "Unix Makefiles" Ninja)
list(REMOVE_ITEM _generators "${CMAKE_GENERATOR}")
foreach(gen IN LISTS _generators)
  string(REPLACE " " "_" slug "${gen}")
  set(scratch ${CMAKE_CURRENT_BINARY_DIR}/generator-${slug})
  add_test(NAME cmake.configures_with_${slug}
           COMMAND ${CMAKE_COMMAND} -E env --unset=CUDAARCHS
                   ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR} -B ${scratch} -G "${gen}" -DCMAKE_BUILD_TYPE=Release
                   -DCROSSFIRE_CUDA=AUTO -DCROSSFIRE_VULKAN=OFF
                   -DCROSSFIRE_TESTS=OFF -DCROSSFIRE_BENCHMARKS=OFF)
  set_tests_properties(cmake.configures_with_${slug} PROPERTIES LABELS "cmake;core" TIMEOUT 120)
endforeach()
