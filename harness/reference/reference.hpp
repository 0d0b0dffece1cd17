// SPDX-License-Identifier: Apache-2.0
// The f64 reference evaluator: every op of the op table computed with plain loops in double precision on host
// values. It shares no code with any backend's kernels (it is what they are checked against) and none with the
// op table's output rules: it reads only the op table's metadata (names, parameters, accepted dtypes) and works out
// every output shape itself, so a wrong output rule and a wrong kernel both show up as a disagreement. Tests use it
// for expected values; the harness's agreement and gradient oracles use it as their exact model (contract
// section 6).
//
// Note [What the reference computes]
// The semantics are the op table's doc strings, read literally:
// - i32 and i64 add/sub/mul/neg/abs/sum wrap two's complement (computed modulo 2^64, then narrowed); a float cast
//   (and `full`/`arange`) into i32 or i64 truncates toward zero, saturates at the dtype's INT_MIN/INT_MAX and sends
//   NaN to 0; i64 -> i32 keeps the low 32 bits; i64 -> a float dtype rounds the exact integer once; anything ->
//   bool is x != 0 (so NaN -> true). Note [64-bit integers] in device.hpp.
// - maximum/minimum/max propagate NaN; argmax is the first maximal element, or the first NaN if there is one;
//   relu(NaN) = NaN; compares follow IEEE (NaN == NaN is false, NaN != NaN is true).
// - mean of zero elements is 0/0 = NaN; sum of zero elements is 0.
// - f32 results of bitwise ops (creation, data movement, cast, where, maximum, ...) are the f64 value rounded to
//   nearest f32 once, so they compare exactly; every other float result is the exact f64 value (not rounded).
// - rand/randn use Philox4x32-10 as the doc string specifies; randn's u1 = ((w >> 8) + 0.5) * 2^-24 needs 25
//   significant bits, so it is evaluated in f64 exactly as written (a kernel that forms u1 in f32 rounds it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::reference {

// A host tensor in f64. i32 and bool values are held exactly (bool as 0.0 / 1.0). An i64 value need not be an f64
// one (2^53 + 1 is not), so an i64 tensor holds its exact values in `ints` too, and `values` holds each of them
// rounded to f64 (for magnitudes and messages); every other dtype leaves `ints` empty. Whatever computes or
// compares i64 reads `ints` (int_at).
struct RefTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> values;  // row-major, shape.numel() entries
  std::vector<int64_t> ints = {};  // i64 only: the exact values, row-major

  static RefTensor from(const Tensor& t);  // reads a device tensor (f32 widened exactly)
  // An i64 tensor from its exact values (values filled from them).
  static RefTensor of_i64(const Shape& shape, std::vector<int64_t> ints);
  int64_t numel() const { return shape.numel(); }
  // Element i as an exact integer: i64 from `ints`, i32 and bool from `values` (exact there).
  int64_t int_at(size_t i) const { return dtype == DType::i64 ? ints[i] : int64_t(values[i]); }
};

// One argument of a reference call, mirroring ParamRole.
struct RefAbsent {};
using RefArg = std::variant<RefTensor,               // tensor, present optional_tensor
                            RefAbsent,               // absent optional_tensor / optional_int_attr
                            std::vector<RefTensor>,  // tensor_list
                            int64_t,                 // int_attr, present optional_int_attr
                            double,                  // float_attr
                            bool,                    // bool_attr
                            std::vector<int64_t>,    // int_list_attr
                            DType,                   // dtype_attr
                            Device,                  // device_attr
                            std::vector<uint8_t>>;   // bytes_attr

struct RefCall {
  OpId op;
  std::vector<RefArg> args;  // in signature order

  // Mirrors a dispatch call: reads every tensor argument to the host.
  static RefCall from(OpId op, const ArgPack& args);
};

// The exact result and, per element, the magnitude and term count that contract section 6's bound needs.
// For float results: `magnitude` is the f64 sum of |terms| that formed the element (|a|+|b| for add/sub, |a*b| for
// mul, |a/b| for div, sum |a_i*b_i| for matmul and conv2d (+|bias|), sum |x_i| for sum/fold, sum |x_i| / n for
// mean, |exact| for unary transcendentals and pow), and `terms` the number of terms summed (1 for elementwise ops;
// the reduction length for sum/mean/matmul/softmax; C*kh*kw, + 1 with a bias, for conv2d, padded positions
// included; for fold, how many patch entries land on the element, 0 or more). docs/contract.md, "Magnitude and
// terms, op by op", has the table. Two ops need a word more:
// - softmax: magnitude = p_i * (1 + |x_i - m| + sum_j p_j |x_j - m|), m the max: an f32 kernel rounds each
//   x_j - m before exp, which moves exp(x_j - m) by up to eps*|x_j - m| relatively; terms = the axis length.
// - randn: magnitude = r * (1 + 2*pi*u2), r the Box-Muller radius: any f32 evaluation rounds the angle 2*pi*u2,
//   which moves cos/sin by up to eps*2*pi*u2 absolutely, however small the result is.
// For bitwise results (integer, bool, data movement) magnitude is |value| and terms is 0 (the f32 results of neg,
// abs, relu, maximum and minimum, which share the elementwise path, carry terms 1); their allowed error is 0
// either way: they compare exactly.
struct RefResult {
  RefTensor value;
  std::vector<double> magnitude;
  std::vector<int64_t> terms;
};
// Vectors of these grow by moving their elements, never by copying their data (Shape's copy is noexcept).
static_assert(std::is_nothrow_move_constructible_v<RefTensor> && std::is_nothrow_move_constructible_v<RefResult>);

