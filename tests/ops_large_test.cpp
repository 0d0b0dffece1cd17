// SPDX-License-Identifier: Apache-2.0
// Ops at the extents where kernels change behaviour or hit a driver's limits, on every backend: long softmax rows,
// conv2d outputs that sum tens of thousands of products, means whose f32 running sum would overflow. Each call is
// held to the reference's bound (contract section 6), and each expected value is worked out by hand in a comment
// and checked against the reference too, so the test cannot pass by a reference that drifted with the kernels.
//
// The first three are the wrong results an external check found on vulkan:0 (issue 16): lavapipe's loop limiter cut
// a softmax row of 21,845 elements (three loops over the row) and a conv2d output of 20,000 channels short, and mean
// summed in f32 before dividing (Note [A driver's loop limit] in kernels/vulkan/vulkan_kernels.cpp). The others
// hold kernels that loop over a long axis or window (matmul's K, sum, fold) at sizes past that limit.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "ops_cases.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::testing::ops {
namespace {

namespace ref = crossfire::reference;

// The call on the device under test agrees with the reference within the op's bound, and the reference agrees with
// the hand-worked value `want(i)` for element i within `tol` (relative).
template <class Want>
void large(const CallBuilder& c, const Want& want, double tol) {
  SCOPED_TRACE(std::string(op_def(c.op()).name) + ": " + c.label());
  const ref::RefResult exact = ref::evaluate(ref::RefCall::from(c.op(), c.args()));
  for (size_t i = 0; i < exact.value.values.size(); ++i) {
    const double w = want(i);
    ASSERT_LE(std::fabs(exact.value.values[i] - w), tol * std::fabs(w)) << "reference, element " << i;
  }
  Tensor out;
  try {
    out = call(c.op(), c.args());
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  }
  const ref::RefTensor got = ref::RefTensor::from(out);
  if (auto m = ref::first_mismatch(op_def(c.op()), exact, got))
    FAIL() << "element " << m->index << " is " << m->got << ", exact " << m->exact << ", allowed " << m->allowed
           << " (" << m->what << ")";
}

Tensor filled_f32(std::vector<int64_t> shape, float v, Device d) {
  int64_t n = 1;
  for (int64_t x : shape) n *= x;
  return make_f32(std::vector<float>(size_t(n), v), shape, d);
}

TEST(OpLarge, SoftmaxAlongALongAxis) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  // A row of equal values: every element is 1 / n. 21,844 was right on lavapipe and 21,845 was not.
  for (int64_t n : {int64_t(21844), int64_t(21845), int64_t(70000)}) {
    CallBuilder row(ids::softmax_id, fmt::format("row of {} zeros", n));
    row.tensor(filled_f32({2, n}, 0.0f, d)).integer(1);
    large(row, [n](size_t) { return 1.0 / double(n); }, 1e-12);
  }
  // Along axis 0 of [n, 3] (a strided row per column): the same, 1 / n.
  CallBuilder col(ids::softmax_id, "columns of 30000");
  col.tensor(filled_f32({30000, 3}, 0.0f, d)).integer(0);
  large(col, [](size_t) { return 1.0 / 30000.0; }, 1e-12);
  // A row of 40,000 with one element ln(40000) larger: it gets e^ln(40000) / (39999 + 40000) = 40000 / 79999, the
  // others 1 / 79999.
  std::vector<float> x(40000, 0.0f);
  x[123] = float(std::log(40000.0));
  CallBuilder peak(ids::softmax_id, "row of 40000 with one peak");
  peak.tensor(make_f32(x, {40000}, d)).integer(0);
  const double e = std::exp(double(x[123]));
  large(peak, [e](size_t i) { return (i == 123 ? e : 1.0) / (39999.0 + e); }, 1e-12);
}

TEST(OpLarge, Conv2dWithTensOfThousandsOfProductsPerOutput) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  // 1x1 window over 20,000 channels of ones: each output is 20,000 (lavapipe gave 10,923); plus a bias of 0.5.
  CallBuilder ch(ids::conv2d_id, "20000 channels, 1x1, bias");
  ch.tensor(filled_f32({1, 20000, 2, 1}, 1.0f, d))
      .tensor(filled_f32({2, 20000, 1, 1}, 1.0f, d))
      .optional(make_f32({0.5f, 0.5f}, {2}, d))
      .ints({1, 1})
      .ints({0, 0});
  large(ch, [](size_t) { return 20000.5; }, 0);
  // A 150x150 window over a 150x150 image of ones (one output, 22,500 products), with 2 channels: 45,000.
  CallBuilder win(ids::conv2d_id, "150x150 window, 2 channels");
  win.tensor(filled_f32({1, 2, 150, 150}, 1.0f, d))
      .tensor(filled_f32({1, 2, 150, 150}, 1.0f, d))
      .optional(std::nullopt)
      .ints({1, 1})
      .ints({0, 0});
  large(win, [](size_t) { return 45000.0; }, 0);
  // Padding 1 around a 200x200 image of ones with a 201x201 window of ones and stride 1: the 2x2 outputs each cover
  // 200 x 200 image pixels (the rest of the window lies on padding): 40,000 each, from 40,401 products.
  CallBuilder pad(ids::conv2d_id, "201x201 window over padding");
  pad.tensor(filled_f32({1, 1, 200, 200}, 1.0f, d))
      .tensor(filled_f32({1, 1, 201, 201}, 1.0f, d))
      .optional(std::nullopt)
      .ints({1, 1})
      .ints({1, 1});
  large(pad, [](size_t) { return 40000.0; }, 0);
}

