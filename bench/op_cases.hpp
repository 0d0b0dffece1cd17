// SPDX-License-Identifier: Apache-2.0
// A tiny argument generator for the kernel benchmarks: valid arguments for any op of kOpTable, built from its
// OpFamily and signature (roles, accepted dtypes, value domains), never from a list of op names. Adding an op to
// the table gives it a benchmark with no change here, as long as its family is one this file knows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::bench {

enum class SizeClass : uint8_t { small, medium, large };
inline constexpr SizeClass kAllSizes[] = {SizeClass::small, SizeClass::medium, SizeClass::large};
std::string_view size_name(SizeClass s);

// One op call ready to run: the arguments and everything they point at, owned. Not movable (the ArgPack holds
// views into the members), hence always held by unique_ptr.
struct OpCase {
  OpId id = 0;
  Device device;
  SizeClass size = SizeClass::small;
  std::vector<Tensor> tensors;                  // Tensor / OptionalTensor arguments, and tensor-list elements
  std::vector<std::vector<int64_t>> int_lists;  // int-list attributes
  std::vector<uint8_t> bytes;                   // bytes attribute (from_data)
  ArgPack args;
  double bytes_moved = 0;  // bytes read from the inputs plus bytes written to the output, per call
  double flops = 0;        // floating-point operations per call; 0 for ops that are bandwidth-bound
  std::string label;       // e.g. "x=[256, 256] f32"

  OpCase() = default;
  OpCase(const OpCase&) = delete;
  OpCase& operator=(const OpCase&) = delete;
};

// Builds valid arguments for op `id` on `device` at `size`. Raises crossfire errors as dispatch would (the inputs
// are created with from_data on `device`), and std::logic_error for a family this generator does not know.
// `float_dtype` is the dtype of every tensor parameter that accepts it (f16 and bf16 benchmarks); others get f32,
// else i32, else bool.
std::unique_ptr<OpCase> make_op_case(OpId id, Device device, SizeClass size, DType float_dtype = DType::f32);

// Whether op `id` has a tensor parameter that accepts `dt` (an op with a dtype variant of its benchmark).
bool takes_dtype(OpId id, DType dt);

// The square matmul size used at each size class (shared with the Eigen reference GEMM).
int64_t matmul_dim(SizeClass s);

}  // namespace crossfire::bench
