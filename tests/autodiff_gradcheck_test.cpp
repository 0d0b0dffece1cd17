// SPDX-License-Identifier: Apache-2.0
// Every backward rule against f64 central finite differences (contract section 6, last point).
//
// For each case: random f32 inputs inside each parameter's domain (ParamDef::domain), loss = sum(out * w) with
// fixed random weights w. The analytic gradient comes from backward() on the backend under test, in f32; the
// numerical one from central differences of the same loss evaluated in f64 by the reference evaluator
// (harness/reference), which shares no code with the kernels or the rules. The cases are keyed by op name and the
// op table is enumerated: a differentiable op without a case fails EveryDifferentiableOpHasACase.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reference/reference.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

using reference::RefArg;
using reference::RefCall;
using reference::RefTensor;

// Note [Why the inputs lie on a coarse grid]
// Every input and weight is a multiple of 2^-8 below 8 in magnitude, and the difference step is h = 2^-10, so
// x +- h is exactly an f32. The reference rounds the results of bitwise ops (data movement, maximum, where, ...) to
// f32, as a kernel would; on the grid that rounding is exact, so the differences see no f32 noise at all.
// Values stay away from kinks by more than h: |x| >= 0.25 where the rule picks a side at 0 (relu, abs), and all
// values at least 0.125 apart where ties would matter (maximum, minimum, max).
constexpr double kGrid = 1.0 / 256;
constexpr double kStep = 1.0 / 1024;

// Note [Gradient tolerance]
// An element passes when |analytic - numeric| <= 1e-3 * (|numeric| + 0.1 * max |numeric| over that input) + 1e-6.
// The analytic side is f32: a chain of at most ~10 ops, each within a few eps_f32 (6e-8) of its exact value times
// the reduction length (<= 64 here), so ~4e-5 relative to the magnitude of the terms; the cancellation in sums
// (matmul, softmax, conv2d) makes small elements err relative to the input's largest gradient, hence the 0.1 * max
// term. The numerical side is f64 with h = 2^-10: truncation h^2/6 * |f'''| <= ~2e-6 relative for these inputs,
// rounding ~1e-16 * |loss| / h, negligible. So 1e-3 leaves a margin of 25x or more, while a wrong rule (a wrong
// factor, sign, index or axis) errs by O(1) relative and fails.
constexpr double kRelTol = 1e-3;
constexpr double kAbsTol = 1e-6;

// How the values of a case's differentiable f32 inputs are drawn.
enum class Values {
  smooth,          // uniform in the parameter's domain
  away_from_zero,  // |x| in [0.25, 1.5] (relu, abs)
  distinct,        // all values of all inputs distinct, >= 0.125 apart (max, maximum, minimum)
};

// Where a device attribute points, resolved at run time on the device under test.
enum class DevicePick { other_index, other_backend };

struct TensorSpec {
  Shape shape;
  DType dtype = DType::f32;
  Domain domain = Domain::any;
  bool requires_grad = true;
  std::vector<double> values;  // filled when the case is built
};

struct ArgSpec {
  ParamRole role = ParamRole::tensor;
  bool present = true;
  int64_t i = 0;
  double f = 0;
  bool flag = false;
  std::vector<int64_t> ints;
  int list_len = 0;
  DevicePick device = DevicePick::other_index;
};

struct GradCase {
  std::string op;
  std::string name;
  Values values = Values::smooth;
  std::vector<ArgSpec> args;     // one per parameter
  std::vector<TensorSpec> slots;  // one per tensor input slot (list elements expanded, absent optional skipped)
  std::vector<double> weights;   // loss weights; sized once the output is known
  uint64_t seed = 0;
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : s) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  return h;
}

// Multiples of kGrid, uniform in [lo, hi].
double grid_value(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_int_distribution<int64_t> k(int64_t(std::ceil(lo / kGrid)), int64_t(std::floor(hi / kGrid)));
  return double(k(rng)) * kGrid;
}

double random_sign(std::mt19937_64& rng) { return std::bernoulli_distribution(0.5)(rng) ? 1.0 : -1.0; }

// Builds one case in signature order; each call consumes the next parameter of the op and checks its role, so a
// case that does not fit its op's signature fails loudly instead of testing something else.
class CaseBuilder {
 public:
  CaseBuilder(std::string op, std::string name, Values v = Values::smooth) : op_def_(&lookup(op)) {
    c_.op = std::move(op);
    c_.name = std::move(name);
    c_.values = v;
  }

