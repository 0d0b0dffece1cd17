# SPDX-License-Identifier: Apache-2.0
# Per-op forward tests (contract section 6) on every backend: every op of the op table against the f64 reference
# evaluator (harness/reference), small hand-worked cases per family, f16/bf16 semantics (ops_half_test.cpp), ops at the extents where kernels break
# (ops_large_test.cpp), and the reference evaluator's own tests.
crossfire_backend_test(ops REGISTERED AREA ops
                       SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_cases.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/ops_forward_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/ops_hand_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/ops_half_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/ops_large_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/ops_reference_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/reference_vjp_test.cpp)
