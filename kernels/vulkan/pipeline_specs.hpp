// SPDX-License-Identifier: Apache-2.0
// Every pipeline the Vulkan kernels can create that has specialization constants: its generic module and the
// constants the kernel passes, from the op table. Shared by the kernels (vulkan_kernels.cpp: packed_code), the
// build-time tool that lists the specialized SPIR-V modules to write
// (tools/spirv_specializations.cpp) and the tests that hold the build to them (Note [Specialized SPIR-V] in
// vulkan_backend.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "elementwise_codes.hpp"

namespace crossfire::vulkan {

// A data-movement shader's dtype code: only the width matters (f32 and i32 are both whole words), so they share one
// pipeline; bool, f16 and bf16 are packed (shaders/packed_main.glsl), i64 is two words an element.
constexpr int32_t packed_code(DType dt) {
  return dt == DType::boolean || is_half(dt) || dt == DType::i64 ? int32_t(dt) : CF_F32;
}

// One pipeline: the generic module and the constants, in constant_id order, as the kernel passes them to
// Context::pipeline. `bools` marks the constants the shader declares `bool` (bit i for constant_id i): the kernel
// passes 0 or 1 for them, and spirv-opt must be told `false` or `true`.
struct PipelineSpec {
  std::string module;
  std::array<int32_t, 3> constants{};
  int count = 0;
  unsigned bools = 0;
};

// What the enumeration below reads from the op table, read at compile time (so the build-time tool needs no
// crossfire library): the input dtypes of each op of the reduce family that has a reduce.comp code (by OpId; empty
// for every other op), rand's and randn's dtype attributes, index_select's index dtypes and unfold's input dtypes.
struct PipelineFacts {
  std::array<DTypeSet, kNumOps> reduce_dtypes{};
  std::array<DTypeSet, 2> rand_dtypes{};  // rand, randn
  DTypeSet index_dtypes{};
  DTypeSet unfold_dtypes{};
};
inline constexpr PipelineFacts kPipelineFacts = [] {
  PipelineFacts f;
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (kOpTable[i].family == OpFamily::reduce && kCodes[i] != 0) f.reduce_dtypes[i] = kOpTable[i].params[0].dtypes;
  const std::array<OpId, 2> rands{op_id("rand"), op_id("randn")};
  for (size_t i = 0; i < rands.size(); ++i) {
    const OpDef& op = kOpTable[size_t(rands[i])];
    for (int p = 0; p < op.num_params; ++p)
      if (op.params[size_t(p)].role == ParamRole::dtype_attr) f.rand_dtypes[i] = op.params[size_t(p)].dtypes;
  }
  f.index_dtypes = kOpTable[size_t(op_id("index_select"))].params[2].dtypes;
  f.unfold_dtypes = kOpTable[size_t(op_id("unfold"))].params[0].dtypes;
  return f;
}();

// Calls `emit(spec)` once for each pipeline of the elementwise kernel (kElementwiseSpecs, and pow's Float64 twin),
// the reductions, softmax, rand/randn, arange's shader and the data movement (gather, cat, index_select, unfold).
// matmul, matmul_small, conv2d and fold have no constants. Halves never reach reduce or softmax (the kernels run
// their f32 shader on f32 copies: Note [Halves through the f32 kernels] in vulkan_kernels.cpp).
template <class Emit>
void for_each_pipeline_spec(Emit&& emit) {
  auto one = [&](std::string module, std::initializer_list<int32_t> c, unsigned bools) {
    PipelineSpec s{std::move(module), {}, int(c.size()), bools};
    std::copy(c.begin(), c.end(), s.constants.begin());
    emit(s);
  };
  for (const ElementwiseSpec& s : kElementwiseSpecs) {
    const std::initializer_list<int32_t> c{s.code, int32_t(s.in), int32_t(s.out)};
    one("elementwise_" + std::to_string(s.code), c, 0);
    if (s.code == CF_POW) one("elementwise_" + std::to_string(s.code) + "_f64", c, 0);  // devices with shaderFloat64
  }
  const PipelineFacts& f = kPipelineFacts;
  for (size_t i = 0; i < f.reduce_dtypes.size(); ++i)
    for (DType dt : kAllDTypes)
      if (f.reduce_dtypes[i].contains(dt) && !is_half(dt))
        for (int32_t group : {0, 1}) one("reduce", {kCodes[i], int32_t(dt), group}, 0b100);
  for (int32_t group : {0, 1}) one("softmax", {group}, 0b1);
  for (int32_t normal : {0, 1})
    for (DType dt : kAllDTypes) {
      if (!f.rand_dtypes[size_t(normal)].contains(dt)) continue;
      one("rand", {normal, int32_t(dt)}, 0b01);
      if (normal) one("rand_f64", {normal, int32_t(dt)}, 0b01);  // randn on devices with shaderFloat64
    }
  for (DType dt : {DType::f32, DType::i32}) one("arange_f64", {int32_t(dt)}, 0);  // (other dtypes: on the host)
  // The data movement takes every dtype (unfold: those its op does), by packed code.
  std::array<bool, kNumDTypes> packed{}, unfold{};
  for (DType dt : kAllDTypes) {
    packed[size_t(packed_code(dt))] = true;
    if (f.unfold_dtypes.contains(dt)) unfold[size_t(packed_code(dt))] = true;
  }
  for (DType dt : kAllDTypes) {
    if (unfold[size_t(dt)]) one("unfold", {int32_t(dt)}, 0);
    if (!packed[size_t(dt)]) continue;
    for (const char* module : {"gather", "cat"}) one(module, {int32_t(dt)}, 0);
    for (DType index : kAllDTypes)
      if (f.index_dtypes.contains(index)) one("index_select", {int32_t(dt), int32_t(index)}, 0);
  }
}

}  // namespace crossfire::vulkan
