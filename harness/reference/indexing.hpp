// SPDX-License-Identifier: Apache-2.0
// Shapes and indexing for the reference's own loops (reference.cpp's evaluators and vjp.cpp's derivatives). Written
// apart from the core's helpers on purpose: the reference shares no code with what it checks. Internal to the
// reference library (not installed).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::reference::detail {

using Index = std::array<int64_t, kMaxRank>;

// Row-major strides (own code: the reference keeps no dependency on the core's helpers beyond the types).
inline Index strides_of(const Shape& s) {
  Index st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    acc *= s[i];
  }
  return st;
}

// Advances a row-major multi-index; returns false after the last element.
inline bool next_index(Index& idx, const Shape& s) {
  for (int a = s.rank() - 1; a >= 0; --a) {
    if (++idx[size_t(a)] < s[a]) return true;
    idx[size_t(a)] = 0;
  }
  return false;
}

inline int64_t offset_of(const Index& idx, const Index& strides, int rank) {
  int64_t o = 0;
  for (int a = 0; a < rank; ++a) o += idx[size_t(a)] * strides[size_t(a)];
  return o;
}

// For each element of `out` (row-major), the flat index of the element of `in` that numpy broadcasting maps to it:
// in's dims align with out's trailing dims, and size-1 dims repeat. The two common cases hold no table: an input of
// out's own shape maps element e to e, and a one-element input maps every element to 0. (Every reference call of a
// broadcasting op and every vjp of one builds these, in every finite difference of the gradient oracle; a table
// each was a heap block each, and a sanitizer build pays a stack trace per block: docs/fuzzing.md, Speed.)
class BroadcastSources {
 public:
  BroadcastSources(const Shape& in, const Shape& out) : n_(size_t(out.numel())) {
    if (in == out) {
      kind_ = Kind::identity;
      return;
    }
    if (in.numel() == 1) {
      kind_ = Kind::first;
      return;
    }
    kind_ = Kind::table;
    Index stride{};
    int off = out.rank() - in.rank();
    int64_t acc = 1;
    for (int i = in.rank() - 1; i >= 0; --i) {
      stride[size_t(i + off)] = in[i] == 1 ? 0 : acc;
      acc *= in[i];
    }
    table_.resize(n_);
    Index idx{};
    for (size_t e = 0; e < n_; ++e) {
      table_[e] = offset_of(idx, stride, out.rank());
      next_index(idx, out);
    }
  }
  size_t size() const { return n_; }
  int64_t operator[](size_t e) const {
    switch (kind_) {
      case Kind::identity: return int64_t(e);
      case Kind::first: return 0;
      case Kind::table: break;
    }
    return table_[e];
  }

 private:
  enum class Kind : uint8_t { identity, first, table };
  Kind kind_ = Kind::table;
  size_t n_ = 0;
  std::vector<int64_t> table_;
};

// Splits a tensor around one axis: outer * len * inner == numel. Written apart from the core's split_at() on
// purpose: the reference shares no code with what it checks.
struct RefSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
inline RefSplit ref_split_at(const Shape& s, int axis) {
  RefSplit a;
  for (int i = 0; i < axis; ++i) a.outer *= s[i];
  a.len = s[axis];
  for (int i = axis + 1; i < s.rank(); ++i) a.inner *= s[i];
  return a;
}

}  // namespace crossfire::reference::detail