  CaseBuilder& t(Shape s) { return tensor(s, true); }
  CaseBuilder& constant(Shape s) { return tensor(s, false); }  // an untracked f32 input: acts as a constant
  CaseBuilder& mask(Shape s) {
    next(ParamRole::tensor);
    c_.slots.push_back({s, DType::boolean, Domain::any, false, {}});
    return *this;
  }
  CaseBuilder& index(std::vector<int32_t> v, DType dtype = DType::i32) {
    next(ParamRole::tensor);
    c_.slots.push_back({Shape{int64_t(v.size())}, dtype, Domain::index, false, {v.begin(), v.end()}});
    return *this;
  }
  CaseBuilder& list(std::vector<Shape> shapes, std::vector<bool> tracked = {}) {
    next(ParamRole::tensor_list).list_len = int(shapes.size());
    for (size_t j = 0; j < shapes.size(); ++j)
      c_.slots.push_back({shapes[j], DType::f32, Domain::any, tracked.empty() || tracked[j], {}});
    return *this;
  }
  CaseBuilder& optional(std::optional<Shape> s) {
    next(ParamRole::optional_tensor).present = s.has_value();
    if (s) c_.slots.push_back({*s, DType::f32, param().domain, true, {}});
    return *this;
  }
  CaseBuilder& integer(int64_t v) {
    next(ParamRole::int_attr).i = v;
    return *this;
  }
  CaseBuilder& axis(std::optional<int64_t> a) {
    ArgSpec& s = next(ParamRole::optional_int_attr);
    s.present = a.has_value();
    s.i = a.value_or(0);
    return *this;
  }
  CaseBuilder& flag(bool b) {
    next(ParamRole::bool_attr).flag = b;
    return *this;
  }
  CaseBuilder& scalar(double v) {
    next(ParamRole::float_attr).f = v;
    return *this;
  }
  CaseBuilder& ints(std::vector<int64_t> v) {
    next(ParamRole::int_list_attr).ints = std::move(v);
    return *this;
  }
  CaseBuilder& device(DevicePick p) {
    next(ParamRole::device_attr).device = p;
    return *this;
  }

  GradCase build() {
    if (int(c_.args.size()) != op_def_->num_params)
      throw std::logic_error(fmt::format("gradient case {}/{}: {} of {} arguments given", c_.op, c_.name,
                                         c_.args.size(), op_def_->num_params));
    c_.seed = fnv1a(c_.op + "/" + c_.name);
    std::mt19937_64 rng(c_.seed);
    std::vector<double*> distinct;
    for (TensorSpec& s : c_.slots) {
      if (!s.values.empty()) continue;  // given (index)
      s.values.resize(size_t(s.shape.numel()));
      for (double& v : s.values) {
        if (s.dtype == DType::boolean) v = std::bernoulli_distribution(0.5)(rng) ? 1 : 0;
        else if (c_.values == Values::distinct) distinct.push_back(&v);
        else v = draw(rng, s.domain, c_.values);
      }
    }
    // Distinct values: a shuffled ladder 0.125 apart, centred on 0 (every case using it has domain `any`).
    std::vector<int64_t> rungs(distinct.size());
    for (size_t k = 0; k < rungs.size(); ++k) rungs[k] = int64_t(k) - int64_t(rungs.size() / 2);
    std::shuffle(rungs.begin(), rungs.end(), rng);
    for (size_t k = 0; k < distinct.size(); ++k) *distinct[k] = double(rungs[k]) * 0.125;
    return c_;
  }

