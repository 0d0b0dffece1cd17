// SPDX-License-Identifier: Apache-2.0
// Small hand-worked cases per op family: expected values worked out on paper (in the comments), checked against
// the reference evaluator (so they test it too) and against dispatch on the device under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "ops_cases.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::testing::ops {
namespace {

namespace ref = crossfire::reference;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();

bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol;
}

void expect_values(const char* who, const ref::RefTensor& got, DType dt, const Shape& shape,
                   const std::vector<double>& want, double tol) {
  EXPECT_EQ(got.dtype, dt) << who;
  ASSERT_EQ(got.shape, shape) << who << ": shape " << got.shape.str();
  ASSERT_EQ(got.values.size(), want.size()) << who;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(close(got.values[i], want[i], tol))
        << who << " element " << i << ": got " << got.values[i] << ", want " << want[i];
}

// The hand-worked answer must hold for the reference and for the device under test (skipped when the backend
// has no kernel for the op yet, after the reference was checked).
void hand(const CallBuilder& c, DType dt, const Shape& shape, const std::vector<double>& want, double tol = 0) {
  SCOPED_TRACE(std::string(op_def(c.op()).name) + ": " + c.label());
  ref::RefResult r = ref::evaluate(ref::RefCall::from(c.op(), c.args()));
  expect_values("reference", r.value, dt, shape, want, tol);
  Tensor out;
  try {
    out = call(c.op(), c.args());
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  }
  expect_values("dispatch", ref::RefTensor::from(out), dt, shape, want, tol);
}

#define HAND_DEVICE CROSSFIRE_REQUIRE_DEVICE(d, 0)

TEST(OpHand, AddBroadcast) {
  HAND_DEVICE;
  // [[1],[2]] + [10,20,30] = [[11,21,31],[12,22,32]]
  CallBuilder c(ids::add_id, "[2,1] + [3]");
  c.tensor(make_f32({1, 2}, {2, 1}, d)).tensor(make_f32({10, 20, 30}, {3}, d));
  hand(c, DType::f32, Shape{2, 3}, {11, 21, 31, 12, 22, 32});
}

TEST(OpHand, IntegerArithmeticWraps) {
  HAND_DEVICE;
  CallBuilder a(ids::add_id, "INT_MAX + 1");
  a.tensor(make_i32({kMax, 5}, {2}, d)).tensor(make_i32({1, -7}, {2}, d));
  hand(a, DType::i32, Shape{2}, {double(kMin), -2});
  CallBuilder s(ids::sub_id, "INT_MIN - 1");
  s.tensor(make_i32({kMin}, {1}, d)).tensor(make_i32({1}, {1}, d));
  hand(s, DType::i32, Shape{1}, {double(kMax)});
  // 65536^2 = 2^32 -> 0; 46341^2 = 2147488281 = 2^31 + 4633 -> -2^31 + 4633 = -2147479015
  CallBuilder m(ids::mul_id, "squares past 2^31");
  m.tensor(make_i32({65536, 46341}, {2}, d)).tensor(make_i32({65536, 46341}, {2}, d));
  hand(m, DType::i32, Shape{2}, {0, -2147479015});
  CallBuilder n(ids::neg_id, "-INT_MIN");
  n.tensor(make_i32({kMin, 3}, {2}, d));
  hand(n, DType::i32, Shape{2}, {double(kMin), -3});
  CallBuilder ab(ids::abs_id, "|INT_MIN|");
  ab.tensor(make_i32({kMin, -3}, {2}, d));
  hand(ab, DType::i32, Shape{2}, {double(kMin), 3});
  // INT_MAX + INT_MAX + 2 = 2^32 -> 0
  CallBuilder su(ids::sum_id, "sum wraps");
  su.tensor(make_i32({kMax, kMax, 2}, {3}, d)).optional_integer(std::nullopt).flag(false);
  hand(su, DType::i32, Shape{}, {0});
}

// An i64 result, exactly: the reference's exact integers and the device's, element for element (an f64 cannot
// tell 2^53 from 2^53 + 1, so `hand` would not do).
void hand_i64(const CallBuilder& c, const Shape& shape, const std::vector<int64_t>& want) {
  SCOPED_TRACE(std::string(op_def(c.op()).name) + ": " + c.label());
  ref::RefResult r = ref::evaluate(ref::RefCall::from(c.op(), c.args()));
  ASSERT_EQ(r.value.dtype, DType::i64);
  ASSERT_EQ(r.value.shape, shape) << r.value.shape.str();
  EXPECT_EQ(r.value.ints, want) << "reference";
  Tensor out;
  try {
    out = call(c.op(), c.args());
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  }
  ASSERT_EQ(out.dtype(), DType::i64);
  EXPECT_EQ(out.to_i64(), want) << "dispatch";
}

