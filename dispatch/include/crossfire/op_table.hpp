// SPDX-License-Identifier: Apache-2.0
// THE op table (contract section 2): every op crossfire knows is declared exactly once, below, in kOpTable.
// Dispatch, validation, the kernels' registration, the generators, the benchmarks and the docs all enumerate this
// table; none of them keeps its own list of ops. To add an op: add one OpDef here (with its output and backward
// rules in rules.cpp / backward.cpp), one kernel per backend, and nothing else.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "crossfire/args.hpp"
#include "crossfire/device.hpp"

namespace crossfire {

using OpId = uint16_t;

// How a tensor parameter relates to autodiff (contract section 4, step 4).
enum class GradPolicy : uint8_t {
  differentiable,  // gradient flows to it
  constant,        // tracked inputs are accepted and act as constants (compare ops, where's cond)
  forbidden,       // a tracked input raises AutodiffError (cast: it would silently cut the gradient)
};

// Where the values of a tensor parameter must lie for the op to be defined; generators keep inputs inside it.
enum class Domain : uint8_t {
  any,
  positive,      // > 0 (log, pow's base)
  non_negative,  // >= 0 (sqrt)
  non_zero,      // != 0 (div's rhs)
  index,         // a valid index along the op's axis (index_select's index)
};

// The shape family of an op: what the generators need to build valid arguments for it. One entry per kind of
// shape relation, not per op.
enum class OpFamily : uint8_t {
  creation,      // no tensor inputs; shape, dtype, device attributes
  unary,         // elementwise, one input
  binary,        // elementwise with numpy broadcasting
  where,         // elementwise, three broadcast inputs
  cast,          // elementwise dtype change
  reduce,        // over one axis or all elements
  matmul,        // 2-D or batched, broadcast batch dims
  reshape, permute, slice, expand, cat, index_select,
  softmax,       // along one axis
  conv2d, unfold, fold,
  transfer,      // to(device)
};

// Data movement: the output's elements are input elements (or zero padding), copied, never computed. Contract
// section 6 asks them to be bit for bit the same on every backend: the sign of a zero and a NaN's payload included.
constexpr bool moves_data(OpFamily f) {
  return f == OpFamily::reshape || f == OpFamily::permute || f == OpFamily::slice || f == OpFamily::expand ||
         f == OpFamily::cat || f == OpFamily::index_select || f == OpFamily::unfold || f == OpFamily::transfer;
}

struct ParamDef {
  std::string_view name;
  ParamRole role;
  DTypeSet dtypes{};              // tensor roles: what the parameter accepts; dtype_attr: the dtypes it may name
  uint8_t same_dtype_group = 0;  // tensor params of one op with the same non-zero group must share one dtype
  GradPolicy grad = GradPolicy::constant;
  Domain domain = Domain::any;
};

struct OpDef;
struct OutputSpec {
  DType dtype;
  Shape shape;
  Device device;
};

// A call seen by rules: the op, its arguments (already checked for device and dtype) and its target device.
struct CallView {
  const OpDef& op;
  const ArgPack& args;
  Device target;

