// Dispatch's specialised path (Note [Specialised fast path] in dispatch/src/dispatch.cpp) against its generic
// path, on hostile calls replayed from a seeded PRNG (harness/hostile_call.hpp, the same builder fuzz_call uses):
//  - validate() and detail::validate_generic() end the same way: the same output spec, or the same error kind and
//    message;
//  - call() and detail::call_generic() too, and when they succeed, with bit-identical outputs, the same tracking
//    and the same change to every backend's counters and to the autodiff tape;
//  - with grad mode on and off (half the calls run under no_grad).
// The specialisation only accepts calls and hands everything else to the generic path, so any disagreement here
// is a check the specialisation skipped or a side effect it added.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <optional>
#include <set>

#include "crossfire/harness/hostile_call.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::harness {
namespace {

using crossfire::testing::snapshot_world;
using crossfire::testing::WorldSnapshot;

struct Outcome {
  bool ok = false;
  ErrorKind kind{};
  std::string what;  // the error message, or a description of the result
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

template <class F>
Outcome outcome_of(F&& f) {
  try {
    return {true, {}, f()};
  } catch (const Error& e) {
    return {false, e.kind(), e.what()};
  }
}

std::string describe(const OutputSpec& s) {
  return fmt::format("{} {} on {}", dtype_name(s.dtype), s.shape.str(), s.device.str());
}

std::string describe(const Tensor& t) { return fmt::format("{} tracked={}", t.str(), t.tracked()); }

// How much each counter moved from `a` to `b`.
std::vector<uint64_t> moved(const WorldSnapshot& a, const WorldSnapshot& b) {
  std::vector<uint64_t> d;
  for (size_t i = 0; i < a.backends.size(); ++i) {
    const CounterSnapshot &x = a.backends[i], &y = b.backends[i];
    d.insert(d.end(), {y.allocations - x.allocations, y.releases - x.releases, y.kernel_launches - x.kernel_launches,
                       y.bytes_allocated - x.bytes_allocated, y.transfers - x.transfers});
  }
  d.push_back(b.autodiff_nodes - a.autodiff_nodes);
  return d;
}

std::vector<Device> cpu_devices() {
  std::vector<Device> d;
  for (const Device& x : available_devices())
    if (x.backend == BackendKind::cpu) d.push_back(x);
  return d;
}

TEST(SpecialisedPath, AgreesWithTheGenericPathOnHostileCalls) {
  const std::vector<Device> devices = cpu_devices();
  ASSERT_FALSE(devices.empty());
  constexpr int kCalls = 20000;
  std::set<OpId> ops_run;
  int valid = 0, invalid = 0;
  for (uint64_t seed = 0; seed < kCalls; ++seed) {
    PrngChoices c(seed);
    const std::unique_ptr<HostileCall> h = make_hostile_call(c, devices);
    const OpDef& op = op_def(h->id);
    // Every other call under no_grad, where the specialised path accepts tracked inputs it must not record.
    const bool no_grad = seed % 2 == 1;
    std::optional<NoGradGuard> guard;
    if (no_grad) guard.emplace();
    SCOPED_TRACE(fmt::format("seed {}: {} with {} arguments{}", seed, op.name, h->pack.count,
                             no_grad ? ", under no_grad" : ""));

    std::optional<Shape> accepted;  // the result's shape, when the specialised path accepts the call
    const Outcome fast = outcome_of([&] {
      const OutputSpec spec = validate(h->id, h->pack);
      accepted = spec.shape;
      return describe(spec);
    });
    const Outcome generic = outcome_of([&] { return describe(detail::validate_generic(h->id, h->pack)); });
    ASSERT_EQ(fast, generic) << "validate: specialised says " << fast.what << "; generic says " << generic.what;
    if (accepted) {
      ASSERT_TRUE(accepted->within_element_bound()) << accepted->str() << " is over the element bound";
      // Large valid calls are validated only: running them would make this test slow, not stronger.
      if (accepted->numel() > (int64_t(1) << 12)) continue;
    }

    Tensor out_fast, out_generic;
    const WorldSnapshot s0 = snapshot_world();
    const Outcome run_fast = outcome_of([&] {
      out_fast = call(h->id, h->pack);
      return describe(out_fast);
    });
    const WorldSnapshot s1 = snapshot_world();
    const Outcome run_generic = outcome_of([&] {
      out_generic = detail::call_generic(h->id, h->pack);
      return describe(out_generic);
    });
    const WorldSnapshot s2 = snapshot_world();
    ASSERT_EQ(run_fast, run_generic) << "call: specialised says " << run_fast.what << "; generic says "
                                     << run_generic.what;
    ASSERT_EQ(moved(s0, s1), moved(s1, s2)) << "the two paths changed the counters or the tape differently";
    if (run_fast.ok) {
      ASSERT_EQ(out_fast.to_host_bytes(), out_generic.to_host_bytes());
      ++valid;
      ops_run.insert(h->id);
    } else {
      ++invalid;
    }
  }
  // Not vacuous: both outcomes are common, and most ops were run to the end (hostile attributes make some ops
  // rarely valid, which the generator's own tests cover).
  EXPECT_GT(valid, kCalls / 10);
  EXPECT_GT(invalid, kCalls / 10);
  EXPECT_GE(ops_run.size(), size_t(kNumOps) * 3 / 4) << valid << " valid calls";
  std::printf("%d valid and %d invalid calls agreed, %zu ops run\n", valid, invalid, ops_run.size());
}

}  // namespace
}  // namespace crossfire::harness
