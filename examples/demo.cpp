// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include "crossfire/crossfire.hpp"
using namespace crossfire;
int main() {
  for (Device d : available_devices()) fmt::print("{}: {}\n", d.str(), backend(d.backend).device_info(d.index).name);
  Tensor a = ones({2, 3}, DType::f32, Device::cpu(0));
  Tensor b = ones({2, 3}, DType::f32, Device::cpu(1));
  try {
    ArgPack p(Arg::of(a), Arg::of(b));
    call(ids::add_id, p);
  } catch (const Error& e) {
    fmt::print("{}\n", e.what());
  }
}
