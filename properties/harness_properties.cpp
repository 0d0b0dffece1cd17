// SPDX-License-Identifier: Apache-2.0
// Properties of generated programs, with RapidCheck driving the generator (so failures shrink):
//  - every generated program round-trips exactly through the text format;
//  - the contract model and dispatch agree on every call (devices uniform or deliberately mismatched);
//  - every node agrees with the f64 reference, gradients with finite differences, invalid calls raise the
//    predicted typed error, on the CPU devices.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <limits>
#include <utility>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/oracles.hpp"

namespace crossfire::harness {
namespace {

// The RapidCheck front end of the generator: each decision is a pick that RapidCheck records and shrinks toward
// the lowest choice.
class RcChoices final : public ChoiceSource {
 public:
  // [lo, hi], both ends included, as every ChoiceSource; inRange's end is exclusive, and hi + 1 overflows when hi
  // is the largest int64 (a generated attribute's bound: UBSan stopped seed 2373511941085924274 there).
  int64_t range(int64_t lo, int64_t hi) override {
    if (hi <= lo) return lo;
    if (hi < std::numeric_limits<int64_t>::max()) return *rc::gen::inRange<int64_t>(lo, hi + 1);
    if (lo > std::numeric_limits<int64_t>::min()) return *rc::gen::inRange<int64_t>(lo - 1, hi) + 1;
    return *rc::gen::arbitrary<int64_t>();  // the whole of int64
  }
};

std::vector<Device> cpu_devices() {
  std::vector<Device> d;
  for (const Device& x : available_devices())
    if (x.backend == BackendKind::cpu) d.push_back(x);
  return d;
}

Program generated(int max_nodes, bool mismatches, const std::vector<Device>& devices) {
  RcChoices c;
  GenConfig cfg;
  cfg.max_nodes = max_nodes;
  cfg.mismatches = mismatches;
  cfg.devices = devices;
  return generate_program(c, cfg);
}

std::string failures_of(const ProgramReport& r, const Program& p) {
  std::string s;
  for (const Failure& f : r.failures) s += std::string(oracle_name(f.oracle)) + ": " + f.what + "\n  " + f.detail + "\n";
  return s + print_program(p);
}

// RcChoices keeps to [lo, hi] at the ends of int64 too (ByteChoices and PrngChoices are held to it in
// tests/harness/generator_test.cpp, Generator.ChoiceSourcesStayInRangeAtTheEndsOfInt64).
RC_GTEST_PROP(RcChoices, StaysInItsRangeAtTheEndsOfInt64, ()) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  RcChoices c;
  for (auto [lo, hi] : {std::pair{kMax - 3, kMax}, std::pair{kMin, kMin + 3}, std::pair{kMin, kMax},
                        std::pair{kMax - 1, kMax}, std::pair{int64_t(-5), int64_t(5)}}) {
    const int64_t v = c.range(lo, hi);
    RC_ASSERT(v >= lo);
    RC_ASSERT(v <= hi);
  }
}

RC_GTEST_PROP(GeneratedPrograms, RoundTripThroughTheTextFormat, ()) {
  Program p = generated(30, true, available_devices());
  std::string text = print_program(p);
  RC_ASSERT(parse_program(text) == p);
  RC_ASSERT(print_program(parse_program(text)) == text);
}

RC_GTEST_PROP(GeneratedPrograms, ContractModelMatchesDispatch, ()) {
  Program p = generated(12, true, available_devices());
  CheckOptions o;
  o.enabled = {true, false, false, false};
  ProgramReport r = check_program(p, o);
  RC_LOG() << failures_of(r, p);
  RC_ASSERT(r.failures.empty());
}

RC_GTEST_PROP(GeneratedPrograms, BadInputRaisesThePredictedError, ()) {
  Program p = generated(8, false, cpu_devices());
  CheckOptions o;
  o.devices = cpu_devices();
  o.enabled = {false, false, false, true};
  ProgramReport r = check_program(p, o);
  RC_LOG() << failures_of(r, p);
  RC_ASSERT(r.failures.empty());
}

// Agreement and gradients depend on every CPU kernel and the reference; they run with finite values only (the
// special-value semantics of inf/nan are covered by the campaign, whose findings are triaged by hand).
RC_GTEST_PROP(GeneratedPrograms, AgreeWithTheReferenceOnCpu, ()) {
  RcChoices c;
  GenConfig cfg;
  cfg.max_nodes = 8;
  cfg.devices = cpu_devices();
  cfg.special_values = false;
  Program p = generate_program(c, cfg);
  CheckOptions o;
  o.devices = cpu_devices();
  o.enabled = {false, true, true, false};
  ProgramReport r = check_program(p, o);
  RC_LOG() << failures_of(r, p);
  RC_ASSERT(r.failures.empty());
}

}  // namespace
}  // namespace crossfire::harness