// Evaluates one op. Shapes are worked out here, independently of the op table's output rules. A call the
// evaluator cannot evaluate (a wrong kind of argument, a dtype the op does not accept, an invalid shape or
// attribute, an index out of range) raises InvalidArgument naming the op and the parameter; oracles feed it valid
// calls.
RefResult evaluate(const RefCall& call);

// Note [The bound, and the rounding of the output]
// A float element passes when
//   |got - exact| <= (k_const + k_per_term * terms + 1) * eps * magnitude + tiny,   eps = 2^-23.
// (k_const + k_per_term * terms) is the op's own rounding errors (contract section 6). The "+ 1" is one extra eps
// for the single rounding of the result to f32: `exact` is the unrounded f64 value, so even a perfect kernel is up
// to half an ulp of |exact| from it, and an op whose k counts only its internal steps (or a backend that rounds
// toward zero when it stores) would otherwise fail by that rounding alone. It is charged against `magnitude`, not
// |exact|, because every magnitude here is >= |exact| (a sum of |terms| bounds |their sum|; the ops with a
// conditioning-based magnitude are built so too; the forward tests check it on every element), so the bound needs
// nothing but (magnitude, terms) and stays a function of what RefResult carries. `tiny` (default: the smallest
// normal f32) absorbs results in the subnormal range, which a backend may flush to zero.
// NaN must match NaN. An infinity must match an infinity of the same sign, except that a finite exact value whose
// f32 rounding (allowing the bound) overflows may come back as the infinity of its sign.
// Bitwise ops (bound.bitwise) compare by value exactly: NaN matches NaN (any payload) and +0 matches -0, since
// maximum/minimum of +0 and -0 are not pinned down by the op table. Integer and bool outputs of any op must
// compare exactly too: use compares_bitwise() to pick (first_mismatch() does). first_mismatch() holds data
// movement (moves_data() in op_table.hpp) to more: the same bits, so -0 is not +0 and a NaN keeps its payload.
bool within_bound(const ErrorBound& bound, double got, double exact, double magnitude, int64_t terms,
                  double tiny = 1.1754943508222875e-38);
double allowed_error(const ErrorBound& bound, double magnitude, int64_t terms, double tiny = 1.1754943508222875e-38);

// The same for an element of dtype dt: f32 as above; f16 and bf16 (Note [Half precision] in device.hpp) charge the
// op's own k at f32's eps and one rounding at the dtype's eps: (k_const + k_per_term * terms) * 2^-23 * magnitude
// + eps_dt * magnitude + tiny_dt, with eps 2^-10 (f16) or 2^-7 (bf16) and tiny the dtype's smallest normal; an
// infinite result is allowed where the exact one reaches the dtype's overflow threshold. `accumulates_in_dtype`:
// the backend declares that the op rounds its partial results to the dtype (Backend::accumulates_in_dtype), so all
// of k is charged at the dtype's eps, and a sum whose magnitude passes the dtype's range may give anything.
bool within_bound(const ErrorBound& bound, DType dt, double got, double exact, double magnitude, int64_t terms,
                  bool accumulates_in_dtype = false);
double allowed_error(const ErrorBound& bound, DType dt, double magnitude, int64_t terms,
                     bool accumulates_in_dtype = false);

// A float dtype's constants: eps (2^(1 - precision)), the smallest |x| that rounds to infinity, the smallest
// normal, the precision in bits and the smallest normal exponent.
struct FloatFormat {
  double eps, overflow, tiny;
  int precision, min_exponent;
};
FloatFormat float_format(DType dt);  // f32 for any non-float dtype
// v rounded to nearest (ties to even) in float dtype dt, past its range: the infinity of its sign.
double round_to(double v, DType dt);
// The value of an f16 or bf16 bit pattern (the reference's own decoder: it shares no code with the kernels). A NaN
// keeps its sign and payload (Note [Half NaNs keep their payload]).
double half_value(uint16_t bits, DType dt);
// The bits of an f16/bf16 value: v must be one (round it with round_to first). A NaN keeps its sign and the top of
// its payload, the bits that half_value() put there (a NaN whose kept payload would be 0 becomes the quiet NaN
// 0x7e00 or 0x7fc0 with v's sign).
uint16_t half_bits(double v, DType dt);
// The same from an f32's bits that hold a value of dt (a program's f16/bf16 input): a NaN's bits move as bits, so a
// signalling one stays one (going through a double would quiet it).
uint16_t half_bits_of_f32(uint32_t f32_bits, DType dt);

