// SPDX-License-Identifier: Apache-2.0
// CPU kernels, hand-worked cases for reductions (NaN and ties in max/argmax, strided axes, empty inputs), softmax's
// stability, matmul's batch broadcasting, conv2d / unfold / fold geometry (and fold as unfold's adjoint), and the
// data-movement kernels. Expected values are worked out by hand or by plain loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire {
namespace {

constexpr Device kCpu = Device::cpu(0);
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor f32(std::vector<float> v, IntList shape) { return from_data(std::span<const float>(v), shape, kCpu); }
Tensor i32(std::vector<int32_t> v, IntList shape) { return from_data(std::span<const int32_t>(v), shape, kCpu); }

// Deterministic, exactly representable test values (multiples of 1/8 in [-4, 4)).
std::vector<float> pattern(int64_t n, int salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 37 + salt * 11) % 64 - 32) / 8.0f;
  return v;
}

// ---- max / argmax ---------------------------------------------------------------------------------------------------

TEST(CpuKernels, ArgmaxTakesTheFirstMaximumOrTheFirstNaN) {
  EXPECT_EQ(argmax(f32({1, 3, 3, 2}, {4})).to_i32(), (std::vector<int32_t>{1}));
  EXPECT_EQ(argmax(f32({1, 3, 3, kNaN, 2, kNaN}, {6})).to_i32(), (std::vector<int32_t>{3}));
  EXPECT_EQ(argmax(f32({kNaN, 5}, {2})).to_i32(), (std::vector<int32_t>{0}));
  EXPECT_EQ(argmax(i32({-5, 7, 7, -9}, {4})).to_i32(), (std::vector<int32_t>{1}));
  EXPECT_TRUE(std::isnan(max(f32({1, 3, kNaN, 2}, {4})).to_f32()[0]));
  EXPECT_EQ(max(f32({1, 3, 3, 2}, {4})).to_f32(), (std::vector<float>{3}));
}

