// SPDX-License-Identifier: Apache-2.0
// Machine context for the benchmark JSON (see alloc_counter.hpp).
#include <string>

#include "alloc_counter.hpp"
#include "crossfire/crossfire.hpp"

namespace crossfire::bench {
void add_device_context() {
  std::string available;
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    const std::string key = "crossfire_" + std::string(backend_name(k));
    if (b.available()) {
      available += (available.empty() ? "" : ",") + std::string(backend_name(k));
      const DeviceInfo info = b.device_info(0);
      benchmark::AddCustomContext(key, info.name + (info.driver.empty() ? "" : " / " + info.driver));
    } else {
      benchmark::AddCustomContext(key, "unavailable: " + b.unavailable_reason());
    }
  }
  benchmark::AddCustomContext("crossfire_backends", available);
#ifdef NDEBUG
  benchmark::AddCustomContext("crossfire_build", "NDEBUG");
#else
  benchmark::AddCustomContext("crossfire_build", "assertions on (not a release build)");
#endif
}
}  // namespace crossfire::bench
