// SPDX-License-Identifier: Apache-2.0
// Layout kernels: pure data movement, bit-exact (reshape, permute, slice, expand, cat, index_select). They move
// bytes, never values, so each is written once per element size (Note [Strided iteration] in kernel_support.hpp).
#include <fmt/format.h>

#include "crossfire/error.hpp"
#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

void reshape_kernel(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  if (x.nbytes) std::memcpy(c.out.data, x.data, x.nbytes);
}

// Copies x into the output through a plan whose operand 0 strides were set by `describe`.
template <class Describe>
void strided_copy(const KernelCall& c, Describe&& describe) {
  const TensorImpl& x = impl_of(c, 0);
  if (c.out.numel == 0) return;
  StridedPlan<1> plan;
  plan.set_output(c.out.shape);
  describe(plan, contiguous_strides(x.shape));
  plan.coalesce();
  visit_element_size(x.dtype, [&]<class T>(TypeTag<T>) { gather_copy(plan, data_of<const T>(x), data_of<T>(c.out)); });
}

void permute_kernel(const KernelCall& c) {
  const std::span<const int64_t> dims = c.args[param_of("permute", "dims")].ints;
  strided_copy(c, [&](StridedPlan<1>& p, const std::array<int64_t, kMaxRank>& xs) {
    for (size_t i = 0; i < dims.size(); ++i) p.strides[0][i] = xs[size_t(dims[i])];
  });
}

void slice_kernel(const KernelCall& c) {
  const std::span<const int64_t> starts = c.args[param_of("slice", "starts")].ints;
  const std::span<const int64_t> steps = c.args[param_of("slice", "steps")].ints;
  strided_copy(c, [&](StridedPlan<1>& p, const std::array<int64_t, kMaxRank>&) {
    const SliceView v = slice_view(impl_of(c, 0).shape, c.out.shape, starts, steps);
    p.strides[0] = v.strides;
    p.base[0] += v.offset;
  });
}

void expand_kernel(const KernelCall& c) {
  const Shape& xs = impl_of(c, 0).shape;
  strided_copy(c, [&](StridedPlan<1>& p, const std::array<int64_t, kMaxRank>&) { p.set_broadcast(0, xs); });
}

// Each input contributes a block of dim_j * inner elements to every one of the `outer` output rows.
void cat_kernel(const KernelCall& c) {
  const std::span<const Tensor> ts = c.args[param_of("cat", "tensors")].list;
  if (c.out.numel == 0) return;
  const Shape& os = c.out.shape;
  const int axis = normalised_axis(c.args[param_of("cat", "axis")].i, os.rank());
  const auto [outer, total, inner] = split_at(os, axis);
  const size_t esz = dtype_size(c.out.dtype);
  const size_t out_row = size_t(total * inner) * esz;
  auto* out = static_cast<char*>(c.out.data);
  size_t at = 0;  // byte offset of this input's block within an output row
  for (const Tensor& t : ts) {
    const size_t block = size_t(t.shape()[axis] * inner) * esz;
    const auto* in = static_cast<const char*>(t.impl()->data);
    if (block != 0)
      for (int64_t r = 0; r < outer; ++r) std::memcpy(out + size_t(r) * out_row + at, in + size_t(r) * block, block);
    at += block;
  }
}

// Index values are data, not metadata, so the kernel checks them, all of them before writing anything.
void index_select_kernel(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  const TensorImpl& index = impl_of(c, param_of("index_select", "index"));
  const int axis = normalised_axis(c.args[param_of("index_select", "axis")].i, x.shape.rank());
  const int64_t dim = x.shape[axis];
  const auto gather = [&]<class I>(const I* idx) {  // an i32 or an i64 index
    for (int64_t j = 0; j < index.numel; ++j)
      if (idx[j] < 0 || idx[j] >= dim) [[unlikely]]
        throw InvalidArgument("index_select", "index",
                              fmt::format("value {} at position {} is out of range [0, {})", idx[j], j, dim));
    if (c.out.numel == 0) return;
    const AxisSplit around = split_at(x.shape, axis);  // around.len is `dim`
    const size_t esz = dtype_size(x.dtype), chunk = size_t(around.inner) * esz;
    const auto* in = static_cast<const char*>(x.data);
    auto* out = static_cast<char*>(c.out.data);
    for (int64_t r = 0; r < around.outer; ++r)
      for (int64_t j = 0; j < index.numel; ++j)
        std::memcpy(out + size_t(r * index.numel + j) * chunk, in + size_t(r * dim + int64_t(idx[j])) * chunk,
                    chunk);
  };
  if (index.dtype == DType::i64)
    gather(data_of<const int64_t>(index));
  else
    gather(data_of<const int32_t>(index));
}

}  // namespace

void register_layout_kernels(CpuBackend& b) {
  b.set_kernel("reshape", reshape_kernel);
  b.set_kernel("permute", permute_kernel);
  b.set_kernel("slice", slice_kernel);
  b.set_kernel("expand", expand_kernel);
  b.set_kernel("cat", cat_kernel);
  b.set_kernel("index_select", index_select_kernel);
}

}  // namespace crossfire::cpu
