// SPDX-License-Identifier: Apache-2.0
// f16 and bf16 on the device under test (Note [Half precision] in device.hpp; docs/contract.md, Dtypes): the
// conversions at every rounding point, data movement as bits, arithmetic in f32 rounded once, the reductions,
// matmul and conv2d accumulating in f32 (values worked out by hand, each of which a half accumulation gets wrong),
// and rand from the same Philox words as the CPU backend. Every backend runs these; one that computes no halves
// skips them with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "crossfire/crossfire.hpp"
#include "reference/reference.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::testing {
namespace {

#define REQUIRE_HALVES(var)                                                                        \
  CROSSFIRE_REQUIRE_DEVICE(var, 0);                                                                \
  do {                                                                                             \
    const Backend* b_ = find_backend(var);                                                         \
    if (b_ == nullptr || !b_->dtypes().contains(DType::f16) || !b_->dtypes().contains(DType::bf16)) \
      GTEST_SKIP() << var.str() << " computes no f16/bf16 tensors";                               \
  } while (0)

std::vector<float> f32s(std::initializer_list<float> v) { return std::vector<float>(v); }
Tensor vec(const std::vector<float>& v, Device d) {
  return from_data(std::span<const float>(v), IntList{int64_t(v.size())}, d);
}
// A half tensor's values, widened to f32 on its device (exact).
std::vector<float> value(const Tensor& t) { return cast(t, DType::f32).to_f32(); }

Tensor halves(const std::vector<uint16_t>& bits, std::vector<int64_t> shape, DType dt, Device d) {
  std::vector<uint8_t> bytes;
  for (uint16_t b : bits) bytes.push_back(uint8_t(b)), bytes.push_back(uint8_t(b >> 8));
  return from_bytes(bytes, shape, dt, d);
}
std::vector<uint16_t> bits_of(const Tensor& t) {
  const std::vector<uint8_t> b = t.to_host_bytes();
  std::vector<uint16_t> out;
  for (size_t i = 0; i + 1 < b.size(); i += 2) out.push_back(uint16_t(b[i] | (b[i + 1] << 8)));
  return out;
}

// Every f16/bf16 bit pattern widens exactly (cast to f32, against the reference's own decoder), and f32 values at
// and around every rounding point of f16 and bf16 (ties both ways, the subnormal range, the overflow threshold,
// NaN) narrow to the reference's round-to-nearest-even.
TEST(HalfPrecision, HalvesWidenExactlyAndNarrowToNearestEven) {
  REQUIRE_HALVES(d);
  std::vector<uint8_t> all(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) all[2 * h] = uint8_t(h), all[2 * h + 1] = uint8_t(h >> 8);
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<float> wide = cast(from_bytes(all, {65536}, dt, d), DType::f32).to_f32();
    for (uint32_t h = 0; h < 65536; ++h) {
      const double want = reference::half_value(uint16_t(h), dt);
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(wide[h])) << std::hex << h;
      else ASSERT_EQ(double(wide[h]), want) << std::hex << h;
    }
  }
  // f32 values: each half value, the midpoints to its neighbours (ties), and one f32 ulp either side of those.
  std::vector<float> xs;
  for (DType dt : {DType::f16, DType::bf16})
    for (uint32_t h = 0; h < 0x7c00; h += 7) {
      const double a = reference::half_value(uint16_t(h), dt), b = reference::half_value(uint16_t(h + 1), dt);
      const float mid = float((a + b) / 2);
      for (float f : {float(a), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)})
        xs.push_back(f), xs.push_back(-f);
    }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e30f, std::numeric_limits<float>::infinity(), 0x1p-25f, 0x1.8p-25f,
                  0x1p-26f, std::numeric_limits<float>::quiet_NaN(), 0x1.fffffep127f})
    xs.push_back(f), xs.push_back(-f);
  const Tensor x = vec(xs, d);
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<float> got = value(cast(x, dt));
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = reference::round_to(double(xs[i]), dt);
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(got[i])) << xs[i];
      else ASSERT_EQ(double(got[i]), want) << std::hexfloat << xs[i];
    }
  }
  // i32 -> f16/bf16 rounds the exact integer once: 2^24 + 2^16 + 1 is 2^24 + 2^17 in bf16, not the tie's 2^24.
  std::vector<int32_t> iv{(1 << 24) + (1 << 16) + 1, 2049, -2147483647 - 1, 65520, 65519};
  const Tensor iv_t = from_data(std::span<const int32_t>(iv), {int64_t(iv.size())}, d);
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::vector<float> got = value(cast(iv_t, dt));
    for (size_t i = 0; i < iv.size(); ++i)
      EXPECT_EQ(double(got[i]), reference::round_to(double(iv[i]), dt)) << dtype_name(dt) << " " << iv[i];
  }
}

