# Autodiff (contract section 5): every backward rule against f64 central differences, and the engine's semantics
# (tracking, no_grad, accumulation, seeds, errors, gradients across devices). Built once per backend.
crossfire_backend_test(autodiff AREA autodiff
                       SOURCES ${CMAKE_CURRENT_LIST_DIR}/autodiff_gradcheck_test.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/autodiff_semantics_test.cpp)