  const Tensor& tensor(int param) const { return *args[param].tensor; }
  bool present(int param) const { return args[param].present; }
  std::span<const Tensor> list(int param) const { return args[param].list; }
  int64_t integer(int param) const { return args[param].i; }
  double scalar(int param) const { return args[param].f; }
  bool flag(int param) const { return args[param].b; }
  std::span<const int64_t> ints(int param) const { return args[param].ints; }
  DType dtype(int param) const { return args[param].dtype; }
  Device device(int param) const { return args[param].device; }
  std::span<const uint8_t> bytes(int param) const { return args[param].bytes; }
};

// Output rule: the output's dtype, shape and device, or ShapeError / InvalidArgument (validation step 5).
using OutputRule = OutputSpec (*)(const CallView& call);

// Backward rule (contract section 5), written with forward ops only, so every backend gets gradients.
// `grads` has one slot per tensor input in signature order, list elements expanded (see input_slot()); the rule
// fills the slots whose `needs` flag is set, with a tensor of that input's shape on that input's device.
struct BackwardCall {
  const CallView& call;  // the forward call's inputs (saved) and attributes
  const Tensor& output;  // the forward output
  const Tensor& grad;    // d(loss)/d(output)
  std::span<const bool> needs;
  std::span<Tensor> grads;
};
using BackwardRule = void (*)(const BackwardCall& b);

// How far a float result may lie from the exact f64 result (contract section 6):
// |got - exact| <= k * eps_f32 * magnitude + tiny, where k = k_const + k_per_term * (number of terms summed).
struct ErrorBound {
  float k_const = 1;
  float k_per_term = 0;
  bool bitwise = false;  // data movement and integer/bool results: must be bit-identical on every backend
};

// An op's rule in its common case, which dispatch's fast path runs in line instead of calling the rule (Note [A
// rule's common case, in line] in dispatch/src/dispatch.cpp). Set beside the rule by the table's helpers below;
// RuleForm.EveryFormIsItsRulesCommonCase holds each to its rule.
struct RuleForm {
  enum Kind : uint8_t {
    none,         // the fast path calls the rule
    elementwise,  // when tensor parameters 0 .. tensors-1 all have the same shape, the output has that shape, the
                  // target device and the dtype of parameter dtype_from (a tensor's dtype or a dtype attribute's
                  // value; -1: bool); other shapes broadcast, in the rule
    creation,     // the whole rule: the dtype attribute, the int-list attribute as a checked shape, the target
  };
  Kind kind = none;
  int8_t tensors = 0;
  int8_t dtype_from = -1;
};

// Where an op's derivative jumps, as its backward rule has it (the op's entry in kOpTable says which):
enum class Kink : uint8_t {
  none,
  at_zero,     // where its input is 0 (relu, abs)
  at_ties,     // where lhs equals rhs, element by element after broadcasting (maximum, minimum)
  at_repeats,  // where two elements of its input are equal: a tie for the maximum, taken conservatively (max)
  at_attributes,  // where its input equals one of its float attributes, rounded to f32 (clamp's min and max)
};

struct OpDef {
  std::string_view name;
  OpFamily family;
  std::array<ParamDef, kMaxParams> params{};
  int num_params = 0;
  OutputRule output;
  BackwardRule backward;  // nullptr: not differentiable (outputs are never tracked)
  ErrorBound bound;
  std::string_view doc;

  // Where the op's derivative jumps (Kink): the gradient oracle skips points that sit on such a kink instead of
  // comparing them with finite differences. piecewise(): it jumps somewhere.
  Kink kink = Kink::none;
  constexpr bool piecewise() const { return kink != Kink::none; }
  // Reductions: whether the op is defined over an empty range (sum: 0, mean: NaN). The others (max, argmax) raise
  // ShapeError on one, and generators give them non-empty inputs.
  bool defined_on_empty = false;
  RuleForm form{};  // see RuleForm

  // Derived from `params` when the table is built (see op() below): the indices of the tensor parameters in
  // signature order, and whether they are all plain `tensor`s (no list, no optional).
  std::array<uint8_t, kMaxParams> tensor_params{};
  int num_tensor_params = 0;
  bool plain_tensors = false;
  std::array<int8_t, kNumParamRoles> first_with_role{};  // see param_with_role()