// Elementwise arithmetic computes in f32 and rounds each result once. f16 has 11 significant bits, so at 2048 its
// spacing is 2: 2048 + 1 is a tie that goes to the even 2048, 2048 + 3 a tie that goes to 2052; bf16 (8 bits)
// spaces 256 by 2 the same way. 300 * 300 = 90000 is past f16's 65504: infinity, a result and not an error.
TEST(HalfPrecision, ElementwiseArithmeticRoundsOnce) {
  REQUIRE_HALVES(d);
  const Tensor a = cast(vec(f32s({2048, 2048, 300, -1}), d), DType::f16);
  const Tensor b = cast(vec(f32s({1, 3, 300, 0.5f}), d), DType::f16);
  EXPECT_EQ(value(add(a, b)), f32s({2048, 2052, 600, -0.5f}));
  EXPECT_EQ(value(mul(a, b)), f32s({2048, 6144, std::numeric_limits<float>::infinity(), -0.5f}));
  EXPECT_EQ(add(a, b).dtype(), DType::f16);
  EXPECT_EQ(lt(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 0, 1}));
  const Tensor c = cast(vec(f32s({256, 256}), d), DType::bf16), e = cast(vec(f32s({1, 3}), d), DType::bf16);
  EXPECT_EQ(value(add(c, e)), f32s({256, 260}));
  // clamp: x in f32 against the f32 bounds, rounded once: the bound 0.998046875 (1 - 2^-9) is a bf16 tie -> 1.
  EXPECT_EQ(value(clamp(c, -1.0, 0.998046875)), f32s({1, 1}));
}

// Data movement copies 16-bit elements: odd sizes, pieces of cat that share a word, strided slices, index_select by
// an i32 and an i64 index, and unfold, each against the same bits computed by hand (a NaN's payload included).
TEST(HalfPrecision, LayoutOpsCopyBits) {
  REQUIRE_HALVES(d);
  const Backend* be = find_backend(d);
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<uint16_t> a{0x3c00, 0x8000, 0x7e01, 0x0001, 0xc000}, b{0x1234, 0xfbff, 0x7c00};
    const Tensor ta = halves(a, {5}, dt, d), tb = halves(b, {3}, dt, d);
    std::vector<Tensor> ts{ta, tb, ta};
    EXPECT_EQ(bits_of(cat(ts, 0)), (std::vector<uint16_t>{0x3c00, 0x8000, 0x7e01, 0x0001, 0xc000, 0x1234, 0xfbff,
                                                            0x7c00, 0x3c00, 0x8000, 0x7e01, 0x0001, 0xc000}));
    EXPECT_EQ(bits_of(slice(cat(ts, 0), {1}, {13}, {3})), (std::vector<uint16_t>{0x8000, 0xc000, 0x7c00, 0x7e01}));
    EXPECT_EQ(bits_of(permute(reshape(ta, {5, 1}), {1, 0})), a);
    EXPECT_EQ(bits_of(expand(reshape(tb, {3, 1}), {3, 2})),
              (std::vector<uint16_t>{0x1234, 0x1234, 0xfbff, 0xfbff, 0x7c00, 0x7c00}));
    std::vector<int32_t> idx{4, 0, 4, 2, 1};
    EXPECT_EQ(bits_of(index_select(ta, 0, from_data(std::span<const int32_t>(idx), {5}, d))),
              (std::vector<uint16_t>{0xc000, 0x3c00, 0xc000, 0x7e01, 0x8000}));
    if (be->dtypes().contains(DType::i64)) {
      std::vector<int64_t> idx64{2, 4};
      EXPECT_EQ(bits_of(index_select(ta, 0, from_data(std::span<const int64_t>(idx64), {2}, d))),
                (std::vector<uint16_t>{0x7e01, 0xc000}));
    }
    // unfold of a [1, 1, 2, 2] image by a 2x1 kernel, padding 1 row: columns are the 3 x 2 window positions, rows
    // the kernel's two taps; a padded tap is +0 (0x0000) and the NaN keeps its payload.
    const Tensor img = halves({0x7e01, 0x3c00, 0x8000, 0xc000}, {1, 1, 2, 2}, dt, d);
    const std::vector<int64_t> kernel{2, 1}, stride{1, 1}, pad{1, 0};
    EXPECT_EQ(bits_of(unfold(img, kernel, stride, pad)),
              (std::vector<uint16_t>{0x0000, 0x0000, 0x7e01, 0x3c00, 0x8000, 0xc000,    // tap 0: rows -1, 0, 1
                                     0x7e01, 0x3c00, 0x8000, 0xc000, 0x0000, 0x0000}));  // tap 1: rows 0, 1, 2
  }
}