 private:
  static const OpDef& lookup(const std::string& name) {
    int id = find_op(name);
    if (id < 0) throw std::logic_error("gradient case for unknown op " + name);
    return op_def(OpId(id));
  }
  const ParamDef& param() const { return op_def_->params[c_.args.size() - 1]; }
  ArgSpec& next(ParamRole role) {
    size_t k = c_.args.size();
    if (int(k) >= op_def_->num_params || op_def_->params[k].role != role)
      throw std::logic_error(fmt::format("gradient case {}/{}: argument {} does not match the signature", c_.op,
                                         c_.name, k));
    ArgSpec a;
    a.role = role;
    c_.args.push_back(a);
    return c_.args.back();
  }
  CaseBuilder& tensor(Shape s, bool tracked) {
    next(ParamRole::tensor);
    c_.slots.push_back({s, DType::f32, param().domain, tracked, {}});
    return *this;
  }
  static double draw(std::mt19937_64& rng, Domain d, Values v) {
    switch (d) {
      case Domain::positive:
      case Domain::non_negative: return grid_value(rng, 0.5, 2.0);  // away from 0, where log/sqrt/pow blow up
      case Domain::non_zero: return random_sign(rng) * grid_value(rng, 0.5, 2.0);
      default: break;
    }
    if (v == Values::away_from_zero) return random_sign(rng) * grid_value(rng, 0.25, 1.5);
    return grid_value(rng, -1.5, 1.5);
  }

  const OpDef* op_def_;
  GradCase c_;
};

using V = Values;
using S = Shape;
using B = CaseBuilder;

