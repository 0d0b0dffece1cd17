// SPDX-License-Identifier: Apache-2.0
// The generator: sizes, coverage of the op table, device assignment, termination on any byte string, speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/model.hpp"

namespace crossfire::harness {
namespace {

GenConfig two_backends() {
  GenConfig cfg;
  cfg.devices = {Device::cpu(0), Device::cpu(1), Device::vulkan(0)};
  return cfg;
}

TEST(Generator, ProgramsHaveOneToThirtyNodesAndEveryOpAppears) {
  GenConfig cfg = two_backends();
  std::set<std::string> ops;
  int min_nodes = 100, max_nodes = 0, with_backward = 0, with_tracked = 0, max_rank = 0;
  bool optional_absent = false, optional_present = false, list_of_many = false;
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    PrngChoices c(seed);
    Program p = generate_program(c, cfg);
    min_nodes = std::min(min_nodes, p.num_nodes());
    max_nodes = std::max(max_nodes, p.num_nodes());
    with_backward += p.backward_of.has_value();
    for (const Value& v : p.values) {
      if (v.is_input()) {
        with_tracked += v.input().tracked;
        max_rank = std::max(max_rank, v.input().shape.rank());
        continue;
      }
      const OpDef& op = op_def(v.node().op);
      ops.insert(std::string(op.name));
      for (int i = 0; i < op.num_params; ++i) {
        if (op.params[size_t(i)].role == ParamRole::optional_tensor) {
          optional_absent |= std::holds_alternative<AbsentArg>(v.node().args[size_t(i)]);
          optional_present |= std::holds_alternative<ValueRef>(v.node().args[size_t(i)]);
        }
        if (auto* l = std::get_if<std::vector<ValueRef>>(&v.node().args[size_t(i)])) list_of_many |= l->size() >= 3;
      }
    }
  }
  EXPECT_EQ(min_nodes, 1);
  EXPECT_EQ(max_nodes, 30);
  EXPECT_EQ(ops.size(), size_t(kNumOps)) << "every op of the table is generated";
  EXPECT_GT(with_backward, 100);
  EXPECT_GT(with_tracked, 100);
  EXPECT_EQ(max_rank, 4);
  EXPECT_TRUE(optional_absent && optional_present && list_of_many);
}

// A ChoiceSource that answers every question with one fixed value (clamped into the range asked for).
class FixedChoice final : public ChoiceSource {
 public:
  explicit FixedChoice(int64_t v) : v_(v) {}
  int64_t range(int64_t lo, int64_t hi) override { return std::clamp(v_, lo, hi); }