bool computes_i64(Device d) { return find_backend(d) != nullptr && find_backend(d)->dtypes().contains(DType::i64); }

constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min(), kMax64 = std::numeric_limits<int64_t>::max();
constexpr int64_t k2p53 = int64_t(1) << 53;

TEST(OpHand, I64ArithmeticWrapsAtSixtyFourBits) {
  HAND_DEVICE;
  if (!computes_i64(d)) GTEST_SKIP() << d.str() << " computes no i64 tensors";
  CallBuilder a(ids::add_id, "INT64_MAX + 1");
  a.tensor(make_i64({kMax64, 5, k2p53}, {3}, d)).tensor(make_i64({1, -7, 1}, {3}, d));
  hand_i64(a, Shape{3}, {kMin64, -2, k2p53 + 1});
  CallBuilder s(ids::sub_id, "INT64_MIN - 1");
  s.tensor(make_i64({kMin64}, {1}, d)).tensor(make_i64({1}, {1}, d));
  hand_i64(s, Shape{1}, {kMax64});
  // (2^32)^2 = 2^64 -> 0. 3037000500^2 = 9223372037000250000 = 2^63 + 145474192 -> -2^63 + 145474192.
  CallBuilder m(ids::mul_id, "squares past 2^63");
  m.tensor(make_i64({int64_t(1) << 32, 3037000500}, {2}, d)).tensor(make_i64({int64_t(1) << 32, 3037000500}, {2}, d));
  hand_i64(m, Shape{2}, {0, -9223372036709301616});
  CallBuilder n(ids::neg_id, "-INT64_MIN");
  n.tensor(make_i64({kMin64, k2p53 + 1}, {2}, d));
  hand_i64(n, Shape{2}, {kMin64, -k2p53 - 1});
  CallBuilder ab(ids::abs_id, "|INT64_MIN|");
  ab.tensor(make_i64({kMin64, -3}, {2}, d));
  hand_i64(ab, Shape{2}, {kMin64, 3});
  // INT64_MAX + INT64_MAX + 2 = 2^64 -> 0; 2^53 + 1 + 2^53 + 1 = 2^54 + 2, which no f64 sum gives.
  CallBuilder su(ids::sum_id, "sum wraps");
  su.tensor(make_i64({kMax64, kMax64, 2, k2p53 + 1, k2p53 + 1}, {5}, d)).optional_integer(std::nullopt).flag(false);
  hand_i64(su, Shape{}, {(int64_t(1) << 54) + 2});
  CallBuilder mx(ids::maximum_id, "maximum of neighbours past 2^53");
  mx.tensor(make_i64({k2p53, k2p53 + 1}, {2}, d)).tensor(make_i64({k2p53 + 1, k2p53}, {2}, d));
  hand_i64(mx, Shape{2}, {k2p53 + 1, k2p53 + 1});
}

