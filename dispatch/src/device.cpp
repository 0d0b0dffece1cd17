// SPDX-License-Identifier: Apache-2.0
#include "crossfire/device.hpp"

#include <charconv>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {

// FMT_COMPILE: the format string is parsed at compile time; an error message names two or three devices, and this
// is a third of what formatting a DeviceMismatch costs otherwise (Note [Nothing alive at a throw] in dispatch.cpp).
std::string Device::str() const { return fmt::format(FMT_COMPILE("{}:{}"), backend_name(backend), index); }

Device Device::parse(std::string_view text) {
  std::string_view name = text, idx;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    idx = text.substr(colon + 1);
  }
  Device d;
  const std::optional<BackendKind> kind = backend_kind_named(name);
  if (!kind)
    throw InvalidArgument("device", "", fmt::format("unknown backend in `{}` ({})", printable(text), backend_names()));
  d.backend = *kind;
  if (!idx.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    if (ec != std::errc() || p != idx.data() + idx.size() || v > 255)
      throw InvalidArgument("device", "", fmt::format("bad device index in `{}` (0..255)", printable(text)));
    d.index = uint8_t(v);
  }
  return d;
}

DType parse_dtype(std::string_view text) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == text) return d;
  throw InvalidArgument("dtype", "", fmt::format("unknown dtype `{}` ({})", printable(text), kAnyDType.str()));
}

std::string DTypeSet::str() const {
  std::string s;
  for (DType d : kAllDTypes)
    if (contains(d)) s += (s.empty() ? "" : "|") + std::string(dtype_name(d));
  return s.empty() ? "nothing" : s;
}

namespace {
// Why Shape::checked refused `dims`, in the order its comment promises: rank, then the first negative dim, then
// the element bound.
[[gnu::cold, noreturn]] void throw_unchecked(std::span<const int64_t> dims, std::string_view op,
                                             std::string_view param) {
  if (dims.size() > size_t(kMaxRank))
    throw ShapeError(std::string(op), std::string(param),
                     fmt::format("rank {} is above the maximum rank {}", dims.size(), kMaxRank));
  for (int64_t d : dims)
    if (d < 0) throw ShapeError(std::string(op), std::string(param), fmt::format("negative dimension {}", d));
  throw ShapeError(std::string(op), std::string(param),
                   fmt::format("[{}] has more than {} elements", fmt::join(dims, ", "), kMaxElements));
}
}  // namespace

Shape Shape::checked(std::span<const int64_t> dims, std::string_view op, std::string_view param) {
  if (dims.size() > size_t(kMaxRank)) [[unlikely]]
    throw_unchecked(dims, op, param);
  // The element bound (Note [The element bound] in dispatch.cpp): the non-zero dims multiply to at most
  // kMaxElements, so any shape an op builds from these dims can be multiplied out without overflow. One pass copies
  // and tests (a creation op pays for this on every call); the test reads dims as unsigned, so it refuses a
  // negative dim too, and throw_unchecked says which it was.
  Shape s;
  ElementBound bound;
  for (size_t i = 0; i < dims.size(); ++i) {
    s.dims_[i] = dims[i];
    bound.add(dims[i]);
  }
  s.rank_ = int(dims.size());
  if (bound.over) [[unlikely]]
    throw_unchecked(dims, op, param);
  return s;
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

std::array<int64_t, kMaxRank> contiguous_strides(const Shape& s) {
  std::array<int64_t, kMaxRank> st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    acc *= s[i];
  }
  return st;
}

SliceView slice_view(const Shape& in, const Shape& out, std::span<const int64_t> starts,
                     std::span<const int64_t> steps) {
  const std::array<int64_t, kMaxRank> st = contiguous_strides(in);
  SliceView v;
  for (int i = 0; i < in.rank(); ++i) {
    v.offset += starts[size_t(i)] * st[size_t(i)];
    // With two or more elements kept, step < dim, so the product stays below the input's size.
    v.strides[size_t(i)] = out[i] <= 1 ? 0 : st[size_t(i)] * steps[size_t(i)];
  }
  return v;
}

AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit a;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < axis) a.outer *= s[i];
    else if (i == axis) a.len = s[i];
    else a.inner *= s[i];
  }
  return a;
}

}  // namespace crossfire