 private:
  int64_t v_;
};

// Note [Draws that name what they pick]: adding an op to the table changes only the draws the new op wins. Simulated
// by leaving each op out in turn: every draw that did not pick the left-out op picks the same op without it.
TEST(Generator, AnOpDrawIsStableWhenAnOpIsAddedOrRemoved) {
  std::vector<OpId> all;
  for (int i = 0; i < kNumOps; ++i) all.push_back(OpId(i));
  std::vector<int> wins(size_t(kNumOps), 0);
  std::vector<OpId> full(65536);
  for (int64_t w = 0; w < 65536; ++w) {
    FixedChoice c(w);
    full[size_t(w)] = draw_op(c);
    ++wins[full[size_t(w)]];
  }
  for (int i = 0; i < kNumOps; ++i) {
    // Each op wins about 1/N of the draws (a hash, not a partition: within a factor of 1.5 either way).
    EXPECT_GT(wins[size_t(i)], 65536 / kNumOps * 2 / 3) << op_def(OpId(i)).name;
    EXPECT_LT(wins[size_t(i)], 65536 / kNumOps * 3 / 2) << op_def(OpId(i)).name;
  }
  for (int left_out = 0; left_out < kNumOps; left_out += 7) {
    std::vector<OpId> among;
    for (OpId id : all)
      if (id != left_out) among.push_back(id);
    int changed = 0;
    for (int64_t w = 0; w < 65536; ++w) {
      FixedChoice c(w);
      const OpId got = draw_op(c, among);
      if (full[size_t(w)] == OpId(left_out)) ++changed;
      else EXPECT_EQ(got, full[size_t(w)]) << "draw " << w << " without " << op_def(OpId(left_out)).name;
    }
    EXPECT_EQ(changed, wins[size_t(left_out)]);
  }
}

// The same for dtypes: f16 and bf16 joined the table after the corpora were grown, and i64 after them; a draw that
// picked a dtype before one joined picks it still, unless the new one now wins it (about 1/n of the draws for the
// n-th dtype).
TEST(Generator, ADTypeDrawIsStableWhenADTypeIsAdded) {
  struct Step {
    DTypeSet before, now;
    int added;  // how many dtypes `now` adds
  };
  for (const Step& step : {Step{kClassicDTypes, kAllButI64, 2}, Step{kAllButI64, kAnyDType, 1}}) {
    int changed = 0, n = 0;
    for (DType d : kAllDTypes) n += step.now.contains(d);
    for (int64_t w = 0; w < 65536; ++w) {
      FixedChoice a(w), b(w);
      const DType now = draw_dtype(a, step.now);
      const DType before = draw_dtype(b, step.before);
      if (!step.before.contains(now)) {
        ++changed;
      } else {
        ASSERT_EQ(now, before) << w << " among " << step.now.str();
      }
    }
    EXPECT_GT(changed, 65536 * step.added / n * 2 / 3) << step.added << " of " << n << " dtypes win about that share";
    EXPECT_LT(changed, 65536 * step.added / n * 3 / 2);
  }
}

TEST(Generator, MismatchesAppearAtEveryKindOfPosition) {
  GenConfig cfg = two_backends();
  bool first = false, later = false, list_elem = false, optional = false, same_backend = false, cross_backend = false;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    PrngChoices c(seed);
    Program p = generate_program(c, cfg);
    std::vector<NodePrediction> pred = predict(p);
    for (const NodePrediction& np : pred) {
      if (!np.mismatch) continue;
      for (const DeviceOffender& o : np.mismatch->offenders) {
        (o.wrong_backend ? cross_backend : same_backend) = true;
        if (o.list_index > 0) list_elem = true;
        if (o.param == "bias") optional = true;
        if (o.param_index > 0) later = true;
      }
      // A target taken from a moved first argument blames all the others.
      if (np.mismatch->target_from == "lhs" || np.mismatch->target_from == "tensors[0]") first = true;
    }
  }
  EXPECT_TRUE(first && later && list_elem && optional && same_backend && cross_backend)
      << first << later << list_elem << optional << same_backend << cross_backend;
}

// Every ChoiceSource keeps to [lo, hi], both ends included, at the ends of int64 too (where hi + 1 or hi - lo
// overflows; the RapidCheck one, in properties/, is held to it there).
TEST(Generator, ChoiceSourcesStayInRangeAtTheEndsOfInt64) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::pair<int64_t, int64_t>> ranges{
      {kMax - 3, kMax}, {kMin, kMin + 3}, {kMin, kMax}, {kMax - 1, kMax}, {-5, 5}, {kMin, -1}, {0, kMax}};
  const std::vector<uint8_t> ones(64, 0xff), zeros(64, 0);
  for (auto [lo, hi] : ranges) {
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      PrngChoices c(seed);
      const int64_t v = c.range(lo, hi);
      EXPECT_TRUE(v >= lo && v <= hi) << v << " outside [" << lo << ", " << hi << "], seed " << seed;
    }
    for (const std::vector<uint8_t>* bytes : {&ones, &zeros}) {
      ByteChoices c(*bytes);
      const int64_t v = c.range(lo, hi);
      EXPECT_TRUE(v >= lo && v <= hi) << v << " outside [" << lo << ", " << hi << "], bytes " << int((*bytes)[0]);
    }
  }
}

TEST(Generator, AnyByteStringGivesAProgramWithoutLooping) {
  GenConfig cfg = two_backends();
  std::vector<uint8_t> bytes;
  for (int n = 0; n < 300; ++n) {
    ByteChoices c(bytes);
    Program p = generate_program(c, cfg);
    EXPECT_GE(p.num_nodes(), 1);
    bytes.push_back(uint8_t(n * 37 + 11));
  }
  ByteChoices empty({});
  EXPECT_EQ(generate_program(empty, cfg).num_nodes(), 1);
}

