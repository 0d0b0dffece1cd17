// SPDX-License-Identifier: Apache-2.0
// fuzz_generate_check: the bytes drive the program generator (ByteChoices), and the generated program must
// (1) round-trip through the text format and (2) pass every oracle: the contract model and dispatch agree on
// every call as written (across the CPU devices), every node agrees with the f64 reference on cpu:0, gradients
// agree with finite differences, and invalid calls raise the predicted typed error. Any failure aborts with the program printed.
#include <cstdio>
#include <cstdlib>

#include "crossfire/harness/oracles.hpp"
#include "crossfire/harness/generate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossfire;
  using namespace crossfire::harness;
  static const std::vector<Device> devices = [] {
    std::vector<Device> d;
    for (const Device& x : available_devices())
      if (x.backend == BackendKind::cpu) d.push_back(x);
    return d;
  }();
  ByteChoices choices({data, size});
  GenConfig cfg;
  cfg.max_nodes = 8;
  cfg.devices = devices;
  Program p = generate_program(choices, cfg);
  std::string text = print_program(p);
  if (!(parse_program(text) == p)) {
    std::fprintf(stderr, "generated program does not round-trip:\n%s\n", text.c_str());
    std::abort();
  }
  // The program spans every CPU device (so the contract oracle checks mismatches across indices), but the
  // oracles run it on cpu:0 alone: the CPU devices share one set of kernels, so a second run would repeat the
  // same computation (and its coverage) and double the execution's cost for no check.
  CheckOptions opts;
  opts.devices = {devices.front()};
  ProgramReport r = check_program(p, opts);
  if (r.failed()) {
    for (const Failure& f : r.failures)
      std::fprintf(stderr, "[%s] %s\n  %s\n", std::string(oracle_name(f.oracle)).c_str(), f.what.c_str(),
                   f.detail.c_str());
    std::fprintf(stderr, "%s\n", text.c_str());
    std::abort();
  }
  return 0;
}
