// SPDX-License-Identifier: Apache-2.0
// Standalone timing of the Vulkan backend next to the CPU backend (issue 3's speed questions), without Google
// Benchmark so that it builds wherever the backend does; bench/ may wrap the same loops later.
//   crossfire_vulkan_timing [reps]
// Prints medians: per-op cost of a 1-element add (unbatched: each result read back; batched: 1000 chained adds,
// one read), add at 1M elements (GB/s counting 2 reads + 1 write), 512x512 matmul (GFLOP/s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "crossfire/crossfire.hpp"

using namespace crossfire;
using Clock = std::chrono::steady_clock;

namespace {

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run(Device d, int reps) {
  Backend& b = backend(d.backend);
  if (b.device_count() == 0) {
    std::printf("%s: unavailable: %s\n", d.str().c_str(), b.unavailable_reason().c_str());
    return;
  }
  std::printf("%s (%s)\n", d.str().c_str(), b.device_info(d.index).name.c_str());
  Tensor one = full({1}, 1.0, DType::f32, d);
  add(one, one).to_f32();  // pipelines compiled before timing

  const int chain = 1000;
  double unbatched = median_seconds(reps, [&] {
    for (int i = 0; i < 100; ++i) add(one, one).to_f32();
  }) / 100;
  double batched = median_seconds(reps, [&] {
    Tensor x = one;
    for (int i = 0; i < chain; ++i) x = add(x, one);
    x.to_f32();
  }) / chain;
  std::printf("  add 1 element, unbatched (read back each): %8.2f us/op\n", unbatched * 1e6);
  std::printf("  add 1 element, batched (%d chained, 1 read): %6.2f us/op\n", chain, batched * 1e6);

  const int64_t n = 1 << 20;
  Tensor p = rand({n}, 1, d), q = rand({n}, 2, d);
  add(p, q).to_f32();
  double t_add = median_seconds(reps, [&] {
    Tensor r;
    for (int i = 0; i < 10; ++i) r = add(p, q);
    b.synchronize();
  }) / 10;
  std::printf("  add 1M f32: %8.3f ms  %7.2f GB/s\n", t_add * 1e3, 3.0 * 4 * double(n) / t_add / 1e9);

  Tensor a = rand({512, 512}, 3, d), c = rand({512, 512}, 4, d);
  matmul(a, c).to_f32();
  double t_mm = median_seconds(reps, [&] {
    Tensor r = matmul(a, c);
    b.synchronize();
  });
  std::printf("  matmul 512x512: %8.3f ms  %7.2f GFLOP/s\n", t_mm * 1e3, 2.0 * 512 * 512 * 512 / t_mm / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  run(Device::cpu(0), reps);
  run(Device::vulkan(0), reps);
}