  constexpr std::span<const ParamDef> signature() const { return {params.data(), size_t(num_params)}; }
  constexpr bool has_tensor_params() const { return num_tensor_params > 0; }
  constexpr int param_index(std::string_view n) const {
    for (int i = 0; i < num_params; ++i)
      if (params[size_t(i)].name == n) return i;
    return -1;
  }
  // The first parameter with this role, or -1 (a table lookup: output rules use it on the hot path).
  constexpr int param_with_role(ParamRole r) const { return first_with_role[size_t(r)]; }
};

namespace rules {  // defined in dispatch/src/rules.cpp
OutputSpec creation(const CallView&);
OutputSpec arange(const CallView&);
OutputSpec from_data(const CallView&);
OutputSpec random(const CallView&);
OutputSpec same_as_input(const CallView&);
OutputSpec broadcast(const CallView&);
OutputSpec broadcast_bool(const CallView&);
OutputSpec where(const CallView&);
OutputSpec cast(const CallView&);
OutputSpec reduce(const CallView&);
OutputSpec argmax(const CallView&);
OutputSpec matmul(const CallView&);
OutputSpec reshape(const CallView&);
OutputSpec permute(const CallView&);
OutputSpec slice(const CallView&);
OutputSpec expand(const CallView&);
OutputSpec cat(const CallView&);
OutputSpec index_select(const CallView&);
OutputSpec softmax(const CallView&);
OutputSpec conv2d(const CallView&);
OutputSpec unfold(const CallView&);
OutputSpec fold(const CallView&);
OutputSpec to(const CallView&);
}  // namespace rules

namespace backward_rules {  // defined in dispatch/src/backward.cpp
void neg(const BackwardCall&);
void abs(const BackwardCall&);
void exp(const BackwardCall&);
void log(const BackwardCall&);
void sqrt(const BackwardCall&);
void tanh(const BackwardCall&);
void sigmoid(const BackwardCall&);
void relu(const BackwardCall&);
void clamp(const BackwardCall&);
void add(const BackwardCall&);
void sub(const BackwardCall&);
void mul(const BackwardCall&);
void div(const BackwardCall&);
void pow(const BackwardCall&);
void maximum(const BackwardCall&);
void minimum(const BackwardCall&);
void where(const BackwardCall&);
void sum(const BackwardCall&);
void mean(const BackwardCall&);
void max(const BackwardCall&);
void matmul(const BackwardCall&);
void reshape(const BackwardCall&);
void permute(const BackwardCall&);
void slice(const BackwardCall&);
void expand(const BackwardCall&);
void cat(const BackwardCall&);
void index_select(const BackwardCall&);
void softmax(const BackwardCall&);
void conv2d(const BackwardCall&);
void unfold(const BackwardCall&);
void fold(const BackwardCall&);
void to(const BackwardCall&);
}  // namespace backward_rules

namespace op_table_detail {
using R = ParamRole;
using G = GradPolicy;
using D = Domain;
constexpr ParamDef T(std::string_view n, DTypeSet d, G g = G::differentiable, D dom = D::any, uint8_t grp = 0) {
  return {n, R::tensor, d, grp, g, dom};
}
constexpr ParamDef Attr(std::string_view n, R r) { return {n, r, {}, 0, G::constant, D::any}; }

template <class... P>
constexpr OpDef op(std::string_view name, OpFamily fam, OutputRule out, BackwardRule bw, ErrorBound bound,
                   std::string_view doc, P... ps) {
  OpDef d{name, fam, {ps...}, int(sizeof...(P)), out, bw, bound, doc};
  d.plain_tensors = true;
  d.first_with_role.fill(-1);
  for (int i = 0; i < d.num_params; ++i) {
    ParamRole r = d.params[size_t(i)].role;
    if (d.first_with_role[size_t(r)] < 0) d.first_with_role[size_t(r)] = int8_t(i);
    if (d.params[size_t(i)].same_dtype_group > 3) throw "op_table: dtype groups are 1..3 (see TensorChecks)";
    if (!is_tensor_role(r)) continue;
    d.tensor_params[size_t(d.num_tensor_params++)] = uint8_t(i);
    d.plain_tensors &= r == ParamRole::tensor;
  }
  d.plain_tensors &= d.num_tensor_params > 0;
  return d;
}
// Marks an op whose derivative jumps, and where (see OpDef::kink).
constexpr OpDef piecewise(OpDef d, Kink where) {
  d.kink = where;
  return d;
}
// An elementwise op: its rule's common case (see RuleForm::elementwise).
constexpr OpDef elementwise(OpDef d, int tensors, int dtype_from) {
  for (int i = 0; i < tensors; ++i)
    if (i >= d.num_params || d.params[size_t(i)].role != R::tensor) throw "op_table: an elementwise form's shapes are plain tensors";
  if (dtype_from >= tensors && d.params[size_t(dtype_from)].role != R::dtype_attr)
    throw "op_table: an elementwise form's dtype comes from one of its tensors or a dtype attribute";
  d.form = {RuleForm::elementwise, int8_t(tensors), int8_t(dtype_from)};
  return d;
}
// Marks a reduction that is defined over an empty range (see OpDef::defined_on_empty).
constexpr OpDef defined_on_empty(OpDef d) {
  d.defined_on_empty = true;
  return d;
}
constexpr ErrorBound kExact{0, 0, true};
constexpr ErrorBound kOneRounding{1, 0, false};
constexpr ErrorBound kTranscendental{4, 0, false};
constexpr ErrorBound kReduction{2, 1, false};

constexpr ParamDef kShape = Attr("shape", R::int_list_attr);
// A dtype attribute naming one of `d` (rand and randn draw float values only).
constexpr ParamDef DTypeAttr(DTypeSet d) { return {"dtype", R::dtype_attr, d, 0, G::constant, D::any}; }
constexpr ParamDef kDTypeAttr = DTypeAttr(kAnyDType);
constexpr ParamDef kDeviceAttr = Attr("device", R::device_attr);
constexpr ParamDef kAxisOpt = Attr("axis", R::optional_int_attr);
constexpr ParamDef kAxis = Attr("axis", R::int_attr);
constexpr ParamDef kKeepdim = Attr("keepdim", R::bool_attr);

// Elementwise binary ops share a dtype group: lhs and rhs must have the same dtype (no implicit promotion).
constexpr OpDef binary(std::string_view n, DTypeSet d, BackwardRule bw, ErrorBound b, std::string_view doc,
                       D rhs_domain = D::any, D lhs_domain = D::any) {
  return elementwise(op(n, OpFamily::binary, rules::broadcast, bw, b, doc, T("lhs", d, G::differentiable, lhs_domain, 1),
                        T("rhs", d, G::differentiable, rhs_domain, 1)),
                     2, 0);
}
constexpr OpDef compare(std::string_view n, DTypeSet d, std::string_view doc) {
  return elementwise(op(n, OpFamily::binary, rules::broadcast_bool, nullptr, kExact, doc,
                        T("lhs", d, G::constant, D::any, 1), T("rhs", d, G::constant, D::any, 1)),
                     2, -1);
}
constexpr OpDef unary(std::string_view n, DTypeSet d, BackwardRule bw, ErrorBound b, std::string_view doc,
                      D dom = D::any) {
  return elementwise(op(n, OpFamily::unary, rules::same_as_input, bw, b, doc, T("x", d, G::differentiable, dom)), 1, 0);
}
// (The policy is explicit rather than derived from `bw != nullptr`: comparing a function's address with null is
// not a constant expression for g++ under -fsanitize.)
constexpr OpDef reduction(std::string_view n, DTypeSet d, OutputRule out, BackwardRule bw, ErrorBound b,
                          std::string_view doc, G policy = G::differentiable) {
  return op(n, OpFamily::reduce, out, bw, b, doc, T("x", d, policy), kAxisOpt, kKeepdim);
}
// A creation op whose output is its shape and dtype attributes on its device: rules::creation, which the fast path
// runs in line (see RuleForm::creation).
template <class... P>
constexpr OpDef filled(std::string_view name, std::string_view doc, P... ps) {
  OpDef d = op(name, OpFamily::creation, rules::creation, nullptr, kExact, doc, ps...);
  if (d.param_with_role(R::int_list_attr) < 0 || d.param_with_role(R::dtype_attr) < 0 || d.param_with_role(R::device_attr) < 0)
    throw "op_table: a filled tensor's op has shape, dtype and device attributes";
  d.form.kind = RuleForm::creation;
  return d;
}
}  // namespace op_table_detail

// clang-format off
inline constexpr auto kOpTable = [] {
  using namespace op_table_detail;
  namespace bw = backward_rules;
  return std::array{
    // ---- creation: the target is the explicit `device` argument ------------------------------------------------
    filled("zeros", "A tensor of zeros.", kShape, kDTypeAttr, kDeviceAttr),
    filled("ones", "A tensor of ones.", kShape, kDTypeAttr, kDeviceAttr),
    filled("full", "A tensor filled with `value` (cast to dtype).", kShape, Attr("value", R::float_attr), kDTypeAttr,
           kDeviceAttr),
    op("arange", OpFamily::creation, rules::arange, nullptr, kExact,
       "start, start+step, ... below stop (above, for a negative step); element i is computed as start + i*step in f64.",
       Attr("start", R::float_attr), Attr("stop", R::float_attr), Attr("step", R::float_attr), DTypeAttr(kNumeric),
       kDeviceAttr),
    op("from_data", OpFamily::creation, rules::from_data, nullptr, kExact,
       "A tensor holding `data` (raw little-endian values of dtype; bool is one byte 0/1).",
       Attr("data", R::bytes_attr), kShape, kDTypeAttr, kDeviceAttr),
    op("rand", OpFamily::creation, rules::random, nullptr, kExact,
       "Uniform in [0, 1) of float dtype (f32, f16, bf16) from Philox4x32-10 (Salmon et al. 2011): element i takes "
       "word i%4 of the block for counter (lo32(i/4), hi32(i/4), 0, 0) and key (lo32(seed), hi32(seed)); value = "
       "(word >> (32 - p)) * 2^-p with p the dtype's precision (24, 11, 8 bits): the same stream's top bits, exact "
       "in the dtype and below 1. Bit-identical on every backend.",
       kShape, Attr("seed", R::int_attr), DTypeAttr(kFloat), kDeviceAttr),
    op("randn", OpFamily::creation, rules::random, nullptr, kTranscendental,
       "Standard normal of float dtype (f32, f16, bf16) by Box-Muller on rand's Philox words w (every dtype draws "
       "the same values): elements 2j and 2j+1 use u1 = ((w[2j] >> 8) + 0.5) * 2^-24 and u2 = (w[2j+1] >> 8) * "
       "2^-24; r = sqrt(-2 ln u1); out[2j] = r cos(2 pi u2), out[2j+1] = r sin(2 pi u2) (an odd last element takes "
       "the cos), rounded to the dtype.",
       kShape, Attr("seed", R::int_attr), DTypeAttr(kFloat), kDeviceAttr),

    // ---- unary ---------------------------------------------------------------------------------------------------
    unary("neg", kNumeric, bw::neg, kExact, "-x (integers wrap)."),
    piecewise(unary("abs", kNumeric, bw::abs, kExact,
                    "|x| (integers: abs(INT_MIN) wraps to INT_MIN). Gradient: sign(x) * g, 0 at x = 0 and at NaN."),
              Kink::at_zero),
    unary("exp", kFloat, bw::exp, kTranscendental, "e^x."),
    unary("log", kFloat, bw::log, kTranscendental, "Natural log; domain x > 0.", D::positive),
    unary("sqrt", kFloat, bw::sqrt, kOneRounding, "Square root; domain x >= 0.", D::non_negative),
    unary("tanh", kFloat, bw::tanh, kTranscendental, "Hyperbolic tangent."),
    unary("sigmoid", kFloat, bw::sigmoid, kTranscendental, "1 / (1 + e^-x)."),
    piecewise(unary("relu", kFloat, bw::relu, kExact,
                    "x > 0 ? x : 0 (NaN stays NaN). Gradient: g where x > 0, else 0 (also at 0 and at NaN)."),
              Kink::at_zero),
    piecewise(elementwise(op("clamp", OpFamily::unary, rules::same_as_input, bw::clamp, kExact,
       "x limited to [min, max], both rounded to f32 first: min where x < min, else max where x > max, else x (its "
       "bits: -0 stays -0, NaN stays NaN). min > max gives max everywhere; a NaN min or max gives NaN. Gradient: "
       "the upstream gradient where min <= x <= max, else 0.",
       T("x", kFloat), Attr("min", R::float_attr), Attr("max", R::float_attr)), 1, 0), Kink::at_attributes),

    // ---- binary, numpy broadcasting --------------------------------------------------------------------------------
    binary("add", kNumeric, bw::add, kOneRounding, "lhs + rhs (integers wrap)."),
    binary("sub", kNumeric, bw::sub, kOneRounding, "lhs - rhs (integers wrap)."),
    binary("mul", kNumeric, bw::mul, kOneRounding, "lhs * rhs (integers wrap)."),
    binary("div", kFloat, bw::div, kOneRounding, "lhs / rhs; domain rhs != 0.", D::non_zero),
    binary("pow", kFloat, bw::pow, ErrorBound{16, 0, false}, "lhs ^ rhs; domain lhs > 0.", D::any, D::positive),
    piecewise(binary("maximum", kNumeric, bw::maximum, kExact,
              "Elementwise max; NaN if either is NaN. Gradient: all of g to lhs where lhs >= rhs (ties "
              "included), else all to rhs (also where either is NaN); the two gradients add up to g."), Kink::at_ties),
    piecewise(binary("minimum", kNumeric, bw::minimum, kExact,
              "Elementwise min; NaN if either is NaN. Gradient: all of g to lhs where lhs <= rhs (ties "
              "included), else all to rhs (also where either is NaN); the two gradients add up to g."), Kink::at_ties),

    // ---- compare and logic: bool out ----------------------------------------------------------------------------
    compare("eq", kAnyDType, "lhs == rhs."),
    compare("ne", kAnyDType, "lhs != rhs."),
    compare("lt", kNumeric, "lhs < rhs."),
    compare("le", kNumeric, "lhs <= rhs."),
    compare("gt", kNumeric, "lhs > rhs."),
    compare("ge", kNumeric, "lhs >= rhs."),
    elementwise(op("logical_and", OpFamily::binary, rules::broadcast_bool, nullptr, kExact, "lhs && rhs.",
                   T("lhs", kBool, G::constant, D::any, 1), T("rhs", kBool, G::constant, D::any, 1)), 2, -1),
    elementwise(op("logical_or", OpFamily::binary, rules::broadcast_bool, nullptr, kExact, "lhs || rhs.",
                   T("lhs", kBool, G::constant, D::any, 1), T("rhs", kBool, G::constant, D::any, 1)), 2, -1),
    elementwise(op("logical_not", OpFamily::unary, rules::same_as_input, nullptr, kExact, "!x.", T("x", kBool, G::constant)),
                1, 0),

    elementwise(op("where", OpFamily::where, rules::where, bw::where, kExact,
                   "cond ? a : b, all three broadcast. Gradient: g to a where cond, else to b (they add up to g); "
                   "cond is a constant.",
                   T("cond", kBool, G::constant), T("a", kAnyDType, G::differentiable, D::any, 1),
                   T("b", kAnyDType, G::differentiable, D::any, 1)),
                3, 1),
    elementwise(op("cast", OpFamily::cast, rules::cast, nullptr, kExact,
       "Converts to dtype. A float -> i32/i64 truncates toward zero and saturates (NaN -> 0); i64 -> i32 keeps the "
       "low 32 bits; an integer -> float rounds once to nearest even; x -> bool is x != 0. "
       "Not differentiable: a tracked input raises AutodiffError (detach it first), since a silent cast would cut "
       "the gradient.",
       T("x", kAnyDType, G::forbidden), kDTypeAttr),
                1, 1),

    // ---- reductions: over one axis, or all elements when axis is absent --------------------------------------------
    defined_on_empty(reduction("sum", kNumeric, rules::reduce, bw::sum, kReduction, "Sum (integers wrap; empty: 0).")),
    defined_on_empty(reduction("mean", kFloat, rules::reduce, bw::mean, kReduction, "Arithmetic mean (empty: NaN).")),
    piecewise(reduction("max", kNumeric, rules::reduce, bw::max, kExact,
              "Maximum; NaN if any element is NaN; the gradient goes to the first maximal element (argmax's)."),
              Kink::at_repeats),
    reduction("argmax", kNumeric, rules::argmax, nullptr, kExact,
              "i32 index of the first maximal element, or of the first NaN if any (over all elements: the flat index).",
              G::constant),

    op("matmul", OpFamily::matmul, rules::matmul, bw::matmul, kReduction,
       "[..., m, k] x [..., k, n] -> [..., m, n]; both rank >= 2; batch dims broadcast.",
       T("lhs", kFloat, G::differentiable, D::any, 1), T("rhs", kFloat, G::differentiable, D::any, 1)),

    // ---- layout: data movement, bit-exact -----------------------------------------------------------------------
    op("reshape", OpFamily::reshape, rules::reshape, bw::reshape, kExact,
       "Same elements, new shape; one dim may be -1.", T("x", kAnyDType), kShape),
    op("permute", OpFamily::permute, rules::permute, bw::permute, kExact,
       "Reorders axes: out.shape[i] = x.shape[dims[i]].", T("x", kAnyDType), Attr("dims", R::int_list_attr)),
    op("slice", OpFamily::slice, rules::slice, bw::slice, kExact,
       "Per axis, elements start, start+step, ... below stop; 0 <= start <= stop <= dim, step >= 1.",
       T("x", kAnyDType), Attr("starts", R::int_list_attr), Attr("stops", R::int_list_attr),
       Attr("steps", R::int_list_attr)),
    op("expand", OpFamily::expand, rules::expand, bw::expand, kExact,
       "Broadcasts x to `shape` (numpy rules; new leading dims allowed).", T("x", kAnyDType), kShape),
    op("cat", OpFamily::cat, rules::cat, bw::cat, kExact,
       "Concatenates along axis; all tensors share dtype and every other dim.",
       ParamDef{"tensors", R::tensor_list, kAnyDType, 0, G::differentiable, D::any}, kAxis),
    op("index_select", OpFamily::index_select, rules::index_select, bw::index_select, kExact,
       "Picks entries index[j] along axis; index is 1-D i32 or i64 with values in [0, dim). An index out of range is "
       "found by the kernel (it is data, not metadata) and raises InvalidArgument after the output was allocated.",
       T("x", kAnyDType), kAxis, T("index", kInt, G::constant, D::index)),

    // ---- nn --------------------------------------------------------------------------------------------------------
    op("softmax", OpFamily::softmax, rules::softmax, bw::softmax, ErrorBound{8, 1, false},
       "exp(x - max) / sum(exp(x - max)) along axis.", T("x", kFloat), kAxis),
    op("conv2d", OpFamily::conv2d, rules::conv2d, bw::conv2d, kReduction,
       "input [N, C, H, W] * weight [O, C, kh, kw] (+ bias [O]) with stride and zero padding -> [N, O, Ho, Wo]. "
       "Padded positions are real zeros: they contribute 0 * w, so a NaN or infinite weight gives NaN there.",
       T("input", kFloat, G::differentiable, D::any, 1), T("weight", kFloat, G::differentiable, D::any, 1),
       ParamDef{"bias", R::optional_tensor, kFloat, 1, G::differentiable, D::any},
       Attr("stride", R::int_list_attr), Attr("padding", R::int_list_attr)),
    op("unfold", OpFamily::unfold, rules::unfold, bw::unfold, kExact,
       "im2col: [N, C, H, W] -> [N, C*kh*kw, L] patches (zero padding); row c*kh*kw + i*kw + j.",
       T("input", kFloat), Attr("kernel", R::int_list_attr), Attr("stride", R::int_list_attr),
       Attr("padding", R::int_list_attr)),
    op("fold", OpFamily::fold, rules::fold, bw::fold, kReduction,
       "col2im, unfold's adjoint: sums [N, C*kh*kw, L] patches into [N, C, H, W].",
       T("input", kFloat), Attr("output_size", R::int_list_attr), Attr("kernel", R::int_list_attr),
       Attr("stride", R::int_list_attr), Attr("padding", R::int_list_attr)),

    // ---- transfer ----------------------------------------------------------------------------------------------------
    op("to", OpFamily::transfer, rules::to, bw::to, kExact,
       "Copies x to `device` (the only op whose output lives elsewhere than its target); differentiable.",
       T("x", kAnyDType), kDeviceAttr),
  };
}();
// clang-format on

inline constexpr int kNumOps = int(kOpTable.size());

// The id of an op by name, at compile time: `constexpr OpId kAdd = op_id("add");` A misspelt name fails to compile.
consteval OpId op_id(std::string_view name) {
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (kOpTable[i].name == name) return OpId(i);
  throw "crossfire::op_id: no such op in kOpTable";
}
// The same at run time (program files, command lines); returns -1 when there is no such op.
int find_op(std::string_view name);

// Note [Coverage checks that name the op]
// A per-op list kept beside the table (a backend's op codes, a registration list) is checked against the table at
// compile time, and the failure names the op: every_op_passes<Check, covered>() instantiates Check<name, covered(op)>
// for every op, where Check is a class template that static_asserts its second argument, so the instantiation
// that fails carries the op's name (OpName). g++ prints e.g. `In instantiation of 'struct vulkan_op_code_for<
// crossfire::OpName<4>{"relu"}, false>'` (clang prints the name's character codes). Usage:
//   template <auto Name, bool ok> struct my_list_has { static_assert(ok, "..."); static constexpr bool value = ok; };
//   constexpr bool listed(const OpDef& op) { ... }
//   static_assert(every_op_passes<my_list_has, listed>());
template <size_t N>
struct OpName {
  char name[N + 1]{};
  consteval OpName(std::string_view v) {
    for (size_t i = 0; i < N; ++i) name[i] = v[i];
  }
};
template <size_t I>
consteval auto op_name_at() {
  constexpr std::string_view name = kOpTable[I].name;
  return OpName<name.size()>(name);
}
template <template <auto, bool> class Check, bool (*covered)(const OpDef&), size_t... I>
consteval bool every_op_passes(std::index_sequence<I...>) {
  return (Check<op_name_at<I>(), covered(kOpTable[I])>::value && ...);
}
template <template <auto, bool> class Check, bool (*covered)(const OpDef&)>
consteval bool every_op_passes() {
  return every_op_passes<Check, covered>(std::make_index_sequence<kOpTable.size()>{});
}
inline const OpDef& op_def(OpId id) { return kOpTable[id]; }

// Flattened input slots: one per tensor input in signature order, list elements expanded, absent optionals
// skipped. Autodiff and the harness number gradients this way.
int count_input_slots(const OpDef& op, const ArgPack& args);

}  // namespace crossfire
