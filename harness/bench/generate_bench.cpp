// Generation speed of valid 10-node programs (issue 4 asks for >= 20,000 per second on one core).
#include <benchmark/benchmark.h>

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

}  // namespace

BENCHMARK_MAIN();
