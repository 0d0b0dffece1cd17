// SPDX-License-Identifier: Apache-2.0
// Contract section 4: DeviceMismatch is exact. For EVERY op in the op table with tensor parameters and EVERY
// tensor argument position (position 0, list elements and the optional bias included), an argument moved to
// another device is blamed completely and precisely, for both kinds of mismatch (another backend, another index
// of the same backend), with tracked and untracked inputs; and nothing changes.
//
// Device checks come before dtype and shape checks, so the calls built here need only the right parameter roles:
// a call whose shapes would be invalid must still raise DeviceMismatch first. The no-false-positive half checks
// that the same calls with every argument on one device never raise DeviceMismatch.
#include <exception>
#include <functional>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

using testing::snapshot_world;
using testing::WorldSnapshot;

// One tensor argument position: (parameter, element of a list or -1).
struct Slot {
  int param;
  int list_index;
  std::string label;
};

// A call to `op` with every argument owned here. Tensors are small f32/i32/bool vectors of the first dtype the
// parameter accepts, made with from_data (which needs no kernel on any backend).
class OwnedCall {
 public:
  OwnedCall(const OpDef& op, Device d, int list_len, bool tracked) : op_(op) {
    tensors_.reserve(64);
    ints_.reserve(8);
    for (int i = 0; i < op.num_params; ++i) {
      const ParamDef& p = op.params[size_t(i)];
      switch (p.role) {
        case ParamRole::tensor:
        case ParamRole::optional_tensor:
          slots_.push_back({i, -1, std::string(p.name)});
          first_of_param_.push_back(int(tensors_.size()));
          tensors_.push_back(make(p, d, tracked));
          break;
        case ParamRole::tensor_list:
          first_of_param_.push_back(int(tensors_.size()));
          for (int j = 0; j < list_len; ++j) {
            slots_.push_back({i, j, fmt::format("{}[{}]", p.name, j)});
            tensors_.push_back(make(p, d, tracked));
          }
          break;
        default: first_of_param_.push_back(-1); break;
      }
    }
    list_len_ = list_len;
  }

  ArgPack pack() const {
    ArgPack a;
    for (int i = 0; i < op_.num_params; ++i) {
      const ParamDef& p = op_.params[size_t(i)];
      switch (p.role) {
        case ParamRole::tensor: a.push(Arg::of(tensors_[size_t(first_of_param_[size_t(i)])])); break;
        case ParamRole::optional_tensor: a.push(Arg::optional(&tensors_[size_t(first_of_param_[size_t(i)])])); break;
        case ParamRole::tensor_list:
          a.push(Arg::of(std::span<const Tensor>(tensors_.data() + first_of_param_[size_t(i)], size_t(list_len_))));
          break;
        case ParamRole::int_attr: a.push(Arg::integer(0)); break;
        case ParamRole::optional_int_attr: a.push(Arg::optional_integer(false, 0)); break;
        case ParamRole::float_attr: a.push(Arg::scalar(1.0)); break;
        case ParamRole::bool_attr: a.push(Arg::flag(false)); break;
        case ParamRole::int_list_attr: a.push(Arg::of(IntList(kPair))); break;
        case ParamRole::dtype_attr: a.push(Arg::of(DType::f32)); break;
        case ParamRole::device_attr: a.push(Arg::of(Device::cpu(0))); break;
        case ParamRole::bytes_attr: a.push(Arg::of(std::span<const uint8_t>())); break;
      }
    }
    return a;
  }

