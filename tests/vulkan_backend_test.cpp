// SPDX-License-Identifier: Apache-2.0
// The Vulkan backend's own behaviour (issue 3): what the shared op/contract suites do not see. Every test skips
// with the reason when this machine has no Vulkan device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include <unistd.h>

#include <fmt/format.h>

#include "crossfire/crossfire.hpp"
#include "reference/reference.hpp"
#include "support/backend_under_test.hpp"
#include "pipeline_specs.hpp"
#include "vulkan_backend.hpp"

namespace crossfire::testing {
namespace {

using vulkan::VulkanBackend;

VulkanBackend& vkb() { return static_cast<VulkanBackend&>(backend(BackendKind::vulkan)); }

#define REQUIRE_VULKAN(var)                                                   \
  CROSSFIRE_REQUIRE_DEVICE(var, 0);                                           \
  do {                                                                        \
  } while (0)

std::vector<float> f32s(std::initializer_list<float> v) { return std::vector<float>(v); }

Tensor vec(const std::vector<float>& v, Device d) {
  return from_data(std::span<const float>(v), IntList{int64_t(v.size())}, d);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---- discovery ---------------------------------------------------------------------------------------------------

TEST(VulkanDiscovery, DevicesHaveNameTypeAndDriver) {
  Backend& b = backend(BackendKind::vulkan);
  if (b.device_count() == 0) {
    std::string reason = b.unavailable_reason();
    EXPECT_FALSE(reason.empty());
    EXPECT_EQ(reason.find('\n'), std::string::npos) << "the reason must be one line";
    EXPECT_THROW(zeros({1}, DType::f32, Device::vulkan(0)), BackendUnavailable);
    GTEST_SKIP() << "vulkan: unavailable: " << reason;
  }
  for (int i = 0; i < b.device_count(); ++i) {
    DeviceInfo info = b.device_info(i);
    EXPECT_EQ(info.device, Device::vulkan(i));
    EXPECT_FALSE(info.name.empty());
    EXPECT_TRUE(info.type == "cpu" || info.type == "integrated" || info.type == "discrete" || info.type == "virtual" ||
                info.type == "other")
        << info.type;
    EXPECT_FALSE(info.driver.empty());
    std::cout << info.device.str() << ": " << info.name << " [" << info.type << "] " << info.driver << "\n";
  }
  EXPECT_THROW(zeros({1}, DType::f32, Device::vulkan(b.device_count())), InvalidArgument);
}

// ---- transfers -----------------------------------------------------------------------------------------------------

TEST(VulkanTransfers, RoundTripEveryDtypeAndOddSizes) {
  REQUIRE_VULKAN(d);
  for (int64_t n : {0, 1, 3, 5, 1000, 4097}) {
    std::vector<float> f(static_cast<size_t>(n));
    std::vector<int32_t> i(static_cast<size_t>(n));
    std::vector<uint8_t> b(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      f[size_t(k)] = float(k) * 0.5f - 3.f;
      i[size_t(k)] = int32_t(k * 7919 - 100000);
      b[size_t(k)] = uint8_t(k % 3 == 0);
    }
    EXPECT_EQ(from_data(std::span<const float>(f), {n}, d).to_f32(), f);
    EXPECT_EQ(from_data(std::span<const int32_t>(i), {n}, d).to_i32(), i);
    EXPECT_EQ(from_bool(b, {n}, d).to_bool(), b);
    // Device to device (same device: a queue copy) and to the CPU and back.
    Tensor t = from_data(std::span<const float>(f), {n}, d);
    EXPECT_EQ(to(t, d).to_f32(), f);
    EXPECT_EQ(to(to(t, Device::cpu(0)), d).to_f32(), f);
  }
}

// ---- the pool and deferred frees ---------------------------------------------------------------------------------------

TEST(VulkanMemory, PoolReusesChunksWithoutNewDeviceAllocations) {
  REQUIRE_VULKAN(d);
  {
    Tensor warm = zeros({1000}, DType::f32, d);
    warm.to_f32();
  }
  backend(BackendKind::vulkan).synchronize();
  vulkan::PoolStats before = vkb().pool_stats(d.index);
  for (int i = 0; i < 500; ++i) {
    Tensor t = full({1000}, double(i), DType::f32, d);
    if (i % 100 == 0) {
      EXPECT_EQ(t.to_f32()[999], float(i));
    }
  }
  backend(BackendKind::vulkan).synchronize();
  vulkan::PoolStats after = vkb().pool_stats(d.index);
  EXPECT_EQ(after.device_allocations, before.device_allocations) << "vkAllocateMemory was called per tensor";
  EXPECT_GT(after.chunks_reused, before.chunks_reused);
  EXPECT_GT(after.batches_submitted, before.batches_submitted);
  EXPECT_LT(after.batches_submitted - before.batches_submitted, 500u) << "ops were not batched";
}

TEST(VulkanMemory, TensorFreedWhilePendingIsKeptUntilTheBatchCompletes) {
  REQUIRE_VULKAN(d);
  backend(BackendKind::vulkan).synchronize();
  std::vector<float> v(1 << 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 1000);
  // Each pipeline's first dispatch is waited for at once (Note [Idle before exit]): create them first.
  (void)exp(neg(vec(v, d))).to_f32();
  const uint64_t deferred0 = vkb().pool_stats(d.index).deferred_frees;
  Tensor y;
  {
    Tensor x = vec(v, d);
    y = exp(neg(x));  // recorded, not yet run
  }  // x and the temporary are released while the batch that reads them is pending
  // New tensors of the same size must not take x's memory before the batch ran.
  std::vector<Tensor> noise;
  for (int i = 0; i < 4; ++i) noise.push_back(full({int64_t(v.size())}, 123.0, DType::f32, d));
  EXPECT_GT(vkb().pool_stats(d.index).deferred_frees, deferred0);
  std::vector<float> got = y.to_f32();
  for (size_t i = 0; i < v.size(); i += 997) EXPECT_NEAR(got[i], std::exp(-double(v[i])), 1e-6 * std::exp(-double(v[i])) + 1e-38);
}

TEST(VulkanMemory, OutOfMemoryIsTypedAndTheBackendKeepsWorking) {
  REQUIRE_VULKAN(d);
  uint64_t old_limit = 0;
  {
    vulkan::Context& c = vkb().context(d.index);
    std::lock_guard l(c.mu);
    old_limit = c.pool().limit();
  }
  vkb().set_memory_limit(d.index, 512ull << 20);
  const auto before = snapshot_world();
  try {
    Tensor t = zeros({int64_t(1) << 30}, DType::f32, d);  // 4 GiB
    ADD_FAILURE() << "allocating 4 GiB under a 512 MiB limit did not raise";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.op(), "zeros");
    EXPECT_EQ(e.device, d);
    std::cout << e.what() << "\n";
  }
  (void)before;
  vkb().set_memory_limit(d.index, old_limit);
  EXPECT_EQ(add(vec({1, 2}, d), vec({3, 4}, d)).to_f32(), f32s({4, 6}));
  EXPECT_EQ(add(vec({1, 2}, Device::cpu(0)), vec({3, 4}, Device::cpu(0))).to_f32(), f32s({4, 6}));
}

TEST(VulkanErrors, PipelineFailureIsBackendFailureNamingTheOp) {
  REQUIRE_VULKAN(d);
  Tensor x = vec({1, 2, 3}, d);
  {
    vulkan::Context& c = vkb().context(d.index);
    std::lock_guard l(c.mu);
    c.fail_next_pipeline = true;
  }
  // A pipeline that is not cached yet: fold with unusual specialization is still one module; use a fresh op.
  try {
    Tensor y = softmax(x, 0);
    y.to_f32();
    // softmax may already have been cached by an earlier test in this process; then the hook fires on the next op.
    Tensor z = argmax(x);
    z.to_i32();
    Tensor w = conv2d(reshape(x, {1, 1, 1, 3}), reshape(vec({1}, d), {1, 1, 1, 1}), nullptr, {1, 1}, {0, 0});
    w.to_f32();
  } catch (const BackendFailure& e) {
    EXPECT_FALSE(e.op().empty());
    EXPECT_EQ(e.device, d);
    std::cout << e.what() << "\n";
  }
  {
    vulkan::Context& c = vkb().context(d.index);
    std::lock_guard l(c.mu);
    c.fail_next_pipeline = false;
  }
  EXPECT_EQ(mul(x, x).to_f32(), f32s({1, 4, 9}));
  EXPECT_EQ(softmax(vec({0, 0}, d), 0).to_f32(), f32s({0.5f, 0.5f}));
  EXPECT_EQ(mul(vec({2}, Device::cpu(0)), vec({3}, Device::cpu(0))).to_f32(), f32s({6}));
}

// ---- semantics the CPU backend pins down bitwise ------------------------------------------------------------------------

TEST(VulkanSemantics, CastTruncatesSaturatesAndMapsNaNToZero) {
  REQUIRE_VULKAN(d);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = vec({-2.7f, 2.7f, -0.5f, 3e9f, -3e9f, nan, inf, -inf, 2147483520.f, 1e-40f}, d);
  EXPECT_EQ(cast(x, DType::i32).to_i32(),
            (std::vector<int32_t>{-2, 2, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520, 0}));
  EXPECT_EQ(cast(x, DType::boolean).to_bool(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  std::vector<int32_t> iv{INT32_MIN, -1, 0, 16777217, INT32_MAX};
  Tensor i = from_data(std::span<const int32_t>(iv), {5}, d);
  EXPECT_EQ(cast(i, DType::f32).to_f32(), f32s({-2147483648.f, -1.f, 0.f, 16777216.f, 2147483648.f}));
  EXPECT_EQ(abs(i).to_i32(), (std::vector<int32_t>{INT32_MIN, 1, 0, 16777217, INT32_MAX}));
  EXPECT_EQ(neg(i).to_i32(), (std::vector<int32_t>{INT32_MIN, 1, 0, -16777217, -INT32_MAX}));
  EXPECT_EQ(add(i, i).to_i32(), (std::vector<int32_t>{0, -2, 0, 33554434, -2}));
}

TEST(VulkanSemantics, DenormalsCompareAndMoveExactly) {
  REQUIRE_VULKAN(d);
  const float den = 1e-40f, nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = vec({den, -den, 0.f, -0.f, nan}, d);
  Tensor z = vec({0.f, 0.f, -0.f, 0.f, 0.f}, d);
  EXPECT_EQ(gt(x, z).to_bool(), (std::vector<uint8_t>{1, 0, 0, 0, 0}));
  EXPECT_EQ(lt(x, z).to_bool(), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(eq(x, z).to_bool(), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(ne(x, z).to_bool(), (std::vector<uint8_t>{1, 1, 0, 0, 1}));
  std::vector<float> r = relu(x).to_f32();
  EXPECT_EQ(bits(r[0]), bits(den));
  EXPECT_EQ(bits(r[1]), 0u);
  EXPECT_TRUE(std::isnan(r[4]));
  std::vector<float> mx = maximum(x, z).to_f32(), mn = minimum(x, z).to_f32();
  EXPECT_EQ(bits(mx[0]), bits(den));
  EXPECT_EQ(bits(mx[2]), bits(0.f));   // max(+0, -0) = +0
  EXPECT_EQ(bits(mn[3]), bits(-0.f));  // min(-0, +0) = -0
  EXPECT_EQ(bits(mn[1]), bits(-den));
  EXPECT_TRUE(std::isnan(mx[4]) && std::isnan(mn[4]));
  EXPECT_EQ(bits(neg(x).to_f32()[0]), bits(-den));
  EXPECT_EQ(bits(abs(x).to_f32()[1]), bits(den));
  EXPECT_EQ(argmax(vec({1.f, 3.f, nan, 3.f, nan}, d)).to_i32(), std::vector<int32_t>{2});
  EXPECT_EQ(argmax(vec({1.f, 3.f, 2.f, 3.f}, d)).to_i32(), std::vector<int32_t>{1});
  EXPECT_TRUE(std::isnan(max(vec({1.f, nan, 2.f}, d)).to_f32()[0]));
}

TEST(VulkanSemantics, BoolLayoutOpsAcrossWordBoundaries) {
  REQUIRE_VULKAN(d);
  std::vector<uint8_t> a{1, 0, 1, 1, 0}, b{0, 1, 1};
  Tensor ta = from_bool(a, {5}, d), tb = from_bool(b, {3}, d);
  std::vector<Tensor> ts{ta, tb, ta};
  EXPECT_EQ(cat(ts, 0).to_bool(), (std::vector<uint8_t>{1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0}));
  Tensor m = reshape(cat(ts, 0), {1, 13});
  std::vector<Tensor> rows{m, m, m};
  Tensor c2 = cat(rows, 0);
  EXPECT_EQ(slice(c2, {1, 2}, {3, 13}, {1, 3}).to_bool(), (std::vector<uint8_t>{1, 0, 1, 1, 1, 0, 1, 1}));
  EXPECT_EQ(permute(reshape(from_bool(a, {5}, d), {5, 1}), {1, 0}).to_bool(), a);
  EXPECT_EQ(expand(reshape(tb, {3, 1}), {3, 2}).to_bool(), (std::vector<uint8_t>{0, 0, 1, 1, 1, 1}));
  std::vector<int32_t> idx{4, 0, 4, 1};
  EXPECT_EQ(index_select(ta, 0, from_data(std::span<const int32_t>(idx), {4}, d)).to_bool(),
            (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(logical_and(ta, from_bool(std::vector<uint8_t>{1, 1, 0, 1, 1}, {5}, d)).to_bool(),
            (std::vector<uint8_t>{1, 0, 0, 1, 0}));
  EXPECT_EQ(where(ta, vec({1, 2, 3, 4, 5}, d), vec({-1}, d)).to_f32(), f32s({1, -1, 3, 4, -1}));
  std::vector<int32_t> bad{0, 5};
  EXPECT_THROW(index_select(ta, 0, from_data(std::span<const int32_t>(bad), {2}, d)), InvalidArgument);
}

// ---- rand: Philox4x32-10, bit-identical ----------------------------------------------------------------------------

std::array<uint32_t, 4> philox(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

// (f16 and bf16: tests/ops_half_test.cpp, which every backend runs.)

TEST(VulkanRandom, PhiloxMatchesTheKnownAnswersAndIsBitIdentical) {
  // Random123's known-answer vectors for philox4x32 with 10 rounds.
  EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  REQUIRE_VULKAN(d);
  const int64_t seed = int64_t(0x123456789abcdefull);
  const int64_t n = 1001;
  std::vector<float> got = rand({n}, seed, d).to_f32();
  for (int64_t i = 0; i < n; ++i) {
    auto w = philox({uint32_t(i / 4), 0, 0, 0}, {uint32_t(uint64_t(seed)), uint32_t(uint64_t(seed) >> 32)});
    float want = float(w[size_t(i % 4)] >> 8) * 0x1p-24f;
    ASSERT_EQ(bits(got[size_t(i)]), bits(want)) << "element " << i;
  }
}

// ---- accuracy at the edges: every float op against the f64 reference -------------------------------------------------

void expect_within_reference(OpId id, const ArgPack& args, const Tensor& got) {
  reference::RefResult r = reference::evaluate(reference::RefCall::from(id, args));
  std::vector<float> g = got.to_f32();
  ASSERT_EQ(g.size(), r.value.values.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!reference::within_bound(op_def(id).bound, g[i], r.value.values[i], r.magnitude[i], r.terms[i])) {
      ++bad;
      ADD_FAILURE() << op_def(id).name << " element " << i << ": got " << g[i] << " exact " << r.value.values[i]
                    << " allowed " << reference::allowed_error(op_def(id).bound, r.magnitude[i], r.terms[i]);
    }
  }
}

std::vector<float> edge_values(float lo, float hi, int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(u(g));
  return v;
}

TEST(VulkanAccuracy, TranscendentalsStayInsideTheBoundOverTheirRange) {
  REQUIRE_VULKAN(d);
  struct Case {
    const char* op;
    std::vector<float> x;
  };
  std::vector<float> wide = edge_values(-87.f, 88.f, 4000, 1), small = edge_values(-1.f, 1.f, 4000, 2),
                     pos = edge_values(1e-30f, 1e30f, 2000, 3), near1 = edge_values(0.9f, 1.1f, 2000, 4),
                     tiny = {1e-40f, 1e-45f, 3e-39f, 1e-38f, 1e-30f, 1e-10f};
  for (float& v : pos) v = std::exp2(std::log2(1e-30f) + (v / 1e30f) * 199.f);
  std::vector<Case> cases = {
      {"exp", wide}, {"exp", small}, {"tanh", small}, {"tanh", edge_values(-10.f, 10.f, 4000, 5)},
      {"sigmoid", wide}, {"log", pos}, {"log", near1}, {"log", tiny}, {"sqrt", pos}, {"sqrt", tiny},
  };
  for (const Case& c : cases) {
    Tensor x = vec(c.x, d);
    ArgPack args(Arg::of(x));
    OpId id = OpId(find_op(c.op));
    SCOPED_TRACE(c.op);
    expect_within_reference(id, args, call(id, args));
  }
  // pow: base in (0, 100], exponent in [-20, 20] (results up to ~1e40 overflow to inf, which the reference allows).
  std::vector<float> base = edge_values(1e-3f, 100.f, 4000, 6), ex = edge_values(-20.f, 20.f, 4000, 7);
  Tensor a = vec(base, d), b = vec(ex, d);
  ArgPack args(Arg::of(a), Arg::of(b));
  expect_within_reference(ids::pow_id, args, call(ids::pow_id, args));
  // div over a wide range of magnitudes.
  std::vector<float> num = edge_values(-1e20f, 1e20f, 4000, 8), den = edge_values(0.001f, 1e10f, 4000, 9);
  Tensor p = vec(num, d), q = vec(den, d);
  ArgPack dargs(Arg::of(p), Arg::of(q));
  expect_within_reference(ids::div_id, dargs, call(ids::div_id, dargs));
  // randn (Box-Muller on the same Philox words) and softmax over a long axis.
  const std::vector<int64_t> rshape{4099};
  ArgPack rargs(Arg::of(IntList(rshape)), Arg::integer(42), Arg::of(DType::f32), Arg::of(d));
  expect_within_reference(ids::randn_id, rargs, call(ids::randn_id, rargs));
  Tensor s = vec(edge_values(-50.f, 50.f, 3000, 10), d);
  ArgPack sargs(Arg::of(s), Arg::integer(0));
  expect_within_reference(ids::softmax_id, sargs, call(ids::softmax_id, sargs));
}

TEST(VulkanAccuracy, ReductionsAndMatmulAtSize) {
  REQUIRE_VULKAN(d);
  std::vector<float> v = edge_values(-1.f, 1.f, 70000, 11);
  Tensor x = from_data(std::span<const float>(v), {70, 1000}, d);
  for (OpId id : {ids::sum_id, ids::mean_id, ids::max_id}) {
    for (int axis : {-1, 0, 1}) {
      ArgPack args(Arg::of(x), Arg::optional_integer(axis >= 0, axis), Arg::flag(axis == 1));
      SCOPED_TRACE(std::string(op_def(id).name) + " axis " + std::to_string(axis));
      expect_within_reference(id, args, call(id, args));
    }
  }
  Tensor a = from_data(std::span<const float>(v.data(), 130 * 67), {130, 67}, d);
  Tensor b = from_data(std::span<const float>(v.data() + 9000, 67 * 70), {67, 70}, d);
  ArgPack margs(Arg::of(a), Arg::of(b));
  expect_within_reference(ids::matmul_id, margs, call(ids::matmul_id, margs));
  Tensor ba = from_data(std::span<const float>(v.data(), 3 * 5 * 7), {3, 1, 5, 7}, d);
  Tensor bb = from_data(std::span<const float>(v.data() + 100, 4 * 7 * 2), {4, 7, 2}, d);
  ArgPack bargs(Arg::of(ba), Arg::of(bb));
  expect_within_reference(ids::matmul_id, bargs, call(ids::matmul_id, bargs));
  // Few outputs and a long K: matmul_small.comp in three passes of at most 4096 products (Note [Small matmuls
  // without tiles]), each continuing from the partial sums the one before stored.
  Tensor sa = from_data(std::span<const float>(v.data(), 3 * 9000), {3, 9000}, d);
  Tensor sb = from_data(std::span<const float>(v.data() + 30000, 9000 * 2), {9000, 2}, d);
  ArgPack sargs(Arg::of(sa), Arg::of(sb));
  expect_within_reference(ids::matmul_id, sargs, call(ids::matmul_id, sargs));
}

// ---- exit (Note [Idle before exit] in vulkan_backend.cpp) ------------------------------------------------------------

// A process that submits work for new pipelines and exits without waiting for it exits cleanly: lavapipe compiles
// a pipeline's shader on its queue thread when its first dispatch runs, and a compile still going when exit() ran
// LLVM's destructors crashed the process after all its work was done (SIGSEGV, SIGABRT "pure virtual method
// called", or a hang). The child (a fresh process: gtest's threadsafe death-test style re-runs this binary) runs
// and reads a few ops, then runs a dozen ops it has not run yet, submits them unread and exits at once; five times.
// (Without the wait for a new pipeline's first dispatch it hung in exit, or crashed, every time on a Zen 3 VM.)
TEST(VulkanExit, ExitRightAfterSubmittingNewPipelines) {
  REQUIRE_VULKAN(d);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto submit_and_exit = [&] {
    const Tensor x = vec(f32s({0.5f, -1.f, 2.f, 3.f}), d);
    const Tensor y = vec(f32s({1.f, 2.f, -3.f, 4.f}), d);
    (void)cast(where(gt(x, y), x, y), DType::i32).to_host_bytes();  // some compiles done and waited for
    const std::vector<Tensor> keep{neg(x),    abs(x),    exp(x),    log(x),         sqrt(x),        tanh(x),
                                   sigmoid(x), relu(x),  add(x, y), sub(x, y),      mul(x, y),      div(x, y),
                                   maximum(x, y), minimum(x, y)};
    vulkan::Context& c = vkb().context(d.index);
    {
      std::lock_guard l(c.mu);
      c.flush("test");  // submitted, not waited for
    }
    alarm(10);  // an exit that hangs is killed by SIGALRM (and fails the expectation) instead of hanging the test
    std::exit(0);
  };
  for (int round = 0; round < 5; ++round)
    EXPECT_EXIT(submit_and_exit(), ::testing::ExitedWithCode(0), "") << "round " << round;
}

// Must stay last in this file: with CROSSFIRE_VULKAN_VALIDATION=1 everything above ran under the validation layer.
TEST(VulkanValidation, LayerReportedNothing) {
  REQUIRE_VULKAN(d);
  backend(BackendKind::vulkan).synchronize();
  const char* env = std::getenv(vulkan::kValidationEnv);
  const bool asked = env != nullptr && *env != 0 && std::strcmp(env, "0") != 0;
  EXPECT_EQ(vkb().validation_enabled(), asked);
  EXPECT_EQ(vkb().validation_messages(), 0u) << [] {
    std::string all;
    for (const std::string& m : vkb().validation_log()) all += m + "\n";
    return all;
  }();
  if (!asked) GTEST_SKIP() << "validation layer not requested (set " << vulkan::kValidationEnv << "=1)";
}

// ---- specialized SPIR-V (Note [Specialized SPIR-V] in vulkan_backend.cpp) -------------------------------------------

// Bytes for a tensor of dtype dt drawn from `rng`: any bit pattern, NaNs and subnormals included, but a bool's 0 or 1.
Tensor pattern_tensor(DType dt, IntList shape, std::mt19937& rng, Device d) {
  int64_t n = 1;
  for (int64_t s : shape.span()) n *= s;
  std::vector<uint8_t> bytes(size_t(n) * dtype_size(dt));
  for (uint8_t& b : bytes) b = dt == DType::boolean ? uint8_t(rng() & 1) : uint8_t(rng());
  return from_bytes(bytes, shape, dt, d);
}

void set_specialized(vulkan::Context& c, bool on) {
  std::lock_guard l(c.mu);
  c.use_specialized = on;
}

// The output bytes of one pipeline run from its specialized module and from its generic one are the same.
void expect_same_bytes(const std::string& what, const std::vector<uint8_t>& specialized,
                       const std::vector<uint8_t>& generic) {
  ASSERT_EQ(specialized.size(), generic.size()) << what;
  const auto [a, b] = std::mismatch(specialized.begin(), specialized.end(), generic.begin());
  EXPECT_TRUE(a == specialized.end()) << what << ": byte " << (a - specialized.begin()) << " of the output is "
                                      << int(*a) << " from the specialized module, " << int(*b) << " from the generic";
}

// Every pipeline with constants that the kernels can create has its specialized module in the build (the build's
// list comes from the same enumeration, pipeline_specs.hpp; this holds the build to writing them all, under the name
// the backend looks up).
TEST(VulkanSpecialized, EveryListedPipelineHasItsModule) {
#if !CROSSFIRE_SPECIALIZED_SPIRV
  GTEST_SKIP() << "this build has no specialized modules (no spirv-opt, or CROSSFIRE_VULKAN_SPECIALIZE=OFF)";
#endif
  size_t listed = 0;
  vulkan::for_each_pipeline_spec([&](const vulkan::PipelineSpec& s) {
    std::string name;
    EXPECT_FALSE(vulkan::embedded_spirv(vulkan::specialized_name(
                                            s.module, std::span<const int32_t>(s.constants.data(), size_t(s.count)),
                                            name))
                     .empty())
        << "no specialized module " << name;
    ++listed;
  });
  EXPECT_GT(listed, vulkan::kElementwiseSpecs.size());
}

// A pipeline from its specialized module computes, bit for bit, what the generic module with the same constants
// computes: every pipeline of the elementwise kernel, on inputs of random bits (NaN payloads, subnormals, both
// zeros, integer extremes) broadcast from [10] to [4, 10]. With a constant the specialization dropped or set wrong,
// the two run different dtype paths and the bytes differ.
TEST(VulkanSpecialized, EveryElementwisePipelineMatchesItsGenericModule) {
#if !CROSSFIRE_SPECIALIZED_SPIRV
  GTEST_SKIP() << "this build has no specialized modules (no spirv-opt, or CROSSFIRE_VULKAN_SPECIALIZE=OFF)";
#endif
  REQUIRE_VULKAN(d);
  vulkan::Context& c = vkb().context(d.index);
  std::mt19937 rng(20261206);
  size_t checked = 0;
  for (const vulkan::ElementwiseSpec& s : vulkan::kElementwiseSpecs) {
    const OpId id = s.op;
    const OpDef& op = kOpTable[id];
    const std::string what = fmt::format("{} {} -> {}", op.name, dtype_name(s.in), dtype_name(s.out));
    std::vector<Tensor> inputs;
    inputs.reserve(size_t(op.num_params));  // (the pack points at them)
    ArgPack args;
    for (int p = 0; p < op.num_params; ++p) {
      const ParamDef& param = op.params[size_t(p)];
      if (param.role == ParamRole::tensor) {
        // where's condition is a bool whatever the values' dtype
        const DType dt = param.dtypes.contains(s.in) ? s.in : DType::boolean;
        inputs.push_back(pattern_tensor(dt, p == 0 ? IntList{4, 10} : IntList{10}, rng, d));
        args.push(Arg::of(inputs.back()));
      } else if (param.role == ParamRole::dtype_attr) {
        args.push(Arg::of(s.out));
      } else if (param.role == ParamRole::float_attr) {
        args.push(Arg::scalar(p == 1 ? -1.5 : 2.5));  // clamp's min and max
      } else {
        FAIL() << what << ": parameter `" << param.name << "` has a role this test does not build";
      }
    }
    set_specialized(c, false);
    const std::vector<uint8_t> generic = call(id, args).to_host_bytes();
    set_specialized(c, true);
    const size_t generic_before = c.generic_pipelines;
    const Tensor out = call(id, args);
    EXPECT_EQ(c.generic_pipelines, generic_before) << what << ": no specialized module for its pipeline";
    ASSERT_EQ(out.dtype(), s.out) << what;
    expect_same_bytes(what, out.to_host_bytes(), generic);
    ++checked;
  }
  set_specialized(c, true);
  EXPECT_EQ(checked, vulkan::kElementwiseSpecs.size());
  EXPECT_GT(checked, size_t(100));
}

// The same for every other kernel with constants: the reductions (each op and dtype, rows short enough for one
// invocation each and long enough for a workgroup each), softmax (both), rand and randn, arange's shader and the
// data movement (gather, cat, index_select with both index dtypes, unfold) in every dtype its op takes. Each runs
// from its generic module and from its specialized one and the outputs' bytes are compared; and no pipeline with
// constants that this process created from the start (every test above included) lacked a specialized module.
TEST(VulkanSpecialized, EveryOtherKernelMatchesItsGenericModule) {
#if !CROSSFIRE_SPECIALIZED_SPIRV
  GTEST_SKIP() << "this build has no specialized modules (no spirv-opt, or CROSSFIRE_VULKAN_SPECIALIZE=OFF)";
#endif
  REQUIRE_VULKAN(d);
  vulkan::Context& c = vkb().context(d.index);
  size_t checked = 0;
  auto both_ways = [&](const std::string& what, const std::function<Tensor()>& run) {
    set_specialized(c, false);
    const std::vector<uint8_t> generic = run().to_host_bytes();
    set_specialized(c, true);
    expect_same_bytes(what, run().to_host_bytes(), generic);
    ++checked;
  };
  std::mt19937 rng(20261207);
  // Values a reduction can sum without overflowing to the same infinity both ways: floats in [-4, 4), integers of
  // any bits (they wrap alike), bools 0 or 1.
  auto values = [&](DType dt, int64_t rows, int64_t cols) {
    if (dt != DType::f32) return pattern_tensor(dt, {rows, cols}, rng, d);
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    std::vector<float> v(size_t(rows * cols));
    for (float& x : v) x = u(rng);
    return from_data(std::span<const float>(v), {rows, cols}, d);
  };
  const std::array<std::array<int64_t, 2>, 2> shapes{{{6, 10}, {3, 2000}}};  // a row per invocation; per workgroup
  for (OpId id = 0; id < kNumOps; ++id)
    for (DType dt : kAllDTypes) {
      if (kOpTable[id].family != OpFamily::reduce || !kOpTable[id].params[0].dtypes.contains(dt) || is_half(dt))
        continue;
      for (const auto& [rows, cols] : shapes) {
        const Tensor x = values(dt, rows, cols);
        const std::string what = fmt::format("{} of {} [{}, {}]", kOpTable[id].name, dtype_name(dt), rows, cols);
        both_ways(what, [&] { return call(id, ArgPack().of(x).optional_integer(true, 1).flag(false)); });
      }
    }
  for (const auto& [rows, cols] : shapes) {
    const Tensor x = values(DType::f32, rows, cols);
    both_ways(fmt::format("softmax [{}, {}]", rows, cols), [&] { return softmax(x, 1); });
  }
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    both_ways(fmt::format("rand {}", dtype_name(dt)), [&] { return rand({1001}, 77, d, dt); });
    both_ways(fmt::format("randn {}", dtype_name(dt)), [&] { return randn({1001}, 78, d, dt); });
  }
  for (DType dt : {DType::f32, DType::i32})
    both_ways(fmt::format("arange {}", dtype_name(dt)), [&] { return arange(-3, 90, 0.7, dt, d); });
  const std::vector<int32_t> i32_index{4, 0, 2, 2, 3};
  const std::vector<int64_t> i64_index{1, 4, 4, 0};
  const Tensor idx32 = from_data(std::span<const int32_t>(i32_index), {5}, d);
  const Tensor idx64 = from_data(std::span<const int64_t>(i64_index), {4}, d);
  for (DType dt : kAllDTypes) {
    const Tensor x = pattern_tensor(dt, {5, 7}, rng, d);
    const Tensor img = pattern_tensor(dt, {1, 2, 5, 6}, rng, d);
    const std::string name(dtype_name(dt));
    both_ways("permute " + name, [&] { return permute(x, {1, 0}); });
    both_ways("cat " + name, [&] {
      const std::array<Tensor, 2> parts{x, x};
      return cat(parts, 1);
    });
    both_ways("index_select, i32 index, " + name, [&] { return index_select(x, 0, idx32); });
    both_ways("index_select, i64 index, " + name, [&] { return index_select(x, 0, idx64); });
    if (kOpTable[ids::unfold_id].params[0].dtypes.contains(dt))
      both_ways("unfold " + name, [&] { return unfold(img, {2, 3}, {1, 2}, {1, 0}); });
  }
  EXPECT_GT(checked, size_t(50));
  EXPECT_EQ(c.generic_pipelines, 0u) << "pipelines with constants this process created from a generic module "
                                        "although specialized modules were on: the build listed none for them "
                                        "(kernels/vulkan/pipeline_specs.hpp)";
}

}  // namespace
}  // namespace crossfire::testing
