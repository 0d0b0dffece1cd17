// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's own checks (kernels/cuda), beside the shared suites that every backend runs.
//
// Without a device (or with CUDA compiled out): the backend is unavailable and says why in one line (contract
// section 1), and asking for cuda:0 raises BackendUnavailable with that reason and changes nothing.
// With a device: device info, hand-worked kernel cases with exact expectations (integer wrap, NaN and signed-zero
// rules, conversions, Philox known answers), f32 kernels against f64 loops written here, agreement with the CPU
// backend for bit-exact ops, the typed errors only a device can raise (an out-of-range index, out of memory), and
// the caching allocator.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "crossfire/crossfire.hpp"
#ifdef CROSSFIRE_HAS_CUDA
#include "cuda_backend.hpp"
#endif

namespace {

using namespace crossfire;

Backend& cuda_backend() { return backend(BackendKind::cuda); }
bool has_device() { return cuda_backend().device_count() > 0; }
std::string unavailable_line() { return "cuda: unavailable: " + cuda_backend().unavailable_reason(); }

#define REQUIRE_CUDA_DEVICE()                    \
  do {                                           \
    if (!has_device()) GTEST_SKIP() << unavailable_line(); \
  } while (0)

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu(0);

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Bitwise equality of two f32 vectors (NaN == NaN, +0 != -0).
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << " (0x" << std::hex
                                           << bits(got[i]) << "), want " << want[i] << " (0x" << bits(want[i])
                                           << ")";
  return ::testing::AssertionSuccess();
}

// |got - want| <= k * eps * |want| + tiny, NaN where want is NaN.
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& want, double k,
                                 double tiny = 1.2e-38) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i]))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
    if (std::isnan(want[i])) continue;
    const double tol = k * 0x1p-23 * std::abs(want[i]) + tiny;
    if (std::abs(double(got[i]) - want[i]) > tol)
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i]
                                           << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

Tensor gpu(const std::vector<float>& v, IntList shape) { return from_data(std::span<const float>(v), shape, kGpu); }
Tensor gpu_i32(const std::vector<int32_t>& v, IntList shape) {
  return from_data(std::span<const int32_t>(v), shape, kGpu);
}
Tensor gpu_bool(const std::vector<uint8_t>& v, IntList shape) {
  return from_bool(std::span<const uint8_t>(v), shape, kGpu);
}

// ---- no device ------------------------------------------------------------------------------------------------------

TEST(CudaAvailability, UnavailableWithAOneLineReason) {
  if (has_device()) GTEST_SKIP() << "this machine has a CUDA device";
  const std::string reason = cuda_backend().unavailable_reason();
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  EXPECT_FALSE(cuda_backend().available());
  EXPECT_EQ(cuda_backend().device_count(), 0);
  for (Device d : available_devices()) EXPECT_NE(d.backend, BackendKind::cuda) << d.str();
#ifdef CROSSFIRE_HAS_CUDA
  // Compiled in: cudaGetDeviceCount's error and its code, e.g. "CUDA driver version is insufficient for CUDA
  // runtime version (35)", or "no CUDA device found".
  EXPECT_TRUE(reason.back() == ')' || reason == "no CUDA device found") << reason;
#endif
  std::printf("%s\n", unavailable_line().c_str());
}

