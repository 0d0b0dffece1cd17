// SPDX-License-Identifier: Apache-2.0
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
#include "crossfire/ops.hpp"
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

// Backward from `root` with a seed of ones: each leaf's gradient, or the error.
Outcome gradients_through(const Tensor& root, std::vector<Tensor>& leaves) {
  for (Tensor& l : leaves) l.zero_grad();
  return outcome_of([&] {
    backward(root, ones(root.shape().dims(), root.dtype(), root.device()));
    std::string grads;
    for (const Tensor& l : leaves) {
      const Tensor g = l.grad();
      grads += g.defined() ? fmt::format("{} {};", g.str(), fmt::join(g.to_host_bytes(), ",")) : "none;";
    }
    return grads;
  });
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
  constexpr int kCalls = 40000;
  std::set<OpId> ops_run, ops_recorded;
  int valid = 0, invalid = 0, recorded = 0;
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
      if (out_fast.tracked()) {
        // The two nodes must send the same gradient to every leaf (Note [A tracked call on the fast path]).
        const Outcome back_fast = gradients_through(out_fast, h->leaves);
        const Outcome back_generic = gradients_through(out_generic, h->leaves);
        ASSERT_EQ(back_fast, back_generic) << "backward through the specialised path's node says " << back_fast.what
                                           << "; through the generic path's node " << back_generic.what;
        ++recorded;
        ops_recorded.insert(h->id);
      }
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
  EXPECT_GT(recorded, kCalls / 200) << "calls that recorded a node";
  EXPECT_GE(ops_recorded.size(), size_t(15)) << "ops that recorded a node";
  std::printf("%d valid (%d recorded a node, %zu ops) and %d invalid calls agreed, %zu ops run\n", valid, recorded,
              ops_recorded.size(), invalid, ops_run.size());
}