  const std::vector<Slot>& slots() const { return slots_; }
  Tensor& tensor_at(size_t slot) { return tensors_[slot]; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  static Tensor make(const ParamDef& p, Device d, bool tracked) {
    DType dt = DType::f32;
    for (DType c : kAllDTypes)
      if (p.dtypes.contains(c)) {
        dt = c;
        break;
      }
    std::vector<uint8_t> bytes(2 * dtype_size(dt), 0);
    if (dt != DType::boolean) {
      float one = 1.5f;  // any bit pattern will do; these tensors are never read by a kernel here
      std::memcpy(bytes.data(), &one, 4);
    }
    Tensor t = from_bytes(bytes, {2}, dt, d);
    if (tracked && dt == DType::f32 && p.grad != GradPolicy::forbidden) t.set_requires_grad();
    return t;
  }

  static constexpr std::array<int64_t, 2> kPair{1, 1};
  const OpDef& op_;
  std::vector<Tensor> tensors_;
  std::vector<int> first_of_param_;
  std::vector<Slot> slots_;
  std::vector<std::vector<int64_t>> ints_;
  int list_len_ = 0;
};

std::vector<std::vector<uint8_t>> contents(const std::vector<Tensor>& ts) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor& t : ts) out.push_back(t.to_host_bytes());
  return out;
}

// The devices an argument can be moved to: another index of the same backend, and another backend.
std::vector<Device> odd_devices(Device d) {
  std::vector<Device> out;
  if (backend(d.backend).device_count() > 1) out.push_back(Device{d.backend, uint8_t(d.index == 0 ? 1 : 0)});
  for (BackendKind k : backend_kinds())
    if (k != d.backend && backend(k).device_count() > 0) out.push_back(Device{k, 0});
  return out;
}

std::vector<OpId> ops_with_tensor_params() {
  std::vector<OpId> out;
  for (int i = 0; i < kNumOps; ++i)
    if (kOpTable[size_t(i)].has_tensor_params()) out.push_back(OpId(i));
  return out;
}

class DeviceMismatchExactness : public ::testing::TestWithParam<OpId> {};

// Moves each tensor argument in turn to each odd device and checks the error field by field.
void check_each_position(OpId id, Device d, bool tracked) {
  const OpDef& op = op_def(id);
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "this machine has only one device (" << d.str() << "): no mismatch is possible";
  for (Device other : odd) {
    OwnedCall probe(op, d, 3, tracked);
    for (size_t s = 0; s < probe.slots().size(); ++s) {
      SCOPED_TRACE(fmt::format("{}: `{}` moved to {} ({})", op.name, probe.slots()[s].label, other.str(),
                               tracked ? "tracked" : "untracked"));
      OwnedCall c(op, d, 3, tracked);
      c.tensor_at(s) = OwnedCall(op, other, 3, tracked).tensor_at(s);
      const std::vector<Slot>& slots = c.slots();
      // Expected: when the moved argument is the first (the target's source), every other argument is blamed.
      Device target = s == 0 ? other : d;
      std::vector<DeviceOffender> expected;
      for (size_t k = 0; k < slots.size(); ++k) {
        bool offends = s == 0 ? k != 0 : k == s;
        if (offends) {
          Device dk = k == s ? other : d;
          expected.push_back({slots[k].label, slots[k].param, slots[k].list_index, dk, dk.backend != target.backend});
        }
      }
      if (expected.empty()) continue;  // a single tensor argument moved alone: no mismatch (see NoFalsePositive)
      auto before_values = contents(c.tensors());
      WorldSnapshot before = snapshot_world();
      try {
        call(id, c.pack());
        ADD_FAILURE() << "no error raised";
      } catch (const DeviceMismatch& e) {
        EXPECT_EQ(e.op(), op.name);
        EXPECT_EQ(e.target, target);
        EXPECT_EQ(e.target_from, slots[0].label);
        EXPECT_EQ(e.offenders, expected);
        std::string msg = e.what();
        for (const DeviceOffender& o : expected) {
          EXPECT_NE(msg.find("`" + o.param + "`"), std::string::npos) << msg;
          EXPECT_NE(msg.find(o.wrong_backend ? "wrong backend" : (expected.size() == 1 ? "wrong device" : "wrong device index")),
                    std::string::npos)
              << msg;
        }
      } catch (const Error& e) {
        ADD_FAILURE() << "expected DeviceMismatch, got " << error_kind_name(e.kind()) << ": " << e.what();
      }
      EXPECT_EQ(before, snapshot_world()) << "an error must leave counters and the autodiff tape unchanged";
      EXPECT_EQ(before_values, contents(c.tensors())) << "an error must not change any input";
    }
  }
}