TEST(CudaAvailability, AskingForCuda0RaisesBackendUnavailable) {
  if (has_device()) GTEST_SKIP() << "this machine has a CUDA device";
  const std::string reason = cuda_backend().unavailable_reason();
  const CounterSnapshot before = backend(BackendKind::cpu).snapshot();
  try {
    zeros({2, 3}, DType::f32, kGpu);
    FAIL() << "zeros on cuda:0 did not raise";
  } catch (const BackendUnavailable& e) {
    EXPECT_EQ(e.backend, BackendKind::cuda);
    EXPECT_EQ(e.reason, reason);
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
  Tensor host = ones({4}, DType::f32, kCpu);
  const CounterSnapshot with_host = backend(BackendKind::cpu).snapshot();
  EXPECT_THROW(to(host, kGpu), BackendUnavailable);
  EXPECT_THROW(rand({3}, 1, kGpu), BackendUnavailable);
  EXPECT_EQ(backend(BackendKind::cpu).snapshot(), with_host);  // nothing allocated or copied
  EXPECT_NE(before, with_host);
}

TEST(CudaKernels, EveryOpButTheTransfersHasAKernel) {
#ifndef CROSSFIRE_HAS_CUDA
  GTEST_SKIP() << "the CUDA backend is compiled out";
#endif
  for (size_t i = 0; i < kOpTable.size(); ++i) {
    const std::string_view name = kOpTable[i].name;
    if (name == "from_data" || name == "to") continue;  // dispatch runs these through write/read/copy
    EXPECT_NE(cuda_backend().kernel(OpId(i)), nullptr) << name;
  }
}

// ---- with a device: the device and its memory --------------------------------------------------------------------

TEST(CudaDevice, InfoAndDeviceList) {
  REQUIRE_CUDA_DEVICE();
  EXPECT_TRUE(cuda_backend().unavailable_reason().empty());
  for (int i = 0; i < cuda_backend().device_count(); ++i) {
    DeviceInfo info = cuda_backend().device_info(i);
    EXPECT_EQ(info.device, Device::cuda(i));
    EXPECT_FALSE(info.name.empty());
    std::printf("%s: %s [%s] %s\n", info.device.str().c_str(), info.name.c_str(), info.type.c_str(),
                info.driver.c_str());
  }
}

TEST(CudaDevice, RoundTripsAreBitExact) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> f = {1.5f, -0.0f, kNaN, -kInf, 3.4028235e38f, 1e-45f};
  EXPECT_TRUE(same_bits(gpu(f, {2, 3}).to_f32(), f));
  std::vector<int32_t> i = {INT32_MIN, -1, 0, 7, INT32_MAX};
  EXPECT_EQ(gpu_i32(i, {5}).to_i32(), i);
  std::vector<uint8_t> b = {1, 0, 0, 1, 1};
  EXPECT_EQ(gpu_bool(b, {5}).to_bool(), b);
  // cpu -> cuda -> cuda -> cpu, through dispatch's write/copy/read
  Tensor h = from_data(std::span<const float>(f), {6}, kCpu);
  EXPECT_TRUE(same_bits(to(to(to(h, kGpu), kGpu), kCpu).to_f32(), f));
  Tensor empty = zeros({0, 3}, DType::f32, kGpu);
  EXPECT_TRUE(empty.to_f32().empty());
  cuda_backend().synchronize();
}

TEST(CudaDevice, OutOfMemoryIsTyped) {
  REQUIRE_CUDA_DEVICE();
  // 4 TiB, past any GPU; called directly because dispatch's shape rules cap tensors well below that.
  Shape huge{int64_t(1) << 20, int64_t(1) << 20};
  try {
    TensorImpl* t = cuda_backend().allocate(kGpu, DType::f32, huge, "test_oom");
    cuda_backend().release(t);
    FAIL() << "a 4 TiB allocation succeeded";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.op(), "test_oom");
    EXPECT_EQ(e.device, kGpu);
    EXPECT_EQ(e.bytes, size_t(4) << 40);
  }
  EXPECT_EQ(ones({3}, DType::f32, kGpu).to_f32(), (std::vector<float>{1, 1, 1}));  // still usable
}

#ifdef CROSSFIRE_HAS_CUDA
TEST(CudaDevice, ReleasedBuffersAreReused) {
  REQUIRE_CUDA_DEVICE();
  auto& b = dynamic_cast<cuda::CudaBackend&>(cuda_backend());
  { Tensor warm = zeros({1000}, DType::f32, kGpu); }
  const size_t cached = b.cached_bytes(0);
  EXPECT_GE(cached, cuda::size_class(4000));
  for (int i = 0; i < 100; ++i) {
    Tensor t = zeros({1000}, DType::f32, kGpu);
    EXPECT_EQ(b.cached_bytes(0), cached - cuda::size_class(4000));  // served from the free list
  }
  EXPECT_EQ(b.cached_bytes(0), cached);
  static_assert(cuda::size_class(1) == 512 && cuda::size_class(512) == 512 && cuda::size_class(513) == 1024);
  static_assert(cuda::size_class((size_t(1) << 20) + 1) == size_t(2) << 20);
}
#endif

// ---- creation --------------------------------------------------------------------------------------------------------

