// The reducer shrinks a failing program to a few nodes while the same failure persists.
#include <gtest/gtest.h>

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