TEST_P(DeviceMismatchExactness, EveryPositionUntracked) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  check_each_position(GetParam(), d, false);
}

TEST_P(DeviceMismatchExactness, EveryPositionTracked) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  check_each_position(GetParam(), d, true);
}

TEST_P(DeviceMismatchExactness, EveryOtherPositionAtOnceIsBlamedInSignatureOrder) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  const OpDef& op = op_def(GetParam());
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "only one device on this machine";
  OwnedCall c(op, d, 4, false);
  std::vector<DeviceOffender> expected;
  for (size_t s = 1; s < c.slots().size(); s += 2) {
    Device dk = odd[(s / 2) % odd.size()];  // alternate kinds of mismatch when there are several
    c.tensor_at(s) = OwnedCall(op, dk, 4, false).tensor_at(s);
    expected.push_back({c.slots()[s].label, c.slots()[s].param, c.slots()[s].list_index, dk, dk.backend != d.backend});
  }
  if (expected.empty()) GTEST_SKIP() << op.name << " has a single tensor argument";
  WorldSnapshot before = snapshot_world();
  try {
    call(GetParam(), c.pack());
    ADD_FAILURE() << "no error raised";
  } catch (const DeviceMismatch& e) {
    EXPECT_EQ(e.target, d);
    EXPECT_EQ(e.offenders, expected);
  }
  EXPECT_EQ(before, snapshot_world());
}

