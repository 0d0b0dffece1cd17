// SPDX-License-Identifier: Apache-2.0
// One walk over cat's list, shared by cat's output rule (rules.cpp) and cat's fast path (dispatch.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire::detail {

// Note [One walk over cat's list]
// cat is the one op whose validation grows with its arguments: every element of the list must match the first
// one's device and dtype (steps 2-3 of contract section 4), its rank and its dims outside the axis (step 5), and
// the output's dim along the axis is the list's total. The generic path checks these in two walks (the
// per-tensor checks, then the rule); the fast path does all of them in one, with the rule's own code:
// cat_walk<R, true> is cat_walk<R, false> plus the device, dtype and autodiff words, so what the rule accepts
// and what the fast path accepts cannot drift apart.
//
// A walk only accumulates: each compared word (the signature, each dim) is OR-ed and AND-ed over the list, and
// the two results are equal exactly when every element holds the first one's value (a bit on in one element and
// off in another is on in the OR and off in the AND). Which element differs, and how, is found by the cold code
// that raises. So the walk costs two instructions per compared word and element, with no branch but the loop's and
// the undefined-tensor test, and no constant to compare against (docs/benchmarks.md, the list-of-8 case).
//
// R is the first element's rank, a template parameter so that the dims are unrolled. The other elements' dims are
// read up to R whatever their rank (every shape has kMaxRank slots, zero past its rank); an element of another rank
// is caught by its rank word whatever its dims.

// The most elements cat's list may have: below 2^32, so that the total along the axis cannot overflow.
inline constexpr size_t kMaxCatList = (size_t(1) << 32) - 1;

struct CatWalkResult {
  bool differs = false;    // some element differs from the first: in rank or a dim outside the axis, or, with
                           // kPlacement, in device or dtype
  bool undefined = false;  // kPlacement: an element is an undefined tensor (the walk stopped there)
  uintptr_t meta = 0;      // kPlacement: non-zero when some element carries autodiff state
  int64_t total = 0;       // the sum of the elements' dims along the axis
};

template <int R, bool kPlacement>
[[gnu::always_inline]] inline CatWalkResult cat_walk(std::span<const Tensor> ts, int axis) {
  static_assert(R >= 1 && R <= kMaxRank);
  const int a = R == 1 ? 0 : axis;  // the caller has normalised the axis to [0, R)
  const TensorImpl* first = ts[0].impl();
  // The compared words, OR-ed and AND-ed; locals, not the result's fields, so that they stay in registers. With
  // kPlacement the signature stands for device, dtype and rank (Note [A tensor's signature]), else the rank alone.
  const uint32_t word0 = kPlacement ? first->signature() : uint32_t(first->shape.rank());
  uint32_t word_or = word0, word_and = word0;
  std::array<uint64_t, R> dim_or, dim_and;  // R > 1 only: the axis's entry is computed and ignored
  for (int d = 0; d < R; ++d) dim_or[size_t(d)] = dim_and[size_t(d)] = uint64_t(first->shape[d]);
  uintptr_t meta = kPlacement ? reinterpret_cast<uintptr_t>(first->autograd) : 0;
  int64_t total = first->shape[a];
  bool undefined = false;
  // (Unrolled by 4: ~1 ns less than by 2 on cat of 8, paired, docs/benchmarks.md.)
#pragma GCC unroll 4
  for (const Tensor& t : ts.subspan(1)) {
    const TensorImpl* i = t.impl();
    if constexpr (kPlacement) {
      if (i == nullptr) [[unlikely]] {
        undefined = true;
        break;
      }
      word_or |= i->signature();
      word_and &= i->signature();
      meta |= reinterpret_cast<uintptr_t>(i->autograd);
    } else {
      word_or |= uint32_t(i->shape.rank());
      word_and &= uint32_t(i->shape.rank());
    }
    if constexpr (R > 1) {
      for (int d = 0; d < R; ++d) {
        dim_or[size_t(d)] |= uint64_t(i->shape[d]);
        dim_and[size_t(d)] &= uint64_t(i->shape[d]);
      }
    }
    total += i->shape[a];  // each <= kMaxElements and fewer than 2^32 elements: cannot overflow
  }
  uint64_t diff = word_or ^ word_and;
  if constexpr (R > 1)
    for (int d = 0; d < R; ++d) diff |= d == a ? 0 : dim_or[size_t(d)] ^ dim_and[size_t(d)];
  return {diff != 0, undefined, meta, total};
}

// The output of a cat that passed the walk: the first element's shape with `total` along the axis.
template <int R>
[[gnu::always_inline]] inline OutputSpec cat_output(std::span<const Tensor> ts, int axis, int64_t total, Device target) {
  const Shape& first = ts[0].shape();
  std::array<int64_t, size_t(R)> dims;
  for (int d = 0; d < R; ++d) dims[size_t(d)] = d == axis ? total : first[d];
  return {ts[0].dtype(), Shape(dims), target};
}

}  // namespace crossfire::detail
