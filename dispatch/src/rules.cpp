// SPDX-License-Identifier: Apache-2.0
// Output rules (validation step 5): each computes an op's output dtype, shape and device from its arguments, or
// raises ShapeError / InvalidArgument naming the argument. Referenced from kOpTable.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "crossfire/error.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"
#include "cat_walk.hpp"

namespace crossfire::rules {

namespace {

std::string op_name(const CallView& c) { return std::string(c.op.name); }
std::string pname(const CallView& c, int p) { return std::string(c.op.params[size_t(p)].name); }

[[noreturn]] void shape_error(const CallView& c, int p, std::string msg) {
  throw ShapeError(op_name(c), pname(c, p), std::move(msg));
}
[[noreturn]] void invalid(const CallView& c, int p, std::string msg) {
  throw InvalidArgument(op_name(c), pname(c, p), std::move(msg));
}

Shape checked_shape(const CallView& c, int p, std::span<const int64_t> dims) {
  return Shape::checked(dims, c.op.name, c.op.params[size_t(p)].name);
}

[[gnu::cold, noreturn]] void axis_out_of_range(const CallView& c, int p, int64_t axis, int rank) {
  invalid(c, p,
          rank == 0 ? fmt::format("axis {} is out of range for a rank-0 tensor", axis)
                    : fmt::format("axis {} is out of range for rank {} (valid: {}..{})", axis, rank, -rank, rank - 1));
}

// A valid axis for rank r (negative counts from the end), normalised to [0, r).
inline int64_t normalise_axis(const CallView& c, int p, int64_t axis, int rank) {
  if (rank == 0 || axis < -rank || axis >= rank) [[unlikely]]
    axis_out_of_range(c, p, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

// Numpy broadcasting of two shapes; `p` names the argument blamed for a conflict.
Shape broadcast_shapes(const CallView& c, const Shape& a, const Shape& b, int p) {
  int r = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    int ia = i - (r - a.rank()), ib = i - (r - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      shape_error(c, p, fmt::format("shape {} does not broadcast with {} (dimension {}: {} vs {})", b.str(), a.str(), i,
                                    db, da));
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

void check_pair(const CallView& c, int p, std::span<const int64_t> v, const char* what, int64_t min) {
  if (v.size() != 2) invalid(c, p, fmt::format("needs 2 values ({}), got {}", what, v.size()));
  for (int64_t x : v)
    if (x < min || x > (int64_t(1) << 24)) invalid(c, p, fmt::format("{} must be in [{}, 2^24], got {}", what, min, x));
}

// Spatial output size of a convolution window; ShapeError when the window does not fit.
int64_t window_out(const CallView& c, int p, int64_t in, int64_t k, int64_t s, int64_t pad) {
  int64_t span = in + 2 * pad - k;
  if (span < 0)
    shape_error(c, p, fmt::format("kernel {} is larger than the padded input {}", k, in + 2 * pad));
  return span / s + 1;
}

// The product of dims, or -1 when it exceeds kMaxElements (never overflows: every factor is checked first).
int64_t bounded_product(std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && n > kMaxElements / d) return -1;
    n *= d;
  }
  for (int64_t d : dims)
    if (d == 0) return 0;
  return n;
}

}  // namespace

OutputSpec creation(const CallView& c) {
  const int shape_p = c.op.param_with_role(ParamRole::int_list_attr);
  const int dtype_p = c.op.param_with_role(ParamRole::dtype_attr);
  return {c.dtype(dtype_p), checked_shape(c, shape_p, c.ints(shape_p)), c.target};
}

OutputSpec arange(const CallView& c) {
  double start = c.scalar(0), stop = c.scalar(1), step = c.scalar(2);
  DType dt = c.dtype(3);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    invalid(c, 0, "start, stop and step must be finite");
  if (step == 0) invalid(c, 2, "step must not be 0");
  if (!c.op.params[3].dtypes.contains(dt))
    invalid(c, 3, fmt::format("arange makes {} tensors, not {}", c.op.params[3].dtypes.str(), dtype_name(dt)));
  double n = std::ceil((stop - start) / step);
  if (n > double(kMaxElements)) invalid(c, 1, fmt::format("{} elements is more than the limit {}", n, kMaxElements));
  Shape s;
  s.push_back(n > 0 ? int64_t(n) : 0);
  return {dt, s, c.target};
}

OutputSpec from_data(const CallView& c) {
  Shape s = checked_shape(c, 1, c.ints(1));
  DType dt = c.dtype(2);
  size_t want = size_t(s.numel()) * dtype_size(dt);
  if (c.bytes(0).size() != want)
    invalid(c, 0, fmt::format("has {} bytes; shape {} of {} needs {}", c.bytes(0).size(), s.str(), dtype_name(dt), want));
  if (dt == DType::boolean)
    for (uint8_t b : c.bytes(0))
      if (b > 1) invalid(c, 0, fmt::format("bool values must be 0 or 1, got {}", b));
  return {dt, s, c.target};
}

// rand and randn: their dtype attribute (parameter 2) names one of the dtypes the op table lets it name (float).
OutputSpec random(const CallView& c) {
  const DType dt = c.dtype(2);
  if (!c.op.params[2].dtypes.contains(dt))
    invalid(c, 2, fmt::format("{} draws {} values, not {}", c.op.name, c.op.params[2].dtypes.str(), dtype_name(dt)));
  return {dt, checked_shape(c, 0, c.ints(0)), c.target};
}

OutputSpec same_as_input(const CallView& c) {
  const Tensor& x = c.tensor(0);
  return {x.dtype(), x.shape(), c.target};
}

OutputSpec broadcast(const CallView& c) {
  const Shape &a = c.tensor(0).shape(), &b = c.tensor(1).shape();
  if (a == b) return {c.tensor(0).dtype(), a, c.target};  // the common case needs no broadcasting
  return {c.tensor(0).dtype(), broadcast_shapes(c, a, b, 1), c.target};
}

OutputSpec broadcast_bool(const CallView& c) {
  const Shape &a = c.tensor(0).shape(), &b = c.tensor(1).shape();
  if (a == b) return {DType::boolean, a, c.target};
  return {DType::boolean, broadcast_shapes(c, a, b, 1), c.target};
}

OutputSpec where(const CallView& c) {
  const Shape &cond = c.tensor(0).shape(), &x = c.tensor(1).shape();
  if (cond == x && x == c.tensor(2).shape()) return {c.tensor(1).dtype(), x, c.target};  // no broadcasting
  Shape s = broadcast_shapes(c, c.tensor(0).shape(), c.tensor(1).shape(), 1);
  s = broadcast_shapes(c, s, c.tensor(2).shape(), 2);
  return {c.tensor(1).dtype(), s, c.target};
}

OutputSpec cast(const CallView& c) { return {c.dtype(1), c.tensor(0).shape(), c.target}; }

OutputSpec reduce(const CallView& c) {
  const Tensor& x = c.tensor(0);
  Shape out;
  if (!c.present(1)) {
    if (x.numel() == 0 && !c.op.defined_on_empty)
      shape_error(c, 0, fmt::format("cannot take {} of an empty tensor", c.op.name));
    if (c.flag(2))
      for (int i = 0; i < x.rank(); ++i) out.push_back(1);
    return {x.dtype(), out, c.target};
  }
  int64_t axis = normalise_axis(c, 1, c.integer(1), x.rank());
  if (x.shape()[int(axis)] == 0 && !c.op.defined_on_empty)
    shape_error(c, 0, fmt::format("cannot take {} over an empty axis {}", c.op.name, axis));
  for (int i = 0; i < x.rank(); ++i) {
    if (i == axis) {
      if (c.flag(2)) out.push_back(1);
    } else {
      out.push_back(x.shape()[i]);
    }
  }
  return {x.dtype(), out, c.target};
}

OutputSpec argmax(const CallView& c) {
  OutputSpec s = reduce(c);
  s.dtype = DType::i32;
  return s;
}

OutputSpec matmul(const CallView& c) {
  const Shape &a = c.tensor(0).shape(), &b = c.tensor(1).shape();
  if (a.rank() < 2) shape_error(c, 0, fmt::format("needs rank >= 2, got shape {}", a.str()));
  if (b.rank() < 2) shape_error(c, 1, fmt::format("needs rank >= 2, got shape {}", b.str()));
  if (a[a.rank() - 1] != b[b.rank() - 2])
    shape_error(c, 1, fmt::format("inner dimensions differ: lhs {} has k = {}, rhs {} has k = {}", a.str(),
                                  a[a.rank() - 1], b.str(), b[b.rank() - 2]));
  Shape ba, bb;
  for (int i = 0; i < a.rank() - 2; ++i) ba.push_back(a[i]);
  for (int i = 0; i < b.rank() - 2; ++i) bb.push_back(b[i]);
  Shape out = broadcast_shapes(c, ba, bb, 1);
  if (out.rank() + 2 > kMaxRank) shape_error(c, 1, "result would exceed the maximum rank");
  if (bounded_product({out.numel(), a[a.rank() - 2], b[b.rank() - 1]}) < 0)
    shape_error(c, 1, "result has too many elements");
  out.push_back(a[a.rank() - 2]);
  out.push_back(b[b.rank() - 1]);
  return {c.tensor(0).dtype(), out, c.target};
}

OutputSpec reshape(const CallView& c) {
  const Tensor& x = c.tensor(0);
  std::span<const int64_t> dims = c.ints(1);
  if (dims.size() > size_t(kMaxRank)) invalid(c, 1, fmt::format("rank {} is above the maximum {}", dims.size(), kMaxRank));
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) invalid(c, 1, "only one dimension may be -1");
      infer = int(i);
    } else if (dims[i] < 0) {
      invalid(c, 1, fmt::format("negative dimension {}", dims[i]));
    } else {
      if (dims[i] != 0 && known > kMaxElements / dims[i]) shape_error(c, 1, "too many elements");
      known *= dims[i];
    }
  }
  std::array<int64_t, kMaxRank> resolved{};
  std::copy(dims.begin(), dims.end(), resolved.begin());
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      shape_error(c, 1, fmt::format("cannot infer -1: {} elements do not divide by {}", x.numel(), known));
    resolved[size_t(infer)] = x.numel() / known;
    known = x.numel();
  }
  if (known != x.numel())
    shape_error(c, 1, fmt::format("[{}] has {} elements, x {} has {}", fmt::join(dims, ", "), known, x.shape().str(),
                                  x.numel()));
  return {x.dtype(), checked_shape(c, 1, std::span(resolved.data(), dims.size())), c.target};
}