TEST(CudaCreation, FillsConvertLikeCast) {
  REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(zeros({2, 2}, DType::i32, kGpu).to_i32(), (std::vector<int32_t>(4, 0)));
  EXPECT_EQ(ones({3}, DType::boolean, kGpu).to_bool(), (std::vector<uint8_t>(3, 1)));
  EXPECT_EQ(full({2}, -2.7, DType::i32, kGpu).to_i32(), (std::vector<int32_t>{-2, -2}));
  EXPECT_EQ(full({1}, 1e10, DType::i32, kGpu).to_i32(), (std::vector<int32_t>{INT32_MAX}));
  EXPECT_EQ(full({1}, -1e10, DType::i32, kGpu).to_i32(), (std::vector<int32_t>{INT32_MIN}));
  EXPECT_EQ(full({1}, double(kNaN), DType::i32, kGpu).to_i32(), (std::vector<int32_t>{0}));
  EXPECT_EQ(full({1}, double(kNaN), DType::boolean, kGpu).to_bool(), (std::vector<uint8_t>{1}));
  EXPECT_TRUE(same_bits(full({2}, 0.1, DType::f32, kGpu).to_f32(), {0.1f, 0.1f}));
  EXPECT_TRUE(same_bits(full({1}, 1e300, DType::f32, kGpu).to_f32(), {kInf}));
  EXPECT_EQ(scalar(5, kGpu, DType::i32).to_i32(), (std::vector<int32_t>{5}));
}

TEST(CudaCreation, ArangeIsStartPlusIStepInF64) {
  REQUIRE_CUDA_DEVICE();
  Tensor r = arange(0.1, 100.0, 0.3, DType::f32, kGpu);
  ASSERT_EQ(r.numel(), int64_t(std::ceil((100.0 - 0.1) / 0.3)));  // the output rule's count
  std::vector<float> want;
  for (int64_t i = 0; i < r.numel(); ++i) want.push_back(float(0.1 + double(i) * 0.3));
  EXPECT_TRUE(same_bits(r.to_f32(), want));
  EXPECT_EQ(arange(5, -5, -2.5, DType::i32, kGpu).to_i32(), (std::vector<int32_t>{5, 2, 0, -2}));
  EXPECT_EQ(arange(0, 0, 1, DType::f32, kGpu).numel(), 0);
}

// Philox4x32-10 written again here, independently of every backend, for the known-answer check.
std::array<uint32_t, 4> philox(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    const uint64_t a = uint64_t(0xD2511F53u) * c[0], b = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(b >> 32) ^ c[1] ^ k[0], uint32_t(b), uint32_t(a >> 32) ^ c[3] ^ k[1], uint32_t(a)};
    k = {k[0] + 0x9E3779B9u, k[1] + 0xBB67AE85u};
  }
  return c;
}