// The cases, keyed by op. Each op has a plain case and the variants its rule has to get right: broadcasting,
// axes (negative, keepdim, all), batch dims, strides and padding, untracked inputs, repeated indices.
const std::vector<GradCase>& all_cases() {
  static const std::vector<GradCase> cases = [] {
    std::vector<GradCase> v;
    // Every differentiable unary op, derived from the table: values away from where its derivative jumps (its
    // Kink), float attributes (clamp's bounds) half a grid step off the grid, so that no input is within the
    // difference step of one (Note [Why the inputs lie on a coarse grid]).
    for (const OpDef& op : kOpTable) {
      if (op.family != OpFamily::unary || op.backward == nullptr) continue;
      const V values = op.kink == Kink::at_zero ? V::away_from_zero : V::smooth;
      for (const auto& [name, shape] : {std::pair{"matrix", S{3, 4}}, std::pair{"scalar", S{}}}) {
        B b(std::string(op.name), name, values);
        b.t(shape);
        for (int i = 1, k = 0; i < op.num_params; ++i, ++k) {
          if (op.params[size_t(i)].role != ParamRole::float_attr)
            throw std::logic_error(fmt::format("gradient case for {}: a unary op's parameter {} is not a float "
                                               "attribute; give it a hand-written case", op.name, i));
          b.scalar(k == 0 ? -0.5 - kGrid / 2 : 0.75 + kGrid / 2);
        }
        v.push_back(b.build());
      }
    }

    for (const char* op : {"add", "sub", "mul", "div", "pow"}) {
      v.push_back(B(op, "same_shape").t(S{2, 3}).t(S{2, 3}).build());
      v.push_back(B(op, "rhs_row").t(S{2, 3}).t(S{3}).build());
      v.push_back(B(op, "outer").t(S{2, 1}).t(S{1, 3}).build());
      v.push_back(B(op, "scalar_lhs").t(S{}).t(S{2, 2}).build());
      v.push_back(B(op, "rank3_mixed").t(S{2, 1, 3}).t(S{4, 1}).build());
      v.push_back(B(op, "constant_lhs").constant(S{2, 3}).t(S{3}).build());
      v.push_back(B(op, "constant_rhs").t(S{2, 3}).constant(S{2, 3}).build());
    }
    for (const char* op : {"maximum", "minimum"}) {
      v.push_back(B(op, "same_shape", V::distinct).t(S{2, 3}).t(S{2, 3}).build());
      v.push_back(B(op, "broadcast", V::distinct).t(S{2, 3}).t(S{3}).build());
      v.push_back(B(op, "outer", V::distinct).t(S{3, 1}).t(S{1, 2}).build());
    }
    v.push_back(B("where", "same_shape").mask(S{2, 3}).t(S{2, 3}).t(S{2, 3}).build());
    v.push_back(B("where", "broadcast").mask(S{2, 1}).t(S{}).t(S{2, 3}).build());
    v.push_back(B("where", "constant_a").mask(S{3}).constant(S{2, 3}).t(S{1, 3}).build());

    for (const char* op : {"sum", "mean"}) {
      v.push_back(B(op, "all").t(S{3, 4}).axis({}).flag(false).build());
      v.push_back(B(op, "all_keepdim").t(S{2, 3}).axis({}).flag(true).build());
      v.push_back(B(op, "axis0").t(S{3, 4}).axis(0).flag(false).build());
      v.push_back(B(op, "axis_neg_keepdim").t(S{2, 3, 4}).axis(-2).flag(true).build());
      v.push_back(B(op, "rank0").t(S{}).axis({}).flag(false).build());
    }
    v.push_back(B("max", "all", V::distinct).t(S{3, 4}).axis({}).flag(false).build());
    v.push_back(B("max", "all_keepdim", V::distinct).t(S{2, 3}).axis({}).flag(true).build());
    v.push_back(B("max", "axis1", V::distinct).t(S{3, 4}).axis(1).flag(false).build());
    v.push_back(B("max", "axis_neg_keepdim", V::distinct).t(S{2, 3, 4}).axis(-3).flag(true).build());

    v.push_back(B("matmul", "2d").t(S{3, 4}).t(S{4, 2}).build());
    v.push_back(B("matmul", "batched_lhs").t(S{2, 3, 4}).t(S{4, 5}).build());
    v.push_back(B("matmul", "batched_rhs").t(S{3, 4}).t(S{2, 4, 2}).build());
    v.push_back(B("matmul", "broadcast_batch").t(S{2, 1, 3, 4}).t(S{3, 4, 2}).build());
    v.push_back(B("matmul", "constant_rhs").t(S{3, 4}).constant(S{4, 2}).build());

    v.push_back(B("reshape", "flatten").t(S{2, 3, 4}).ints({4, 6}).build());
    v.push_back(B("reshape", "infer").t(S{6}).ints({2, -1, 1}).build());
    v.push_back(B("permute", "rank3").t(S{2, 3, 4}).ints({2, 0, 1}).build());
    v.push_back(B("permute", "rank4").t(S{2, 1, 3, 2}).ints({3, 1, 0, 2}).build());
    v.push_back(B("slice", "step2").t(S{5, 6}).ints({1, 0}).ints({4, 6}).ints({2, 1}).build());
    v.push_back(B("slice", "two_axes").t(S{4, 5, 3}).ints({0, 1, 1}).ints({4, 5, 3}).ints({3, 2, 1}).build());
    v.push_back(B("slice", "empty").t(S{4, 3}).ints({2, 0}).ints({2, 3}).ints({1, 1}).build());
    v.push_back(B("expand", "new_and_unit_dims").t(S{3, 1}).ints({2, 3, 4}).build());
    v.push_back(B("expand", "scalar").t(S{}).ints({2, 2}).build());
    v.push_back(B("cat", "axis1").list({S{2, 1}, S{2, 3}, S{2, 2}}).integer(1).build());
    v.push_back(B("cat", "axis0_one_constant").list({S{1, 3}, S{2, 3}, S{1, 3}}, {true, false, true}).integer(0).build());
    v.push_back(B("cat", "negative_axis").list({S{2, 2, 1}, S{2, 2, 2}}).integer(-1).build());
    v.push_back(B("index_select", "repeated").t(S{4, 3}).integer(0).index({3, 0, 3, 1}).build());
    v.push_back(B("index_select", "negative_axis").t(S{2, 5}).integer(-1).index({4, 4, 0}).build());
    v.push_back(B("index_select", "middle_axis").t(S{2, 3, 2}).integer(1).index({2, 1}).build());
    v.push_back(B("index_select", "i64_index").t(S{4, 3}).integer(0).index({3, 0, 3}, DType::i64).build());

    v.push_back(B("softmax", "rows").t(S{3, 4}).integer(1).build());
    v.push_back(B("softmax", "axis0").t(S{2, 3, 2}).integer(0).build());
    v.push_back(B("softmax", "negative_axis").t(S{2, 5}).integer(-1).build());
    v.push_back(B("conv2d", "bias").t(S{2, 2, 5, 5}).t(S{3, 2, 3, 3}).optional(S{3}).ints({1, 1}).ints({0, 0}).build());
    v.push_back(B("conv2d", "stride_padding").t(S{1, 2, 6, 5}).t(S{2, 2, 3, 2}).optional({}).ints({2, 2}).ints({1, 0}).build());
    v.push_back(B("conv2d", "uneven_stride").t(S{1, 1, 6, 6}).t(S{2, 1, 2, 3}).optional(S{2}).ints({3, 2}).ints({0, 1}).build());
    v.push_back(B("conv2d", "constant_input").constant(S{1, 2, 4, 4}).t(S{2, 2, 2, 2}).optional(S{2}).ints({1, 1}).ints({1, 1}).build());
    v.push_back(B("unfold", "padded").t(S{1, 2, 4, 5}).ints({2, 3}).ints({1, 2}).ints({1, 0}).build());
    v.push_back(B("unfold", "overlapping").t(S{2, 1, 4, 4}).ints({3, 3}).ints({1, 1}).ints({1, 1}).build());
    v.push_back(B("fold", "tiles").t(S{1, 8, 4}).ints({4, 4}).ints({2, 2}).ints({2, 2}).ints({0, 0}).build());
    v.push_back(B("fold", "overlapping").t(S{1, 9, 16}).ints({4, 4}).ints({3, 3}).ints({1, 1}).ints({1, 1}).build());
    v.push_back(B("to", "other_index").t(S{2, 3}).device(DevicePick::other_index).build());
    v.push_back(B("to", "other_backend").t(S{2, 3}).device(DevicePick::other_backend).build());
    return v;
  }();
  return cases;
}