OutputSpec permute(const CallView& c) {
  const Tensor& x = c.tensor(0);
  std::span<const int64_t> dims = c.ints(1);
  if (int(dims.size()) != x.rank())
    invalid(c, 1, fmt::format("needs {} entries (the rank of x), got {}", x.rank(), dims.size()));
  std::array<bool, kMaxRank> seen{};
  Shape out;
  for (int64_t d : dims) {
    if (d < 0 || d >= x.rank()) invalid(c, 1, fmt::format("entry {} is out of range for rank {}", d, x.rank()));
    if (seen[size_t(d)]) invalid(c, 1, fmt::format("entry {} appears twice; dims must be a permutation", d));
    seen[size_t(d)] = true;
    out.push_back(x.shape()[int(d)]);
  }
  return {x.dtype(), out, c.target};
}

OutputSpec slice(const CallView& c) {
  const Tensor& x = c.tensor(0);
  for (int p = 1; p <= 3; ++p)
    if (int(c.ints(p).size()) != x.rank())
      invalid(c, p, fmt::format("needs {} entries (the rank of x), got {}", x.rank(), c.ints(p).size()));
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    int64_t start = c.ints(1)[size_t(i)], stop = c.ints(2)[size_t(i)], step = c.ints(3)[size_t(i)], dim = x.shape()[i];
    if (step < 1) invalid(c, 3, fmt::format("step {} on axis {} must be >= 1", step, i));
    if (start < 0 || start > dim)
      invalid(c, 1, fmt::format("start {} on axis {} is out of range [0, {}]", start, i, dim));
    if (stop < start || stop > dim)
      invalid(c, 2, fmt::format("stop {} on axis {} is out of range [{}, {}]", stop, i, start, dim));
    const int64_t span = stop - start;                     // in [0, dim]
    out.push_back(span == 0 ? 0 : (span - 1) / step + 1);  // ceil(span / step), even for a step near INT64_MAX
  }
  return {x.dtype(), out, c.target};
}

