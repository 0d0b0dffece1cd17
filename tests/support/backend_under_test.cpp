// SPDX-License-Identifier: Apache-2.0
#include "support/backend_under_test.hpp"

#include <fmt/format.h>

#include "reference/reference.hpp"
#include "support/mirror_backend.hpp"

namespace crossfire::testing {

// Defined in each test binary's generated backend_<name>.cpp.
extern const char* const kTestBackendName;

BackendKind backend_under_test() {
  static const BackendKind kind = parse_backend_kind(kTestBackendName);
  return kind;
}

BackendKind parse_backend_kind(std::string_view n) {
  if (n == kMirrorName) return mirror_backend();  // registered on first use, as a plug-in's backend would be
  return backend_kind_named(n).value_or(BackendKind::cpu);
}

std::optional<Device> device_of(BackendKind k, int index, std::string* why) {
  Backend& b = backend(k);
  if (b.device_count() == 0) {
    if (why) *why = fmt::format("{}: unavailable: {}", backend_name(k), b.unavailable_reason());
    return std::nullopt;
  }
  if (index >= b.device_count()) {
    if (why)
      *why = fmt::format("{} has {} device(s); this test needs {}:{}", backend_name(k), b.device_count(),
                         backend_name(k), index);
    return std::nullopt;
  }
  return Device{k, uint8_t(index)};
}

std::optional<Device> device_not_of(BackendKind other) {
  for (BackendKind k : backend_kinds())
    if (k != other && backend(k).device_count() > 0) return Device{k, 0};
  return std::nullopt;
}

WorldSnapshot snapshot_world() {
  WorldSnapshot w;
  for (BackendKind k : backend_kinds()) w.backends.push_back(backend(k).snapshot());
  w.autodiff_nodes = autodiff_nodes_recorded();
  return w;
}

std::vector<double> values_of(const Tensor& t) { return reference::RefTensor::from(t).values; }

}  // namespace crossfire::testing