TEST(AutodiffGradCheck, EveryDifferentiableOpHasACase) {
  std::map<std::string, int> count;
  for (const GradCase& c : all_cases()) ++count[c.op];
  for (const OpDef& op : kOpTable) {
    const bool differentiable = op.backward != nullptr;
    const int n = count[std::string(op.name)];
    if (differentiable) EXPECT_GT(n, 0) << op.name << " is differentiable but has no gradient case";
    else EXPECT_EQ(n, 0) << op.name << " has gradient cases but no backward rule";
  }
}

// ---- running one case ----------------------------------------------------------------------------------------------

Tensor make_tensor(const TensorSpec& s, Device d) {
  switch (s.dtype) {
    case DType::f32: {
      std::vector<float> v(s.values.begin(), s.values.end());
      return from_data(std::span<const float>(v), s.shape.dims(), d);
    }
    case DType::i32: {
      std::vector<int32_t> v(s.values.begin(), s.values.end());
      return from_data(std::span<const int32_t>(v), s.shape.dims(), d);
    }
    case DType::boolean: {
      std::vector<uint8_t> v(s.values.begin(), s.values.end());
      return from_bool(v, s.shape.dims(), d);
    }
    case DType::i64: {
      std::vector<int64_t> v(s.values.begin(), s.values.end());
      return from_data(std::span<const int64_t>(v), s.shape.dims(), d);
    }
    case DType::f16:
    case DType::bf16: break;
  }
  throw std::logic_error(fmt::format("gradient cases hold f32, i32/i64 (indices) and bool only, not {}",
                                     dtype_name(s.dtype)));
}

// The device call: views into `slots` (one tensor per slot, list elements adjacent) and into the case's attributes.
ArgPack device_call(const GradCase& c, std::span<const Tensor> slots, Device dest) {
  ArgPack p;
  size_t k = 0;
  for (const ArgSpec& a : c.args) {
    switch (a.role) {
      case ParamRole::tensor: p.push(Arg::of(slots[k++])); break;
      case ParamRole::optional_tensor: p.push(Arg::optional(a.present ? &slots[k++] : nullptr)); break;
      case ParamRole::tensor_list:
        p.push(Arg::of(slots.subspan(k, size_t(a.list_len))));
        k += size_t(a.list_len);
        break;
      case ParamRole::int_attr: p.push(Arg::integer(a.i)); break;
      case ParamRole::float_attr: p.push(Arg::scalar(a.f)); break;
      case ParamRole::optional_int_attr: p.push(Arg::optional_integer(a.present, a.i)); break;
      case ParamRole::bool_attr: p.push(Arg::flag(a.flag)); break;
      case ParamRole::int_list_attr: p.push(Arg::of(IntList(a.ints))); break;
      case ParamRole::device_attr: p.push(Arg::of(dest)); break;
      default: throw std::logic_error("gradient cases use no other argument roles");
    }
  }
  return p;
}