TEST(OpHand, I64ComparesAndPicksExactly) {
  HAND_DEVICE;
  if (!computes_i64(d)) GTEST_SKIP() << d.str() << " computes no i64 tensors";
  // 2^53 and 2^53 + 1 are one f64: a kernel or reference that compares through f64 calls them equal.
  CallBuilder e(ids::eq_id, "2^53 == 2^53 + 1");
  e.tensor(make_i64({k2p53, kMin64}, {2}, d)).tensor(make_i64({k2p53 + 1, kMin64}, {2}, d));
  hand(e, DType::boolean, Shape{2}, {0, 1});
  CallBuilder l(ids::lt_id, "2^53 < 2^53 + 1");
  l.tensor(make_i64({k2p53, kMax64}, {2}, d)).tensor(make_i64({k2p53 + 1, kMin64}, {2}, d));
  hand(l, DType::boolean, Shape{2}, {1, 0});
  CallBuilder m(ids::max_id, "max past 2^53");
  m.tensor(make_i64({k2p53, k2p53 + 1, k2p53}, {3}, d)).optional_integer(std::nullopt).flag(false);
  hand_i64(m, Shape{}, {k2p53 + 1});
  CallBuilder am(ids::argmax_id, "argmax past 2^53");
  am.tensor(make_i64({k2p53, k2p53 + 1, k2p53}, {3}, d)).optional_integer(std::nullopt).flag(false);
  hand(am, DType::i32, Shape{}, {1});
  CallBuilder w(ids::where_id, "where keeps the bits");
  w.tensor(make_bool({1, 0}, {2}, d)).tensor(make_i64({k2p53 + 1, 0}, {2}, d)).tensor(make_i64({0, -k2p53 - 1}, {2}, d));
  hand_i64(w, Shape{2}, {k2p53 + 1, -k2p53 - 1});
  // An i64 index picks as an i32 one does; one past the axis, however large, is InvalidArgument.
  CallBuilder ix(ids::index_select_id, "i64 index");
  ix.tensor(make_i64({10, k2p53 + 1, 30}, {3}, d)).integer(0).tensor(make_i64({1, 0, 1}, {3}, d));
  hand_i64(ix, Shape{3}, {k2p53 + 1, 10, k2p53 + 1});
  CallBuilder bad(ids::index_select_id, "i64 index past the axis");
  bad.tensor(make_f32({1, 2}, {2}, d)).integer(0).tensor(make_i64({0, int64_t(1) << 32}, {2}, d));
  EXPECT_THROW(ref::evaluate(ref::RefCall::from(bad.op(), bad.args())), InvalidArgument);
  EXPECT_THROW(call(bad.op(), bad.args()), InvalidArgument);
}

TEST(OpHand, I64CastsRoundOnceAndSaturate) {
  HAND_DEVICE;
  if (!computes_i64(d)) GTEST_SKIP() << d.str() << " computes no i64 tensors";
  const int64_t p60 = int64_t(1) << 60;
  // To f32 (24 bits; at 2^60 an ulp is 2^37): 2^60 + 2^36 + 1 is past the half ulp, so 2^60 + 2^37; through f64 it
  // would first become 2^60 + 2^36, a tie, and then 2^60. 2^24 + 1 is a tie: to even, 2^24; 2^24 + 3 -> 2^24 + 4.
  CallBuilder f(ids::cast_id, "i64 -> f32");
  f.tensor(make_i64({p60 + (int64_t(1) << 36) + 1, (1 << 24) + 1, (1 << 24) + 3, kMin64}, {4}, d)).dtype(DType::f32);
  hand(f, DType::f32, Shape{4}, {0x1p60 + 0x1p37, 0x1p24, 0x1p24 + 4, -0x1p63});
  // To bf16 (8 bits; at 2^60 an ulp is 2^53): 2^60 + 2^52 + 1 is past the half ulp: 2^60 + 2^53 (through f64 it
  // is 2^60 + 2^52, a tie, then 2^60).
  CallBuilder b(ids::cast_id, "i64 -> bf16");
  b.tensor(make_i64({p60 + (int64_t(1) << 52) + 1, -p60 - (int64_t(1) << 52)}, {2}, d)).dtype(DType::bf16);
  hand(b, DType::bf16, Shape{2}, {0x1p60 + 0x1p53, -0x1p60});
  // To f16 (11 bits; largest 65504, infinity from 65520 on): 2049 is a tie -> 2048, 2051 -> 2052.
  CallBuilder h(ids::cast_id, "i64 -> f16");
  h.tensor(make_i64({2049, 2051, 65519, 65520, -p60}, {5}, d)).dtype(DType::f16);
  hand(h, DType::f16, Shape{5}, {2048, 2052, 65504, std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity()});
  // From f32: truncate toward zero, saturate at 2^63 (an f32; INT64_MAX is not), NaN -> 0.
  CallBuilder t(ids::cast_id, "f32 -> i64");
  t.tensor(make_f32({9.3e18f, -9.3e18f, -1.75f, 0x1p62f, float(kNaN), -0x1p63f}, {6}, d)).dtype(DType::i64);
  hand_i64(t, Shape{6}, {kMax64, kMin64, -1, int64_t(1) << 62, 0, kMin64});
  // To i32: the low 32 bits. 3 * 2^31 = 2^32 + 2^31 -> 2^31 -> INT32_MIN.
  CallBuilder n(ids::cast_id, "i64 -> i32");
  n.tensor(make_i64({(int64_t(1) << 32) + 5, int64_t(3) << 31, -1, kMax64}, {4}, d)).dtype(DType::i32);
  hand(n, DType::i32, Shape{4}, {5, double(kMin), -1, -1});
  // full and arange into i64 convert their f64 attributes as cast does.
  CallBuilder fu(ids::full_id, "full i64");
  fu.ints({3}).scalar(1e300).dtype(DType::i64).device(d);
  hand_i64(fu, Shape{3}, {kMax64, kMax64, kMax64});
  CallBuilder ar(ids::arange_id, "arange i64");
  ar.scalar(-2).scalar(7).scalar(3).dtype(DType::i64).device(d);
  hand_i64(ar, Shape{3}, {-2, 1, 4});
}