TEST_P(DeviceMismatchExactness, NoFalsePositiveWhenEveryArgumentSharesOneDevice) {
  for (int idx = 0; idx < 2; ++idx) {
    std::string why;
    auto d = testing::device_under_test(idx, &why);
    if (!d) continue;
    for (bool tracked : {false, true}) {
      OwnedCall c(op_def(GetParam()), *d, 3, tracked);
      try {
        call(GetParam(), c.pack());
      } catch (const DeviceMismatch& e) {
        ADD_FAILURE() << "false positive on " << d->str() << ": " << e.what();
      } catch (const Error&) {
        // Shapes/attributes here are arbitrary; any other error is fine. Only DeviceMismatch would be wrong.
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, DeviceMismatchExactness, ::testing::ValuesIn(ops_with_tensor_params()),
                         [](const ::testing::TestParamInfo<OpId>& info) {
                           return std::string(op_def(info.param).name);
                         });

// For every op with an optional tensor parameter: absent, it is never blamed, and the other arguments still are.
TEST(DeviceMismatchOptional, AbsentOptionalArgumentsAreNeverBlamed) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "only one device on this machine";
  int ops_checked = 0;
  for (OpId id : ops_with_tensor_params()) {
    const OpDef& op = op_def(id);
    for (int optional = 0; optional < op.num_params; ++optional) {
      if (op.params[size_t(optional)].role != ParamRole::optional_tensor) continue;
      ++ops_checked;
      SCOPED_TRACE(fmt::format("{}: `{}` absent", op.name, op.params[size_t(optional)].name));
      OwnedCall c(op, d, 2, false);
      // Move the last tensor argument that is not the optional one, so that a mismatch exists.
      size_t moved = c.slots().size();
      for (size_t s = c.slots().size(); s-- > 1;)
        if (c.slots()[s].param != optional) {
          moved = s;
          break;
        }
      ASSERT_LT(moved, c.slots().size());
      c.tensor_at(moved) = OwnedCall(op, odd[0], 2, false).tensor_at(moved);
      ArgPack p = c.pack();
      p.args[size_t(optional)] = Arg::optional(nullptr);
      try {
        call(id, p);
        ADD_FAILURE() << "no error raised";
      } catch (const DeviceMismatch& e) {
        ASSERT_EQ(e.offenders.size(), 1u) << e.what();
        EXPECT_EQ(e.offenders[0].param, c.slots()[moved].label);
      }
    }
  }
  EXPECT_GT(ops_checked, 0) << "the op table has no optional tensor parameter any more; update this test";
}

TEST(DeviceMismatchMessages, MatchTheContractShape) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "only one device on this machine";
  for (Device other : odd) {
    Tensor a = from_data({1.f}, {1}, d), b = from_data({1.f}, {1}, other);
    try {
      add(a, b);
      FAIL();
    } catch (const DeviceMismatch& e) {
      bool backend_differs = other.backend != d.backend;
      EXPECT_EQ(std::string(e.what()),
                fmt::format("add: input tensor `rhs` is on the wrong {}: expected {} (from `lhs`), got {}",
                            backend_differs ? "backend" : "device", d.str(), other.str()));
    }
  }
  // Several offenders: one line, then one line per offender, each saying which kind of mismatch it is.
  std::vector<Tensor> ts;
  for (int i = 0; i < 4; ++i) ts.push_back(from_data({1.f}, {1}, i % 2 == 1 ? odd[size_t(i / 2) % odd.size()] : d));
  try {
    cat(ts, 0);
    FAIL();
  } catch (const DeviceMismatch& e) {
    std::string want = fmt::format("cat: 2 input tensors are on the wrong device (expected {}, from `tensors[0]`):", d.str());
    for (int i : {1, 3}) {
      Device o = odd[size_t(i / 2) % odd.size()];
      want += fmt::format("\n  `tensors[{}]` is on {} ({})", i, o.str(),
                          o.backend != d.backend ? "wrong backend" : "wrong device index");
    }
    EXPECT_EQ(std::string(e.what()), want);
  }
}

// More offenders than OffenderList keeps in place (Note [What raising an error allocates]): every one is blamed, in
// signature order, and the list behaves as the vector it replaced when it grows past and shrinks back to kInline.
TEST(DeviceMismatchOffenders, MoreThanTheInlineCapacityAreAllBlamedInOrder) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "only one device on this machine";
  constexpr int n = int(OffenderList::kInline) * 3;
  std::vector<Tensor> ts;
  ts.push_back(from_data({1.f}, {1}, odd[0]));  // the target comes from tensors[0]: every other element offends
  for (int i = 1; i < n; ++i) ts.push_back(from_data({1.f}, {1}, d));
  try {
    cat(ts, 0);
    FAIL() << "no error raised";
  } catch (const DeviceMismatch& e) {
    ASSERT_EQ(e.offenders.size(), size_t(n - 1)) << e.what();
    for (int i = 1; i < n; ++i) {
      EXPECT_EQ(e.offenders[size_t(i - 1)].param, fmt::format("tensors[{}]", i));
      EXPECT_EQ(e.offenders[size_t(i - 1)].device, d);
    }
  }
}

