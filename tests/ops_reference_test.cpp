// SPDX-License-Identifier: Apache-2.0
// The reference evaluator's own tests: its table covers kOpTable, Philox matches the published known answers, the
// bound behaves as reference.hpp's Note [The bound, and the rounding of the output] says, and bad calls raise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops_cases.hpp"
#include "reference/reference.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::testing::ops {
namespace {

namespace ref = crossfire::reference;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Reference, EveryOpHasAnEvaluator) {
  std::vector<std::string> problems = ref::evaluator_table_problems();
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// Known-answer vectors of Philox4x32-10 from Random123's kat_vectors (Salmon et al. 2011).
TEST(Reference, PhiloxKnownAnswers) {
  using W = std::array<uint32_t, 4>;
  EXPECT_EQ(ref::philox4x32_10({0, 0, 0, 0}, {0, 0}), (W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(ref::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(ref::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Reference, PhiloxWordLayout) {
  // Element i takes word i%4 of the block for counter (lo32(i/4), hi32(i/4), 0, 0), key (lo32(seed), hi32(seed)).
  int64_t seed = (int64_t(7) << 32) | 5;
  auto block1 = ref::philox4x32_10({1, 0, 0, 0}, {5, 7});
  EXPECT_EQ(ref::philox_word(seed, 6), block1[2]);
  auto high = ref::philox4x32_10({0, 1, 0, 0}, {0xffffffff, 0xffffffff});
  EXPECT_EQ(ref::philox_word(-1, (int64_t(1) << 34) + 3), high[3]);
}

TEST(Reference, BoundNaNAndInfinity) {
  ErrorBound add{1, 0, false};
  EXPECT_TRUE(ref::within_bound(add, kNaN, kNaN, 0, 1));
  EXPECT_FALSE(ref::within_bound(add, 1.0, kNaN, 0, 1));
  EXPECT_FALSE(ref::within_bound(add, kNaN, 1.0, 1, 1));
  EXPECT_TRUE(ref::within_bound(add, kInf, kInf, kInf, 1));
  EXPECT_FALSE(ref::within_bound(add, -kInf, kInf, kInf, 1));
  EXPECT_FALSE(ref::within_bound(add, 3.4e38, kInf, kInf, 1));
  // 3e38 + 3e38 is finite in f64 but overflows f32: the f32 result is +inf, never -inf or a finite number.
  EXPECT_TRUE(ref::within_bound(add, kInf, 6e38, 6e38, 1));
  EXPECT_FALSE(ref::within_bound(add, -kInf, 6e38, 6e38, 1));
  EXPECT_FALSE(ref::within_bound(add, kInf, 1e38, 2e38, 1));
}

// Accumulation declared in the half dtype (Backend::set_accumulates_in_dtype): every rounding is charged at the
// dtype's eps, and a sum past the dtype's range may give anything. The numbers are ATen's bf16 matmul finding:
// exact 556,336, got 561,152, magnitude 562,672, 4 terms.
TEST(Reference, DeclaredHalfAccumulationWidensTheBound) {
  const ErrorBound mm{2, 1, false};
  EXPECT_FALSE(ref::within_bound(mm, DType::bf16, 561152, 556336, 562672, 4));
  EXPECT_TRUE(ref::within_bound(mm, DType::bf16, 561152, 556336, 562672, 4, true));
  EXPECT_FALSE(ref::within_bound(mm, DType::bf16, 600000, 556336, 562672, 4, true));
  EXPECT_EQ(ref::allowed_error(mm, DType::f32, 1.0, 4, true), ref::allowed_error(mm, DType::f32, 1.0, 4));
  // (2 + 4 + 1) * 2^-7 * 562672 + 2^-126.
  EXPECT_DOUBLE_EQ(ref::allowed_error(mm, DType::bf16, 562672, 4, true), 7 * 0x1p-7 * 562672 + 0x1p-126);
  EXPECT_TRUE(ref::within_bound(mm, DType::f16, kInf, 1000, 70000, 4, true));
  EXPECT_FALSE(ref::within_bound(mm, DType::f16, kInf, 1000, 70000, 4));
}

TEST(Reference, BoundScalesWithMagnitudeAndTerms) {
  ErrorBound add{1, 0, false}, sum{2, 1, false};
  // 1 + 2^-24 rounds to 1 in f32: within one rounding of |a|+|b| = 2.
  EXPECT_TRUE(ref::within_bound(add, 1.0, 1.0 + 0x1p-24, 1.0 + 0x1p-24, 1));
  EXPECT_FALSE(ref::within_bound(add, 1.0 + 0x1p-20, 1.0, 1.0, 1));
  // Cancellation: exact 0 from 1e8 - 1e8 may be off by about eps * 2e8.
  EXPECT_TRUE(ref::within_bound(add, 8.0, 0.0, 2e8, 1));
  EXPECT_FALSE(ref::within_bound(add, 64.0, 0.0, 2e8, 1));
  // A sum of 1000 terms may drift by (2 + 1000 + 1) eps * magnitude.
  EXPECT_TRUE(ref::within_bound(sum, 1000.0 + 1000 * 0x1p-23 * 1000, 1000.0, 1000.0, 1000));
  EXPECT_FALSE(ref::within_bound(sum, 1000.0 + 2000 * 0x1p-23 * 1000, 1000.0, 1000.0, 1000));
  // The rounding of the output to f32 is allowed even with k = 0 (Note [The bound, and the rounding of the output]).
  ErrorBound none{0, 0, false};
  EXPECT_TRUE(ref::within_bound(none, double(float(1.0 / 3.0)), 1.0 / 3.0, 1.0 / 3.0, 1));
  EXPECT_FALSE(ref::within_bound(none, 1.0 / 3.0 + 0x1p-22, 1.0 / 3.0, 1.0 / 3.0, 1));
  // tiny absorbs a flushed subnormal.
  EXPECT_TRUE(ref::within_bound(add, 0.0, 1e-40, 1e-40, 1));
}

TEST(Reference, BitwiseComparesValues) {
  ErrorBound exact{0, 0, true};
  EXPECT_TRUE(ref::within_bound(exact, 1.5, 1.5, 0, 0));
  EXPECT_FALSE(ref::within_bound(exact, 1.5, 1.5 + 0x1p-20, 0, 0));
  EXPECT_TRUE(ref::within_bound(exact, kNaN, kNaN, 0, 0));
  EXPECT_TRUE(ref::within_bound(exact, -0.0, 0.0, 0, 0));
  EXPECT_EQ(ref::allowed_error(exact, 5, 1), 0.0);
}

// Contract section 6: data movement is bit for bit. A backend that turns -0 into +0 or changes a NaN's payload while
// copying is wrong (first_mismatch() used to compare values, where -0 == +0 and every NaN matches every NaN);
// other exact ops keep comparing values (maximum's choice between +0 and -0 is not pinned down).
TEST(Reference, DataMovementComparesBits) {
  auto with_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return double(f);
  };
  const double nan_a = with_bits(0x7fc00001u), nan_b = with_bits(0x7fc00002u);
  const ref::RefTensor x{DType::f32, Shape{3}, {-0.0, nan_a, 1.5}};
  const ref::RefResult moved = ref::evaluate({ids::reshape_id, {x, std::vector<int64_t>{3}}});
  const OpDef& reshape = op_def(ids::reshape_id);
  EXPECT_FALSE(ref::first_mismatch(reshape, moved, ref::RefTensor{DType::f32, Shape{3}, {-0.0, nan_a, 1.5}}));
  auto zero = ref::first_mismatch(reshape, moved, ref::RefTensor{DType::f32, Shape{3}, {0.0, nan_a, 1.5}});
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->index, 0);
  EXPECT_NE(zero->what.find("0x80000000"), std::string::npos) << zero->what;
  auto payload = ref::first_mismatch(reshape, moved, ref::RefTensor{DType::f32, Shape{3}, {-0.0, nan_b, 1.5}});
  ASSERT_TRUE(payload);
  EXPECT_EQ(payload->index, 1);
  // maximum(+0, -0): either zero is right; two NaNs' maximum is some NaN.
  const ref::RefTensor z{DType::f32, Shape{2}, {0.0, nan_a}}, nz{DType::f32, Shape{2}, {-0.0, nan_b}};
  const ref::RefResult mx = ref::evaluate({ids::maximum_id, {z, nz}});
  EXPECT_FALSE(ref::first_mismatch(op_def(ids::maximum_id), mx, ref::RefTensor{DType::f32, Shape{2}, {-0.0, nan_b}}));
  EXPECT_FALSE(ref::first_mismatch(op_def(ids::maximum_id), mx, ref::RefTensor{DType::f32, Shape{2}, {0.0, nan_a}}));
}

TEST(Reference, RejectsBadCalls) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  // A dtype the op does not accept, mixed dtypes in a same-dtype group, a wrong argument count.
  ref::RefTensor i{DType::i32, Shape{2}, {1, 2}}, f{DType::f32, Shape{2}, {1, 2}}, b{DType::boolean, Shape{2}, {1, 0}};
  EXPECT_THROW(ref::evaluate({ids::exp_id, {i}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::add_id, {f, i}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::add_id, {f}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::add_id, {f, int64_t(3)}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::add_id, {f, ref::RefTensor{DType::f32, Shape{3}, {1, 2, 3}}}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::logical_not_id, {f}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::max_id, {ref::RefTensor{DType::f32, Shape{0}, {}}, ref::RefAbsent{}, false}}),
               InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::sum_id, {f, int64_t(1), false}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::cat_id, {std::vector<ref::RefTensor>{}, int64_t(0)}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::reshape_id, {f, std::vector<int64_t>{3}}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::zeros_id, {std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1}, DType::f32, d}}),
               InvalidArgument);
  EXPECT_THROW(ref::evaluate({ids::zeros_id, {std::vector<int64_t>{-1}, DType::f32, d}}), InvalidArgument);
  EXPECT_THROW(ref::evaluate({OpId(kNumOps), {}}), InvalidArgument);
  EXPECT_NO_THROW(ref::evaluate({ids::logical_not_id, {b}}));
}