TEST(OpHand, UnaryFloat) {
  HAND_DEVICE;
  CallBuilder e(ids::exp_id, "exp");
  e.tensor(make_f32({0, 1}, {2}, d));
  hand(e, DType::f32, Shape{2}, {1, std::numbers::e}, 1e-6);
  CallBuilder l(ids::log_id, "log");
  l.tensor(make_f32({1, 8}, {2}, d));
  hand(l, DType::f32, Shape{2}, {0, 3 * std::numbers::ln2}, 1e-6);
  CallBuilder s(ids::sqrt_id, "sqrt");
  s.tensor(make_f32({4, 0, 2.25f}, {3}, d));
  hand(s, DType::f32, Shape{3}, {2, 0, 1.5});
  CallBuilder t(ids::tanh_id, "tanh");
  t.tensor(make_f32({0}, {}, d));
  hand(t, DType::f32, Shape{}, {0});
  CallBuilder g(ids::sigmoid_id, "sigmoid");
  g.tensor(make_f32({0, float(std::log(3.0))}, {2}, d));  // 1/(1+1/3) = 3/4
  hand(g, DType::f32, Shape{2}, {0.5, 0.75}, 1e-6);
  CallBuilder r(ids::relu_id, "relu");
  r.tensor(make_f32({-1, 2, float(kNaN), 0}, {4}, d));
  hand(r, DType::f32, Shape{4}, {0, 2, kNaN, 0});
  CallBuilder c(ids::clamp_id, "clamp to [-1, 0.5]");
  c.tensor(make_f32({-2, -0.5f, -0.0f, 0.3f, 1, 5, float(kNaN), -std::numeric_limits<float>::infinity()}, {8}, d)).scalar(-1).scalar(0.5);
  hand(c, DType::f32, Shape{8}, {-1, -0.5, -0.0, double(0.3f), 0.5, 0.5, kNaN, -1});
  CallBuilder cr(ids::clamp_id, "clamp with min > max: max everywhere");
  cr.tensor(make_f32({-2, 0, 3}, {3}, d)).scalar(1).scalar(-1);
  hand(cr, DType::f32, Shape{3}, {-1, -1, -1});
  CallBuilder cn(ids::clamp_id, "clamp with a NaN bound, and bounds rounded to f32 (1e39 -> inf)");
  cn.tensor(make_f32({-2, 3}, {2}, d)).scalar(kNaN).scalar(1);
  hand(cn, DType::f32, Shape{2}, {kNaN, kNaN});
  CallBuilder cb(ids::clamp_id, "clamp with bounds past f32's range");
  cb.tensor(make_f32({-3e38f, 3e38f}, {2}, d)).scalar(-1e39).scalar(0.1);
  hand(cb, DType::f32, Shape{2}, {double(-3e38f), double(0.1f)});
}

TEST(OpHand, BinaryFloat) {
  HAND_DEVICE;
  CallBuilder dv(ids::div_id, "div");
  dv.tensor(make_f32({1, -3}, {2}, d)).tensor(make_f32({4, 2}, {2}, d));
  hand(dv, DType::f32, Shape{2}, {0.25, -1.5});
  CallBuilder p(ids::pow_id, "pow");
  p.tensor(make_f32({2, 9}, {2}, d)).tensor(make_f32({10, 0.5f}, {2}, d));
  hand(p, DType::f32, Shape{2}, {1024, 3}, 1e-4);
  CallBuilder mx(ids::maximum_id, "maximum with NaN");
  mx.tensor(make_f32({1, float(kNaN), 5}, {3}, d)).tensor(make_f32({2, 0, float(kNaN)}, {3}, d));
  hand(mx, DType::f32, Shape{3}, {2, kNaN, kNaN});
  CallBuilder mn(ids::minimum_id, "minimum with NaN");
  mn.tensor(make_f32({1, float(kNaN), 5}, {3}, d)).tensor(make_f32({2, 0, float(kNaN)}, {3}, d));
  hand(mn, DType::f32, Shape{3}, {1, kNaN, kNaN});
}

