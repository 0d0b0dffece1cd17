// SPDX-License-Identifier: Apache-2.0
// The autodiff engine's promises (contract section 5), on the backend under test: what can be tracked, what
// backward() accepts, accumulation, no_grad, constants, the cast rule of validation step 4, and gradients that
// cross devices (each gradient lives on its leaf's device).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

// Runs a test body; a kernel that the backend does not have yet skips the test with the reason instead of failing
// it (the rule under test is the engine's, not the kernel's).
void skip_if_unsupported(const std::function<void()>& body) {
  try {
    body();
  } catch (const Unsupported& e) {
    GTEST_SKIP() << "not supported on this backend yet: " << e.what();
  }
}

Tensor leaf(std::vector<float> v, IntList shape, Device d) {
  Tensor t = from_data(std::span<const float>(v), shape, d);
  t.set_requires_grad();
  return t;
}

// ---- what may be tracked --------------------------------------------------------------------------------------------

TEST(AutodiffSemantics, RequiresGradOnlyForFloats) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  std::vector<int32_t> iv{1, 2, 3};
  Tensor i = from_data(std::span<const int32_t>(iv), {3}, dev);
  std::vector<uint8_t> bv{1, 0};
  Tensor b = from_bool(bv, {2}, dev);
  EXPECT_THROW(i.set_requires_grad(), AutodiffError);
  EXPECT_THROW(b.set_requires_grad(), AutodiffError);
  EXPECT_FALSE(i.tracked());
  EXPECT_FALSE(b.tracked());
  Tensor f = leaf({1, 2}, {2}, dev);
  EXPECT_TRUE(f.requires_grad());
  EXPECT_TRUE(f.tracked());
}

// f16 and bf16 leaves may be tracked too: their gradients have their dtype, and a seed must have the root's dtype.
// y = x * x, loss = sum(y), x = [1, -2, 0.5]: d/dx = 2x = [2, -4, 1], exact in both (bits written by hand).
TEST(AutodiffSemantics, HalfLeavesGetGradientsOfTheirDtype) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  const std::pair<DType, std::array<uint16_t, 3>> cases[] = {{DType::f16, {0x3c00, 0xc000, 0x3800}},
                                                             {DType::bf16, {0x3f80, 0xc000, 0x3f00}}};
  for (const auto& [dt, bits] : cases) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<uint8_t> bytes;
    for (uint16_t b : bits) bytes.push_back(uint8_t(b)), bytes.push_back(uint8_t(b >> 8));
    Tensor x, y, loss;
    try {
      x = from_bytes(bytes, {3}, dt, dev);
      x.set_requires_grad();
      y = mul(x, x);
      loss = sum(y);
    } catch (const Unsupported& e) {
      GTEST_SKIP() << e.what();
    }
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_THROW(backward(y, from_data({1.0f, 1.0f, 1.0f}, {3}, dev)), DTypeMismatch);  // an f32 seed
    backward(loss);  // a scalar root: a seed of one in its dtype
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_EQ(cast(x.grad(), DType::f32).to_f32(), (std::vector<float>{2.0f, -4.0f, 1.0f}));
  }
}

TEST(AutodiffSemantics, OnlyLeavesCanBeMarked) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1, 2}, {2}, dev);
  Tensor y = to(x, dev);  // a tracked result (to needs no kernel)
  EXPECT_TRUE(y.tracked());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.set_requires_grad(), AutodiffError);
}

// ---- what backward() accepts ----------------------------------------------------------------------------------------

TEST(AutodiffSemantics, BackwardOfUntrackedIsAnError) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = from_data({1.0f}, {}, dev);
  EXPECT_THROW(backward(x), AutodiffError);
  EXPECT_THROW(backward(Tensor()), AutodiffError);
}

TEST(AutodiffSemantics, NonScalarRootNeedsASeed) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1, 2, 3}, {3}, dev);
  Tensor y = to(x, dev);
  EXPECT_THROW(backward(y), AutodiffError);
  EXPECT_THROW(backward(x), AutodiffError);
  EXPECT_FALSE(x.grad().defined()) << "a failed backward must not leave a gradient behind";
}