// Whether an output element of `op` with dtype `dt` must match exactly.
inline bool compares_bitwise(const OpDef& op, DType dt) { return op.bound.bitwise || !is_float(dt); }
// The bound an output of `op` with dtype `dt` is held to: exact when compares_bitwise(), else the op's.
inline ErrorBound bound_for(const OpDef& op, DType dt) {
  return compares_bitwise(op, dt) ? ErrorBound{0, 0, true} : op.bound;
}

// The first disagreement between a backend's result and the reference, for reports: element `index` (-1 when the
// dtype or shape already differ, explained in `what`), both values and the allowed error.
struct Mismatch {
  int64_t index = -1;
  double got = 0, exact = 0, allowed = 0;
  std::string what;  // one line: "element 3: got 1.5, exact 1.25, allowed 2.9e-07 (magnitude 2.5, 1 term)"
};
std::optional<Mismatch> first_mismatch(const OpDef& op, const RefResult& expected, const RefTensor& got,
                                       bool accumulates_in_dtype = false);

// Note [The f64 derivative of a node]
// vjp() differentiates one op in f64: given a call (its inputs, read as they are) and an upstream gradient u of the
// output's shape, it gives the gradient of sum(u * op(inputs)) with respect to each tensor argument, in slots: one
// per tensor argument in signature order, list elements expanded, absent optionals skipped (as autodiff numbers
// them); nullopt for a parameter that is not differentiable (where's cond, index_select's index). Where an op's
// derivative jumps, it follows the convention the op's doc string states in the op table ("Gradient: ..."): relu
// and abs give 0 at 0; maximum sends a tie to lhs and minimum too (ge / le), and a NaN on either side to rhs;
// max sends u to the first maximal element, argmax's; clamp passes u where min <= x <= max, both ends included.
// Each gradient element carries the magnitude and term count of the bound (Note [The bound, and the rounding of
// the output]) for `bound`: how far an f32 backward rule, evaluated from the same inputs and its forward output,
// may lie from the exact value. An elementwise term whose derivative factor (or an intermediate an f32 formula
// forms, like div's l / r) is past f32's range has magnitude +inf: an f32 evaluation meets an infinity there while
// the exact term may fit, so any finite value or the infinity of the term's sign passes (NaN does not). The
// gradient oracle judges every backward rule on every device this way, at that
// device's own forward values (the agreement oracle's principle), and runs reverse mode in f64 with it.
// Raises InvalidArgument for a call the evaluator rejects, an op that is not differentiable, or a u of the wrong
// shape.
struct RefVjp {
  ErrorBound bound;
  std::vector<std::optional<RefResult>> grads;  // per slot
  bool conserves = false;  // every upstream element goes whole to one slot, so the gradients add up to sum(u)
};
RefVjp vjp(const RefCall& call, const RefTensor& upstream);
// Whether a backward rule's gradient element of dtype dt is within `bound` of the exact one. f32: within_bound().
// f16/bf16: a backward rule chains several ops, each rounding its result to the dtype, so every rounding is
// charged at the dtype's eps: (k_const + k_per_term * terms + 1) * eps_dt * magnitude + tiny_dt, with the same
// NaN, infinity and overflow rules at the dtype's range (a sum whose magnitude passes the dtype's largest value may
// give anything, since its partial sums are stored in the dtype).
bool within_vjp_bound(const ErrorBound& bound, DType dt, double got, double exact, double magnitude, int64_t terms);
double vjp_allowed_error(const ErrorBound& bound, DType dt, double magnitude, int64_t terms);
bool has_vjp(OpId op);  // whether the op is differentiable (has a derivative here)

// Philox4x32-10 (Salmon et al. 2011), written here from the paper so that rand/randn are checked against an
// independent generator: ten rounds, multipliers 0xD2511F53 / 0xCD9E8D57, key increments 0x9E3779B9 / 0xBB67AE85.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// Word i of rand's stream for `seed` (op table: word i%4 of the block for counter (lo32(i/4), hi32(i/4), 0, 0)).
uint32_t philox_word(int64_t seed, int64_t i);

// Ops of kOpTable that have no evaluator, and evaluator names that are no op (both empty in a healthy build; a
// static_assert in reference.cpp already refuses to compile otherwise, and a test checks it too).
std::vector<std::string> evaluator_table_problems();

}  // namespace crossfire::reference