// The same call for the f64 reference, with the given slot values.
RefCall reference_call(const GradCase& c, const std::vector<std::vector<double>>& values, Device dest) {
  RefCall r{OpId(find_op(c.op)), {}};
  size_t k = 0;
  auto ref_tensor = [&] {
    const TensorSpec& s = c.slots[k];
    const std::vector<double>& v = values[k++];
    if (s.dtype == DType::i64) return RefTensor::of_i64(s.shape, {v.begin(), v.end()});  // index values: exact
    return RefTensor{s.dtype, s.shape, v};
  };
  for (const ArgSpec& a : c.args) {
    switch (a.role) {
      case ParamRole::tensor: r.args.emplace_back(ref_tensor()); break;
      case ParamRole::optional_tensor:
        if (a.present) r.args.emplace_back(ref_tensor());
        else r.args.emplace_back(reference::RefAbsent{});
        break;
      case ParamRole::tensor_list: {
        std::vector<RefTensor> l;
        for (int j = 0; j < a.list_len; ++j) l.push_back(ref_tensor());
        r.args.emplace_back(std::move(l));
        break;
      }
      case ParamRole::int_attr: r.args.emplace_back(std::in_place_type<int64_t>, a.i); break;
      case ParamRole::float_attr: r.args.emplace_back(std::in_place_type<double>, a.f); break;
      case ParamRole::optional_int_attr:
        if (a.present) r.args.emplace_back(std::in_place_type<int64_t>, a.i);
        else r.args.emplace_back(reference::RefAbsent{});
        break;
      case ParamRole::bool_attr: r.args.emplace_back(std::in_place_type<bool>, a.flag); break;
      case ParamRole::int_list_attr: r.args.emplace_back(a.ints); break;
      case ParamRole::device_attr: r.args.emplace_back(dest); break;
      default: throw std::logic_error("gradient cases use no other argument roles");
    }
  }
  return r;
}

class GradCheck : public ::testing::TestWithParam<size_t> {};