// A step near INT64_MAX takes the first element of each axis; the walk must not compute start + step.
TEST(Reference, SliceWithAHugeStep) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  ref::RefTensor x{DType::f32, Shape{2, 3}, {1, 2, 3, 4, 5, 6}};
  ref::RefResult r = ref::evaluate(
      {ids::slice_id, {x, std::vector<int64_t>{0, 1}, std::vector<int64_t>{2, 3}, std::vector<int64_t>{huge, huge}}});
  EXPECT_EQ(r.value.shape, Shape({1, 1}));
  EXPECT_EQ(r.value.values, (std::vector<double>{2}));
}

TEST(Reference, ReadsDispatchArguments) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  CallBuilder c(ids::conv2d_id, "absent bias");
  c.tensor(make_f32({1, 2, 3, 4}, {1, 1, 2, 2}, d))
      .tensor(make_f32({1}, {1, 1, 1, 1}, d))
      .optional(std::nullopt)
      .ints({1, 1})
      .ints({0, 0});
  ref::RefCall r = ref::RefCall::from(c.op(), c.args());
  ASSERT_EQ(r.args.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<ref::RefAbsent>(r.args[2]));
  EXPECT_EQ(std::get<std::vector<int64_t>>(r.args[3]), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(std::get<ref::RefTensor>(r.args[0]).values, (std::vector<double>{1, 2, 3, 4}));
}