// A DeviceMismatch or DTypeMismatch found by the generic path is thrown from the caller's own frame (Note [A raise
// with no crossfire frame] in dispatch.cpp): made as an exception object, returned tagged, thrown by adopt_result().
// It must behave exactly as a throw expression's exception would, through every way in: caught as its own type and
// as each base, copied, held by an exception_ptr past its handler and thrown again, raised while another is being
// handled, and destroyed once (the ASan + UBSan build checks that none is leaked or freed twice).
TEST(DeviceMismatchRaise, BehavesAsAThrowExpressionsExceptionThroughEveryWayIn) {
  CROSSFIRE_REQUIRE_DEVICE(d, 0);
  std::vector<Device> odd = odd_devices(d);
  if (odd.empty()) GTEST_SKIP() << "only one device on this machine";
  const Tensor a = from_data({1.f, 2.f}, {2}, d), b = from_data({1.f, 2.f}, {2}, odd[0]);
  const ArgPack pack(Arg::of(a), Arg::of(b));
  const std::vector<Tensor> list{a, a, b};
  const WorldSnapshot before = snapshot_world();
  const std::vector<std::pair<const char*, std::function<Tensor()>>> ways{
      {"typed add", [&] { return add(a, b); }},
      {"call()", [&] { return call(ids::add_id, pack); }},
      {"the generic path alone", [&] { return detail::call_generic(ids::add_id, pack); }},
      {"typed cat", [&] { return cat(list, 0); }},
  };
  for (const auto& [way, run] : ways) {
    SCOPED_TRACE(way);
    const std::string blamed = std::string(way) == "typed cat" ? "tensors[2]" : "rhs";
    EXPECT_THROW(run(), DeviceMismatch);
    EXPECT_THROW(run(), Error);
    EXPECT_THROW(run(), std::exception);
    try {
      run();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {  // a base: the dynamic type is still the mismatch's
      EXPECT_EQ(e.kind(), ErrorKind::device_mismatch);
      ASSERT_NE(dynamic_cast<const DeviceMismatch*>(&e), nullptr);
    }
    try {
      run();
      ADD_FAILURE() << "no error";
    } catch (const DeviceMismatch& e) {
      const DeviceMismatch copy = e;  // a copy outlives the runtime's object
      ASSERT_EQ(copy.offenders.size(), 1u);
      EXPECT_EQ(copy.offenders[0].param, blamed);
      EXPECT_STREQ(copy.what(), e.what());
    }
    std::exception_ptr held;
    try {
      run();
    } catch (...) {
      held = std::current_exception();
    }
    ASSERT_TRUE(held) << "no error";
    try {
      run();  // a second raise while the first is still held
    } catch (const DeviceMismatch&) {
    }
    try {
      std::rethrow_exception(held);
    } catch (const DeviceMismatch& e) {
      EXPECT_EQ(e.target, d);
      ASSERT_EQ(e.offenders.size(), 1u);
      EXPECT_EQ(e.offenders[0].param, blamed);
      EXPECT_EQ(e.offenders[0].device, odd[0]);
    }
    // Raised inside a handler of another: each handler sees its own, and the outer one can be thrown again.
    try {
      try {
        throw InvalidArgument("outer", "", "first");
      } catch (const InvalidArgument&) {
        try {
          run();
        } catch (const DeviceMismatch& inner) {
          EXPECT_EQ(inner.offenders[0].param, blamed);
        }
        throw;
      }
    } catch (const InvalidArgument& outer) {
      EXPECT_EQ(outer.op(), "outer");
    } catch (...) {
      ADD_FAILURE() << "the outer exception changed";
    }
    EXPECT_EQ(std::uncaught_exceptions(), 0);
  }
  EXPECT_EQ(before, snapshot_world()) << "a raise had a side effect";

  // Step 3's error takes the same way: an f32 and an i32 operand.
  const Tensor ints = from_data(std::vector<int32_t>{1, 2}, {2}, d);
  try {
    add(a, ints);
    ADD_FAILURE() << "no error";
  } catch (const DTypeMismatch& e) {
    EXPECT_EQ(e.param, "rhs");
  }
  EXPECT_THROW(call(ids::add_id, ArgPack(Arg::of(a), Arg::of(ints))), DTypeMismatch);
}

TEST(DeviceMismatchOffenders, OffenderListGrowsAndShrinksLikeAVector) {
  OffenderList list;
  std::vector<DeviceOffender> mirror;
  for (int i = 0; i < int(OffenderList::kInline) * 2 + 1; ++i) {
    DeviceOffender o{fmt::format("a long parameter label that is not a short string {}", i), i, -1, Device::cpu(0),
                     i % 2 == 0};
    list.push_back(o);
    mirror.push_back(o);
    ASSERT_TRUE(list == mirror) << "after push " << i;
  }
  while (!mirror.empty()) {
    list.pop_back();
    mirror.pop_back();
    ASSERT_TRUE(list == mirror) << "after pop to " << mirror.size();
    ASSERT_EQ(list.empty(), mirror.empty());
  }
  OffenderList copy = OffenderList{{"x", 0, -1, Device::cpu(1), false}, {"y", 1, -1, Device::cpu(1), true}};
  OffenderList moved = std::move(copy);
  EXPECT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved.back().param, "y");
}

}  // namespace
}  // namespace crossfire
