# SPDX-License-Identifier: Apache-2.0
# The Vulkan backend's own tests (kernels/vulkan), labelled `vulkan`: discovery, transfers, the pool, deferred
# frees, typed errors, Philox bit-exactness, transcendental accuracy at the edges, and a zero validation-message
# count. The shared suites (ops, contract, autodiff) run on vulkan:0 as test_<suite>_vulkan on their own.
#
# Run the whole Vulkan suite under the Khronos validation layer with
#   CROSSFIRE_VULKAN_VALIDATION=1 ctest -L vulkan
# Any validation message fails the process that saw it (kernels/vulkan prints it and exits non-zero at exit).
if(NOT TARGET crossfire_backend_vulkan)
  return()
endif()
add_library(suite_vulkan_backend OBJECT ${CMAKE_CURRENT_LIST_DIR}/vulkan_backend_test.cpp)
target_link_libraries(suite_vulkan_backend PUBLIC crossfire_test_support GTest::gtest PRIVATE crossfire_warnings)
# Whether the build wrote specialized SPIR-V modules (kernels/vulkan/CMakeLists.txt, with spirv-opt).
target_compile_definitions(suite_vulkan_backend PRIVATE
                           CROSSFIRE_SPECIALIZED_SPIRV=$<BOOL:${CROSSFIRE_VULKAN_SPECIALIZED_SPIRV}>)
# One label only (CMake 3.25's gtest_discover_tests flattens list-valued LABELS).
crossfire_test_binary(test_vulkan_backend suite_vulkan_backend vulkan vulkan vulkan 120)
# The same tests in one process with the validation layer on: it must report nothing.
add_test(NAME vulkan.validation_layer_clean COMMAND test_vulkan_backend)
set_tests_properties(vulkan.validation_layer_clean PROPERTIES LABELS vulkan TIMEOUT 300
                     ENVIRONMENT "CROSSFIRE_VULKAN_VALIDATION=1")