TEST(Reference, MagnitudesAndTerms) {
  ref::RefTensor a{DType::f32, Shape{2, 2}, {1, -2, 3, 4}}, b{DType::f32, Shape{2, 2}, {5, 6, -7, 8}};
  ref::RefResult mm = ref::evaluate({ids::matmul_id, {a, b}});
  // [[1*5 + -2*-7, 1*6 + -2*8], [3*5 + 4*-7, 3*6 + 4*8]] = [[19, -10], [-13, 50]]
  EXPECT_EQ(mm.value.values, (std::vector<double>{19, -10, -13, 50}));
  EXPECT_EQ(mm.magnitude, (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(mm.terms, (std::vector<int64_t>{2, 2, 2, 2}));
  ref::RefResult s = ref::evaluate({ids::sub_id, {a, b}});
  EXPECT_EQ(s.magnitude, (std::vector<double>{6, 8, 10, 12}));
  ref::RefResult sum = ref::evaluate({ids::sum_id, {a, int64_t(-1), true}});
  EXPECT_EQ(sum.value.shape, (Shape{2, 1}));
  EXPECT_EQ(sum.value.values, (std::vector<double>{-1, 7}));
  EXPECT_EQ(sum.magnitude, (std::vector<double>{3, 7}));
  EXPECT_EQ(sum.terms, (std::vector<int64_t>{2, 2}));
}

}  // namespace
}  // namespace crossfire::testing::ops
