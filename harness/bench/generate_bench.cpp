// SPDX-License-Identifier: Apache-2.0
// The harness's own speed: generation of valid 10-node programs (issue 4 asks for >= 20,000 per second on one
// core), the text format's round trip, and campaign throughput (programs checked by all four oracles per second,
// as `crossfire run` does it, without the supervising process).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "crossfire/harness/campaign.hpp"
#include "crossfire/harness/generate.hpp"

namespace {

void BM_GenerateTenNodePrograms(benchmark::State& state) {
  crossfire::harness::GenConfig cfg;
  cfg.min_nodes = cfg.max_nodes = 10;
  cfg.devices = {crossfire::Device::cpu(0), crossfire::Device::cpu(1)};
  uint64_t seed = 1;
  size_t values = 0;
  for (auto _ : state) {
    crossfire::harness::PrngChoices choices(seed++);
    crossfire::harness::Program p = crossfire::harness::generate_program(choices, cfg);
    values += p.values.size();
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.counters["values_per_program"] = double(values) / double(state.iterations());
}
BENCHMARK(BM_GenerateTenNodePrograms);

void BM_PrintParseRoundTrip(benchmark::State& state) {
  crossfire::harness::GenConfig cfg;
  cfg.min_nodes = cfg.max_nodes = 10;
  crossfire::harness::PrngChoices choices(7);
  crossfire::harness::Program p = crossfire::harness::generate_program(choices, cfg);
  for (auto _ : state) {
    std::string text = crossfire::harness::print_program(p);
    benchmark::DoNotOptimize(crossfire::harness::parse_program(text));
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(BM_PrintParseRoundTrip);

// What one campaign worker does per program on the CPU devices (the README's main command, on cpu:0 and cpu:1):
// the campaign's program for an index, then the contract, agreement, gradient and bad-input oracles. Items are
// programs; `checks/program` is the oracles' individual checks. Skipped when a failure is found (a campaign would
// report it; a benchmark must not time it).
void BM_CampaignProgramsAllOracles(benchmark::State& state) {
  using namespace crossfire::harness;
  CampaignConfig c;
  c.seed = 1;
  c.devices = {crossfire::Device::cpu(0), crossfire::Device::cpu(1)};
  CheckOptions o;
  o.devices = c.devices;
  uint64_t index = 0, checks = 0;
  for (auto _ : state) {
    ProgramReport r = check_program(campaign_program(c, index++), o);
    for (const OracleCounts& k : r.counts) checks += k.checked;
    if (r.failed()) {
      state.SkipWithError("a program failed an oracle: run `crossfire run` to see it");
      break;
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.counters["checks/program"] = double(checks) / double(std::max<int64_t>(1, int64_t(state.iterations())));
}
BENCHMARK(BM_CampaignProgramsAllOracles)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
