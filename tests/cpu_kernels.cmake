# SPDX-License-Identifier: Apache-2.0
# The CPU kernels' hand-worked semantics (Philox known answers, conversions, wrap-around, NaN rules, broadcasting,
# reductions, conv/unfold/fold geometry, data movement). Built once: it checks the CPU backend that every other
# backend is compared against.
crossfire_core_test(cpu_kernels AREA ops
                    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cpu_kernels_values_test.cpp
                            ${CMAKE_CURRENT_LIST_DIR}/cpu_kernels_structure_test.cpp
                            ${CMAKE_CURRENT_LIST_DIR}/cpu_half_conversion_test.cpp
                    LIBS Eigen3::Eigen)
