// SPDX-License-Identifier: Apache-2.0
// What may run concurrently (contract section 8, docs/contract.md "Threads"), on the backend under test:
// backward() from many threads into one shared leaf loses no gradient, reading that leaf's grad() while others
// accumulate is safe, independent work on different tensors from many threads gives the single-threaded results,
// and a no_grad scope belongs to its own thread. Labelled `threads`: the ThreadSanitizer build
// (CROSSFIRE_SANITIZE=thread, scripts/test.sh) runs these, where a data race fails the test.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>

#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 64;

void skip_if_unsupported(const std::function<void()>& body) {
  try {
    body();
  } catch (const Unsupported& e) {
    GTEST_SKIP() << "not supported on this backend yet: " << e.what();
  }
}

// Runs body(i) on kThreads threads at once (a barrier lines their starts up, so they overlap); an exception in a
// thread is recorded and fails the test instead of terminating the process.
void on_threads(const std::function<void(int)>& body) {
  std::barrier start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        body(i);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << i << ": " << e.what();
        failures.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// d/dx sum(x * c + x) = c + 1. Every value and every partial sum of kThreads * kIterations of these gradients is
// a small multiple of 1/2, exact in f32, so accumulation in any order gives exactly the expected sum and a lost
// update shows as a wrong value, not as rounding.
const std::vector<float> kX{1.0f, -2.0f, 3.0f, 0.5f};
const std::vector<float> kC{0.5f, 1.0f, 2.0f, -3.0f};

Tensor loss(const Tensor& x, const Tensor& c) { return sum(add(mul(x, c), x)); }

TEST(AutodiffThreads, ConcurrentBackwardIntoASharedLeafLosesNoGradient) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = from_data(std::span<const float>(kX), {4}, dev);
    x.set_requires_grad();
    Tensor c = from_data(std::span<const float>(kC), {4}, dev);
    backward(loss(x, c));  // once before the threads: the kernels are known to exist (else a skip, above)
    x.zero_grad();

    // One more thread reads the gradient while the others accumulate into it: each read is some earlier sum.
    std::atomic<bool> done{false};
    std::thread reader([&] {
      while (!done.load()) {
        Tensor g = x.grad();
        if (g.defined()) (void)g.to_f32();
      }
    });
    on_threads([&](int) {
      for (int k = 0; k < kIterations; ++k) backward(loss(x, c));
    });
    done.store(true);
    reader.join();

    std::vector<float> want(kX.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = float(kThreads * kIterations) * (kC[i] + 1.0f);
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().to_f32(), want);
    EXPECT_EQ(x.grad().device(), dev);
  });
}

// Backward from many threads where the shared leaf is the root itself (the seed is its gradient).
TEST(AutodiffThreads, ConcurrentBackwardOfTheLeafItself) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  skip_if_unsupported([&] {
    Tensor x = from_data({2.0f}, {}, dev);
    x.set_requires_grad();
    on_threads([&](int) {
      for (int k = 0; k < kIterations; ++k) backward(x);
    });
    EXPECT_EQ(x.grad().to_f32(), (std::vector<float>{float(kThreads * kIterations)}));
  });
}

// Independent work: each thread its own tensors, alternating between device 0 and device 1 of the backend (the
// CPU backend has two logical devices), with forward ops, a matmul, a transfer and its own backward; every
// thread's results equal the single-threaded ones.
TEST(AutodiffThreads, IndependentWorkOnDifferentTensorsAndDevices) {
  CROSSFIRE_REQUIRE_DEVICE(dev0, 0);
  std::string why;
  const Device dev1 = testing::device_under_test(1, &why).value_or(dev0);
  skip_if_unsupported([&] {
    auto work = [&](Device d, int seed) {
      Tensor a = from_data({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3}, d);
      Tensor b = from_data({0.5f, -1.0f, 2.0f, 0.25f, -0.5f, 1.0f}, {3, 2}, d);
      a.set_requires_grad();
      Tensor r = rand({16}, seed, d);
      Tensor m = matmul(a, b);                     // [2, 2]
      Tensor back = to(to(m, dev0), d);            // a round trip through device 0
      backward(sum(mul(back, back)));              // d/da = 2 * m @ b^T
      std::vector<float> out = m.to_f32();
      std::vector<float> grad = a.grad().to_f32();
      std::vector<float> noise = r.to_f32();
      out.insert(out.end(), grad.begin(), grad.end());
      out.insert(out.end(), noise.begin(), noise.end());
      return out;
    };
    std::vector<std::vector<float>> want(kThreads);
    for (int i = 0; i < kThreads; ++i) want[size_t(i)] = work(i % 2 ? dev1 : dev0, i);

    std::vector<std::vector<std::vector<float>>> got(kThreads);
    on_threads([&](int i) {
      for (int k = 0; k < kIterations / 4; ++k) got[size_t(i)].push_back(work(i % 2 ? dev1 : dev0, i));
    });
    for (int i = 0; i < kThreads; ++i)
      for (const auto& g : got[size_t(i)]) EXPECT_EQ(g, want[size_t(i)]) << "thread " << i;
  });
}

// A no_grad scope is the calling thread's: while one thread is inside one, another thread's results are tracked.
TEST(AutodiffThreads, NoGradIsPerThread) {
  CROSSFIRE_REQUIRE_DEVICE(dev, 0);
  Tensor x = from_data({1.0f, 2.0f}, {2}, dev);
  x.set_requires_grad();
  std::barrier inside(2), checked(2);
  bool other_tracked = false, own_tracked = true;
  std::thread guarded([&] {
    NoGradGuard no_grad;
    inside.arrive_and_wait();  // the scope is open ...
    checked.arrive_and_wait();  // ... until the other thread has dispatched
    own_tracked = to(x, dev).tracked();
  });
  inside.arrive_and_wait();
  other_tracked = to(x, dev).tracked();  // to() needs no kernel
  checked.arrive_and_wait();
  guarded.join();
  EXPECT_TRUE(other_tracked);
  EXPECT_FALSE(own_tracked);
}

}  // namespace
}  // namespace crossfire