OutputSpec expand(const CallView& c) {
  const Tensor& x = c.tensor(0);
  Shape target = checked_shape(c, 1, c.ints(1));
  if (target.rank() < x.rank())
    shape_error(c, 1, fmt::format("target {} has lower rank than x {}", target.str(), x.shape().str()));
  for (int i = 0; i < x.rank(); ++i) {
    int64_t d = x.shape()[i], t = target[i + target.rank() - x.rank()];
    if (d != t && d != 1)
      shape_error(c, 1, fmt::format("cannot expand {} to {}: dimension {} is {}, not 1", x.shape().str(),
                                    target.str(), i, d));
  }
  return {x.dtype(), target, c.target};
}

namespace {
// Raises the ShapeError for the first element of cat's list whose shape does not fit the first element's (the walk
// said that one does not).
[[gnu::cold, noreturn]] void cat_mismatch(const CallView& c, int64_t axis) {
  const std::span<const Tensor> ts = c.list(0);
  const Shape& first = ts[0].shape();
  for (size_t j = 1; j < ts.size(); ++j) {
    const Shape& s = ts[j].shape();
    if (s.rank() != first.rank())
      throw ShapeError(op_name(c), fmt::format("tensors[{}]", j),
                       fmt::format("has rank {}, `tensors[0]` has rank {}", s.rank(), first.rank()));
    for (int i = 0; i < s.rank(); ++i)
      if (i != axis && s[i] != first[i])
        throw ShapeError(op_name(c), fmt::format("tensors[{}]", j),
                         fmt::format("has shape {}, which differs from `tensors[0]` {} outside axis {}", s.str(),
                                     first.str(), axis));
  }
  throw ShapeError(op_name(c), "tensors", "a shape check failed without an offender");
}

// Step 5 of cat for a list whose first element has rank R: every element must have rank R and the first element's
// dims outside `axis`; the output is the first element's shape with the list's total along `axis`. The walk is
// the one cat's fast path runs (Note [One walk over cat's list] in cat_walk.hpp).
template <int R>
OutputSpec cat_rank(const CallView& c, std::span<const Tensor> ts, int axis) {
  const detail::CatWalkResult w = detail::cat_walk<R, false>(ts, axis);
  if (w.differs) [[unlikely]]
    cat_mismatch(c, axis);
  if (w.total > kMaxElements) [[unlikely]]
    shape_error(c, 0, "result has too many elements along the axis");
  // (The whole result's size is held to the bound by dispatch: Note [The element bound].)
  return detail::cat_output<R>(ts, axis, w.total, c.target);
}

template <int... R>
constexpr auto make_cat_rules(std::integer_sequence<int, R...>) {
  return std::array<OutputSpec (*)(const CallView&, std::span<const Tensor>, int), sizeof...(R)>{&cat_rank<R + 1>...};
}
constexpr auto kCatRules = make_cat_rules(std::make_integer_sequence<int, kMaxRank>());
}  // namespace