// cat is the one op with its own fast path (Note [One walk over cat's list] in dispatch/src/cat_walk.hpp): one
// walk checks every list element's device, dtype, autodiff state, rank and dims. Every kind of difference, at the
// first, second and last element, for lists of 1 to 9 tensors of ranks 1 to 4 and every axis (in range or not),
// must end as the generic path ends it, and as the contract says independently of either path: which error kind,
// or the output's shape; and a tracked element must get the same gradient through either path's node.
TEST(SpecialisedPath, CatAgreesWithTheGenericPathOnEveryKindOfDifference) {
  enum class Change { none, along_axis, off_axis, rank, device, dtype, undefined, tracked };
  const std::vector<Device> devices = cpu_devices();
  ASSERT_FALSE(devices.empty());
  const Device d0 = devices[0];
  const bool have_d1 = devices.size() > 1;  // a second CPU device, for a device mismatch
  const Device d1 = have_d1 ? devices[1] : d0;
  int cases = 0, accepted = 0, recorded = 0;
  for (const bool no_grad : {false, true})
    for (int rank = 1; rank <= 4; ++rank)
      for (int n : {1, 2, 3, 8, 9})
        for (int64_t axis = -rank - 1; axis <= rank; ++axis)
          for (const Change change : {Change::none, Change::along_axis, Change::off_axis, Change::rank,
                                      Change::device, Change::dtype, Change::undefined, Change::tracked})
            for (const int at : {0, 1, n - 1}) {
              if (at >= n || (change == Change::device && !have_d1)) continue;
              // The first element's rank decides which axes are valid; only a rank change there alters it.
              const int first_rank = rank + (change == Change::rank && at == 0 ? 1 : 0);
              const bool in_range = axis >= -first_rank && axis < first_rank;
              const int a = int(axis < 0 ? axis + first_rank : axis);
              const int off = in_range ? (a + 1) % rank : 0;  // a dim other than the axis, when there is one
              if (change == Change::off_axis && (rank == 1 || !in_range)) continue;
              std::optional<NoGradGuard> guard;
              if (no_grad) guard.emplace();
              SCOPED_TRACE(fmt::format("rank {}, {} tensors, axis {}, change {} at {}{}", rank, n, axis, int(change),
                                       at, no_grad ? ", under no_grad" : ""));
              std::vector<int64_t> dims{2, 3, 4, 5};
              dims.resize(size_t(rank));
              std::vector<Tensor> ts;
              std::vector<int64_t> first_dims;
              int64_t total = 0;
              for (int j = 0; j < n; ++j) {
                std::vector<int64_t> s = dims;
                DType dt = DType::f32;
                Device dev = d0;
                if (j == at) {
                  if (change == Change::along_axis && in_range) s[size_t(a)] += 1;
                  if (change == Change::off_axis) s[size_t(off)] += 1;
                  if (change == Change::rank) s.push_back(1);
                  if (change == Change::dtype) dt = DType::i32;
                  if (change == Change::device) dev = d1;
                }
                if (j == 0) first_dims = s;
                if (in_range && size_t(a) < s.size()) total += s[size_t(a)];
                ts.push_back(change == Change::undefined && j == at ? Tensor() : ones(s, dt, dev));
                if (change == Change::tracked && j == at) ts.back().set_requires_grad();
              }
              const ArgPack pack(Arg::of(std::span<const Tensor>(ts)), Arg::integer(axis));

              // What the contract says, from the case alone.
              std::optional<ErrorKind> expected;  // nullopt: the call succeeds
              if (change == Change::undefined) expected = ErrorKind::invalid_argument;
              else if (change == Change::device && n > 1) expected = ErrorKind::device_mismatch;
              else if (change == Change::dtype && n > 1) expected = ErrorKind::dtype_mismatch;
              else if (!in_range) expected = ErrorKind::invalid_argument;
              else if ((change == Change::off_axis || change == Change::rank) && n > 1)
                expected = ErrorKind::shape;

              const Outcome fast = outcome_of([&] { return describe(validate(ids::cat_id, pack)); });
              const Outcome generic = outcome_of([&] { return describe(detail::validate_generic(ids::cat_id, pack)); });
              ASSERT_EQ(fast, generic) << "validate: specialised says " << fast.what << "; generic says "
                                       << generic.what;
              ASSERT_EQ(fast.ok, !expected) << fast.what;
              if (expected) {
                ASSERT_EQ(fast.kind, *expected) << fast.what;
              }

              Tensor out_fast, out_generic;
              const WorldSnapshot s0 = snapshot_world();
              const Outcome run_fast = outcome_of([&] {
                out_fast = call(ids::cat_id, pack);
                return describe(out_fast);
              });
              const WorldSnapshot s1 = snapshot_world();
              const Outcome run_generic = outcome_of([&] {
                out_generic = detail::call_generic(ids::cat_id, pack);
                return describe(out_generic);
              });
              const WorldSnapshot s2 = snapshot_world();
              ASSERT_EQ(run_fast, run_generic);
              ASSERT_EQ(moved(s0, s1), moved(s1, s2));
              ++cases;
              if (!run_fast.ok) continue;
              ++accepted;
              ASSERT_EQ(out_fast.to_host_bytes(), out_generic.to_host_bytes());
              ASSERT_EQ(out_fast.tracked(), change == Change::tracked && !no_grad);
              if (out_fast.tracked()) {
                // Both nodes send the tracked element the same gradient (Note [A tracked call on the fast path]).
                std::vector<Tensor> leaves{ts[size_t(at)]};
                const Outcome back_fast = gradients_through(out_fast, leaves);
                ASSERT_TRUE(back_fast.ok) << back_fast.what;
                ASSERT_EQ(back_fast, gradients_through(out_generic, leaves));
                ++recorded;
              }
              std::vector<int64_t> want = first_dims;
              want[size_t(a)] = total;
              ASSERT_EQ(out_fast.shape(), Shape::checked(want, "cat", "test"));
            }
  EXPECT_GT(accepted, cases / 4);
  EXPECT_GT(cases - accepted, cases / 4);
  EXPECT_GT(recorded, 50) << "tracked cat calls whose gradients were compared";
  std::printf("%d cat calls agreed, %d of them valid, %d recorded a node\n", cases, accepted, recorded);
}

