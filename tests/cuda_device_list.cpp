// SPDX-License-Identifier: Apache-2.0
// Prints every backend's availability and devices, one line each:
//   cpu: 2 devices
//     cpu:0  host (logical device 0 of 2, 16 hardware threads)  [cpu]  crossfire cpu backend (Eigen)
//   cuda: unavailable: CUDA driver version is insufficient for CUDA runtime version (35)
// Exits 0 whatever it finds; scripts/gpu-check.sh runs it before the CUDA tests.
#include <cstdio>

#include "crossfire/crossfire.hpp"

int main() {
  using namespace crossfire;
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    const int n = b.device_count();
    if (n == 0) {
      std::printf("%s: unavailable: %s\n", std::string(backend_name(k)).c_str(), b.unavailable_reason().c_str());
      continue;
    }
    std::printf("%s: %d device%s\n", std::string(backend_name(k)).c_str(), n, n == 1 ? "" : "s");
    for (int i = 0; i < n; ++i) {
      DeviceInfo info = b.device_info(i);
      std::printf("  %s  %s  [%s]  %s\n", info.device.str().c_str(), info.name.c_str(), info.type.c_str(),
                  info.driver.c_str());
    }
  }
  return 0;
}
