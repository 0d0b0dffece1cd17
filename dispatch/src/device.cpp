#include "crossfire/device.hpp"

#include <charconv>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {

std::string Device::str() const { return fmt::format("{}:{}", backend_name(backend), index); }

Device Device::parse(std::string_view text) {
  std::string_view name = text, idx;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    idx = text.substr(colon + 1);
  }
  Device d;
  bool known = false;
  for (BackendKind b : kAllBackendKinds)
    if (backend_name(b) == name) d.backend = b, known = true;
  if (!known) throw InvalidArgument("device", "", fmt::format("unknown backend in `{}` (cpu, vulkan, cuda)", text));
  if (!idx.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    if (ec != std::errc() || p != idx.data() + idx.size() || v > 255)
      throw InvalidArgument("device", "", fmt::format("bad device index in `{}` (0..255)", text));
    d.index = uint8_t(v);
  }
  return d;
}

DType parse_dtype(std::string_view text) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == text) return d;
  throw InvalidArgument("dtype", "", fmt::format("unknown dtype `{}` (f32, i32, bool)", text));
}

std::string DTypeSet::str() const {
  std::string s;
  for (DType d : kAllDTypes)
    if (contains(d)) s += (s.empty() ? "" : "|") + std::string(dtype_name(d));
  return s.empty() ? "nothing" : s;
}

Shape Shape::checked(std::span<const int64_t> dims, std::string_view op, std::string_view param) {
  if (dims.size() > size_t(kMaxRank))
    throw ShapeError(std::string(op), std::string(param),
                     fmt::format("rank {} is above the maximum rank {}", dims.size(), kMaxRank));
  // Invariant: the product of the non-zero dims is at most kMaxElements, so any shape built from these dims by an
  // op (cat, expand, matmul) can be multiplied out without overflow, even when another dim is 0.
  Shape s;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      throw ShapeError(std::string(op), std::string(param), fmt::format("negative dimension {}", d));
    int64_t next = 0;
    if (d != 0 && (__builtin_mul_overflow(n, d, &next) || next > kMaxElements))
      throw ShapeError(std::string(op), std::string(param),
                       fmt::format("[{}] has more than {} elements", fmt::join(dims, ", "), kMaxElements));
    if (d != 0) n = next;
    s.push_back(d);
  }
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