TEST(OpHand, CompareAndLogic) {
  HAND_DEVICE;
  CallBuilder eq(ids::eq_id, "eq with NaN");
  eq.tensor(make_f32({1, float(kNaN), 2}, {3}, d)).tensor(make_f32({1, float(kNaN), 3}, {3}, d));
  hand(eq, DType::boolean, Shape{3}, {1, 0, 0});
  CallBuilder ne(ids::ne_id, "ne with NaN");
  ne.tensor(make_f32({1, float(kNaN), 2}, {3}, d)).tensor(make_f32({1, float(kNaN), 3}, {3}, d));
  hand(ne, DType::boolean, Shape{3}, {0, 1, 1});
  // [[1],[3]] < [2, 3] = [[1, 1], [0, 0]]
  CallBuilder lt(ids::lt_id, "lt broadcast i32");
  lt.tensor(make_i32({1, 3}, {2, 1}, d)).tensor(make_i32({2, 3}, {2}, d));
  hand(lt, DType::boolean, Shape{2, 2}, {1, 1, 0, 0});
  CallBuilder ge(ids::ge_id, "ge");
  ge.tensor(make_f32({1, 3}, {2}, d)).tensor(make_f32({2, 3}, {2}, d));
  hand(ge, DType::boolean, Shape{2}, {0, 1});
  CallBuilder an(ids::logical_and_id, "and");
  an.tensor(make_bool({0, 0, 1, 1}, {4}, d)).tensor(make_bool({0, 1, 0, 1}, {4}, d));
  hand(an, DType::boolean, Shape{4}, {0, 0, 0, 1});
  CallBuilder o(ids::logical_or_id, "or");
  o.tensor(make_bool({0, 0, 1, 1}, {4}, d)).tensor(make_bool({0, 1, 0, 1}, {4}, d));
  hand(o, DType::boolean, Shape{4}, {0, 1, 1, 1});
  CallBuilder nt(ids::logical_not_id, "not");
  nt.tensor(make_bool({0, 1}, {2}, d));
  hand(nt, DType::boolean, Shape{2}, {1, 0});
}

TEST(OpHand, WhereAndCast) {
  HAND_DEVICE;
  // cond [[1],[0]], a [1,2], b 9 -> [[1,2],[9,9]]
  CallBuilder w(ids::where_id, "where broadcast");
  w.tensor(make_bool({1, 0}, {2, 1}, d)).tensor(make_f32({1, 2}, {2}, d)).tensor(make_f32({9}, {}, d));
  hand(w, DType::f32, Shape{2, 2}, {1, 2, 9, 9});
  CallBuilder ci(ids::cast_id, "f32 -> i32");
  ci.tensor(make_f32({-1.7f, 1.7f, 3e9f, -3e9f, float(kNaN), -0.5f}, {6}, d)).dtype(DType::i32);
  hand(ci, DType::i32, Shape{6}, {-1, 1, double(kMax), double(kMin), 0, 0});
  CallBuilder cb(ids::cast_id, "f32 -> bool");
  cb.tensor(make_f32({0, -0.0f, 0.5f, float(kNaN)}, {4}, d)).dtype(DType::boolean);
  hand(cb, DType::boolean, Shape{4}, {0, 0, 1, 1});
  // 16777217 = 2^24 + 1 is a tie between 2^24 and 2^24 + 2: rounds to even, 2^24.
  CallBuilder cf(ids::cast_id, "i32 -> f32");
  cf.tensor(make_i32({16777217, -5}, {2}, d)).dtype(DType::f32);
  hand(cf, DType::f32, Shape{2}, {16777216, -5});
}

