// SPDX-License-Identifier: Apache-2.0
// Backends registered at run time (issue 15; Note [Registered backends] in dispatch/src/backend.cpp): names are
// checked, a refused registration changes nothing, a registered backend's devices are `<name>:<index>` in every
// place a device is named, and the slots run out with a typed error, not an overflow. (The contract, ops and
// autodiff suites run whole against a registered backend as test_<suite>_mirror.)
#include <gtest/gtest.h>

#include <string>

#include "crossfire/crossfire.hpp"
#include "support/mirror_backend.hpp"

namespace crossfire {
namespace {

// Registers `name` and expects a refusal whose message says `why`, with the registry unchanged.
void expect_refused(std::string_view name, std::unique_ptr<Backend> b, const std::string& why) {
  const size_t kinds = backend_kinds().size();
  try {
    register_backend(name, std::move(b));
    ADD_FAILURE() << "registered `" << name << "`";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
  EXPECT_EQ(backend_kinds().size(), kinds) << name;
}

TEST(Registry, BadOrTakenNamesAreRefusedAndChangeNothing) {
  for (const char* name : {"Torch", "9lives", "a-b", "x:y", "has space", "_lead"})
    expect_refused(name, testing::make_mirror_backend(), "is not a-z, 0-9 and `_`");
  expect_refused("", testing::make_mirror_backend(), "the name is empty");
  expect_refused("abcdefghijklmnop", testing::make_mirror_backend(), "longer than 15 characters");
  for (const char* taken : {"cpu", "vulkan", "cuda"})  // compiled in or not, a built-in name is taken
    expect_refused(taken, testing::make_mirror_backend(), "is already registered");
  expect_refused("nothing", nullptr, "is null");
  EXPECT_EQ(backend_name_problem("fine_name2"), "");
}

TEST(Registry, ARegisteredBackendsDevicesAreNamedEverywhere) {
  const BackendKind k = register_backend("alpha", testing::make_mirror_backend());
  EXPECT_GE(int(k), kNumBuiltinBackends);
  EXPECT_EQ(backend_kinds().back(), k);
  EXPECT_EQ(backend_name(k), "alpha");
  EXPECT_EQ(backend_kind_named("alpha"), k);
  EXPECT_EQ(backend(k).kind(), k);
  EXPECT_EQ(Device::parse("alpha:1"), (Device{k, 1}));
  EXPECT_EQ((Device{k, 1}).str(), "alpha:1");
  EXPECT_NE(backend_names().find("alpha"), std::string::npos);
  const std::vector<Device> all = available_devices();
  EXPECT_NE(std::find(all.begin(), all.end(), Device{k, 1}), all.end());
  expect_refused("alpha", testing::make_mirror_backend(), "a backend called `alpha` is already registered");

  // A mismatch between it and the CPU backend: blamed with its name, as a different backend.
  Tensor a = full({2}, 1.0, DType::f32, Device{k, 0});
  Tensor b = full({2}, 2.0, DType::f32, Device::cpu(0));
  try {
    add(a, b);
    ADD_FAILURE() << "no DeviceMismatch";
  } catch (const DeviceMismatch& e) {
    ASSERT_EQ(e.offenders.size(), 1u);
    EXPECT_TRUE(e.offenders[0].wrong_backend);
    EXPECT_EQ(std::string(e.what()),
              "add: input tensor `rhs` is on the wrong backend: expected alpha:0 (from `lhs`), got cpu:0");
  }
  // And it computes: the values come back through its own memory.
  EXPECT_EQ(add(a, a).to_f32(), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_EQ(to(a, Device::cpu(1)).to_f32(), (std::vector<float>{1.0f, 1.0f}));
  // An index past its devices is the usual error.
  EXPECT_THROW(zeros({1}, DType::f32, Device{k, 2}), InvalidArgument);
}

TEST(Registry, TheSlotsRunOutWithATypedError) {
  std::vector<BackendKind> added;
  while (backend_kinds().size() < size_t(kMaxBackends))
    added.push_back(register_backend("fill" + std::to_string(added.size()), testing::make_mirror_backend()));
  expect_refused("onemore", testing::make_mirror_backend(), "all 8 backend slots are taken");
  // Every slot is usable, the last one included.
  const BackendKind last = backend_kinds().back();
  EXPECT_EQ(int(last), kMaxBackends - 1);
  EXPECT_EQ(full({1}, 3.0, DType::f32, Device{last, 0}).to_f32(), std::vector<float>{3.0f});
  // A device of no slot is still refused (Note [A device of no known backend]).
  EXPECT_THROW(backend(BackendKind(kMaxBackends)), InvalidArgument);
  EXPECT_EQ(find_backend(Device{BackendKind(kMaxBackends), 0}), nullptr);
}

}  // namespace
}  // namespace crossfire
