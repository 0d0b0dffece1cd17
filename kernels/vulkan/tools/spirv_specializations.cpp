// SPDX-License-Identifier: Apache-2.0
// Build-time tool: writes every pipeline the elementwise kernel can create (elementwise_codes.hpp) to the file
// named by its argument, one line each,
//   <module> <constant 0>,<constant 1>,<constant 2>
// for kernels/vulkan/specialize_spirv.cmake, which writes each line's module with those constants folded in
// (Note [Specialized SPIR-V] in vulkan_backend.cpp). It reads the op table at compile time only, so it needs no
// crossfire library.
#include <cstdio>

#include "elementwise_codes.hpp"

int main(int argc, char** argv) {
  using namespace crossfire::vulkan;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
    return 2;
  }
  std::FILE* f = std::fopen(argv[1], "w");
  if (f == nullptr) {
    std::perror(argv[1]);
    return 1;
  }
  for (const ElementwiseSpec& s : kElementwiseSpecs) {
    std::fprintf(f, "elementwise_%d %d,%d,%d\n", s.code, s.code, int(s.in), int(s.out));
    if (s.code == CF_POW)  // pow's Float64 twin, for devices with shaderFloat64 (elementwise_module)
      std::fprintf(f, "elementwise_%d_f64 %d,%d,%d\n", s.code, s.code, int(s.in), int(s.out));
  }
  return std::fclose(f) == 0 ? 0 : 1;
}
