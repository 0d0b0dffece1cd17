// SPDX-License-Identifier: Apache-2.0
// Which backend a test binary checks (CROSSFIRE_TEST_BACKEND, set per binary by tests/CMakeLists.txt), and helpers
// every suite uses.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::testing {

BackendKind parse_backend_kind(std::string_view name);

// The backend this binary was built for. Suites are compiled once and linked into one binary per enabled backend
// with a generated file that names the backend (tests/CMakeLists.txt), so no source depends on a macro.
BackendKind backend_under_test();

// Device `index` of backend `k`, or nullopt with `why` set when it does not exist on this machine.
std::optional<Device> device_of(BackendKind k, int index, std::string* why);
inline std::optional<Device> device_under_test(int index, std::string* why) {
  return device_of(backend_under_test(), index, why);
}

// A device of another backend than `k` (for wrong-backend cases), if this machine has one.
std::optional<Device> device_not_of(BackendKind k);
inline std::optional<Device> other_backend_device() { return device_not_of(backend_under_test()); }

// Counters of every backend plus the autodiff tape length: "nothing changed" is equality of two of these.
struct WorldSnapshot {
  std::vector<CounterSnapshot> backends;
  uint64_t autodiff_nodes;
  friend bool operator==(const WorldSnapshot&, const WorldSnapshot&) = default;
};
WorldSnapshot snapshot_world();

// Host values of a tensor as doubles, whatever its dtype.
std::vector<double> values_of(const Tensor& t);

}  // namespace crossfire::testing

// Skips the current test with the reason when the device does not exist; else binds `var` to it.
#define CROSSFIRE_REQUIRE_DEVICE(var, index)                                        \
  Device var;                                                                       \
  do {                                                                              \
    std::string why_;                                                               \
    auto d_ = ::crossfire::testing::device_under_test((index), &why_);              \
    if (!d_) GTEST_SKIP() << why_;                                                  \
    var = *d_;                                                                      \
  } while (0)