TEST_P(GradCheck, MatchesCentralDifferences) {
  const GradCase& c = all_cases()[GetParam()];
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Device dest = dev;  // where a device attribute (to's destination) points
  for (const ArgSpec& a : c.args) {
    if (a.role != ParamRole::device_attr) continue;
    std::string why;
    std::optional<Device> d = a.device == DevicePick::other_index ? testing::device_under_test(1, &why)
                                                                 : testing::other_backend_device();
    if (!d) GTEST_SKIP() << (why.empty() ? "no device of another backend on this machine" : why);
    dest = *d;
  }

  // The loss weights, on the same grid as the inputs (Note [Why the inputs lie on a coarse grid]).
  std::vector<std::vector<double>> values;
  for (const TensorSpec& s : c.slots) values.push_back(s.values);
  std::mt19937_64 rng(c.seed ^ 0x5eedu);

  // f64 side first: it fixes the output's size, and it tells whether the reference evaluator is there.
  RefTensor ref_out;
  try {
    ref_out = reference::evaluate(reference_call(c, values, dest)).value;
  } catch (const InvalidArgument& e) {
    if (std::string_view(e.what()).find("not written yet") != std::string_view::npos)
      GTEST_SKIP() << "the f64 reference evaluator has not landed yet: " << e.what();
    throw;
  }
  std::vector<double> w(size_t(ref_out.numel()));
  for (double& x : w) x = grid_value(rng, -1.0, 1.0);
  auto loss64 = [&](const std::vector<std::vector<double>>& v) {
    RefTensor out = reference::evaluate(reference_call(c, v, dest)).value;
    double l = 0;
    for (size_t i = 0; i < w.size(); ++i) l += out.values[i] * w[i];
    return l;
  };

  // f32 side on the device under test: analytic gradients through backward().
  std::vector<Tensor> leaves;
  try {
    for (const TensorSpec& s : c.slots) {  // a device may not hold a dtype (Vulkan's i64): Unsupported, a skip
      leaves.push_back(make_tensor(s, dev));
      if (s.requires_grad) leaves.back().set_requires_grad();
    }
    Tensor out = call(OpId(find_op(c.op)), device_call(c, leaves, dest));
    ASSERT_EQ(out.shape().str(), ref_out.shape.str()) << "the output rule and the reference disagree on the shape";
    std::vector<float> wf(w.begin(), w.end());
    Tensor loss = sum(mul(out, from_data(std::span<const float>(wf), out.shape().dims(), out.device())));
    backward(loss);
  } catch (const Unsupported& e) {
    GTEST_SKIP() << "not supported on " << backend_name(dev.backend) << " yet: " << e.what();
  }

  for (size_t s = 0; s < c.slots.size(); ++s) {
    const TensorSpec& spec = c.slots[s];
    const Tensor grad = leaves[s].grad();
    if (!spec.requires_grad) {
      EXPECT_FALSE(grad.defined()) << "input slot " << s << " is untracked (a constant) but received a gradient";
      continue;
    }
    ASSERT_TRUE(grad.defined()) << "input slot " << s << " received no gradient";
    ASSERT_EQ(grad.shape().str(), spec.shape.str()) << "input slot " << s;
    ASSERT_EQ(grad.device().str(), leaves[s].device().str()) << "input slot " << s << ": a gradient lives on its leaf's device";
    const std::vector<float> analytic = grad.to_f32();

    std::vector<double> numeric(analytic.size());
    double scale = 0;
    for (size_t e = 0; e < numeric.size(); ++e) {
      const double x = values[s][e];
      values[s][e] = x + kStep;
      const double up = loss64(values);
      values[s][e] = x - kStep;
      const double down = loss64(values);
      values[s][e] = x;
      numeric[e] = (up - down) / (2 * kStep);
      scale = std::max(scale, std::abs(numeric[e]));
    }
    int reported = 0;
    for (size_t e = 0; e < numeric.size(); ++e) {
      const double err = std::abs(double(analytic[e]) - numeric[e]);
      const double allowed = kRelTol * (std::abs(numeric[e]) + 0.1 * scale) + kAbsTol;
      if (err > allowed && reported++ < 5)
        ADD_FAILURE() << fmt::format("{}/{}: input slot {} element {} (x = {}): analytic {}, numeric {}, allowed {:.3g}",
                                     c.op, c.name, s, e, values[s][e], analytic[e], numeric[e], allowed);
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  const GradCase& c = all_cases()[info.param];
  return c.op + "_" + c.name;
}

INSTANTIATE_TEST_SUITE_P(EveryRule, GradCheck, ::testing::Range(size_t(0), all_cases().size()), case_name);

// Saturating activations: the derivative is tiny where the output is near 1 in magnitude, and computing it from
// the rounded output (sigmoid: y (1 - y); tanh: 1 - y^2) loses it to cancellation: y = sigmoid(15) is 1 - 3.1e-7, an
// ulp of y near 1 is 6e-8, so 1 - y is off by up to 20% and backends that round y differently disagree (a campaign
// found cpu:0 and vulkan:0 20% apart at x = 15); tanh(10) rounds to 1 and 1 - y^2 gives 0 for 8.2e-9. Expected values
// are the closed forms in double: sigmoid' = e^-|x| / (1 + e^-|x|)^2, tanh' = 1 / cosh(x)^2.
TEST(AutodiffGradCheck, SaturatingActivationsKeepTheirSmallGradients) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  const std::vector<float> xs = {15.0f, -15.0f, 12.98f, 30.0f, -30.0f, 0.0f, 0.5f, -3.0f, 10.0f, -20.0f};
  struct Case {
    const char* op;
    Tensor (*f)(const Tensor&);
    double (*derivative)(double);
  };
  const Case cases[] = {
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double x) { const double e = std::exp(-std::fabs(x)); return e / ((1 + e) * (1 + e)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return 1 / (std::cosh(x) * std::cosh(x)); }},
  };
  for (const Case& c : cases) {
    try {
      Tensor x = from_data(std::span<const float>(xs), {int64_t(xs.size())}, dev);
      x.set_requires_grad();
      backward(sum(c.f(x)));
      const std::vector<float> got = x.grad().to_f32();
      for (size_t i = 0; i < xs.size(); ++i) {
        const double want = c.derivative(double(xs[i]));  // of the f32 input, in double
        EXPECT_NEAR(got[i], want, 1e-5 * want) << c.op << "'(" << xs[i] << ")";
      }
    } catch (const Unsupported& e) {
      GTEST_SKIP() << "not supported on this backend yet: " << e.what();
    }
  }
}