TEST(AutodiffSemantics, SeedMustMatchTheRoot) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1, 2, 3}, {3}, dev);
  Tensor y = to(x, dev);
  EXPECT_THROW(backward(y, from_data({1.0f, 1.0f}, {2}, dev)), ShapeError);
  EXPECT_THROW(backward(y, from_data({1.0f, 1.0f, 1.0f}, {1, 3}, dev)), ShapeError);
  std::vector<int32_t> iv{1, 1, 1};
  EXPECT_THROW(backward(y, from_data(std::span<const int32_t>(iv), {3}, dev)), DTypeMismatch);
  std::string why;
  if (auto other = testing::device_under_test(1, &why)) {
    try {
      backward(y, from_data({1.0f, 1.0f, 1.0f}, {3}, *other));
      ADD_FAILURE() << "a seed on another device was accepted";
    } catch (const DeviceMismatch& e) {
      EXPECT_EQ(e.target, dev);
      ASSERT_EQ(e.offenders.size(), 1u);
      EXPECT_EQ(e.offenders[0].param, "seed");
      EXPECT_FALSE(e.offenders[0].wrong_backend);
    }
  }
  if (auto other = testing::other_backend_device()) {
    try {
      backward(y, from_data({1.0f, 1.0f, 1.0f}, {3}, *other));
      ADD_FAILURE() << "a seed on another backend was accepted";
    } catch (const DeviceMismatch& e) {
      ASSERT_EQ(e.offenders.size(), 1u);
      EXPECT_TRUE(e.offenders[0].wrong_backend);
    }
  }
  EXPECT_FALSE(x.grad().defined());
  // The right seed works, and a seed of a non-scalar root is the gradient of the root itself.
  backward(y, from_data({1.0f, -2.0f, 0.5f}, {3}, dev));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{1.0f, -2.0f, 0.5f}));
}

TEST(AutodiffSemantics, BackwardOfALeafIsItsSeed) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({4}, {}, dev);
  backward(x);
  EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{1.0f}));
}

// ---- accumulation --------------------------------------------------------------------------------------------------

TEST(AutodiffSemantics, TwoUsesOfALeafAccumulate) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = leaf({1.5f, -2.0f, 3.0f}, {3}, dev);
    backward(sum(mul(x, x)));  // d/dx sum(x*x) = 2x: x is both lhs and rhs
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{3.0f, -4.0f, 6.0f}));
  });
}

TEST(AutodiffSemantics, TwoBackwardCallsAccumulateUntilZeroGrad) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = leaf({1, 2}, {2}, dev);
    Tensor w = from_data({3.0f, -1.0f}, {2}, dev);
    backward(sum(mul(x, w)));
    backward(sum(mul(x, w)));
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{6.0f, -2.0f}));
    x.zero_grad();
    EXPECT_FALSE(x.grad().defined());
    backward(sum(mul(x, w)));
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{3.0f, -1.0f}));
  });
}

TEST(AutodiffSemantics, DiamondGraphSumsBothPaths) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = leaf({2.0f}, {}, dev);
    Tensor a = mul(x, from_data({3.0f}, {}, dev));
    Tensor b = exp(x);
    backward(add(a, mul(b, a)));  // d/dx (3x + 3x e^x) = 3 + 3 e^x (1 + x)
    const double expected = 3 + 3 * std::exp(2.0) * 3;
    EXPECT_NEAR(x.grad().to_f32()[0], expected, 1e-5 * expected);
  });
}

// ---- no_grad and constants ------------------------------------------------------------------------------------------

TEST(AutodiffSemantics, NoGradMakesResultsUntracked) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1, 2}, {2}, dev);
  const uint64_t tape = autodiff_nodes_recorded();
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    Tensor y = to(x, dev);
    EXPECT_FALSE(y.tracked());
    EXPECT_THROW(backward(y, from_data({1.0f, 1.0f}, {2}, dev)), AutodiffError);
    {
      NoGradGuard nested;
    }
    EXPECT_FALSE(grad_enabled()) << "a nested scope must restore the outer scope's mode, not turn grad back on";
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_EQ(autodiff_nodes_recorded(), tape) << "nothing may be recorded under no_grad";
  EXPECT_TRUE(to(x, dev).tracked());
}

TEST(AutodiffSemantics, UntrackedInputIsAConstant) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = leaf({1.0f, 2.0f}, {2}, dev);
    Tensor c = from_data({5.0f, -3.0f}, {2}, dev);
    Tensor y = mul(x, c);
    EXPECT_TRUE(y.tracked());
    backward(sum(y));
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{5.0f, -3.0f}));
    EXPECT_FALSE(c.grad().defined()) << "an untracked input acts as a constant";
    EXPECT_FALSE(c.tracked());
  });
}

TEST(AutodiffSemantics, OpsOfUntrackedInputsAreUntracked) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor a = from_data({1.0f, 2.0f}, {2}, dev);
    const uint64_t tape = autodiff_nodes_recorded();
    EXPECT_FALSE(add(a, a).tracked());
    EXPECT_EQ(autodiff_nodes_recorded(), tape);
  });
}

// ---- validation step 4: cast would cut the gradient silently ---------------------------------------------------------