TEST(CpuKernels, ArgmaxAndMaxAlongAnAxis) {
  // [[1, 5, 5], [NaN, 0, NaN]]
  Tensor x = f32({1, 5, 5, kNaN, 0, kNaN}, {2, 3});
  EXPECT_EQ(argmax(x, 1).to_i32(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(argmax(x, -1).to_i32(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(argmax(x, 0).to_i32(), (std::vector<int32_t>{1, 0, 1}));  // strided axis: column by column
  EXPECT_EQ(argmax(x).to_i32(), (std::vector<int32_t>{3}));            // over all elements: the flat index
  std::vector<float> m0 = max(x, 0).to_f32();
  EXPECT_TRUE(std::isnan(m0[0]) && std::isnan(m0[2]));
  EXPECT_EQ(m0[1], 5.0f);
  std::vector<float> m1 = max(x, 1).to_f32();
  EXPECT_EQ(m1[0], 5.0f);
  EXPECT_TRUE(std::isnan(m1[1]));
  // Ties along a strided axis: the first row wins. x[i, j, k] over axis 1 of a [2, 3, 2] tensor.
  Tensor t = i32({4, 1, 4, 9, 0, 9, /**/ 2, 2, 3, 2, 3, 1}, {2, 3, 2});
  EXPECT_EQ(argmax(t, 1).to_i32(), (std::vector<int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(max(t, 1).to_i32(), (std::vector<int32_t>{4, 9, 3, 2}));
  Tensor k = argmax(t, 1, true);
  EXPECT_EQ(k.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(max(t, std::nullopt, true).shape(), (Shape{1, 1, 1}));
}

// ---- sum / mean ------------------------------------------------------------------------------------------------------

TEST(CpuKernels, SumAndMeanAlongAxesAndOverEmptyInputs) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(x, 0).to_f32(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(sum(x, 1).to_f32(), (std::vector<float>{6, 15}));
  EXPECT_EQ(sum(x).to_f32(), (std::vector<float>{21}));
  EXPECT_EQ(mean(x, 0).to_f32(), (std::vector<float>{2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(mean(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, 1, true).to_f32(), (std::vector<float>{2, 5}));
  // A wide strided axis (more columns than one accumulator chunk): column sums of a [3, 700] tensor.
  std::vector<float> w(3 * 700);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 700; ++c) w[size_t(r * 700 + c)] = float(c + 1000 * r);
  std::vector<float> cs = sum(f32(w, {3, 700}), 0).to_f32();
  for (int c = 0; c < 700; ++c) ASSERT_EQ(cs[size_t(c)], float(3 * c + 3000)) << c;
  // Empty: the sum of nothing is 0, the mean of nothing is NaN.
  Tensor e = zeros({0, 3}, DType::f32, kCpu);
  EXPECT_EQ(sum(e).to_f32(), (std::vector<float>{0}));
  EXPECT_EQ(sum(e, 0).to_f32(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(mean(e).to_f32()[0]));
  EXPECT_EQ(sum(e, 1).numel(), 0);
  EXPECT_EQ(sum(scalar(2.5, kCpu)).to_f32(), (std::vector<float>{2.5f}));
}

// ---- softmax ---------------------------------------------------------------------------------------------------------

TEST(CpuKernels, SoftmaxSubtractsTheMaximum) {
  // exp(1000) overflows f32 and f64; the stable form gives 1/2 each.
  EXPECT_EQ(softmax(f32({1000, 1000}, {2}), 0).to_f32(), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(softmax(f32({-1000, -1000, -1000, -1000}, {4}), 0).to_f32(),
            (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}));
  // Along axis 0 of [[0, 7], [ln 3, 7]]: column 0 is (1/4, 3/4), column 1 is (1/2, 1/2).
  std::vector<float> v = softmax(f32({0, 7, float(std::log(3.0)), 7}, {2, 2}), 0).to_f32();
  EXPECT_NEAR(v[0], 0.25, 1e-7);
  EXPECT_NEAR(v[2], 0.75, 1e-7);
  EXPECT_EQ(v[1], 0.5f);
  EXPECT_EQ(v[3], 0.5f);
}

// ---- matmul ----------------------------------------------------------------------------------------------------------

TEST(CpuKernels, MatmulSmallCase) {
  // [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  EXPECT_EQ(matmul(f32({1, 2, 3, 4}, {2, 2}), f32({5, 6, 7, 8}, {2, 2})).to_f32(),
            (std::vector<float>{19, 22, 43, 50}));
  // k = 0: a sum of nothing.
  EXPECT_EQ(matmul(zeros({2, 0}, DType::f32, kCpu), zeros({0, 3}, DType::f32, kCpu)).to_f32(),
            std::vector<float>(6, 0.0f));
}

TEST(CpuKernels, MatmulBroadcastsBatchDims) {
  // lhs [2, 1, 2, 3] x rhs [3, 3, 2] -> [2, 3, 2, 2]; out[a, b] = lhs[a, 0] x rhs[b].
  std::vector<float> l = pattern(2 * 2 * 3, 1), r = pattern(3 * 3 * 2, 2);
  Tensor out = matmul(f32(l, {2, 1, 2, 3}), f32(r, {3, 3, 2}));
  ASSERT_EQ(out.shape(), (Shape{2, 3, 2, 2}));
  std::vector<float> v = out.to_f32();
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          double acc = 0;
          for (int k = 0; k < 3; ++k) acc += double(l[size_t(a * 6 + i * 3 + k)]) * r[size_t(b * 6 + k * 2 + j)];
          EXPECT_EQ(v[size_t(((a * 3 + b) * 2 + i) * 2 + j)], float(acc));  // products of eighths: exact
        }
}

// ---- conv2d, unfold, fold --------------------------------------------------------------------------------------------

TEST(CpuKernels, Conv2dHandWorked) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor bias = f32({0.5f}, {1});
  // Stride 1, no padding: 1*1+2*2+3*4+4*5 = 37, then 47, 67, 77; plus the bias.
  EXPECT_EQ(conv2d(x, w, &bias, {1, 1}, {0, 0}).to_f32(), (std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f}));
  // Stride 2, padding 1: each window covers one corner region of the zero-padded 5x5 image.
  EXPECT_EQ(conv2d(x, w, nullptr, {2, 2}, {1, 1}).to_f32(), (std::vector<float>{4, 18, 36, 77}));
  // A 1x1 kernel over two channels, two images (the second is ten times the first), three output channels.
  Tensor x2 = f32({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 1, 2});
  Tensor w2 = f32({1, 1, 1, -1, 2, 0}, {3, 2, 1, 1});
  Tensor b2 = f32({0, 0, 1}, {3});
  EXPECT_EQ(conv2d(x2, w2, &b2, {1, 1}, {0, 0}).to_f32(),
            (std::vector<float>{4, 6, -2, -2, 3, 5, 40, 60, -20, -20, 21, 41}));
}

TEST(CpuKernels, UnfoldRowsAreChannelKernelRowKernelColumn) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor u = unfold(x, {2, 2}, {1, 1}, {0, 0});
  ASSERT_EQ(u.shape(), (Shape{1, 4, 4}));
  EXPECT_EQ(u.to_f32(), (std::vector<float>{1, 2, 4, 5, /**/ 2, 3, 5, 6, /**/ 4, 5, 7, 8, /**/ 5, 6, 8, 9}));
  // Fold of all-ones counts how many windows cover each pixel.
  Tensor f = fold(ones({1, 4, 4}, DType::f32, kCpu), {3, 3}, {2, 2}, {1, 1}, {0, 0});
  EXPECT_EQ(f.to_f32(), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

// <unfold(x), y> == <x, fold(y)> for any x, y: fold is unfold's adjoint (and conv2d's backward relies on it).
TEST(CpuKernels, FoldIsTheAdjointOfUnfold) {
  struct Case {
    int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
  };
  for (const Case& k : {Case{2, 3, 5, 4, 3, 2, 2, 1, 1, 2}, Case{1, 2, 6, 7, 2, 3, 3, 2, 0, 1},
                        Case{1, 1, 4, 4, 1, 1, 1, 1, 0, 0}, Case{2, 2, 3, 3, 3, 3, 1, 1, 2, 2},
                        Case{1, 1, 2, 9, 2, 4, 1, 3, 1, 3}}) {
    std::vector<float> xv = pattern(k.n * k.c * k.h * k.w, 3);
    Tensor x = f32(xv, {k.n, k.c, k.h, k.w});
    Tensor u = unfold(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw});
    std::vector<float> yv = pattern(u.numel(), 5);
    Tensor y = f32(yv, u.shape().dims());
    Tensor f = fold(y, {k.h, k.w}, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw});
    ASSERT_EQ(f.shape(), x.shape());
    std::vector<float> uv = u.to_f32(), fv = f.to_f32();
    double lhs = 0, rhs = 0;  // eighths times eighths, summed in f64: exact
    for (size_t i = 0; i < uv.size(); ++i) lhs += double(uv[i]) * yv[i];
    for (size_t i = 0; i < fv.size(); ++i) rhs += double(xv[i]) * fv[i];
    EXPECT_EQ(lhs, rhs) << "kernel " << k.kh << "x" << k.kw << " stride " << k.sh << "," << k.sw << " padding "
                        << k.ph << "," << k.pw;
  }
}

// ---- data movement ---------------------------------------------------------------------------------------------------

TEST(CpuKernels, PermuteSliceExpandCat) {
  std::vector<float> xv = pattern(24, 7);
  Tensor x = f32(xv, {2, 3, 4});
  // permute (2, 0, 1): out[k, i, j] = x[i, j, k].
  std::vector<float> p = permute(x, {2, 0, 1}).to_f32();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(p[size_t((k * 2 + i) * 3 + j)], xv[size_t((i * 3 + j) * 4 + k)]);
  // slice: axis 1 from 1 step 1, axis 2 from 0 step 3 -> [2, 2, 2] taking k in {0, 3}.
  std::vector<float> s = slice(x, {0, 1, 0}, {2, 3, 4}, {1, 1, 3}).to_f32();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(s[size_t((i * 2 + j) * 2 + k)], xv[size_t((i * 3 + j + 1) * 4 + k * 3)]);
  // expand [3, 1] -> [2, 3, 2].
  EXPECT_EQ(expand(i32({1, 2, 3}, {3, 1}), {2, 3, 2}).to_i32(),
            (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  // cat along the middle axis, an empty block included.
  std::vector<Tensor> parts{i32({1, 2, 3, 4}, {2, 1, 2}), i32({}, {2, 0, 2}), i32({5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 2})};
  Tensor c = cat(parts, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(c.to_i32(), (std::vector<int32_t>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
  // bool moves as bytes.
  std::vector<uint8_t> bv{1, 0, 0, 1, 1, 0};
  EXPECT_EQ(permute(from_bool(bv, {2, 3}, kCpu), {1, 0}).to_bool(), (std::vector<uint8_t>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(reshape(x, {4, -1}).to_f32(), xv);
}

TEST(CpuKernels, IndexSelectPicksAndRejectsOutOfRange) {
  Tensor x = i32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(index_select(x, 1, i32({2, 0, 2}, {3})).to_i32(), (std::vector<int32_t>{3, 1, 3, 6, 4, 6}));
  EXPECT_EQ(index_select(x, 0, i32({1}, {1})).to_i32(), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(index_select(x, -1, i32({}, {0})).shape(), (Shape{2, 0}));
  for (int32_t bad : {3, -1}) {
    try {
      index_select(x, 1, i32({0, bad}, {2}));
      ADD_FAILURE() << "index " << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.param, "index");
      EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crossfire
