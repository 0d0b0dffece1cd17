# SPDX-License-Identifier: Apache-2.0
# The CUDA backend's own tests (kernels/cuda), labelled `cuda`. Built in every configuration: with
# CUDA compiled out or no device they check that the backend is unavailable with a one-line reason and that cuda:0
# raises BackendUnavailable; with a device they check the kernels, typed errors and the allocator.
add_executable(test_cuda_backend ${CMAKE_CURRENT_LIST_DIR}/cuda_backend_test.cpp)
target_link_libraries(test_cuda_backend PRIVATE crossfire GTest::gtest_main crossfire_warnings)
if(TARGET crossfire_backend_cuda)
  target_include_directories(test_cuda_backend PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda)  # CudaBackend
endif()
crossfire_discover_labelled(test_cuda_backend cuda "backend;cuda" 300)

# Prints every backend's availability (with its one-line reason) and every device: scripts/gpu-check.sh's device
# list, and a quick look on any machine.
add_executable(cuda_device_list ${CMAKE_CURRENT_LIST_DIR}/cuda_device_list.cpp)
target_link_libraries(cuda_device_list PRIVATE crossfire crossfire_warnings)
