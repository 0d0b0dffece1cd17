// SPDX-License-Identifier: Apache-2.0
// The typed public API: one inline function per op, each building an ArgPack on the stack (in place: see
// Note [Arguments are built in place] in args.hpp) and calling dispatch.
// These are conveniences; the op table stays the single declaration of every op (contract section 2).
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "crossfire/dispatch.hpp"

namespace crossfire {

#define CROSSFIRE_OP(name) constexpr OpId name##_id = op_id(#name)
namespace ids {
CROSSFIRE_OP(zeros); CROSSFIRE_OP(ones); CROSSFIRE_OP(full); CROSSFIRE_OP(arange); CROSSFIRE_OP(from_data);
CROSSFIRE_OP(rand); CROSSFIRE_OP(randn);
CROSSFIRE_OP(neg); CROSSFIRE_OP(abs); CROSSFIRE_OP(exp); CROSSFIRE_OP(log); CROSSFIRE_OP(sqrt);
CROSSFIRE_OP(tanh); CROSSFIRE_OP(sigmoid); CROSSFIRE_OP(relu); CROSSFIRE_OP(clamp);
CROSSFIRE_OP(add); CROSSFIRE_OP(sub); CROSSFIRE_OP(mul); CROSSFIRE_OP(div); CROSSFIRE_OP(pow);
CROSSFIRE_OP(maximum); CROSSFIRE_OP(minimum);
CROSSFIRE_OP(eq); CROSSFIRE_OP(ne); CROSSFIRE_OP(lt); CROSSFIRE_OP(le); CROSSFIRE_OP(gt); CROSSFIRE_OP(ge);
CROSSFIRE_OP(logical_and); CROSSFIRE_OP(logical_or); CROSSFIRE_OP(logical_not);
CROSSFIRE_OP(where); CROSSFIRE_OP(cast);
CROSSFIRE_OP(sum); CROSSFIRE_OP(mean); CROSSFIRE_OP(max); CROSSFIRE_OP(argmax);
CROSSFIRE_OP(matmul);
CROSSFIRE_OP(reshape); CROSSFIRE_OP(permute); CROSSFIRE_OP(slice); CROSSFIRE_OP(expand); CROSSFIRE_OP(cat);
CROSSFIRE_OP(index_select);
CROSSFIRE_OP(softmax); CROSSFIRE_OP(conv2d); CROSSFIRE_OP(unfold); CROSSFIRE_OP(fold);
CROSSFIRE_OP(to);
}  // namespace ids
#undef CROSSFIRE_OP

// ---- creation ----
inline Tensor zeros(IntList shape, DType dt, Device d) {
  return detail::call_in_table(ids::zeros_id, ArgPack().of(shape).of(dt).of(d));
}
inline Tensor ones(IntList shape, DType dt, Device d) {
  return detail::call_in_table(ids::ones_id, ArgPack().of(shape).of(dt).of(d));
}
inline Tensor full(IntList shape, double value, DType dt, Device d) {
  return detail::call_in_table(ids::full_id, ArgPack().of(shape).scalar(value).of(dt).of(d));
}
inline Tensor arange(double start, double stop, double step, DType dt, Device d) {
  return detail::call_in_table(ids::arange_id, ArgPack().scalar(start).scalar(stop).scalar(step).of(dt).of(d));
}
inline Tensor from_bytes(std::span<const uint8_t> data, IntList shape, DType dt, Device d) {
  return detail::call_in_table(ids::from_data_id, ArgPack().of(data).of(shape).of(dt).of(d));
}
inline Tensor from_data(std::span<const float> v, IntList shape, Device d) {
  return from_bytes({reinterpret_cast<const uint8_t*>(v.data()), v.size_bytes()}, shape, DType::f32, d);
}
inline Tensor from_data(std::span<const int32_t> v, IntList shape, Device d) {
  return from_bytes({reinterpret_cast<const uint8_t*>(v.data()), v.size_bytes()}, shape, DType::i32, d);
}
inline Tensor from_data(std::span<const int64_t> v, IntList shape, Device d) {
  return from_bytes({reinterpret_cast<const uint8_t*>(v.data()), v.size_bytes()}, shape, DType::i64, d);
}
inline Tensor from_bool(std::span<const uint8_t> v, IntList shape, Device d) {
  return from_bytes(v, shape, DType::boolean, d);
}
inline Tensor from_data(std::initializer_list<float> v, std::initializer_list<int64_t> shape, Device d) {
  return from_data(std::span<const float>(v.begin(), v.size()), IntList(shape), d);
}
inline Tensor rand(IntList shape, int64_t seed, Device d, DType dt = DType::f32) {
  return detail::call_in_table(ids::rand_id, ArgPack().of(shape).integer(seed).of(dt).of(d));
}
inline Tensor randn(IntList shape, int64_t seed, Device d, DType dt = DType::f32) {
  return detail::call_in_table(ids::randn_id, ArgPack().of(shape).integer(seed).of(dt).of(d));
}
inline Tensor scalar(double v, Device d, DType dt = DType::f32) { return full({}, v, dt, d); }

// ---- unary ----
#define CROSSFIRE_UNARY(name) \
  inline Tensor name(const Tensor& x) { return detail::call_in_table(ids::name##_id, ArgPack().of(x)); }
CROSSFIRE_UNARY(neg) CROSSFIRE_UNARY(abs) CROSSFIRE_UNARY(exp) CROSSFIRE_UNARY(log) CROSSFIRE_UNARY(sqrt)
CROSSFIRE_UNARY(tanh) CROSSFIRE_UNARY(sigmoid) CROSSFIRE_UNARY(relu) CROSSFIRE_UNARY(logical_not)
#undef CROSSFIRE_UNARY
inline Tensor clamp(const Tensor& x, double min, double max) {
  return detail::call_in_table(ids::clamp_id, ArgPack().of(x).scalar(min).scalar(max));
}

// ---- binary / compare / logic ----
#define CROSSFIRE_BINARY(name)                                               \
  inline Tensor name(const Tensor& lhs, const Tensor& rhs) {                 \
    return detail::call_in_table(ids::name##_id, ArgPack().of(lhs).of(rhs)); \
  }
CROSSFIRE_BINARY(add) CROSSFIRE_BINARY(sub) CROSSFIRE_BINARY(mul) CROSSFIRE_BINARY(div) CROSSFIRE_BINARY(pow)
CROSSFIRE_BINARY(maximum) CROSSFIRE_BINARY(minimum)
CROSSFIRE_BINARY(eq) CROSSFIRE_BINARY(ne) CROSSFIRE_BINARY(lt) CROSSFIRE_BINARY(le) CROSSFIRE_BINARY(gt)
CROSSFIRE_BINARY(ge) CROSSFIRE_BINARY(logical_and) CROSSFIRE_BINARY(logical_or)
CROSSFIRE_BINARY(matmul)
#undef CROSSFIRE_BINARY

inline Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return detail::call_in_table(ids::where_id, ArgPack().of(cond).of(a).of(b));
}
inline Tensor cast(const Tensor& x, DType dt) { return detail::call_in_table(ids::cast_id, ArgPack().of(x).of(dt)); }

// ---- reductions: axis absent (std::nullopt) means all elements ----
#define CROSSFIRE_REDUCE(name)                                                                            \
  inline Tensor name(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdim = false) { \
    return detail::call_in_table(ids::name##_id,                                                          \
                ArgPack().of(x).optional_integer(axis.has_value(), axis.value_or(0)).flag(keepdim));      \
  }
CROSSFIRE_REDUCE(sum) CROSSFIRE_REDUCE(mean) CROSSFIRE_REDUCE(max) CROSSFIRE_REDUCE(argmax)
#undef CROSSFIRE_REDUCE

// ---- layout ----
inline Tensor reshape(const Tensor& x, IntList shape) {
  return detail::call_in_table(ids::reshape_id, ArgPack().of(x).of(shape));
}
inline Tensor permute(const Tensor& x, IntList dims) {
  return detail::call_in_table(ids::permute_id, ArgPack().of(x).of(dims));
}
inline Tensor slice(const Tensor& x, IntList starts, IntList stops, IntList steps) {
  return detail::call_in_table(ids::slice_id, ArgPack().of(x).of(starts).of(stops).of(steps));
}
inline Tensor expand(const Tensor& x, IntList shape) {
  return detail::call_in_table(ids::expand_id, ArgPack().of(x).of(shape));
}
inline Tensor cat(std::span<const Tensor> tensors, int64_t axis) {
  return detail::call_in_table(ids::cat_id, ArgPack().of(tensors).integer(axis));
}
inline Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  return detail::call_in_table(ids::index_select_id, ArgPack().of(x).integer(axis).of(index));
}

// ---- nn ----
inline Tensor softmax(const Tensor& x, int64_t axis) {
  return detail::call_in_table(ids::softmax_id, ArgPack().of(x).integer(axis));
}
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor* bias, IntList stride, IntList padding) {
  return detail::call_in_table(ids::conv2d_id, ArgPack().of(input).of(weight).optional(bias).of(stride).of(padding));
}
inline Tensor unfold(const Tensor& input, IntList kernel, IntList stride, IntList padding) {
  return detail::call_in_table(ids::unfold_id, ArgPack().of(input).of(kernel).of(stride).of(padding));
}
inline Tensor fold(const Tensor& input, IntList output_size, IntList kernel, IntList stride, IntList padding) {
  return detail::call_in_table(ids::fold_id, ArgPack().of(input).of(output_size).of(kernel).of(stride).of(padding));
}

// ---- transfer ----
inline Tensor to(const Tensor& x, Device d) { return detail::call_in_table(ids::to_id, ArgPack().of(x).of(d)); }

}  // namespace crossfire
