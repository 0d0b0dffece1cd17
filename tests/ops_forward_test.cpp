// SPDX-License-Identifier: Apache-2.0
// Every op of kOpTable, forward, on the device under test, against the f64 reference evaluator within the op's
// derived bound (contract section 6): exact for integer, bool and data-movement results. The test list is the op
// table itself, so a new op without argument cases fails here.
#include <gtest/gtest.h>

#include <string>

#include "ops_cases.hpp"
#include "support/backend_under_test.hpp"

namespace crossfire::testing::ops {
namespace {

class OpForward : public ::testing::TestWithParam<int> {};

TEST_P(OpForward, AgreesWithReference) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::string why;
  Device second = device_under_test(1, &why).value_or(d);  // `to` also moves across indices when there are two
  OpId id = OpId(GetParam());
  Calls calls = cases_for(id, d, second);
  ASSERT_FALSE(calls.empty()) << "op `" << op_def(id).name << "` has no argument cases in tests/ops_cases.cpp";
  int checked = 0;
  for (const auto& c : calls) {
    // The result lives on the target: the explicit device for creation and `to`, else device 0 here.
    Device expected = d;
    int dev_param = op_def(id).param_index("device");
    if (dev_param >= 0) expected = c->args()[dev_param].device;
    Outcome o = run_and_compare(*c, expected);
    if (o.unsupported) GTEST_SKIP() << o.message;
    EXPECT_TRUE(o.message.empty()) << o.message;
    ++checked;
  }
  RecordProperty("cases", checked);
}

std::string op_name(const ::testing::TestParamInfo<int>& info) {
  return std::string(kOpTable[size_t(info.param)].name);
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpForward, ::testing::Range(0, kNumOps), op_name);

// Contract section 1: a device value that names no known backend (legal C++: BackendKind is an enum over a byte)
// is refused with a typed error by every op that takes a device, through call() and validate(), and nothing
// changes (Note [A device of no known backend] in dispatch/src/backend.cpp). Once a creation op accepted it (a
// tensor on `?:0`) and `to(x, bad)` indexed the registry out of range.
TEST_P(OpForward, RefusesADeviceOfNoKnownBackend) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  const OpId id = OpId(GetParam());
  const int dev_param = op_def(id).param_with_role(ParamRole::device_attr);
  if (dev_param < 0) GTEST_SKIP() << "`" << op_def(id).name << "` takes no device";
  int checked = 0;
  for (Device bad : {Device{BackendKind(backend_kinds().size()), 0}, Device{BackendKind(255), 1}}) {
    // Creation ops build their calls on the bad device itself; `to` moves a tensor of `d` there.
    const bool creation = !op_def(id).has_tensor_params();
    Calls calls = creation ? cases_for(id, bad, bad) : cases_for(id, d, bad);
    ASSERT_FALSE(calls.empty());
    for (const auto& c : calls) {
      if (!(c->args()[dev_param].device == bad)) continue;  // `to`'s cases also move within `d`'s backend
      WorldSnapshot before = snapshot_world();
      EXPECT_THROW(validate(c->op(), c->args()), InvalidArgument) << c->label();
      try {
        Tensor t = call(c->op(), c->args());
        ADD_FAILURE() << c->label() << ": accepted, a tensor on " << t.device().str();
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("names no known backend"), std::string::npos) << e.what();
      }
      EXPECT_EQ(before, snapshot_world()) << c->label();
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_THROW(backend(BackendKind(backend_kinds().size())), InvalidArgument);
  EXPECT_THROW(backend_for(Device{BackendKind(200), 0}), InvalidArgument);
  EXPECT_EQ(find_backend(Device{BackendKind(200), 0}), nullptr);
}

// index_select's index is data: an index out of range raises InvalidArgument in the kernel, and the reference
// refuses it too.
TEST(OpForwardErrors, IndexSelectOutOfRange) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  CallBuilder c(ids::index_select_id, "index 3 of 3");
  c.tensor(make_f32({1, 2, 3}, {3}, d)).integer(0).tensor(make_i32({0, 3}, {2}, d));
  EXPECT_THROW(reference::evaluate(reference::RefCall::from(c.op(), c.args())), InvalidArgument);
  CallBuilder n(ids::index_select_id, "index -1");
  n.tensor(make_f32({1, 2, 3}, {3}, d)).integer(0).tensor(make_i32({-1}, {1}, d));
  EXPECT_THROW(reference::evaluate(reference::RefCall::from(n.op(), n.args())), InvalidArgument);
  try {
    call(c.op(), c.args());
    ADD_FAILURE() << "index_select with index 3 on a dimension of 3 did not raise";
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  } catch (const InvalidArgument&) {
  }
  try {
    call(n.op(), n.args());
    ADD_FAILURE() << "index_select with index -1 did not raise";
  } catch (const InvalidArgument&) {
  }
}

}  // namespace
}  // namespace crossfire::testing::ops
