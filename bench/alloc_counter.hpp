// SPDX-License-Identifier: Apache-2.0
// Heap allocation counting for the benchmarks: the benchmark binaries replace the global operator new/delete
// (alloc_counter.cpp) with versions that count, so a benchmark can report allocations per op as a counter.
#pragma once

#include <cstdint>

#include <benchmark/benchmark.h>

namespace crossfire::bench {

#ifndef CROSSFIRE_BENCH_COUNT_ALLOCATIONS
#define CROSSFIRE_BENCH_COUNT_ALLOCATIONS 1
#endif

// Every operator new of any form (plain, array, aligned, nothrow) since the process started.
uint64_t heap_allocations();

// Counts the allocations made while a benchmark's timing loop runs; report() sets the counter "allocs/op"
// (allocations per iteration, an average, not a rate).
class AllocationScope {
 public:
  AllocationScope() : start_(heap_allocations()) {}
  void report(benchmark::State& state, const char* name = "allocs/op") const {
    if (!CROSSFIRE_BENCH_COUNT_ALLOCATIONS) return;  // a sanitizer build: nothing counted, nothing reported
    const uint64_t n = heap_allocations() - start_;
    state.counters[name] = benchmark::Counter(double(n) / double(state.iterations() ? state.iterations() : 1));
  }

 private:
  uint64_t start_;
};

}  // namespace crossfire::bench

namespace crossfire::bench {
// Adds the machine context crossfire cares about to the JSON output: which backends are available, each one's
// device 0, and why the others are not (so a run on a machine without a GPU says so in its own file).
void add_device_context();
}  // namespace crossfire::bench
