// SPDX-License-Identifier: Apache-2.0
// The reducer shrinks a failing program to a few nodes while the same failure persists.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/reduce.hpp"

namespace crossfire::harness {
namespace {

TEST(Reducer, ShrinksToAFewNodesKeepingTheFailure) {
  GenConfig cfg;
  cfg.min_nodes = 10;
  cfg.max_nodes = 14;
  cfg.devices = {Device::cpu(0)};
  cfg.special_values = false;
  cfg.mismatches = false;
  for (const char* name : {"add", "mul", "neg", "reshape", "permute", "sum", "exp", "slice"})
    cfg.ops.push_back(OpId(find_op(name)));
  CheckOptions o;
  o.devices = {Device::cpu(0)};
  o.fault = PlantedFault::perturb_float_output;
  int reduced = 0;
  for (uint64_t seed = 0; seed < 40 && reduced < 3; ++seed) {
    PrngChoices c(seed);
    Program p = generate_program(c, cfg);
    ProgramReport r = check_program(p, o);
    if (r.failures.empty()) continue;
    ReduceStats st;
    Program red = reduce_program(p, o, r.failures[0], &st);
    EXPECT_LE(red.num_nodes(), 3) << print_program(red);
    EXPECT_LT(red.values.size(), p.values.size());
    ProgramReport again = check_program(red, o);
    ASSERT_FALSE(again.failures.empty());
    EXPECT_EQ(again.failures[0].signature(), r.failures[0].signature());
    ++reduced;
  }
  if (reduced == 0) GTEST_SKIP() << "no CPU kernels or reference yet: nothing failed to reduce";
}

TEST(Reducer, ShrinksShapesThatMustAgreeTogether) {
  // add broadcasts [4, 3] with [3]: the 3s must shrink together, the 4 alone; every float output is perturbed, so
  // the agreement failure survives any shape and the reducer should reach one element per input.
  std::string ones12, ones3;
  for (int i = 0; i < 12; ++i) ones12 += " 0x1p+0";
  for (int i = 0; i < 3; ++i) ones3 += " 0x1.8p+0";
  Program p = parse_program("crossfire-program 1\ninput %0 f32 [4, 3] cpu:0 =" + ones12 +
                            "\ninput %1 f32 [3] cpu:0 =" + ones3 + "\nnode %2 add lhs=%0 rhs=%1\n");
  CheckOptions o;
  o.devices = {Device::cpu(0)};
  o.fault = PlantedFault::perturb_float_output;
  ProgramReport r = check_program(p, o);
  ASSERT_FALSE(r.failures.empty());
  Program red = reduce_program(p, o, r.failures[0], nullptr);
  for (const Value& v : red.values) {
    if (v.is_input()) {
      EXPECT_EQ(v.input().shape.numel(), 1) << print_program(red);
    }
  }
  ProgramReport again = check_program(red, o);
  ASSERT_FALSE(again.failures.empty());
  EXPECT_EQ(again.failures[0].signature(), r.failures[0].signature());
}

// A gradient failure must survive the renumbering that dropping values causes. Its signature once held the value
// ids ("devices disagree on d(sum %5)/d%0"), so the reducer saw every compacted candidate as another failure and
// kept whole generated programs (a 900 s campaign's two gradient reproducers kept 23 and 11 unrelated nodes beside
// the 2 that mattered, one of them a call the reducer had made invalid while shrinking shapes).
TEST(Reducer, DropsWhatAGradientFailureDoesNotNeed) {
  std::string xs, ws;
  for (int i = 0; i < 6; ++i) xs += fmt::format(" {}", format_float(0.25 * (i + 1)));
  for (int i = 0; i < 3; ++i) ws += fmt::format(" {}", format_float(-0.5 * (i + 1)));
  // %2 and %3 have nothing to do with the gradient of %5 = sum(exp(%0) * %1) (as values below %5, they renumber it).
  Program p = parse_program("crossfire-program 1\ninput %0 f32 [2, 3] cpu:0 tracked =" + xs +
                            "\ninput %1 f32 [3] cpu:0 =" + ws +
                            "\nnode %2 neg x=%1\nnode %3 abs x=%2\nnode %4 exp x=%0\nnode %5 mul lhs=%4 rhs=%1"
                            "\nbackward %5\n");
  CheckOptions o;
  o.only(OracleKind::gradients);
  o.devices = {Device::cpu(0), Device::cpu(1)};
  o.fault = PlantedFault::skew_gradient;  // cpu:1's gradient is off: the devices disagree
  ProgramReport r = check_program(p, o);
  if (r.counts[size_t(OracleKind::gradients)].checked == 0) GTEST_SKIP() << "no backward or reference yet";
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures[0].what.find("devices disagree on a gradient"), std::string::npos) << r.failures[0].what;
  EXPECT_EQ(r.failures[0].signature().find('%'), std::string::npos) << r.failures[0].signature();
  Program red = reduce_program(p, o, r.failures[0], nullptr);
  EXPECT_LE(red.num_nodes(), 2) << print_program(red);  // exp and mul; neg and abs are gone
  ProgramReport again = check_program(red, o);
  ASSERT_FALSE(again.failures.empty());
  EXPECT_EQ(again.failures[0].signature(), r.failures[0].signature());
}

// A failure of no known node (a crash or a hang, checked in a child process that cannot say which node it was in):
// the reducer finds the failing node by bisection and must keep tracking it through every renumbering, although the
// check keeps answering -1. Here a program "crashes" whenever it holds a softmax node, however it got its input: a
// softmax fed by a chain of other nodes must come out as one softmax node on a plain input. (The reducer once took
// the check's -1 as the node after its first compaction, and then compacted the rest away.)
TEST(Reducer, AFailureOfNoKnownNodeIsReducedToTheNodeThatFails) {
  GenConfig cfg;
  cfg.min_nodes = 8;
  cfg.max_nodes = 12;
  cfg.devices = {Device::cpu(0), Device::cpu(1)};
  for (const char* name : {"add", "neg", "exp", "reshape", "softmax", "mul"}) cfg.ops.push_back(OpId(find_op(name)));
  CheckOptions o;
  o.devices = {Device::cpu(0)};
  ReduceGoal goal;
  goal.fails = [](const Program& c) -> std::optional<int> {
    for (const Value& v : c.values)
      if (!v.is_input() && op_def(v.node().op).name == "softmax") return -1;
    return std::nullopt;
  };
  int reduced = 0;
  for (uint64_t seed = 0; seed < 200 && reduced < 5; ++seed) {
    PrngChoices ch(seed);
    Program p = generate_program(ch, cfg);
    // Only programs whose first softmax takes another node's output: the case that needs a cut.
    bool fed_by_a_node = false;
    for (const Value& v : p.values) {
      if (v.is_input() || op_def(v.node().op).name != "softmax") continue;
      const auto& x = std::get<ValueRef>(v.node().args[0]);
      fed_by_a_node = !p.values[size_t(x.id)].is_input();
      break;
    }
    if (!fed_by_a_node) continue;
    Program red = reduce_while(p, o, goal, nullptr, 200);
    ASSERT_EQ(red.num_nodes(), 1) << print_program(red);
    EXPECT_EQ(op_def(red.values.back().node().op).name, "softmax");
    ++reduced;
  }
  EXPECT_EQ(reduced, 5) << "too few generated programs had a softmax fed by another node";
}

TEST(Reducer, CompactKeepsOnlyAncestors) {
  PrngChoices c(3);
  GenConfig cfg;
  cfg.min_nodes = 12;
  Program p = generate_program(c, cfg);
  p.backward_of.reset();
  Program q = compact_program(p, 0);
  EXPECT_EQ(q.values.size(), 1u);
  EXPECT_EQ(parse_program(print_program(q)), q);
}

}  // namespace
}  // namespace crossfire::harness