TEST(OpLarge, MeanWhoseRunningSumPassesF32) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  const float big = std::ldexp(1.5f, 127);  // 1.5 * 2^127, about 2.55e38; two of them sum past f32's largest value
  // The mean of two copies is the value itself (an f32 running sum would be inf).
  CallBuilder two(ids::mean_id, "mean of two 1.5*2^127");
  two.tensor(make_f32({big, big}, {2}, d)).optional_integer(std::nullopt).flag(false);
  large(two, [&](size_t) { return double(big); }, 0);
  // Along axis 0 of [1000, 3]: each column is 1000 copies of big, -big or big / 2.
  std::vector<float> x;
  for (int i = 0; i < 1000; ++i) x.insert(x.end(), {big, -big, big / 2});
  CallBuilder cols(ids::mean_id, "mean of columns of 1000");
  cols.tensor(make_f32(x, {1000, 3}, d)).optional_integer(0).flag(false);
  large(cols, [&](size_t i) { return i == 0 ? double(big) : i == 1 ? -double(big) : double(big) / 2; }, 0);
  // A long row (the one-workgroup-per-output path): 100,000 copies of 3e38.
  CallBuilder row(ids::mean_id, "mean of 100000 x 3e38");
  row.tensor(filled_f32({100000}, 3e38f, d)).optional_integer(std::nullopt).flag(false);
  large(row, [](size_t) { return double(3e38f); }, 1e-6);
}

TEST(OpLarge, MatmulAndSumOverALongInnerAxis) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  // [2, K] x [K, 2] of ones: every element is K.
  for (int64_t k : {int64_t(5000), int64_t(70000)}) {
    CallBuilder mm(ids::matmul_id, fmt::format("K = {}", k));
    mm.tensor(filled_f32({2, k}, 1.0f, d)).tensor(filled_f32({k, 2}, 1.0f, d));
    large(mm, [k](size_t) { return double(k); }, 0);
  }
  // A sum of 1,000,000 ones along one row, and along axis 0 of [300000, 2].
  CallBuilder row(ids::sum_id, "row of 1000000 ones");
  row.tensor(filled_f32({1000000}, 1.0f, d)).optional_integer(std::nullopt).flag(false);
  large(row, [](size_t) { return 1e6; }, 0);
  CallBuilder col(ids::sum_id, "columns of 300000 ones");
  col.tensor(filled_f32({300000, 2}, 1.0f, d)).optional_integer(0).flag(false);
  large(col, [](size_t) { return 3e5; }, 0);
}

// Past the longest row a backend's kernels can walk, a backend must say Unsupported, never return a wrong result
// (Vulkan on a CPU-type device: rows over 2^22 elements, Note [A driver's loop limit]; other backends compute). A
// row of exactly 2^22 must be right everywhere.
TEST(OpLarge, ARowPastAKernelsLimitIsRightOrUnsupported) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::string unsupported;
  auto check = [&](const CallBuilder& c, double want, bool may_be_unsupported) {
    SCOPED_TRACE(c.label());
    const ref::RefResult exact = ref::evaluate(ref::RefCall::from(c.op(), c.args()));
    ASSERT_LE(std::fabs(exact.value.values[0] - want), 1e-12 * want);
    try {
      const ref::RefTensor got = ref::RefTensor::from(call(c.op(), c.args()));
      if (auto m = ref::first_mismatch(op_def(c.op()), exact, got))
        ADD_FAILURE() << "element " << m->index << " is " << m->got << ", exact " << m->exact;
    } catch (const Unsupported& e) {
      if (!may_be_unsupported) ADD_FAILURE() << e.what();
      unsupported += std::string(e.what()) + "; ";
    }
  };
  for (int64_t n : {int64_t(1) << 22, (int64_t(1) << 22) + 1}) {  // the longest row Vulkan walks, and one more
    CallBuilder sm(ids::softmax_id, fmt::format("softmax of a row of {} zeros", n));
    sm.tensor(filled_f32({n}, 0.0f, d)).integer(0);
    check(sm, 1.0 / double(n), n > (int64_t(1) << 22));
    CallBuilder sum(ids::sum_id, fmt::format("sum of a row of {} ones", n));
    sum.tensor(filled_f32({n}, 1.0f, d)).optional_integer(std::nullopt).flag(false);
    check(sum, double(n), n > (int64_t(1) << 22));
  }
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
}

TEST(OpLarge, FoldWithAWindowOfTensOfThousands) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  // fold of [1, 400*400, 1] ones into a 400x400 image with a 400x400 window: one window covers every pixel once.
  CallBuilder f(ids::fold_id, "400x400 window, one position");
  f.tensor(filled_f32({1, 160000, 1}, 1.0f, d)).ints({400, 400}).ints({400, 400}).ints({1, 1}).ints({0, 0});
  large(f, [](size_t) { return 1.0; }, 0);
  // A 260x260 window at stride 1 over a 261x261 image: 2x2 positions; the corner pixels are covered once, the
  // middle ones four times.
  CallBuilder g(ids::fold_id, "260x260 window, 2x2 positions");
  g.tensor(filled_f32({1, 260 * 260, 4}, 1.0f, d)).ints({261, 261}).ints({260, 260}).ints({1, 1}).ints({0, 0});
  large(g, [](size_t i) {
    const size_t y = i / 261, x = i % 261;
    return double((y == 0 || y == 260 ? 1 : 2) * (x == 0 || x == 260 ? 1 : 2));
  }, 0);
}

}  // namespace
}  // namespace crossfire::testing::ops