TEST(OpHand, Reductions) {
  HAND_DEVICE;
  auto x = [&] { return make_f32({1, 2, 3, 4, 5, 6}, {2, 3}, d); };
  CallBuilder s0(ids::sum_id, "sum axis 0");
  s0.tensor(x()).optional_integer(0).flag(false);
  hand(s0, DType::f32, Shape{3}, {5, 7, 9});
  CallBuilder s1(ids::sum_id, "sum axis -1 keepdim");
  s1.tensor(x()).optional_integer(-1).flag(true);
  hand(s1, DType::f32, Shape{2, 1}, {6, 15});
  CallBuilder m(ids::mean_id, "mean all");
  m.tensor(x()).optional_integer(std::nullopt).flag(false);
  hand(m, DType::f32, Shape{}, {3.5});
  CallBuilder mk(ids::mean_id, "mean all keepdim");
  mk.tensor(x()).optional_integer(std::nullopt).flag(true);
  hand(mk, DType::f32, Shape{1, 1}, {3.5});
  CallBuilder mx(ids::max_id, "max with NaN");
  mx.tensor(make_f32({1, float(kNaN), 5, 2}, {2, 2}, d)).optional_integer(1).flag(false);
  hand(mx, DType::f32, Shape{2}, {kNaN, 5});
  CallBuilder a(ids::argmax_id, "argmax first max");
  a.tensor(make_f32({1, 3, 3, 2}, {4}, d)).optional_integer(std::nullopt).flag(false);
  hand(a, DType::i32, Shape{}, {1});
  CallBuilder an(ids::argmax_id, "argmax first NaN");
  an.tensor(make_f32({1, float(kNaN), 5, float(kNaN)}, {4}, d)).optional_integer(0).flag(false);
  hand(an, DType::i32, Shape{}, {1});
  // [[1, 9], [7, 7], [0, -1]] argmax along axis 1 -> [1, 0, 0]; along all -> flat 1
  CallBuilder ai(ids::argmax_id, "argmax i32 axis 1");
  ai.tensor(make_i32({1, 9, 7, 7, 0, -1}, {3, 2}, d)).optional_integer(1).flag(true);
  hand(ai, DType::i32, Shape{3, 1}, {1, 0, 0});
}

TEST(OpHand, Matmul) {
  HAND_DEVICE;
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]
  CallBuilder m(ids::matmul_id, "2x2");
  m.tensor(make_f32({1, 2, 3, 4}, {2, 2}, d)).tensor(make_f32({5, 6, 7, 8}, {2, 2}, d));
  hand(m, DType::f32, Shape{2, 2}, {19, 22, 43, 50});
  // batch [2] x shared [3, 1]: [[1,2,3]] . [1,1,1] = 6, [[4,5,6]] . [1,1,1] = 15
  CallBuilder b(ids::matmul_id, "batched broadcast");
  b.tensor(make_f32({1, 2, 3, 4, 5, 6}, {2, 1, 3}, d)).tensor(make_f32({1, 1, 1}, {3, 1}, d));
  hand(b, DType::f32, Shape{2, 1, 1}, {6, 15});
}

