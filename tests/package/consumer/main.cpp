// SPDX-License-Identifier: Apache-2.0
// Uses the installed crossfire: the core (a tensor op, a device mismatch caught with its blame) and the harness
// (a generated program checked by every oracle). Prints what it saw; exits non-zero on any surprise.
#include <cstdio>

#include "crossfire/crossfire.hpp"
#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/oracles.hpp"
#include "crossfire/version.hpp"

int main() {
  using namespace crossfire;
  std::printf("crossfire %s (%s)\n", std::string(kVersion).c_str(), std::string(build_commit()).c_str());
  Tensor a = full({2}, 1.5, DType::f32, Device::cpu(0));
  Tensor b = full({2}, 2.0, DType::f32, Device::cpu(0));
  if (add(a, b).to_f32() != std::vector<float>{3.5f, 3.5f}) return 1;
  try {
    add(a, full({2}, 2.0, DType::f32, Device::cpu(1)));
    return 2;
  } catch (const DeviceMismatch& e) {
    std::printf("caught: %s\n", e.what());
    if (e.offenders.size() != 1 || e.offenders[0].param != "rhs") return 3;
  }
  harness::PrngChoices choices(7);
  harness::GenConfig g;
  g.devices = {Device::cpu(0), Device::cpu(1)};
  harness::Program p = harness::generate_program(choices, g);
  harness::CheckOptions o;
  o.devices = g.devices;
  harness::ProgramReport r = harness::check_program(p, o);
  std::printf("a generated program of %d nodes: %zu failures, contract checks %llu\n", p.num_nodes(),
              r.failures.size(), (unsigned long long)r.counts[0].checked);
  return r.failures.empty() && harness::checked_anything(r.counts, o.enabled) ? 0 : 4;
}
