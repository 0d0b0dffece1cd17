// SPDX-License-Identifier: Apache-2.0
// The elementwise kernel's op codes by OpId, and every pipeline the kernel can ask for: shared by the kernel
// (vulkan_kernels.cpp) and the build-time tool that writes a specialized SPIR-V module for each of those pipelines
// (tools/spirv_specializations.cpp; Note [Specialized SPIR-V] in vulkan_backend.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "crossfire/op_table.hpp"

namespace crossfire::vulkan {

#include "shaders/op_codes.h"

constexpr bool runs_elementwise(OpFamily f) {
  return f == OpFamily::unary || f == OpFamily::binary || f == OpFamily::where || f == OpFamily::cast;
}

// Op codes by OpId (0: none). Every op of the elementwise families must have one: elementwise_kernel is registered
// for the whole families, so an op without a code would reach the shader's default (checked in vulkan_kernels.cpp).
inline constexpr auto kCodes = [] {
  std::array<int, kNumOps> a{};
  auto set = [&](std::string_view n, int code) {
    for (size_t i = 0; i < kOpTable.size(); ++i)
      if (kOpTable[i].name == n) a[i] = code;
  };
  set("neg", CF_NEG), set("abs", CF_ABS), set("exp", CF_EXP), set("log", CF_LOG), set("sqrt", CF_SQRT);
  set("tanh", CF_TANH), set("sigmoid", CF_SIGMOID), set("relu", CF_RELU), set("logical_not", CF_NOT);
  set("clamp", CF_CLAMP);
  set("cast", CF_CAST), set("add", CF_ADD), set("sub", CF_SUB), set("mul", CF_MUL), set("div", CF_DIV);
  set("pow", CF_POW), set("maximum", CF_MAXIMUM), set("minimum", CF_MINIMUM), set("eq", CF_EQ), set("ne", CF_NE);
  set("lt", CF_LT), set("le", CF_LE), set("gt", CF_GT), set("ge", CF_GE), set("logical_and", CF_AND);
  set("logical_or", CF_OR), set("where", CF_WHERE);
  set("sum", CF_SUM), set("mean", CF_MEAN), set("max", CF_MAX), set("argmax", CF_ARGMAX);
  return a;
}();

// One pipeline of the elementwise kernel: the op's code (its module, elementwise_<code>) and the dtypes of its value
// inputs and of its output, the module's specialization constants 0, 1 and 2 (elementwise_kernel); and the op.
struct ElementwiseSpec {
  OpId op = 0;
  int code = 0;
  DType in = DType::f32;
  DType out = DType::f32;
};

// Every pipeline the elementwise kernel can create, by the op table: for each op of the elementwise families, each
// dtype its value parameter accepts (where's `a`, every other op's first tensor), with the output dtype its rule
// gives (bool, the input's, or for cast every dtype its attribute may name). `emit(spec)` is called once for each.
template <class Emit>
constexpr void for_each_elementwise_spec(Emit&& emit) {
  for (size_t i = 0; i < kOpTable.size(); ++i) {
    const OpDef& op = kOpTable[i];
    if (!runs_elementwise(op.family) || kCodes[i] == 0) continue;
    const ParamDef& value = op.params[kCodes[i] == CF_WHERE ? 1 : 0];
    const int from = op.form.dtype_from;
    for (DType in : kAllDTypes) {
      if (!value.dtypes.contains(in)) continue;
      if (from < 0) {
        emit(ElementwiseSpec{OpId(i), kCodes[i], in, DType::boolean});
      } else if (op.params[size_t(from)].role == ParamRole::dtype_attr) {
        for (DType out : kAllDTypes)
          if (op.params[size_t(from)].dtypes.contains(out)) emit(ElementwiseSpec{OpId(i), kCodes[i], in, out});
      } else {
        emit(ElementwiseSpec{OpId(i), kCodes[i], in, in});
      }
    }
  }
}

inline constexpr size_t kNumElementwiseSpecs = [] {
  size_t n = 0;
  for_each_elementwise_spec([&](ElementwiseSpec) { ++n; });
  return n;
}();

inline constexpr auto kElementwiseSpecs = [] {
  std::array<ElementwiseSpec, kNumElementwiseSpecs> a{};
  size_t n = 0;
  for_each_elementwise_spec([&](ElementwiseSpec s) { a[n++] = s; });
  return a;
}();

}  // namespace crossfire::vulkan
