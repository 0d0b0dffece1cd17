// SPDX-License-Identifier: Apache-2.0
// Contract section 1 (devices, availability) and section 3 (targets, NoTensorInput).
#include <gtest/gtest.h>

#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

using testing::backend_under_test;

TEST(Devices, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu:1"), Device::cpu(1));
  EXPECT_EQ(Device::parse("vulkan"), Device::vulkan(0));
  EXPECT_EQ(Device::cuda(3).str(), "cuda:3");
  EXPECT_THROW(Device::parse("tpu:0"), InvalidArgument);
  EXPECT_THROW(Device::parse("cpu:x"), InvalidArgument);
  EXPECT_THROW(Device::parse("cpu:300"), InvalidArgument);
  EXPECT_THROW(Device::parse("cpu:-1"), InvalidArgument);
}

TEST(Devices, CpuHasConfigurableLogicalDevices) {
  // The default is 2 (CROSSFIRE_CPU_DEVICES unset in the test environment) so that index mismatches are testable.
  if (std::getenv("CROSSFIRE_CPU_DEVICES") != nullptr) GTEST_SKIP() << "CROSSFIRE_CPU_DEVICES is set";
  EXPECT_EQ(backend(BackendKind::cpu).device_count(), 2);
  EXPECT_TRUE(backend(BackendKind::cpu).unavailable_reason().empty());
}

TEST(Devices, EveryBackendIsEitherAvailableOrSaysWhyInOneLine) {
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    EXPECT_EQ(b.kind(), k);
    if (b.device_count() > 0) {
      for (int i = 0; i < b.device_count(); ++i) {
        DeviceInfo info = b.device_info(i);
        EXPECT_EQ(info.device, (Device{k, uint8_t(i)}));
        EXPECT_FALSE(info.name.empty());
        EXPECT_FALSE(info.type.empty());
      }
    } else {
      std::string reason = b.unavailable_reason();
      EXPECT_FALSE(reason.empty()) << backend_name(k);
      EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
    }
  }
}

TEST(Devices, AskingForAnUnavailableBackendRaisesBackendUnavailableWithTheReason) {
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    if (b.device_count() > 0) continue;
    testing::WorldSnapshot before = testing::snapshot_world();
    try {
      zeros({2}, DType::f32, Device{k, 0});
      ADD_FAILURE() << "expected BackendUnavailable for " << backend_name(k);
    } catch (const BackendUnavailable& e) {
      EXPECT_EQ(e.backend, k);
      EXPECT_EQ(e.reason, b.unavailable_reason());
      EXPECT_EQ(std::string(e.what()), std::string(backend_name(k)) + ": unavailable: " + b.unavailable_reason());
    }
    EXPECT_EQ(before, testing::snapshot_world());
  }
}

TEST(Devices, AnIndexPastTheLastDeviceIsInvalid) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  Device missing{d.backend, uint8_t(backend(d.backend).device_count())};
  testing::WorldSnapshot before = testing::snapshot_world();
  EXPECT_THROW(zeros({2}, DType::f32, missing), InvalidArgument);
  EXPECT_EQ(before, testing::snapshot_world());
}

TEST(Targets, CreationOpsRunOnTheirExplicitDevice) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::vector<float> v{1, 2, 3};
  Tensor t = from_data(std::span<const float>(v), {3}, d);
  EXPECT_EQ(t.device(), d);
  EXPECT_EQ(t.to_f32(), v);
}

TEST(Targets, TheTargetIsTheFirstPresentTensorArgument) {
  CROSSFIRE_REQUIRE_DEVICE(d0, 0);
  CROSSFIRE_REQUIRE_DEVICE(d1, 1);
  Tensor a = from_data({1.f}, {1}, d1);
  Tensor b = from_data({2.f}, {1}, d0);
  // add(a on d1, b on d0): the target is d1 (from `lhs`), so `rhs` is blamed, not `lhs`.
  try {
    add(a, b);
    FAIL() << "expected DeviceMismatch";
  } catch (const DeviceMismatch& e) {
    EXPECT_EQ(e.target, d1);
    EXPECT_EQ(e.target_from, "lhs");
    ASSERT_EQ(e.offenders.size(), 1u);
    EXPECT_EQ(e.offenders[0].param, "rhs");
  }
}

TEST(Targets, AnOpWithTensorParametersButNoTensorRaisesNoTensorInput) {
  testing::WorldSnapshot before = testing::snapshot_world();
  try {
    cat(std::span<const Tensor>(), 0);
    FAIL() << "expected NoTensorInput";
  } catch (const NoTensorInput& e) {
    EXPECT_EQ(e.op(), "cat");
    EXPECT_NE(std::string(e.what()).find("cat: no tensor input"), std::string::npos) << e.what();
  }
  EXPECT_EQ(before, testing::snapshot_world());
}

TEST(Targets, ToIsTheOnlyOpWhoseOutputLivesElsewhere) {
  CROSSFIRE_REQUIRE_DEVICE(d0, 0);
  CROSSFIRE_REQUIRE_DEVICE(d1, 1);
  Tensor a = from_data({1.f, -2.f}, {2}, d0);
  Tensor b = to(a, d1);
  EXPECT_EQ(b.device(), d1);
  EXPECT_EQ(b.to_f32(), (std::vector<float>{1.f, -2.f}));
  if (auto other = testing::other_backend_device()) {
    Tensor c = to(a, *other);
    EXPECT_EQ(c.device(), *other);
    EXPECT_EQ(c.to_f32(), (std::vector<float>{1.f, -2.f}));
    EXPECT_EQ(to(c, d0).to_f32(), (std::vector<float>{1.f, -2.f}));
  }
}

}  // namespace
}  // namespace crossfire