// Ordinary programs carry issue 16's stressing values too, among the specials of untracked inputs: huge ones
// (|x| >= 2^120, where an f32 sum or product of a few overflows), denormals, and an element that cancels the one
// before it (x, -x).
TEST(Generator, OrdinaryProgramsHoldHugeDenormalAndCancellingValues) {
  GenConfig cfg;
  cfg.large_rate = 0;
  int huge = 0, denormal = 0, cancelling = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    PrngChoices c(seed);
    const Program p = generate_program(c, cfg);
    for (const Value& v : p.values) {
      if (!v.is_input() || v.input().dtype != DType::f32) continue;
      const std::vector<uint32_t>& b = v.input().f32_bits;
      for (size_t i = 0; i < b.size(); ++i) {
        float x;
        std::memcpy(&x, &b[i], sizeof x);
        huge += std::isfinite(x) && std::fabs(x) >= 0x1p120f;
        denormal += x != 0 && std::fabs(x) < 0x1p-126f;
        if (i > 0 && x != 0 && std::isfinite(x)) {
          float prev;
          std::memcpy(&prev, &b[i - 1], sizeof prev);
          cancelling += prev == -x;
        }
      }
    }
  }
  EXPECT_GT(huge, 20);
  EXPECT_GT(denormal, 20);
  EXPECT_GT(cancelling, 20);
}

TEST(Generator, IsDeterministic) {
  GenConfig cfg = two_backends();
  PrngChoices a(42), b(42);
  EXPECT_EQ(print_program(generate_program(a, cfg)), print_program(generate_program(b, cfg)));
}

// Note [Large programs]: one long-axis node whose length is a declared extent or a neighbour, or a long axis past
// 2^16, with no tensor past the budget; `--ops` narrows them like any program; a rate of 0 spends no choice on them.
TEST(Generator, LargeProgramsReachTheDeclaredExtentsWithinTheBudget) {
  GenConfig cfg;
  cfg.devices = {Device::cpu(0)};
  cfg.large_rate = 1;
  cfg.extents = {21845};
  cfg.large_elements = int64_t(1) << 17;
  std::set<int64_t> lengths;
  std::set<std::string> ops;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    PrngChoices c(seed);
    const Program p = generate_program(c, cfg);
    ASSERT_EQ(p.num_nodes(), 1) << print_program(p);
    const NodeDef& n = p.values.back().node();
    ops.insert(std::string(op_def(n.op).name));
    int64_t longest = 0, terms = 1;
    for (const Value& v : p.values)
      if (v.is_input()) {
        ASSERT_LE(v.input().shape.numel(), cfg.large_elements);
        for (int i = 0; i < v.input().shape.rank(); ++i) longest = std::max(longest, v.input().shape[i]);
      }
    const Shape& x = p.values[0].input().shape;
    if (op_def(n.op).name == "conv2d") terms = x[1] * x[3] * x[3];  // C * k * k (the window is k x k)
    lengths.insert(op_def(n.op).name == "conv2d" ? terms : longest);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"argmax", "conv2d", "matmul", "max", "mean", "softmax", "sum"}));
  for (int64_t l : {21844, 21845, 21846}) EXPECT_TRUE(lengths.count(l)) << "length " << l << " never drawn";
  EXPECT_GT(*lengths.rbegin(), int64_t(1) << 16) << "no long axis past 2^16";

  cfg.ops = {OpId(find_op("mean"))};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    PrngChoices c(seed);
    EXPECT_EQ(op_def(generate_program(c, cfg).values.back().node().op).name, "mean");
  }

  // At a rate of 0 (the default, which the fuzz targets and property tests keep) the extents change nothing: no
  // choice is spent on large programs, so the fuzz corpora keep their meaning.
  GenConfig plain;
  plain.devices = {Device::cpu(0)};
  GenConfig zero = plain;
  zero.large_rate = 0;
  zero.extents = {21845};
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    PrngChoices a(seed), b(seed);
    EXPECT_EQ(generate_program(a, plain), generate_program(b, zero));
  }
}

}  // namespace
}  // namespace crossfire::harness