TEST(AutodiffSemantics, CastOfTrackedIsAnErrorUntilDetached) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1.5f, -2.5f}, {2}, dev);
  EXPECT_THROW(cast(x, DType::i32), AutodiffError);
  EXPECT_THROW(cast(to(x, dev), DType::boolean), AutodiffError);  // a tracked non-leaf too
  skip_if_unsupported([&] {
    Tensor d = x.detach();
    EXPECT_FALSE(d.tracked());
    EXPECT_EQ(d.device(), dev);
    EXPECT_EQ(d.to_f32(), x.to_f32());
    Tensor i = cast(d, DType::i32);
    EXPECT_EQ(i.to_i32(), (std::vector<int32_t>{1, -2}));
  });
}

TEST(AutodiffSemantics, CastErrorChangesNothing) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = leaf({1.5f, -2.5f}, {2}, dev);
  const testing::WorldSnapshot before = testing::snapshot_world();
  EXPECT_THROW(cast(x, DType::f32), AutodiffError);
  EXPECT_EQ(testing::snapshot_world(), before);
}

// ---- gradients across devices ----------------------------------------------------------------------------------------

// A leaf on device 0, moved to `there`, a loss computed there: the gradient arrives on device 0.
void check_gradient_comes_home(Device home, Device there) {
  Tensor x = leaf({1.0f, -2.0f, 3.0f}, {3}, home);
  Tensor moved = to(x, there);
  EXPECT_EQ(moved.device(), there);
  EXPECT_TRUE(moved.tracked());
  Tensor w = from_data({2.0f, 0.5f, -1.0f}, {3}, there);
  Tensor loss = sum(mul(moved, mul(moved, w)));  // sum(w x^2): d/dx = 2 w x
  EXPECT_EQ(loss.device(), there);
  backward(loss);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), home) << "each gradient lives on its leaf's device";
  EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{4.0f, -2.0f, -6.0f}));
}

TEST(AutodiffSemantics, GradientCrossesDeviceIndex) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  CROSSFIRE_REQUIRE_DEVICE(dev1, 1);
  skip_if_unsupported([&] { check_gradient_comes_home(dev, dev1); });
}

TEST(AutodiffSemantics, GradientCrossesBackend) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  std::optional<Device> other = testing::other_backend_device();
  if (!other) GTEST_SKIP() << "no device of another backend on this machine";
  skip_if_unsupported([&] { check_gradient_comes_home(dev, *other); });
}

// Needs no kernel at all: to() is run by dispatch, and the seed is given.
TEST(AutodiffSemantics, SeededGradientCrossesDevicesThroughTo) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  std::vector<Device> elsewhere;
  std::string why;
  if (auto d1 = testing::device_under_test(1, &why)) elsewhere.push_back(*d1);
  if (auto o = testing::other_backend_device()) elsewhere.push_back(*o);
  if (elsewhere.empty()) GTEST_SKIP() << "only one device on this machine";
  for (Device there : elsewhere) {
    Tensor x = leaf({1.0f, 2.0f}, {2}, dev);
    Tensor y = to(to(x, there), there);
    backward(y, from_data({0.25f, -4.0f}, {2}, there));
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().device(), dev);
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{0.25f, -4.0f}));
  }
}

// Two leaves on two devices (index 1 of this backend, else another backend), the loss on the second: each
// gradient lands on its own leaf's device.
TEST(AutodiffSemantics, EachGradientLivesOnItsLeafsDevice) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  std::string why;
  std::optional<Device> second = testing::device_under_test(1, &why);
  if (!second) second = testing::other_backend_device();
  if (!second) GTEST_SKIP() << why << "; and no device of another backend";
  const Device dev1 = *second;
  skip_if_unsupported([&] {
    Tensor a = leaf({1.0f, 2.0f}, {2}, dev);
    Tensor b = leaf({3.0f, 4.0f}, {2}, dev1);
    Tensor loss = sum(mul(to(a, dev1), b));  // on dev1
    backward(loss);
    EXPECT_EQ(a.grad().device(), dev);
    EXPECT_EQ(b.grad().device(), dev1);
    EXPECT_EQ(a.grad().to_f32(), (std::vector<float>{3.0f, 4.0f}));
    EXPECT_EQ(b.grad().to_f32(), (std::vector<float>{1.0f, 2.0f}));
  });
}

// Mixing a tracked and an untracked tensor of different devices is still a device error, tracked or not.
TEST(AutodiffSemantics, TrackedInputsStillObeyDeviceRules) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  CROSSFIRE_REQUIRE_DEVICE(dev1, 1);
  Tensor a = leaf({1.0f}, {1}, dev);
  Tensor b = from_data({2.0f}, {1}, dev1);
  const testing::WorldSnapshot before = testing::snapshot_world();
  EXPECT_THROW(add(a, b), DeviceMismatch);
  EXPECT_EQ(testing::snapshot_world(), before);
}

}  // namespace
}  // namespace crossfire