// div's rhs gradient is -g * lhs / rhs^2 = -g * out / rhs. Computed as (g * out) / rhs it overflowed to -inf for a
// huge g and |out| > 1 although the result fits in f32 (a campaign: g ~ 1e36 through exp and conv2d, seed
// 20261204); computed as (g / rhs) * out it overflows for a huge g and |rhs| < 1 instead (Note [div's rhs gradient
// without overflow] in backward.cpp). Each case below overflows one of the two orders and not the other; expected
// values are the closed form in double, from the f32 inputs and g.
TEST(AutodiffGradCheck, DivRhsGradientIsFiniteWhereverTheResultIs) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  struct Case {
    float lhs, rhs, g;
  };
  const std::vector<Case> cases = {
      {1e7f, 1e4f, 1e36f},    // out = 1e3: g * out = 1e39 overflows; the result is -1e35
      {-1e7f, 1e4f, -2e36f},  // the same with signs
      {1e-4f, 1e-3f, 1e36f},  // out = 0.1: g / rhs = 1e39 overflows; the result is -1e38
      {3.0f, -2.0f, 5.0f},    // ordinary values take either order
      {0.5f, 4.0f, -1e30f},
  };
  std::vector<float> ls, rs, gs;
  for (const Case& c : cases) {
    ls.push_back(c.lhs);
    rs.push_back(c.rhs);
    gs.push_back(c.g);
  }
  const int64_t n = int64_t(cases.size());
  try {
    Tensor lhs = from_data(std::span<const float>(ls), {n}, dev), rhs = from_data(std::span<const float>(rs), {n}, dev);
    const Tensor g = from_data(std::span<const float>(gs), {n}, dev);
    lhs.set_requires_grad();
    rhs.set_requires_grad();
    backward(sum(mul(div(lhs, rhs), g)));  // d(loss)/d(out) = g
    const std::vector<float> dl = lhs.grad().to_f32(), dr = rhs.grad().to_f32();
    for (size_t i = 0; i < cases.size(); ++i) {
      const double l = cases[i].lhs, r = cases[i].rhs, gi = cases[i].g;
      const double want_r = -gi * l / (r * r), want_l = gi / r;
      EXPECT_TRUE(std::isfinite(dr[i])) << "d/drhs at lhs " << l << ", rhs " << r << ", g " << gi << ": " << dr[i];
      EXPECT_NEAR(dr[i], want_r, 1e-5 * std::fabs(want_r)) << "d/drhs at lhs " << l << ", rhs " << r << ", g " << gi;
      if (std::fabs(want_l) <= double(std::numeric_limits<float>::max()))
        EXPECT_NEAR(dl[i], want_l, 1e-5 * std::fabs(want_l)) << "d/dlhs at lhs " << l << ", rhs " << r << ", g " << gi;
      else  // g / rhs itself is past f32 (the third case): infinity of the right sign is the right answer
        EXPECT_EQ(dl[i], std::copysign(std::numeric_limits<float>::infinity(), float(want_l))) << "d/dlhs, case " << i;
    }
  } catch (const Unsupported& e) {
    GTEST_SKIP() << "not supported on this backend yet: " << e.what();
  }
}

// Softmax is unchanged by adding a constant along its axis, so a gradient that is the same along the axis (here
// d(sum(softmax(x) * c))/d softmax = c everywhere) must give exactly 0: sum(c * y) = c * sum(y) = c. The rule
// y * (g - sum(g * y)) computes c - c * sum(y), and sum(y) is 1 only up to f32 rounding, so with c ~ 1e30 it returned
// rounding noise of ~c * eps * y (2^74 here) whose sign and size depended on each backend's summation order: the
// campaign found cpu:0 and vulkan:0 disagreeing by 2^74 on d/dx of a matmul over a softmax (seed 20261201). The rule
// now takes max(g) out of g first, which softmax's Jacobian ignores, so a constant g is exactly 0 on every backend.
TEST(AutodiffGradCheck, SoftmaxOfAConstantUpstreamGradientIsExactlyZero) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  const std::vector<float> xs = {0.0f, 0.23120117f, 0.43164062f, -1.5f, 2.75f, 0.1f};  // y does not sum to 1 exactly
  for (const float c : {1.0f, 3.0f, 1e30f, -7e29f}) {
    for (const int64_t axis : {int64_t(0), int64_t(-1)}) {
      try {
        Tensor x = from_data(std::span<const float>(xs), {2, 3}, dev);
        x.set_requires_grad();
        backward(sum(mul(softmax(x, axis), full({}, c, DType::f32, dev))));
        for (float gi : x.grad().to_f32()) EXPECT_EQ(gi, 0.0f) << "c = " << c << ", axis " << axis;
      } catch (const Unsupported& e) {
        GTEST_SKIP() << "not supported on this backend yet: " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace crossfire
