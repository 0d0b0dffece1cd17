// SPDX-License-Identifier: Apache-2.0
// Build-time tool: writes every pipeline with specialization constants that the Vulkan kernels can create
// (pipeline_specs.hpp) to the file named by its argument, one line each,
//   <module> <c0>_<c1>_... 0:<value> 1:<value> ...
// the module, the suffix of its specialized module's name (specialized_name in vulkan_backend.cpp: the constants as
// the kernel passes them) and each constant as spirv-opt's --set-spec-const-default-value takes it (`true` or
// `false` for a bool constant, which spirv-opt would otherwise leave unset without a word). The build
// (kernels/vulkan/specialize_spirv.cmake) writes each line's module with those constants folded in (Note
// [Specialized SPIR-V] in vulkan_backend.cpp). It reads the op table at compile time only, so it needs no crossfire
// library.
#include <cstdio>
#include <string>

#include "pipeline_specs.hpp"

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
  for_each_pipeline_spec([&](const PipelineSpec& s) {
    std::string suffix, values;
    for (int i = 0; i < s.count; ++i) {
      const int32_t c = s.constants[size_t(i)];
      suffix += (i ? "_" : "") + std::to_string(c);
      values += " " + std::to_string(i) + ":" + ((s.bools >> i) & 1u ? (c ? "true" : "false") : std::to_string(c));
    }
    std::fprintf(f, "%s %s%s\n", s.module.c_str(), suffix.c_str(), values.c_str());
  });
  return std::fclose(f) == 0 ? 0 : 1;
}
