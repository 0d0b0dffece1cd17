// SPDX-License-Identifier: Apache-2.0
// The core alone, through add_subdirectory: an op and the exact blame of a device mismatch.
#include <cstdio>

#include "crossfire/crossfire.hpp"

int main() {
  using namespace crossfire;
  Tensor a = full({3}, 1.0, DType::f32, Device::cpu(0));
  try {
    mul(a, full({3}, 1.0, DType::f32, Device::cpu(1)));
  } catch (const DeviceMismatch& e) {
    std::printf("caught: %s\n", e.what());
    return e.offenders.size() == 1 && e.offenders[0].param == "rhs" ? 0 : 1;
  }
  return 2;
}