// rand in f16 and bf16 takes each Philox word's top 11 or 8 bits: bit-identical to the CPU backend, odd sizes
// included; randn within the op's bound of the reference.
TEST(HalfPrecision, RandIsBitIdenticalAndRandnWithinTheBound) {
  REQUIRE_HALVES(d);
  const Device cpu{BackendKind::cpu, 0};
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t n : {1, 2, 3, 5, 1001}) {
      SCOPED_TRACE(fmt::format("{} n={}", dtype_name(dt), n));
      EXPECT_EQ(rand({n}, 42, d, dt).to_host_bytes(), rand({n}, 42, cpu, dt).to_host_bytes());
      const std::vector<int64_t> shape{n};  // the pack views it
      ArgPack args(Arg::of(IntList(shape)), Arg::integer(7), Arg::of(dt), Arg::of(d));
      const reference::RefResult want = reference::evaluate(reference::RefCall::from(ids::randn_id, args));
      const auto m = reference::first_mismatch(op_def(ids::randn_id), want,
                                               reference::RefTensor::from(call(ids::randn_id, args)));
      EXPECT_FALSE(m.has_value()) << m->what;
    }
}

// The reductions, softmax, matmul and conv2d accumulate in f32 and round each result once; arange computes each
// element in f64 and rounds it once. Values worked out by hand, each of which an accumulation in the half dtype
// would get wrong.
TEST(HalfPrecision, ReductionsMatmulAndConvAccumulateInF32) {
  REQUIRE_HALVES(d);
  // f16 holds 60000 (1875 x 32; the spacing is 32 above 32768). In f16 the first partial sum, 120000, overflows to
  // inf; in f32, 60000 + 60000 - 60000 = 60000. The mean is 20000 (1250 x 16). 60001 rounds to 60000.
  const Tensor x = cast(vec(f32s({60000.f, 60000.f, -60000.f}), d), DType::f16);
  EXPECT_EQ(value(sum(x)), f32s({60000.f}));
  EXPECT_EQ(value(mean(x)), f32s({20000.f}));
  EXPECT_EQ(value(max(x)), f32s({60000.f}));
  EXPECT_EQ(value(sum(cast(vec(f32s({60000.f, 1.f}), d), DType::f16))), f32s({60000.f}));
  EXPECT_EQ(argmax(cast(vec(f32s({1.f, 3.f, 3.f, 2.f}), d), DType::bf16)).to_i32(), std::vector<int32_t>{1});
  EXPECT_EQ(value(sum(reshape(cast(vec(f32s({1.f, 2.f, 3.f, 4.f}), d), DType::f16), {2, 2}), 0)), f32s({4.f, 6.f}));
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie that rounds to 1, so a bf16 accumulation of
  // 1 + 2^-8 + 2^-8 gives 1; in f32 it is 1 + 2^-7, which bf16 holds.
  const Tensor a = reshape(cast(vec(f32s({1.f, 0x1p-8f, 0x1p-8f}), d), DType::bf16), {1, 3});
  const Tensor b = reshape(cast(vec(f32s({1.f, 1.f, 1.f}), d), DType::bf16), {3, 1});
  EXPECT_EQ(value(matmul(a, b)), f32s({1.0078125f}));
  EXPECT_EQ(matmul(a, b).dtype(), DType::bf16);
  EXPECT_EQ(value(sum(a)), f32s({1.0078125f}));
  // conv2d: the same three products in one 1x3 window.
  EXPECT_EQ(value(conv2d(reshape(a, {1, 1, 1, 3}), reshape(b, {1, 1, 1, 3}), nullptr, {1, 1}, {0, 0})),
            f32s({1.0078125f}));
  EXPECT_EQ(value(softmax(cast(vec(f32s({0.f, 0.f, 0.f, 0.f}), d), DType::f16), 0)),
            f32s({0.25f, 0.25f, 0.25f, 0.25f}));
  // arange: element i is start + i*step in f64, rounded once to the dtype; bit-identical to the CPU backend.
  for (DType dt : {DType::f16, DType::bf16}) {
    const Tensor v = arange(-3.0, 7.0, 0.1, dt, d), c = arange(-3.0, 7.0, 0.1, dt, Device{BackendKind::cpu, 0});
    EXPECT_EQ(v.dtype(), dt);
    EXPECT_EQ(v.to_host_bytes(), c.to_host_bytes()) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace crossfire::testing
