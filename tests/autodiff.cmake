# SPDX-License-Identifier: Apache-2.0
# Autodiff (contract section 5): every backward rule against f64 central differences, and the engine's semantics
# (tracking, no_grad, accumulation, seeds, errors, gradients across devices). Built once per backend.
crossfire_backend_test(autodiff REGISTERED AREA autodiff
                       SOURCES ${CMAKE_CURRENT_LIST_DIR}/autodiff_gradcheck_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/autodiff_semantics_test.cpp)

# Threads (contract section 8): concurrent backward() into a shared leaf, independent work from many threads,
# no_grad per thread. One binary per backend like crossfire_backend_test, with one more label, `threads`, which the
# ThreadSanitizer build runs (`CROSSFIRE_SANITIZE=thread scripts/test.sh`, the `tsan` presets: ctest -L threads).
add_library(suite_autodiff_threads OBJECT ${CMAKE_CURRENT_LIST_DIR}/autodiff_threads_test.cpp)
target_link_libraries(suite_autodiff_threads PUBLIC crossfire_test_support GTest::gtest PRIVATE crossfire_warnings)
# `threads_tests` builds every binary labelled `threads` and nothing else: what the ThreadSanitizer build needs.
add_custom_target(threads_tests)
foreach(backend IN LISTS CROSSFIRE_ENABLED_BACKENDS)
  crossfire_test_binary(test_autodiff_threads_${backend} suite_autodiff_threads ${backend} ${backend}
                        "autodiff;threads;${backend}" 300)
  add_dependencies(threads_tests test_autodiff_threads_${backend})
endforeach()