OutputSpec cat(const CallView& c) {
  const std::span<const Tensor> ts = c.list(0);
  const int rank = ts[0].rank();
  const int axis = int(normalise_axis(c, 1, c.integer(1), rank));  // so rank is in 1..kMaxRank below
  if (ts.size() > detail::kMaxCatList) [[unlikely]]
    shape_error(c, 0, "has too many elements");
  return kCatRules[size_t(rank - 1)](c, ts, axis);
}

OutputSpec index_select(const CallView& c) {
  const Tensor& x = c.tensor(0);
  const Tensor& index = c.tensor(2);
  int64_t axis = normalise_axis(c, 1, c.integer(1), x.rank());
  if (index.rank() != 1) shape_error(c, 2, fmt::format("must be 1-D, got shape {}", index.shape().str()));
  if (x.shape()[int(axis)] == 0 && index.numel() > 0)
    shape_error(c, 2, fmt::format("cannot select from the empty axis {}", axis));
  Shape out = x.shape();
  out[int(axis)] = index.numel();
  if (bounded_product({x.numel() / std::max<int64_t>(1, x.shape()[int(axis)]), index.numel()}) < 0)
    shape_error(c, 2, "result has too many elements");
  return {x.dtype(), out, c.target};
}

OutputSpec softmax(const CallView& c) {
  const Tensor& x = c.tensor(0);
  normalise_axis(c, 1, c.integer(1), x.rank());
  return {x.dtype(), x.shape(), c.target};
}

