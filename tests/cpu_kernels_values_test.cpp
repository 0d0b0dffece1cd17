// SPDX-License-Identifier: Apache-2.0
// CPU kernels, hand-worked cases for the semantics other backends must match bit for bit: the Philox stream
// (Random123's published known answers), conversions (saturation, NaN, rounding), i32 wrap-around, NaN and signed
// zero in maximum/minimum/relu, and broadcasting layouts. Expected values come from the op table's doc strings and
// hand calculation, never from the kernels' own output. Per-op comparisons against the f64 reference evaluator live
// in the ops suites.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "crossfire/crossfire.hpp"
#include "philox.hpp"

namespace crossfire {
namespace {

constexpr Device kCpu = Device::cpu(0);
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();

Tensor f32(std::vector<float> v, IntList shape) { return from_data(std::span<const float>(v), shape, kCpu); }
Tensor i32(std::vector<int32_t> v, IntList shape) { return from_data(std::span<const int32_t>(v), shape, kCpu); }
Tensor boolean(std::vector<uint8_t> v, IntList shape) { return from_bool(v, shape, kCpu); }

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

// ---- every op has a CPU kernel ---------------------------------------------------------------------------------------

TEST(CpuKernels, EveryOpButFromDataAndToHasAKernel) {
  Backend& cpu = backend(BackendKind::cpu);
  for (size_t i = 0; i < kOpTable.size(); ++i) {
    const std::string_view name = kOpTable[i].name;
    if (name == "from_data" || name == "to") continue;
    EXPECT_NE(cpu.kernel(OpId(i)), nullptr) << "no CPU kernel for " << name;
  }
}

// ---- Philox ----------------------------------------------------------------------------------------------------------

// Random123 v1.14.0, tests/kat_vectors, the three "philox4x32 10" lines (counter, key -> output).
TEST(CpuKernels, PhiloxKnownAnswers) {
  using philox::Counter;
  EXPECT_EQ(philox::philox4x32_10({0, 0, 0, 0}, {0, 0}), (Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Seed 0, elements 0..3: block 0 has counter (0,0,0,0) and key (0,0), i.e. the first known answer.
TEST(CpuKernels, RandIsTheTop24BitsOfThePhiloxStream) {
  const uint32_t w[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  std::vector<float> got = rand({6}, 0, kCpu).to_f32();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[size_t(i)], float(double(w[i] >> 8) / 16777216.0)) << i;
  // Elements 4 and 5 come from block 1: counter (1, 0, 0, 0).
  const philox::Counter b1 = philox::philox4x32_10({1, 0, 0, 0}, {0, 0});
  EXPECT_EQ(got[4], float(double(b1[0] >> 8) / 16777216.0));
  EXPECT_EQ(got[5], float(double(b1[1] >> 8) / 16777216.0));
  // The key is (lo32(seed), hi32(seed)): seed -1 is key (0xffffffff, 0xffffffff).
  const philox::Counter k = philox::philox4x32_10({0, 0, 0, 0}, {0xffffffff, 0xffffffff});
  EXPECT_EQ(rand({1}, -1, kCpu).to_f32()[0], float(double(k[0] >> 8) / 16777216.0));
  const philox::Counter hi = philox::philox4x32_10({0, 0, 0, 0}, {5, 1});
  EXPECT_EQ(rand({1}, (int64_t(1) << 32) + 5, kCpu).to_f32()[0], float(double(hi[0] >> 8) / 16777216.0));
  // A prefix of a longer stream is the shorter stream.
  EXPECT_EQ(rand({3}, 0, kCpu).to_f32(), std::vector<float>(got.begin(), got.begin() + 3));
}

TEST(CpuKernels, RandnIsBoxMullerOnWordPairs) {
  const uint32_t w[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  auto pair = [&](int j, double* c, double* s) {
    const double u1 = (double(w[2 * j] >> 8) + 0.5) / 16777216.0, u2 = double(w[2 * j + 1] >> 8) / 16777216.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    *c = r * std::cos(2 * std::numbers::pi * u2);
    *s = r * std::sin(2 * std::numbers::pi * u2);
  };
  double c0, s0, c1, s1;
  pair(0, &c0, &s0);
  pair(1, &c1, &s1);
  std::vector<float> got = randn({3}, 0, kCpu).to_f32();  // odd length: the last element takes the cos
  ASSERT_EQ(got.size(), 3u);
  const double tol = 4 * 0x1p-23;
  EXPECT_NEAR(got[0], c0, tol * std::abs(c0));
  EXPECT_NEAR(got[1], s0, tol * std::abs(s0));
  EXPECT_NEAR(got[2], c1, tol * std::abs(c1));
  EXPECT_EQ(randn({4}, 0, kCpu).to_f32()[2], got[2]);
}

// ---- conversions ------------------------------------------------------------------------------------------------------

TEST(CpuKernels, CastF32ToI32TruncatesSaturatesAndMapsNaNToZero) {
  // 2147483520 is the largest f32 below 2^31.
  Tensor x = f32({1.9f, -1.9f, 2.5f, -0.5f, 3e9f, -3e9f, kNaN, kInf, -kInf, 2147483520.0f, 2147483648.0f,
                  -2147483648.0f},
                 {12});
  EXPECT_EQ(cast(x, DType::i32).to_i32(), (std::vector<int32_t>{1, -1, 2, 0, kIntMax, kIntMin, 0, kIntMax, kIntMin,
                                                                 2147483520, kIntMax, kIntMin}));
}

TEST(CpuKernels, CastToBoolIsNonZero) {
  EXPECT_EQ(cast(f32({0.0f, -0.0f, kNaN, 0.5f, -kInf, 1e-45f}, {6}), DType::boolean).to_bool(),
            (std::vector<uint8_t>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(cast(i32({0, -1, kIntMin, 7}, {4}), DType::boolean).to_bool(), (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST(CpuKernels, CastFromBoolAndI32) {
  EXPECT_EQ(cast(boolean({1, 0, 1}, {3}), DType::f32).to_f32(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(cast(boolean({1, 0, 1}, {3}), DType::i32).to_i32(), (std::vector<int32_t>{1, 0, 1}));
  // Round to nearest, ties to even: 2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4; INT_MAX -> 2^31.
  EXPECT_EQ(cast(i32({16777217, 16777219, kIntMax, kIntMin, -7}, {5}), DType::f32).to_f32(),
            (std::vector<float>{16777216.0f, 16777220.0f, 2147483648.0f, -2147483648.0f, -7.0f}));
  // Same dtype: a copy.
  EXPECT_EQ(cast(i32({3, -4}, {2}), DType::i32).to_i32(), (std::vector<int32_t>{3, -4}));
}

TEST(CpuKernels, FullConvertsItsValueByTheCastRules) {
  EXPECT_EQ(full({2}, 3.9, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(full({}, -1e10, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{kIntMin}));
  EXPECT_EQ(full({1}, std::nan(""), DType::i32, kCpu).to_i32(), (std::vector<int32_t>{0}));
  EXPECT_EQ(full({1}, 1e39, DType::f32, kCpu).to_f32(), (std::vector<float>{kInf}));
  EXPECT_EQ(full({1}, -1e39, DType::f32, kCpu).to_f32(), (std::vector<float>{-kInf}));
  EXPECT_EQ(full({1}, 0.1, DType::f32, kCpu).to_f32(), (std::vector<float>{0.1f}));  // rounded once
  EXPECT_EQ(full({2}, 0.5, DType::boolean, kCpu).to_bool(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(ones({2}, DType::boolean, kCpu).to_bool(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(ones({2}, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(bits(zeros({2}, DType::f32, kCpu).to_f32()), (std::vector<uint32_t>{0, 0}));
}

TEST(CpuKernels, ArangeIsStartPlusIStepThenConverted) {
  EXPECT_EQ(arange(0, 1, 0.25, DType::f32, kCpu).to_f32(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0, 3, 0.5, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(arange(5, 0, -2, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(arange(-1.5, 0, 0.5, DType::i32, kCpu).to_i32(), (std::vector<int32_t>{-1, -1, 0}));  // toward zero
  // 0.1 * 3 in f64 is 0.30000000000000004, which rounds to the f32 nearest 0.3.
  EXPECT_EQ(arange(0, 0.35, 0.1, DType::f32, kCpu).to_f32()[3], 0.3f);
  EXPECT_EQ(arange(3, 3, 1, DType::f32, kCpu).numel(), 0);
}

// ---- i32 wrap-around --------------------------------------------------------------------------------------------------

TEST(CpuKernels, I32ArithmeticWraps) {
  EXPECT_EQ(add(i32({kIntMax, -1}, {2}), i32({1, kIntMin}, {2})).to_i32(), (std::vector<int32_t>{kIntMin, kIntMax}));
  EXPECT_EQ(sub(i32({kIntMin, kIntMax}, {2}), i32({1, -1}, {2})).to_i32(), (std::vector<int32_t>{kIntMax, kIntMin}));
  EXPECT_EQ(mul(i32({65536, kIntMax, kIntMin}, {3}), i32({65536, 2, -1}, {3})).to_i32(),
            (std::vector<int32_t>{0, -2, kIntMin}));
  EXPECT_EQ(neg(i32({kIntMin, 5, 0}, {3})).to_i32(), (std::vector<int32_t>{kIntMin, -5, 0}));
  EXPECT_EQ(abs(i32({kIntMin, -5, 5}, {3})).to_i32(), (std::vector<int32_t>{kIntMin, 5, 5}));
  EXPECT_EQ(sum(i32({kIntMax, 1, 1}, {3})).to_i32(), (std::vector<int32_t>{kIntMin + 1}));
  // Along a strided axis too: columns of [[MAX, MIN], [1, -1]].
  EXPECT_EQ(sum(i32({kIntMax, kIntMin, 1, -1}, {2, 2}), 0).to_i32(), (std::vector<int32_t>{kIntMin, kIntMax}));
}

// ---- NaN and signed zero ------------------------------------------------------------------------------------------------

TEST(CpuKernels, MaximumAndMinimumPropagateNaN) {
  Tensor a = f32({kNaN, 1.0f, 2.0f, -kInf}, {4});
  Tensor b = f32({1.0f, kNaN, -3.0f, kNaN}, {4});
  for (const Tensor& r : {maximum(a, b), minimum(a, b), maximum(b, a), minimum(b, a)}) {
    std::vector<float> v = r.to_f32();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[3]));
  }
  EXPECT_EQ(maximum(a, b).to_f32()[2], 2.0f);
  EXPECT_EQ(minimum(a, b).to_f32()[2], -3.0f);
  EXPECT_EQ(maximum(i32({3, -7}, {2}), i32({-4, 9}, {2})).to_i32(), (std::vector<int32_t>{3, 9}));
}

// IEEE 754-2019 maximum/minimum: +0 is above -0, whichever side it is on (bit-exact across backends).
TEST(CpuKernels, MaximumAndMinimumOrderSignedZeros) {
  Tensor a = f32({0.0f, -0.0f}, {2}), b = f32({-0.0f, 0.0f}, {2});
  const uint32_t pos = 0, negz = 0x80000000u;
  EXPECT_EQ(bits(maximum(a, b).to_f32()), (std::vector<uint32_t>{pos, pos}));
  EXPECT_EQ(bits(minimum(a, b).to_f32()), (std::vector<uint32_t>{negz, negz}));
}

TEST(CpuKernels, ReluKeepsNaNAndZeroesTheRest) {
  std::vector<float> v = relu(f32({kNaN, -2.0f, -0.0f, 0.0f, 3.5f, kInf, -kInf}, {7})).to_f32();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(bits(std::vector<float>(v.begin() + 1, v.end())),
            bits({0.0f, 0.0f, 0.0f, 3.5f, kInf, 0.0f}));
}

TEST(CpuKernels, ComparisonsWithNaN) {
  Tensor a = f32({kNaN, 1.0f, 1.0f}, {3}), b = f32({kNaN, kNaN, 1.0f}, {3});
  EXPECT_EQ(eq(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(ne(a, b).to_bool(), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(lt(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(le(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(gt(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(ge(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(eq(boolean({1, 0}, {2}), boolean({1, 1}, {2})).to_bool(), (std::vector<uint8_t>{1, 0}));
}

// ---- broadcasting ------------------------------------------------------------------------------------------------------

TEST(CpuKernels, BroadcastingAlignsTrailingDims) {
  // a[i, 0, k] = 100 i + k (shape [2, 1, 3]), b[j, 0] = 10 j (shape [4, 1]) -> out[i, j, k] = 100 i + 10 j + k.
  Tensor a = f32({0, 1, 2, 100, 101, 102}, {2, 1, 3});
  Tensor b = f32({0, 10, 20, 30}, {4, 1});
  for (const Tensor& r : {add(a, b), add(b, a)}) {
    ASSERT_EQ(r.shape(), (Shape{2, 4, 3}));
    std::vector<float> v = r.to_f32();
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k) EXPECT_EQ(v[size_t((i * 4 + j) * 3 + k)], float(100 * i + 10 * j + k));
  }
  // Row and column vectors, and a rank-0 scalar on either side.
  EXPECT_EQ(sub(f32({10, 20, 30, 40, 50, 60}, {2, 3}), f32({1, 2, 3}, {3})).to_f32(),
            (std::vector<float>{9, 18, 27, 39, 48, 57}));
  EXPECT_EQ(sub(f32({10, 20}, {2, 1}), f32({1, 2, 3}, {1, 3})).to_f32(), (std::vector<float>{9, 8, 7, 19, 18, 17}));
  EXPECT_EQ(div(scalar(12, kCpu), f32({1, 2, 3}, {3})).to_f32(), (std::vector<float>{12, 6, 4}));
  EXPECT_EQ(div(f32({2, 4, 6}, {3}), scalar(2, kCpu)).to_f32(), (std::vector<float>{1, 2, 3}));
  // Rank 0 with rank 0; and size-0 dims broadcast with 1.
  Tensor s = mul(scalar(3, kCpu), scalar(4, kCpu));
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_f32(), (std::vector<float>{12}));
  Tensor e = add(zeros({0, 3}, DType::f32, kCpu), f32({1, 2, 3}, {1, 3}));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

TEST(CpuKernels, WhereBroadcastsAllThreeAndCompareBroadcasts) {
  // cond [2, 1], a [3], b rank 0 -> [2, 3].
  Tensor r = where(boolean({1, 0}, {2, 1}), i32({1, 2, 3}, {3}), full({}, -1, DType::i32, kCpu));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{1, 2, 3, -1, -1, -1}));
  Tensor rb = where(boolean({1, 0, 1}, {3}), boolean({0}, {1}), boolean({1, 1, 0}, {3}));
  EXPECT_EQ(rb.to_bool(), (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(lt(i32({1, 5}, {2, 1}), i32({2, 4, 6}, {3})).to_bool(), (std::vector<uint8_t>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(logical_and(boolean({1, 0}, {2, 1}), boolean({1, 0}, {2})).to_bool(), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(logical_or(boolean({1, 0}, {2, 1}), boolean({1, 0}, {2})).to_bool(), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(logical_not(boolean({1, 0}, {2})).to_bool(), (std::vector<uint8_t>{0, 1}));
}

}  // namespace
}  // namespace crossfire