TEST(CudaCreation, RandIsPhilox4x32_10BitForBit) {
  REQUIRE_CUDA_DEVICE();
  // Random123's known answer for counter 0, key 0: word 0 is 0x6627e8d5.
  ASSERT_EQ(philox({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  for (int64_t seed : {int64_t(0), int64_t(42), int64_t(-1), int64_t(0x123456789abcLL)}) {
    const int64_t n = 4099;  // several blocks and a partial last one
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t b = uint64_t(i / 4), s = uint64_t(seed);
      auto w = philox({uint32_t(b), uint32_t(b >> 32), 0, 0}, {uint32_t(s), uint32_t(s >> 32)});
      want[size_t(i)] = float(w[size_t(i % 4)] >> 8) * 0x1p-24f;
    }
    EXPECT_TRUE(same_bits(rand({n}, seed, kGpu).to_f32(), want)) << "seed " << seed;
    // randn: Box-Muller on the same words, within the transcendental bound of an f64 evaluation.
    std::vector<double> normal(n);
    for (int64_t j = 0; 2 * j < n; ++j) {
      const uint64_t b = uint64_t(2 * j / 4), s = uint64_t(seed);
      auto w = philox({uint32_t(b), uint32_t(b >> 32), 0, 0}, {uint32_t(s), uint32_t(s >> 32)});
      const size_t o = size_t(2 * j % 4);
      const double u1 = (double(w[o] >> 8) + 0.5) * 0x1p-24, u2 = double(w[o + 1] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2.0 * std::log(u1));
      normal[size_t(2 * j)] = r * std::cos(2 * std::numbers::pi * u2);
      if (2 * j + 1 < n) normal[size_t(2 * j + 1)] = r * std::sin(2 * std::numbers::pi * u2);
    }
    // (tiny absorbs cos/sin of a multiple of pi/2, which are 0 on the device (sincospi) and ~1e-16 here)
    EXPECT_TRUE(close(randn({n}, seed, kGpu).to_f32(), normal, 4, 1e-12)) << "seed " << seed;
  }
}

// ---- elementwise -------------------------------------------------------------------------------------------------------

TEST(CudaElementwise, IntegerArithmeticWraps) {
  REQUIRE_CUDA_DEVICE();
  Tensor a = gpu_i32({INT32_MAX, INT32_MIN, 65536, -7}, {4});
  Tensor b = gpu_i32({1, 1, 65536, 3}, {4});
  EXPECT_EQ(add(a, b).to_i32(), (std::vector<int32_t>{INT32_MIN, INT32_MIN + 1, 131072, -4}));
  EXPECT_EQ(sub(a, b).to_i32(), (std::vector<int32_t>{INT32_MAX - 1, INT32_MAX, 0, -10}));
  EXPECT_EQ(mul(a, b).to_i32(), (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, -21}));
  EXPECT_EQ(neg(a).to_i32(), (std::vector<int32_t>{-INT32_MAX, INT32_MIN, -65536, 7}));
  EXPECT_EQ(abs(a).to_i32(), (std::vector<int32_t>{INT32_MAX, INT32_MIN, 65536, 7}));
  EXPECT_EQ(maximum(a, b).to_i32(), (std::vector<int32_t>{INT32_MAX, 1, 65536, 3}));
  EXPECT_EQ(minimum(a, b).to_i32(), (std::vector<int32_t>{1, INT32_MIN, 65536, -7}));
}

TEST(CudaElementwise, NaNAndSignedZeroRules) {
  REQUIRE_CUDA_DEVICE();
  Tensor a = gpu({kNaN, 1.0f, 0.0f, -0.0f, -3.0f}, {5});
  Tensor b = gpu({2.0f, kNaN, -0.0f, 0.0f, kInf}, {5});
  EXPECT_TRUE(same_bits(maximum(a, b).to_f32(), {kNaN, kNaN, 0.0f, 0.0f, kInf}));
  EXPECT_TRUE(same_bits(minimum(a, b).to_f32(), {kNaN, kNaN, -0.0f, -0.0f, -3.0f}));
  EXPECT_TRUE(same_bits(relu(a).to_f32(), {kNaN, 1.0f, 0.0f, 0.0f, 0.0f}));
  EXPECT_TRUE(same_bits(neg(a).to_f32(), {-kNaN, -1.0f, -0.0f, 0.0f, 3.0f}));
  EXPECT_EQ(eq(a, a).to_bool(), (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(ne(a, b).to_bool(), (std::vector<uint8_t>{1, 1, 0, 0, 1}));
  EXPECT_EQ(lt(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(ge(a, b).to_bool(), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
}

TEST(CudaElementwise, CastTruncatesSaturatesAndMapsNaNToZero) {
  REQUIRE_CUDA_DEVICE();
  Tensor f = gpu({2.7f, -2.7f, kNaN, 1e10f, -1e10f, 2147483520.0f, -0.0f, kInf}, {8});
  EXPECT_EQ(cast(f, DType::i32).to_i32(),
            (std::vector<int32_t>{2, -2, 0, INT32_MAX, INT32_MIN, 2147483520, 0, INT32_MAX}));
  EXPECT_EQ(cast(f, DType::boolean).to_bool(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 0, 1}));
  Tensor i = gpu_i32({0, -5, 16777217, INT32_MIN}, {4});
  EXPECT_TRUE(same_bits(cast(i, DType::f32).to_f32(), {0.0f, -5.0f, 16777216.0f, -2147483648.0f}));
  EXPECT_EQ(cast(i, DType::boolean).to_bool(), (std::vector<uint8_t>{0, 1, 1, 1}));
  Tensor b = gpu_bool({1, 0}, {2});
  EXPECT_TRUE(same_bits(cast(b, DType::f32).to_f32(), {1.0f, 0.0f}));
  EXPECT_EQ(cast(b, DType::i32).to_i32(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(logical_not(b).to_bool(), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(cast(i, DType::i32).to_i32(), (std::vector<int32_t>{0, -5, 16777217, INT32_MIN}));
}

TEST(CudaElementwise, BroadcastingAndWhere) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> av = random_floats(6, 1), bv = random_floats(4, 2);
  Tensor r = add(gpu(av, {2, 1, 3}), gpu(bv, {4, 1}));  // -> [2, 4, 3]
  ASSERT_EQ(r.shape(), (Shape{2, 4, 3}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(av[size_t(i * 3 + k)] + bv[size_t(j)]);
  EXPECT_TRUE(same_bits(r.to_f32(), want));

  Tensor cond = gpu_bool({1, 0, 1}, {3});
  Tensor x = gpu_i32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = gpu_i32({-1, -2}, {2, 1});
  EXPECT_EQ(where(cond, x, y).to_i32(), (std::vector<int32_t>{1, -1, 3, 4, -2, 6}));
  Tensor t = gpu_bool({1, 1}, {2, 1}), u = gpu_bool({0, 1, 0}, {3});
  EXPECT_EQ(logical_and(t, u).to_bool(), (std::vector<uint8_t>{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(logical_or(u, u).to_bool(), (std::vector<uint8_t>{0, 1, 0}));
}

TEST(CudaElementwise, TranscendentalsWithinTheirBound) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> v = random_floats(4096, 3, -20, 20), p = random_floats(4096, 4, 0.01f, 30);
  std::vector<double> e, l, s, th, sg, pw, dv;
  for (size_t i = 0; i < v.size(); ++i) {
    e.push_back(std::exp(double(v[i])));
    l.push_back(std::log(double(p[i])));
    s.push_back(std::sqrt(double(p[i])));
    th.push_back(std::tanh(double(v[i])));
    sg.push_back(1.0 / (1.0 + std::exp(-double(v[i]))));
    pw.push_back(std::pow(double(p[i]), double(v[i]) / 8));
    dv.push_back(double(v[i]) / double(p[i]));
  }
  std::vector<float> v8(v.size());
  for (size_t i = 0; i < v.size(); ++i) v8[i] = v[i] / 8;  // exact
  Tensor x = gpu(v, {64, 64}), q = gpu(p, {64, 64});
  EXPECT_TRUE(close(exp(x).to_f32(), e, 4));
  EXPECT_TRUE(close(log(q).to_f32(), l, 4));
  EXPECT_TRUE(close(sqrt(q).to_f32(), s, 1));
  EXPECT_TRUE(close(tanh(x).to_f32(), th, 4));
  EXPECT_TRUE(close(sigmoid(x).to_f32(), sg, 4));
  EXPECT_TRUE(close(pow(q, gpu(v8, {64, 64})).to_f32(), pw, 16));
  EXPECT_TRUE(close(div(x, q).to_f32(), dv, 1));
}

// ---- reductions --------------------------------------------------------------------------------------------------------

TEST(CudaReduce, IntegerSumsWrapAndLongRowsSplit) {
  REQUIRE_CUDA_DEVICE();
  const int64_t n = (1 << 21) + 3;  // long enough for the two-pass (chunked) path
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint32_t want = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[size_t(i)] = int32_t(uint32_t(i) * 2654435761u);
    want += uint32_t(v[size_t(i)]);
  }
  Tensor t = gpu_i32(v, {n});
  EXPECT_EQ(sum(t).to_i32(), (std::vector<int32_t>{int32_t(want)}));
  EXPECT_TRUE(same_bits(sum(ones({n}, DType::f32, kGpu)).to_f32(), {float(n)}));
  EXPECT_TRUE(same_bits(mean(full({n}, 0.5, DType::f32, kGpu)).to_f32(), {0.5f}));
  // argmax of the whole thing: the first maximal element
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[size_t(i)] > v[size_t(best)]) best = int32_t(i);
  EXPECT_EQ(argmax(t).to_i32(), (std::vector<int32_t>{best}));
  EXPECT_EQ(max(t).to_i32(), (std::vector<int32_t>{v[size_t(best)]}));
}

TEST(CudaReduce, AxesKeepdimAndEmptyAxes) {
  REQUIRE_CUDA_DEVICE();
  Tensor t = gpu_i32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(t, 0).to_i32(), (std::vector<int32_t>{5, 7, 9}));
  EXPECT_EQ(sum(t, -1).to_i32(), (std::vector<int32_t>{6, 15}));
  EXPECT_EQ(sum(t, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(sum(t, std::nullopt, true).shape(), (Shape{1, 1}));
  Tensor f = gpu({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(same_bits(mean(f, 0).to_f32(), {2.5f, 3.5f, 4.5f}));
  Tensor e = zeros({3, 0}, DType::f32, kGpu);
  EXPECT_TRUE(same_bits(sum(e, 1).to_f32(), {0.0f, 0.0f, 0.0f}));
  std::vector<float> m = mean(e, 1).to_f32();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[2]));
}

TEST(CudaReduce, MaxAndArgmaxTakeTheFirstMaximumOrTheFirstNaN) {
  REQUIRE_CUDA_DEVICE();
  Tensor a = gpu({1, 5, 5, 2, kNaN, 7, kNaN, 0}, {8});
  EXPECT_EQ(argmax(a).to_i32(), (std::vector<int32_t>{4}));
  EXPECT_TRUE(std::isnan(max(a).to_f32()[0]));
  Tensor b = gpu({1, 5, 5, 2, -0.0f, 0.0f, 0.0f, -0.0f}, {2, 4});
  EXPECT_EQ(argmax(b, 1).to_i32(), (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(same_bits(max(b, 1).to_f32(), {5.0f, -0.0f}));  // the first maximal element's bits
  EXPECT_EQ(argmax(b, 0).to_i32(), (std::vector<int32_t>{0, 0, 0, 0}));
  // a strided axis (inner > 1), longer than one block
  const int64_t rows = 1000;
  std::vector<float> v = random_floats(size_t(rows * 3), 5);
  v[size_t(700 * 3 + 1)] = 100.0f;
  v[size_t(800 * 3 + 1)] = 100.0f;
  v[size_t(900 * 3 + 2)] = kNaN;
  Tensor c = gpu(v, {rows, 3});
  std::vector<int32_t> am = argmax(c, 0).to_i32();
  EXPECT_EQ(am[1], 700);
  EXPECT_EQ(am[2], 900);
}

TEST(CudaReduce, FloatSumsAndSoftmaxAgainstF64) {
  REQUIRE_CUDA_DEVICE();
  for (auto [rows, len] : {std::pair<int64_t, int64_t>{3, 100000}, {2000, 37}}) {
    std::vector<float> v = random_floats(size_t(rows * len), 6, -30, 30);
    Tensor t = gpu(v, {rows, len});
    std::vector<double> s(size_t(rows), 0.0), mag(size_t(rows), 0.0), sm(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, tot = 0;
      for (int64_t j = 0; j < len; ++j) {
        const double x = v[size_t(r * len + j)];
        s[size_t(r)] += x;
        mag[size_t(r)] += std::abs(x);
        m = std::max(m, x);
      }
      for (int64_t j = 0; j < len; ++j) tot += std::exp(double(v[size_t(r * len + j)]) - m);
      for (int64_t j = 0; j < len; ++j) sm[size_t(r * len + j)] = std::exp(double(v[size_t(r * len + j)]) - m) / tot;
    }
    std::vector<float> got = sum(t, 1).to_f32();
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_LE(std::abs(double(got[size_t(r)]) - s[size_t(r)]), 2 * 0x1p-23 * mag[size_t(r)]) << r;
    EXPECT_TRUE(close(softmax(t, 1).to_f32(), sm, 8));
    // the same along a strided axis
    Tensor tt = permute(t, {1, 0});
    EXPECT_TRUE(close(permute(softmax(tt, 0), {1, 0}).to_f32(), sm, 8));
  }
  EXPECT_TRUE(std::isnan(softmax(gpu({1, kNaN, 2}, {3}), 0).to_f32()[0]));
}

// ---- matmul ----------------------------------------------------------------------------------------------------------

TEST(CudaMatmul, TiledAndBatchedAgainstF64) {
  REQUIRE_CUDA_DEVICE();
  struct Case {
    std::vector<int64_t> a, b;
  };
  for (const Case& c : {Case{{70, 33}, {33, 65}}, Case{{3, 1, 17, 129}, {2, 129, 5}}, Case{{1, 1}, {1, 1}},
                        Case{{2, 64, 64}, {64, 64}}}) {
    Shape as = Shape::checked(c.a, "test", "a"), bs = Shape::checked(c.b, "test", "b");
    std::vector<float> av = random_floats(size_t(as.numel()), 7), bv = random_floats(size_t(bs.numel()), 8);
    Tensor r = matmul(gpu(av, IntList(c.a)), gpu(bv, IntList(c.b)));
    Tensor h = matmul(from_data(std::span<const float>(av), IntList(c.a), kCpu),
                      from_data(std::span<const float>(bv), IntList(c.b), kCpu));
    ASSERT_EQ(r.shape(), h.shape());
    // f64 reference with the broadcast batch worked out by hand: out batch (i, j) of [3, 2] reads lhs i, rhs j.
    const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1], n = bs[bs.rank() - 1];
    const int64_t batches = r.numel() / (m * n);
    const int64_t a_batches = as.numel() / (m * k), b_batches = bs.numel() / (k * n);
    std::vector<float> got = r.to_f32();
    for (int64_t z = 0; z < batches; ++z) {
      const int64_t za = a_batches == 1 ? 0 : (b_batches == 1 ? z : z / b_batches);
      const int64_t zb = b_batches == 1 ? 0 : (a_batches == 1 ? z : z % b_batches);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0, mag = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double t = double(av[size_t(za * m * k + i * k + p)]) * bv[size_t(zb * k * n + p * n + j)];
            acc += t;
            mag += std::abs(t);
          }
          const double g = got[size_t(z * m * n + i * n + j)];
          ASSERT_LE(std::abs(g - acc), (2 + double(k)) * 0x1p-23 * mag + 1e-30) << z << " " << i << " " << j;
        }
    }
  }
  // k = 0: zeros
  EXPECT_TRUE(same_bits(matmul(zeros({2, 0}, DType::f32, kGpu), zeros({0, 3}, DType::f32, kGpu)).to_f32(),
                        std::vector<float>(6, 0.0f)));
}

// ---- layout: bit-exact, and identical to the CPU backend -------------------------------------------------------------

TEST(CudaLayout, AgreesWithTheCpuBackendBitForBit) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> v = random_floats(2 * 3 * 4 * 5, 9);
  v[7] = kNaN;
  v[8] = -0.0f;
  auto both = [&](auto&& op) {
    Tensor g = op(gpu(v, {2, 3, 4, 5}));
    Tensor c = op(from_data(std::span<const float>(v), {2, 3, 4, 5}, kCpu));
    EXPECT_EQ(g.shape(), c.shape());
    EXPECT_TRUE(same_bits(g.to_f32(), c.to_f32()));
  };
  both([](const Tensor& x) { return reshape(x, {6, -1}); });
  both([](const Tensor& x) { return permute(x, {3, 1, 0, 2}); });
  both([](const Tensor& x) { return slice(x, {0, 1, 0, 1}, {2, 3, 4, 5}, {1, 1, 3, 2}); });
  both([](const Tensor& x) { return expand(slice(x, {0, 0, 0, 0}, {2, 1, 4, 5}, {1, 1, 1, 1}), {3, 2, 7, 4, 5}); });
  both([](const Tensor& x) {
    std::array<Tensor, 3> parts = {x, slice(x, {0, 0, 0, 0}, {2, 3, 4, 2}, {1, 1, 1, 1}), x};
    return cat(parts, 3);
  });
  both([](const Tensor& x) {
    std::array<Tensor, 2> parts = {x, x};
    return cat(parts, 0);
  });
  both([&](const Tensor& x) {
    std::vector<int32_t> idx = {3, 0, 0, 2, 1};
    return index_select(x, 2, from_data(std::span<const int32_t>(idx), {5}, x.device()));
  });
  // bool and i32 data movement too
  std::vector<uint8_t> bv = {1, 0, 0, 1, 1, 0};
  Tensor bt = gpu_bool(bv, {2, 3});
  EXPECT_EQ(permute(bt, {1, 0}).to_bool(), (std::vector<uint8_t>{1, 1, 0, 1, 0, 0}));
  std::array<Tensor, 2> bparts = {bt, bt};
  EXPECT_EQ(cat(bparts, 1).to_bool(), (std::vector<uint8_t>{1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0}));
}

TEST(CudaLayout, IndexOutOfRangeIsInvalidArgument) {
  REQUIRE_CUDA_DEVICE();
  Tensor x = gpu({1, 2, 3, 4, 5, 6}, {2, 3});
  for (std::vector<int32_t> idx : {std::vector<int32_t>{0, 3, 1}, std::vector<int32_t>{-1}}) {
    try {
      index_select(x, 1, gpu_i32(idx, {int64_t(idx.size())}));
      FAIL() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.op(), "index_select");
      EXPECT_EQ(e.param, "index");
      std::printf("%s\n", e.what());
    }
  }
  EXPECT_TRUE(same_bits(index_select(x, 1, gpu_i32({2}, {1})).to_f32(), {3.0f, 6.0f}));  // still usable
}

// ---- nn ------------------------------------------------------------------------------------------------------------

TEST(CudaConv, Conv2dUnfoldAndFoldAgainstLoops) {
  REQUIRE_CUDA_DEVICE();
  const int64_t N = 2, C = 3, H = 9, W = 8, O = 4, kh = 3, kw = 2, sh = 2, sw = 1, ph = 1, pw = 2;
  const int64_t Ho = (H + 2 * ph - kh) / sh + 1, Wo = (W + 2 * pw - kw) / sw + 1;
  std::vector<float> in = random_floats(size_t(N * C * H * W), 10), w = random_floats(size_t(O * C * kh * kw), 11),
                     bias = random_floats(size_t(O), 12);
  Tensor bt = gpu(bias, {O});
  Tensor y = conv2d(gpu(in, {N, C, H, W}), gpu(w, {O, C, kh, kw}), &bt, {sh, sw}, {ph, pw});
  ASSERT_EQ(y.shape(), (Shape{N, O, Ho, Wo}));
  std::vector<float> got = y.to_f32();
  auto at = [&](int64_t n, int64_t c, int64_t yy, int64_t xx) -> double {
    return (yy < 0 || yy >= H || xx < 0 || xx >= W) ? 0.0 : in[size_t(((n * C + c) * H + yy) * W + xx)];
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t yy = 0; yy < Ho; ++yy)
        for (int64_t xx = 0; xx < Wo; ++xx) {
          double acc = bias[size_t(o)], mag = std::abs(acc);
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const double t = at(n, c, yy * sh - ph + i, xx * sw - pw + j) * w[size_t(((o * C + c) * kh + i) * kw + j)];
                acc += t;
                mag += std::abs(t);
              }
          ASSERT_LE(std::abs(got[size_t(((n * O + o) * Ho + yy) * Wo + xx)] - acc), 24 * 0x1p-23 * mag + 1e-30);
        }
  // unfold is exact data movement; fold is its adjoint: <unfold(x), p> == <x, fold(p)>.
  Tensor u = unfold(gpu(in, {N, C, H, W}), {kh, kw}, {sh, sw}, {ph, pw});
  ASSERT_EQ(u.shape(), (Shape{N, C * kh * kw, Ho * Wo}));
  std::vector<float> uv = u.to_f32();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          for (int64_t l = 0; l < Ho * Wo; ++l) {
            const int64_t row = (c * kh + i) * kw + j;
            ASSERT_EQ(double(uv[size_t((n * C * kh * kw + row) * Ho * Wo + l)]),
                      at(n, c, (l / Wo) * sh - ph + i, (l % Wo) * sw - pw + j));
          }
  std::vector<float> p = random_floats(uv.size(), 13);
  Tensor f = fold(gpu(p, {N, C * kh * kw, Ho * Wo}), {H, W}, {kh, kw}, {sh, sw}, {ph, pw});
  ASSERT_EQ(f.shape(), (Shape{N, C, H, W}));
  std::vector<float> fv = f.to_f32();
  double lhs = 0, rhs = 0, mag = 0;
  for (size_t i = 0; i < uv.size(); ++i) lhs += double(uv[i]) * p[i], mag += std::abs(double(uv[i]) * p[i]);
  for (size_t i = 0; i < fv.size(); ++i) rhs += double(in[i]) * fv[i];
  EXPECT_LE(std::abs(lhs - rhs), 64 * 0x1p-23 * mag);
}

TEST(CudaDevice, SynchronizeAndAutodiffOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  Tensor x = gpu({1, 2, 3}, {3});
  x.set_requires_grad();
  Tensor loss = sum(mul(x, x));
  backward(loss);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), kGpu);
  EXPECT_TRUE(same_bits(x.grad().to_f32(), {2, 4, 6}));
  cuda_backend().synchronize();
}

}  // namespace