OutputSpec conv2d(const CallView& c) {
  const Shape &in = c.tensor(0).shape(), &w = c.tensor(1).shape();
  if (in.rank() != 4) shape_error(c, 0, fmt::format("must be [N, C, H, W], got {}", in.str()));
  if (w.rank() != 4) shape_error(c, 1, fmt::format("must be [O, C, kh, kw], got {}", w.str()));
  if (w[1] != in[1])
    shape_error(c, 1, fmt::format("has {} input channels, input {} has {}", w[1], in.str(), in[1]));
  if (c.present(2)) {
    const Shape& b = c.tensor(2).shape();
    if (b.rank() != 1 || b[0] != w[0]) shape_error(c, 2, fmt::format("must be [{}], got {}", w[0], b.str()));
  }
  check_pair(c, 3, c.ints(3), "stride", 1);
  check_pair(c, 4, c.ints(4), "padding", 0);
  if (w[2] == 0 || w[3] == 0) shape_error(c, 1, "kernel dimensions must be at least 1");
  int64_t ho = window_out(c, 1, in[2], w[2], c.ints(3)[0], c.ints(4)[0]);
  int64_t wo = window_out(c, 1, in[3], w[3], c.ints(3)[1], c.ints(4)[1]);
  if (bounded_product({in[0], w[0], ho, wo}) < 0) shape_error(c, 0, "result has too many elements");
  // unfold's intermediate [N, C*kh*kw, L] must fit too; kernels may materialise it.
  if (bounded_product({in[0], in[1], w[2], w[3], ho, wo}) < 0)
    shape_error(c, 0, "the unfolded input would have too many elements");
  Shape out{in[0], w[0], ho, wo};
  return {c.tensor(0).dtype(), out, c.target};
}

OutputSpec unfold(const CallView& c) {
  const Shape& in = c.tensor(0).shape();
  if (in.rank() != 4) shape_error(c, 0, fmt::format("must be [N, C, H, W], got {}", in.str()));
  check_pair(c, 1, c.ints(1), "kernel", 1);
  check_pair(c, 2, c.ints(2), "stride", 1);
  check_pair(c, 3, c.ints(3), "padding", 0);
  int64_t kh = c.ints(1)[0], kw = c.ints(1)[1];
  int64_t ho = window_out(c, 1, in[2], kh, c.ints(2)[0], c.ints(3)[0]);
  int64_t wo = window_out(c, 1, in[3], kw, c.ints(2)[1], c.ints(3)[1]);
  if (bounded_product({in[0], in[1], kh, kw, ho, wo}) < 0) shape_error(c, 0, "result has too many elements");
  int64_t rows = in[1] * kh * kw;
  return {c.tensor(0).dtype(), Shape{in[0], rows, ho * wo}, c.target};
}

OutputSpec fold(const CallView& c) {
  const Shape& in = c.tensor(0).shape();
  if (in.rank() != 3) shape_error(c, 0, fmt::format("must be [N, C*kh*kw, L], got {}", in.str()));
  check_pair(c, 1, c.ints(1), "output_size", 0);
  check_pair(c, 2, c.ints(2), "kernel", 1);
  check_pair(c, 3, c.ints(3), "stride", 1);
  check_pair(c, 4, c.ints(4), "padding", 0);
  int64_t h = c.ints(1)[0], w = c.ints(1)[1], kh = c.ints(2)[0], kw = c.ints(2)[1];
  if (bounded_product({h, w}) < 0) invalid(c, 1, "output_size has too many elements");
  if (in[1] % (kh * kw) != 0)
    shape_error(c, 0, fmt::format("dimension 1 ({}) is not a multiple of kh*kw = {}", in[1], kh * kw));
  int64_t ho = window_out(c, 1, h, kh, c.ints(3)[0], c.ints(4)[0]);
  int64_t wo = window_out(c, 1, w, kw, c.ints(3)[1], c.ints(4)[1]);
  if (bounded_product({ho, wo}) != in[2])
    shape_error(c, 0, fmt::format("has L = {} patches; output_size, kernel, stride and padding give {}", in[2], ho * wo));
  if (bounded_product({in[0], in[1] / (kh * kw), h, w}) < 0) shape_error(c, 1, "result has too many elements");
  Shape out{in[0], in[1] / (kh * kw), h, w};
  return {c.tensor(0).dtype(), out, c.target};
}

OutputSpec to(const CallView& c) {
  const Tensor& x = c.tensor(0);
  return {x.dtype(), x.shape(), c.device(1)};
}

}  // namespace crossfire::rules