// A call of creation op `op` (shape, dtype and device attributes, and any others at a fixed value) for `dims`.
ArgPack creation_call(const OpDef& op, const std::vector<int64_t>& dims, DType dt, Device d) {
  ArgPack pack;
  for (int p = 0; p < op.num_params; ++p) {
    switch (op.params[size_t(p)].role) {
      case ParamRole::int_list_attr: pack.of(IntList(dims)); break;
      case ParamRole::dtype_attr: pack.of(dt); break;
      case ParamRole::device_attr: pack.of(d); break;
      case ParamRole::float_attr: pack.scalar(2.5); break;
      default: ADD_FAILURE() << op.name << ": a parameter this test cannot fill";
    }
  }
  return pack;
}

// The rules the fast path runs in line (Note [A rule's common case, in line] in dispatch/src/dispatch.cpp), as
// OpDef::form records them. For every op: an op whose rule is an elementwise or a creation one records that (so
// none misses the fast path's case), and its calls end the same way on both paths.
//  - elementwise: on tensors of equal shapes (ranks 0 to 6, empty ones too) and every dtype the op takes, the rule
//    itself returns what the record says; on equal and unequal shapes alike (broadcastable or not), both paths
//    end the same way.
//  - creation: on valid and hostile shape attributes (negative, too many dims, over the element bound), both paths
//    end the same way, and a valid call's output is the attribute's dims, dtype and device.
TEST(RuleForm, EveryFormIsItsRulesCommonCase) {
  const std::vector<Device> devices = cpu_devices();
  ASSERT_FALSE(devices.empty());
  const Device d = devices[0];
  using Dims = std::vector<int64_t>;
  // Both paths end `pack`'s call the same way: validate, then call (its side effects and output too).
  auto agree = [&](OpId id, const ArgPack& pack) {
    const Outcome fast = outcome_of([&] { return describe(validate(id, pack)); });
    const Outcome generic = outcome_of([&] { return describe(detail::validate_generic(id, pack)); });
    EXPECT_EQ(fast, generic) << "validate: specialised says " << fast.what << "; generic says " << generic.what;
    const WorldSnapshot s0 = snapshot_world();
    Tensor out_fast, out_generic;
    const Outcome run_fast = outcome_of([&] {
      out_fast = call(id, pack);
      return describe(out_fast);
    });
    const WorldSnapshot s1 = snapshot_world();
    const Outcome run_generic = outcome_of([&] {
      out_generic = detail::call_generic(id, pack);
      return describe(out_generic);
    });
    const WorldSnapshot s2 = snapshot_world();
    EXPECT_EQ(run_fast, run_generic);
    EXPECT_EQ(moved(s0, s1), moved(s1, s2));
    if (run_fast.ok && run_generic.ok) {
      EXPECT_EQ(out_fast.to_host_bytes(), out_generic.to_host_bytes());
    }
    return fast;
  };
  const std::vector<Dims> equal{{}, {0}, {1}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 1, 2, 1, 2}};
  // Pairs of unequal shapes: the first is the first tensor's, the second every other tensor's.
  const std::vector<std::pair<Dims, Dims>> unequal{
      {{2, 3}, {1, 3}}, {{3}, {2, 3}}, {{2, 3}, {4, 3}}, {{2, 1}, {1, 2}}, {{0, 3}, {3}}, {{}, {2}}};
  const int64_t big = int64_t(1) << 16;  // big * big is over the element bound
  const std::vector<Dims> hostile{{-1}, {2, -3}, {1, 1, 1, 1, 1, 1, 1}, {big, big}, {big, 0, big}, {kMaxElements + 1}};
  int elementwise = 0, creation = 0, calls = 0, common = 0;
  for (OpId id = 0; id < kNumOps; ++id) {
    const OpDef& op = op_def(id);
    const RuleForm f = op.form;
    const bool elementwise_rule = op.output == &rules::same_as_input || op.output == &rules::broadcast ||
                                  op.output == &rules::broadcast_bool || op.output == &rules::where ||
                                  op.output == &rules::cast;
    EXPECT_EQ(f.kind == RuleForm::elementwise, elementwise_rule) << op.name;
    EXPECT_EQ(f.kind == RuleForm::creation, op.output == &rules::creation) << op.name;
    if (f.kind == RuleForm::creation) {
      ++creation;
      for (const DType dt : kAllDTypes) {
        for (const Dims& dims : equal) {
          SCOPED_TRACE(fmt::format("{} of {} dims, {}", op.name, dims.size(), dtype_name(dt)));
          ArgPack pack = creation_call(op, dims, dt, d);
          ++calls;
          const Outcome fast = agree(id, pack);
          ASSERT_TRUE(fast.ok) << fast.what;
          const OutputSpec spec = validate(id, pack);
          EXPECT_EQ(std::vector<int64_t>(spec.shape.dims().begin(), spec.shape.dims().end()), dims);
          EXPECT_EQ(spec.dtype, dt);
          EXPECT_EQ(spec.device, d);
        }
        for (const Dims& dims : hostile) {
          SCOPED_TRACE(fmt::format("{} of {}, {}", op.name, fmt::join(dims, ", "), dtype_name(dt)));
          ArgPack pack = creation_call(op, dims, dt, d);
          ++calls;
          const Outcome fast = agree(id, pack);
          EXPECT_FALSE(fast.ok);
          EXPECT_EQ(fast.kind, ErrorKind::shape) << fast.what;
        }
      }
      continue;
    }
    if (f.kind != RuleForm::elementwise) continue;
    ++elementwise;
    ASSERT_EQ(f.tensors, op.num_tensor_params) << op.name;
    for (const DType want : kAllDTypes) {
      // Each tensor takes `want` where its parameter allows it, else the first dtype it allows (a dtype group's
      // members share their dtype set, so they stay together).
      std::vector<DType> dts;
      for (int p = 0; p < f.tensors; ++p) {
        const DTypeSet allowed = op.params[size_t(p)].dtypes;
        DType dt = want;
        for (DType x : kAllDTypes)
          if (!allowed.contains(dt) && allowed.contains(x)) dt = x;
        dts.push_back(dt);
      }
      auto run = [&](const Dims& first, const Dims& rest, bool same) {
        SCOPED_TRACE(fmt::format("{} on {} and {}, dtype {}", op.name, Shape::checked(first, "test", "").str(),
                                 Shape::checked(rest, "test", "").str(), dtype_name(want)));
        std::vector<Tensor> ts;
        for (int p = 0; p < f.tensors; ++p) ts.push_back(ones(p == 0 ? first : rest, dts[size_t(p)], d));
        ArgPack pack;
        for (const Tensor& t : ts) pack.of(t);
        for (int p = f.tensors; p < op.num_params; ++p) {
          const ParamRole role = op.params[size_t(p)].role;
          ASSERT_TRUE(role == ParamRole::dtype_attr || role == ParamRole::float_attr)
              << "a parameter this test cannot fill";
          if (role == ParamRole::dtype_attr) pack.of(want);
          else pack.push(Arg::scalar(0.5));
        }
        ++calls;
        if (same) {
          // The rule, not either path: what it returns on equal shapes is what the record says.
          const OutputSpec spec = op.output(CallView{op, pack, d});
          const DType dtype = f.dtype_from < 0 ? DType::boolean
                              : f.dtype_from < f.tensors ? dts[size_t(f.dtype_from)]
                                                         : pack[f.dtype_from].dtype;
          EXPECT_EQ(spec.dtype, dtype);
          EXPECT_EQ(spec.shape, ts[0].shape());
          EXPECT_EQ(spec.device, d);
          ++common;
        }
        const Outcome fast = agree(id, pack);
        if (same) {
          ASSERT_TRUE(fast.ok) << fast.what;
        }
      };
      for (const Dims& s : equal) run(s, s, true);
      if (f.tensors > 1)
        for (const auto& [a, b] : unequal) {
          run(a, b, false);
          run(b, a, false);
        }
    }
  }
  EXPECT_GE(elementwise, 20);  // the unary, binary, comparison and logical ops, where and cast
  EXPECT_EQ(creation, 3);       // zeros, ones, full
  std::printf("%d elementwise and %d creation ops, %d calls agreed, %d elementwise ones on equal shapes\n", elementwise,
              creation, calls, common);
}

}  // namespace
}  // namespace crossfire::harness