TEST(OpHand, Layout) {
  HAND_DEVICE;
  CallBuilder r(ids::reshape_id, "reshape -1");
  r.tensor(make_f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)).ints({-1, 2});
  hand(r, DType::f32, Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  CallBuilder p(ids::permute_id, "transpose");
  p.tensor(make_f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)).ints({1, 0});
  hand(p, DType::f32, Shape{3, 2}, {1, 4, 2, 5, 3, 6});
  CallBuilder s(ids::slice_id, "step 2");
  s.tensor(make_i32({0, 1, 2, 3, 4, 5}, {6}, d)).ints({0}).ints({6}).ints({2});
  hand(s, DType::i32, Shape{3}, {0, 2, 4});
  CallBuilder s2(ids::slice_id, "2-D");
  s2.tensor(make_i32({0, 1, 2, 3, 4, 5}, {2, 3}, d)).ints({1, 1}).ints({2, 3}).ints({1, 1});
  hand(s2, DType::i32, Shape{1, 2}, {4, 5});
  CallBuilder e(ids::expand_id, "expand [3,1] -> [2,3,2]");
  e.tensor(make_f32({1, 2, 3}, {3, 1}, d)).ints({2, 3, 2});
  hand(e, DType::f32, Shape{2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CallBuilder c(ids::cat_id, "cat axis 1");
  c.list({make_f32({1, 2}, {2, 1}, d), make_f32({3, 4, 5, 6}, {2, 2}, d)}).integer(1);
  hand(c, DType::f32, Shape{2, 3}, {1, 3, 4, 2, 5, 6});
  CallBuilder c0(ids::cat_id, "cat of 3 along axis 0, bool");
  c0.list({make_bool({1}, {1}, d), make_bool({}, {0}, d), make_bool({0, 1}, {2}, d)}).integer(0);
  hand(c0, DType::boolean, Shape{3}, {1, 0, 1});
  CallBuilder ix(ids::index_select_id, "rows 2, 0, 2");
  ix.tensor(make_f32({1, 2, 3, 4, 5, 6}, {3, 2}, d)).integer(0).tensor(make_i32({2, 0, 2}, {3}, d));
  hand(ix, DType::f32, Shape{3, 2}, {5, 6, 1, 2, 5, 6});
  CallBuilder t(ids::to_id, "to self");
  t.tensor(make_i32({7, -8}, {2}, d)).device(d);
  hand(t, DType::i32, Shape{2}, {7, -8});
}

TEST(OpHand, Softmax) {
  HAND_DEVICE;
  // softmax([0, ln 2]) = [1, 2] / 3
  CallBuilder s(ids::softmax_id, "[0, ln 2]");
  s.tensor(make_f32({0, float(std::numbers::ln2)}, {2}, d)).integer(0);
  hand(s, DType::f32, Shape{2}, {1.0 / 3, 2.0 / 3}, 1e-6);
  // along axis 0 of [[0, 5], [0, 5]]: every column is uniform, 1/2 each
  CallBuilder c(ids::softmax_id, "columns");
  c.tensor(make_f32({0, 5, 0, 5}, {2, 2}, d)).integer(0);
  hand(c, DType::f32, Shape{2, 2}, {0.5, 0.5, 0.5, 0.5}, 1e-7);
}

TEST(OpHand, Conv2dUnfoldFold) {
  HAND_DEVICE;
  auto img = [&] { return make_f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, d); };
  // 2x2 ones over [[1,2,3],[4,5,6],[7,8,9]]: [[1+2+4+5, 2+3+5+6], [4+5+7+8, 5+6+8+9]] = [[12,16],[24,28]]
  CallBuilder c(ids::conv2d_id, "2x2 ones");
  c.tensor(img()).tensor(make_f32({1, 1, 1, 1}, {1, 1, 2, 2}, d)).optional(std::nullopt).ints({1, 1}).ints({0, 0});
  hand(c, DType::f32, Shape{1, 1, 2, 2}, {12, 16, 24, 28});
  CallBuilder cb(ids::conv2d_id, "2x2 ones + bias 1");
  cb.tensor(img())
      .tensor(make_f32({1, 1, 1, 1}, {1, 1, 2, 2}, d))
      .optional(make_f32({1}, {1}, d))
      .ints({1, 1})
      .ints({0, 0});
  hand(cb, DType::f32, Shape{1, 1, 2, 2}, {13, 17, 25, 29});
  // padding 1, stride 2: windows at rows/cols {-1,0} and {1,2}: [[1, 2+3], [4+7, 5+6+8+9]]
  CallBuilder cp(ids::conv2d_id, "padding 1 stride 2");
  cp.tensor(img()).tensor(make_f32({1, 1, 1, 1}, {1, 1, 2, 2}, d)).optional(std::nullopt).ints({2, 2}).ints({1, 1});
  hand(cp, DType::f32, Shape{1, 1, 2, 2}, {1, 5, 11, 28});
  // rows (i, j) = (0,0), (0,1), (1,0), (1,1); columns = the 4 window positions
  CallBuilder u(ids::unfold_id, "2x2 patches");
  u.tensor(img()).ints({2, 2}).ints({1, 1}).ints({0, 0});
  hand(u, DType::f32, Shape{1, 4, 4}, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  // folding ones counts how many windows cover each pixel
  CallBuilder f(ids::fold_id, "window counts");
  f.tensor(make_f32(std::vector<float>(16, 1.0f), {1, 4, 4}, d)).ints({3, 3}).ints({2, 2}).ints({1, 1}).ints({0, 0});
  hand(f, DType::f32, Shape{1, 1, 3, 3}, {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

TEST(OpHand, Creation) {
  HAND_DEVICE;
  CallBuilder a(ids::arange_id, "quarters");
  a.scalar(0).scalar(1).scalar(0.25).dtype(DType::f32).device(d);
  hand(a, DType::f32, Shape{4}, {0, 0.25, 0.5, 0.75});
  CallBuilder ai(ids::arange_id, "down by 2, i32");
  ai.scalar(5).scalar(0).scalar(-2).dtype(DType::i32).device(d);
  hand(ai, DType::i32, Shape{3}, {5, 3, 1});
  CallBuilder fi(ids::full_id, "2.5 as i32");
  fi.ints({2}).scalar(2.5).dtype(DType::i32).device(d);
  hand(fi, DType::i32, Shape{2}, {2, 2});
  CallBuilder fb(ids::full_id, "-0.5 as bool");
  fb.ints({}).scalar(-0.5).dtype(DType::boolean).device(d);
  hand(fb, DType::boolean, Shape{}, {1});
  CallBuilder o(ids::ones_id, "ones i32");
  o.ints({1, 2}).dtype(DType::i32).device(d);
  hand(o, DType::i32, Shape{1, 2}, {1, 1});
  CallBuilder z(ids::zeros_id, "zeros bool");
  z.ints({2}).dtype(DType::boolean).device(d);
  hand(z, DType::boolean, Shape{2}, {0, 0});
  std::vector<uint8_t> bytes = {0x00, 0x00, 0xc0, 0x3f, 0xff, 0xff, 0xff, 0xff};  // 1.5f; -1 as i32 / NaN as f32
  CallBuilder fd(ids::from_data_id, "i32 bytes");
  fd.bytes(bytes).ints({2}).dtype(DType::i32).device(d);
  hand(fd, DType::i32, Shape{2}, {1069547520, -1});
  CallBuilder ff(ids::from_data_id, "f32 bytes");
  ff.bytes(bytes).ints({2}).dtype(DType::f32).device(d);
  hand(ff, DType::f32, Shape{2}, {1.5, kNaN});
}

TEST(OpHand, RandomFromPublishedPhilox) {
  HAND_DEVICE;
  // Seed 0, block 0 is Philox4x32-10's known answer for counter 0 and key 0:
  // 0x6627e8d5 0xe169c58d 0xbc57ac4c 0x9b00dbd8; value = (w >> 8) * 2^-24.
  const uint32_t w[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  std::vector<double> u;
  for (uint32_t x : w) u.push_back(double(x >> 8) * 0x1p-24);
  CallBuilder r(ids::rand_id, "seed 0");
  r.ints({2, 2}).integer(0).dtype(DType::f32).device(d);
  hand(r, DType::f32, Shape{2, 2}, u);
  // Box-Muller on words 0 and 1: r = sqrt(-2 ln u1), u1 = ((w0 >> 8) + 0.5) 2^-24, angle 2 pi (w1 >> 8) 2^-24.
  double u1 = (double(w[0] >> 8) + 0.5) * 0x1p-24, rad = std::sqrt(-2 * std::log(u1));
  double angle = 2 * std::numbers::pi * u[1];
  CallBuilder n(ids::randn_id, "seed 0, odd count");
  n.ints({3}).integer(0).dtype(DType::f32).device(d);
  double u1b = (double(w[2] >> 8) + 0.5) * 0x1p-24;
  hand(n, DType::f32, Shape{3},
       {rad * std::cos(angle), rad * std::sin(angle),
        std::sqrt(-2 * std::log(u1b)) * std::cos(2 * std::numbers::pi * u[3])},
       2e-6);
  // f16 and bf16 take the top 11 and 8 bits of the same words: 0x6627e8d5 >> 21 = 0x331 = 817, so 817 / 2048; and so on.
  const Backend* b = find_backend(d);
  if (b == nullptr || !b->dtypes().contains(DType::f16)) return;
  CallBuilder h(ids::rand_id, "seed 0, f16");
  h.ints({4}).integer(0).dtype(DType::f16).device(d);
  hand(h, DType::f16, Shape{4}, {817.0 / 2048, 1803.0 / 2048, 1506.0 / 2048, 1240.0 / 2048});
  CallBuilder bf(ids::rand_id, "seed 0, bf16");
  bf.ints({4}).integer(0).dtype(DType::bf16).device(d);
  hand(bf, DType::bf16, Shape{4}, {102.0 / 256, 225.0 / 256, 188.0 / 256, 155.0 / 256});
}

}  // namespace
}  // namespace crossfire::testing::ops
