// SPDX-License-Identifier: Apache-2.0
// Contract section 4's order of precedence and section 7's bad input: every check raises its typed error, naming
// the op and the argument, before any side effect.
#include <gtest/gtest.h>

#include <array>
#include <limits>

#include <fmt/format.h>

#include "support/backend_under_test.hpp"

namespace crossfire {
namespace {

using testing::snapshot_world;
using testing::WorldSnapshot;

// Runs f, expects error type E, and checks that the world did not change.
template <class E, class F>
E expect_clean_error(F&& f) {
  WorldSnapshot before = snapshot_world();
  try {
    f();
  } catch (const E& e) {
    EXPECT_EQ(before, snapshot_world()) << "side effect before " << e.what();
    return e;
  } catch (const Error& e) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << error_kind_name(e.kind()) << ": " << e.what();
    throw;
  }
  ADD_FAILURE() << "no error raised";
  throw std::runtime_error("no error");
}

class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto d = testing::device_under_test(0, &why);
    if (!d) GTEST_SKIP() << why;
    d0 = *d;
  }
  Tensor f32(std::initializer_list<int64_t> shape, Device d) {
    std::vector<float> v(size_t(Shape(shape).numel()), 1.f);
    return from_data(std::span<const float>(v), IntList(shape), d);
  }
  Tensor i32(std::initializer_list<int64_t> shape, Device d) {
    std::vector<int32_t> v(size_t(Shape(shape).numel()), 1);
    return from_data(std::span<const int32_t>(v), IntList(shape), d);
  }
  Device d0;
};

TEST_F(Validation, DeviceBeatsDTypeBeatsAutodiffBeatsShape) {
  std::vector<Device> others;
  if (backend(d0.backend).device_count() > 1) others.push_back(Device{d0.backend, 1});
  if (auto o = testing::other_backend_device()) others.push_back(*o);
  for (Device other : others) {
    // rhs is on another device AND has the wrong dtype AND the wrong shape: the device wins.
    Tensor a = f32({2}, d0), b = i32({3}, other);
    expect_clean_error<DeviceMismatch>([&] { add(a, b); });
  }
  // Wrong dtype and wrong shape: the dtype wins.
  Tensor a = f32({2}, d0), b = i32({3}, d0);
  DTypeMismatch e = expect_clean_error<DTypeMismatch>([&] { add(a, b); });
  EXPECT_EQ(e.param, "rhs");
  EXPECT_EQ(e.got, DType::i32);
  // A tracked input where the op forbids it, with a bad attribute: autodiff wins over the attribute check.
  Tensor t = f32({2}, d0);
  t.set_requires_grad();
  ArgPack bad_cast(Arg::of(t), Arg::of(DType::f32));
  expect_clean_error<AutodiffError>([&] { call(ids::cast_id, bad_cast); });
}

TEST_F(Validation, DTypeErrorsNameTheArgument) {
  Tensor f = f32({2}, d0), i = i32({2}, d0);
  EXPECT_EQ(expect_clean_error<DTypeMismatch>([&] { logical_and(f, f); }).param, "lhs");
  EXPECT_EQ(expect_clean_error<DTypeMismatch>([&] { exp(i); }).param, "x");
  EXPECT_EQ(expect_clean_error<DTypeMismatch>([&] { matmul(f, i); }).param, "rhs");
  std::vector<Tensor> mixed{f, f, i};
  DTypeMismatch e = expect_clean_error<DTypeMismatch>([&] { cat(mixed, 0); });
  EXPECT_EQ(e.param, "tensors[2]");
  Tensor w = f32({1, 1, 1, 1}, d0), bias = i32({1}, d0);
  EXPECT_EQ(expect_clean_error<DTypeMismatch>([&] { conv2d(f, w, &bias, {1, 1}, {0, 0}); }).param, "bias");
  EXPECT_EQ(expect_clean_error<DTypeMismatch>([&] { index_select(f, 0, f); }).param, "index");
}

TEST_F(Validation, TrackedInputOfANonDifferentiableParameterIsAnAutodiffError) {
  Tensor t = f32({2}, d0);
  t.set_requires_grad();
  AutodiffError e = expect_clean_error<AutodiffError>([&] { cast(t, DType::i32); });
  EXPECT_NE(std::string(e.what()).find("`x`"), std::string::npos) << e.what();
  // Comparisons take tracked inputs as constants: no error, untracked result.
  Tensor u = f32({2}, d0);
  try {
    Tensor r = lt(t, u);
    EXPECT_FALSE(r.tracked());
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  }
}

// A dtype the device's backend does not compute (Backend::dtypes(); contract section 1, "Dtypes") is Unsupported,
// naming the dtype and the device, whether the call creates it, casts to it or moves it there; nothing is allocated.
TEST_F(Validation, ADTypeTheBackendDoesNotComputeIsUnsupportedNamingItAndTheDevice) {
  Backend& b = backend_for(d0);
  for (DType dt : kAllDTypes) {
    if (b.dtypes().contains(dt)) continue;
    const CounterSnapshot before = b.snapshot();
    for (int how = 0; how < 3; ++how) {
      SCOPED_TRACE(fmt::format("{} on {}, way {}", dtype_name(dt), d0.str(), how));
      try {
        if (how == 0) zeros({2, 3}, dt, d0);
        if (how == 1) cast(f32({2}, d0), dt);
        if (how == 2) {
          // Moving a tensor of that dtype from the CPU (which computes every dtype) to the device.
          to(cast(from_data({1.5f, -2.0f}, {2}, Device::cpu(0)), dt), d0);
        }
        ADD_FAILURE() << "no error";
      } catch (const Unsupported& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(dtype_name(dt))), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(d0.str()), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(b.snapshot().allocations, before.allocations + 1) << "only the f32 input of the cast was made there";
    return;
  }
  GTEST_SKIP() << d0.str() << "'s backend computes every dtype";
}

TEST_F(Validation, RequiresGradOnlyForFloats) {
  Tensor i = i32({2}, d0);
  EXPECT_THROW(i.set_requires_grad(), AutodiffError);
  EXPECT_FALSE(i.tracked());
}

TEST_F(Validation, ShapeAndAttributeErrorsNameTheArgument) {
  Tensor a = f32({2, 3}, d0), b = f32({4}, d0);
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { add(a, b); }).param, "rhs");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { matmul(a, a); }).param, "rhs");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { sum(a, 2); }).param, "axis");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { sum(a, -3); }).param, "axis");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { reshape(a, {4}); }).param, "shape");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { reshape(a, {-1, -1}); }).param, "shape");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { permute(a, {0, 0}); }).param, "dims");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { slice(a, {0, 0}, {3, 3}, {1, 1}); }).param, "stops");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { slice(a, {0, -1}, {2, 3}, {1, 1}); }).param, "starts");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { slice(a, {0, 0}, {2, 3}, {1, 0}); }).param, "steps");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { expand(a, {3, 3}); }).param, "shape");
  std::vector<Tensor> ragged{a, b};
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(ragged, 0); }).param, "tensors[1]");
  // cat: every dim but the axis must match `tensors[0]`; the first element that does not is blamed.
  Tensor a3 = f32({2, 3}, d0), a4 = f32({2, 4}, d0), b3 = f32({5, 3}, d0);
  std::vector<Tensor> rows{a3, b3, a4, a4};
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(rows, 0); }).param, "tensors[2]");
  std::vector<Tensor> cols{a3, a4, b3};
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(cols, 1); }).param, "tensors[2]");
  EXPECT_EQ(cat(std::vector<Tensor>{a3, a4}, -1).shape(), Shape({2, 7}));  // 3 + 4 columns
  std::vector<Tensor> ranks{a3, f32({2, 3, 1}, d0)};
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(ranks, 0); }).param, "tensors[1]");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { softmax(a, 7); }).param, "axis");
  Tensor img = f32({1, 1, 3, 3}, d0), w = f32({1, 2, 2, 2}, d0);
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { conv2d(img, w, nullptr, {1, 1}, {0, 0}); }).param, "weight");
  Tensor w1 = f32({1, 1, 2, 2}, d0), bias = f32({3}, d0);
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { conv2d(img, w1, &bias, {1, 1}, {0, 0}); }).param, "bias");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { conv2d(img, w1, nullptr, {0, 1}, {0, 0}); }).param, "stride");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { conv2d(img, w1, nullptr, {1}, {0, 0}); }).param, "stride");
  Tensor big_kernel = f32({1, 1, 5, 5}, d0);
  expect_clean_error<ShapeError>([&] { conv2d(img, big_kernel, nullptr, {1, 1}, {0, 0}); });
  // rand and randn draw float values only.
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { rand({2}, 1, d0, DType::i32); }).param, "dtype");
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { randn({2}, 1, d0, DType::boolean); }).param, "dtype");
}

// cat's shape check is compiled once per rank (rules.cpp), so every rank and axis gets a list that fits and lists
// that differ in exactly one dim or in rank.
TEST_F(Validation, CatChecksEveryDimOutsideTheAxisAtEveryRank) {
  auto ones = [&](const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(size_t(n), 1.f);
    return from_data(std::span<const float>(v), IntList(dims), d0);
  };
  for (int rank = 1; rank <= kMaxRank; ++rank) {
    const std::vector<int64_t> base(size_t(rank), 1);
    const Tensor b = ones(base);
    for (int axis = 0; axis < rank; ++axis) {
      SCOPED_TRACE(fmt::format("rank {}, axis {}", rank, axis));
      for (int k = 0; k < rank; ++k) {
        std::vector<int64_t> grown = base;
        grown[size_t(k)] = 2;
        const std::vector<Tensor> list{b, b, ones(grown), b};
        if (k == axis) {
          std::vector<int64_t> expected = base;
          expected[size_t(axis)] = 5;  // 1 + 1 + 2 + 1
          EXPECT_EQ(cat(list, axis).shape(), Shape::checked(expected, "test", "expected"));
          EXPECT_EQ(cat(list, axis - rank).shape(), Shape::checked(expected, "test", "expected"));
        } else {
          EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(list, axis); }).param, "tensors[2]");
        }
      }
      std::vector<int64_t> longer = base;
      longer.push_back(1);
      if (rank < kMaxRank) {
        const std::vector<Tensor> ranks{b, ones(longer)};
        EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(ranks, axis); }).param, "tensors[1]");
      }
      if (rank > 1) {
        const std::vector<Tensor> ranks{b, b, ones(std::vector<int64_t>(size_t(rank - 1), 1))};
        EXPECT_EQ(expect_clean_error<ShapeError>([&] { cat(ranks, axis); }).param, "tensors[2]");
      }
    }
  }
}

TEST_F(Validation, HostileSizesAreRejectedBeforeAnyAllocation) {
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { zeros({-1}, DType::f32, d0); }).param, "shape");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { zeros({1 << 20, 1 << 20}, DType::f32, d0); }).param, "shape");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { zeros({int64_t(1) << 62, int64_t(1) << 62, 0}, DType::f32, d0); })
                .param,
            "shape");
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { zeros({1, 1, 1, 1, 1, 1, 1}, DType::f32, d0); }).param, "shape");
  expect_clean_error<InvalidArgument>([&] { arange(0, 1e12, 1, DType::f32, d0); });
  expect_clean_error<InvalidArgument>([&] { arange(0, 1, 0, DType::f32, d0); });
  expect_clean_error<InvalidArgument>([&] { arange(0, std::nan(""), 1, DType::f32, d0); });
  std::vector<uint8_t> three(3);
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { from_bytes(three, {1}, DType::f32, d0); }).param, "data");
  std::vector<uint8_t> two{2};
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { from_bytes(two, {1}, DType::boolean, d0); }).param, "data");
  // A step near INT64_MAX takes one element per axis (ceil(span / step) without computing span + step).
  const int64_t huge_step = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(slice(f32({2, 3}, d0), {0, 1}, {2, 3}, {huge_step, huge_step}).shape(), Shape({1, 1}));
  EXPECT_EQ(slice(f32({2, 3}, d0), {0, 1}, {2, 3}, {huge_step - 1, 2}).shape(), Shape({1, 1}));
  // Spatial sizes whose product overflows int64 if multiplied naively.
  Tensor img = f32({1, 1, 1, 1}, d0);
  expect_clean_error<InvalidArgument>(
      [&] { unfold(img, {1, 1}, {1, 1}, {int64_t(1) << 40, 0}); });
  Tensor huge_view = f32({1, 1, 1}, d0);
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] {
              fold(huge_view, {int64_t(1) << 24, int64_t(1) << 24}, {1, 1}, {1, 1}, {0, 0});
            }).param,
            "output_size");
}

// A shape built from an array of its dims (what cat's output uses, Note [One walk over cat's list]) is those dims,
// and reads as zero past its rank, which cat's walk relies on when it reads an element of another rank.
TEST(Shape, FromAnArrayIsItsDimsWithZerosPastTheRank) {
  const Shape s(std::array<int64_t, 3>{2, 0, 7});
  EXPECT_EQ(s, Shape({2, 0, 7}));
  EXPECT_EQ(s.rank(), 3);
  for (int i = 3; i <= kMaxRank; ++i) EXPECT_EQ(s[i], 0) << "dim " << i;
  EXPECT_EQ(Shape(std::array<int64_t, 0>{}), Shape());
}

// A tensor's signature (Note [A tensor's signature] in tensor.hpp) stands for its device, dtype and rank: two
// tensors' signatures are equal exactly when all three are, whatever the dims, on every backend.
TEST_F(Validation, ATensorsSignatureIsItsDeviceDtypeAndRank) {
  std::vector<Device> devices{d0};
  std::string why;
  if (auto d1 = testing::device_under_test(1, &why)) devices.push_back(*d1);
  std::vector<Tensor> ts;
  for (const Device& d : devices)
    for (DType dt : {DType::f32, DType::i32, DType::boolean})
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{}, {3}, {4}, {2, 3}, {3, 2}, {1, 1, 1}})
        ts.push_back(zeros(shape, dt, d));
  for (const Tensor& a : ts) {
    EXPECT_EQ(int(a.impl()->rank), a.rank());
    for (const Tensor& b : ts)
      EXPECT_EQ(a.impl()->signature() == b.impl()->signature(),
                a.device() == b.device() && a.dtype() == b.dtype() && a.rank() == b.rank())
          << a.str() << " and " << b.str();
  }
}

// Every tensor's shape keeps Shape::checked's bound: its non-zero dims multiply to at most kMaxElements. A shape
// with a 0 dim holds no elements, but it must not hide a huge product behind the 0, or the next op that drops the 0
// (a sum over that axis) would allocate it, and numel() would overflow on the way. zeros() refuses such a shape, so
// an op must not build one either: broadcasting, cat along another axis, index_select and matmul's batch dims are
// the ways to try.
TEST_F(Validation, NoOpBuildsAShapeThatZerosWouldRefuse) {
  const int64_t g = int64_t(1) << 30;
  auto empty = [&](std::initializer_list<int64_t> shape, DType dt = DType::f32) { return zeros(shape, dt, d0); };
  const Tensor g1 = empty({g, 1, 0}), one_g = empty({1, g, 0});
  EXPECT_EQ(expect_clean_error<ShapeError>([&] { add(g1, one_g); }).param, "");
  const Tensor c = empty({g, 1, 1, 0}, DType::boolean), a = empty({1, g, 1, 0}), b = empty({1, 1, g, 0});
  expect_clean_error<ShapeError>([&] { where(c, a, b); });  // numel() of [g, g, g, 0] would overflow int64
  const std::vector<Tensor> three(3, empty({1, 0, g}));
  expect_clean_error<ShapeError>([&] { cat(three, 0); });
  const Tensor x = empty({1, 0, g}), index = empty({4}, DType::i32);
  expect_clean_error<ShapeError>([&] { index_select(x, 0, index); });
  const Tensor lhs = empty({g, 1, 0, 1}), rhs = empty({1, g, 1, 0});
  expect_clean_error<ShapeError>([&] { matmul(lhs, rhs); });
  // Without a 0 dim the same bound is the element count: broadcasting two bool vectors to 46341 x 46341 (just over
  // 2^31 - 1) must not allocate the 2 GiB.
  const Tensor col = empty({46341, 1}, DType::boolean), row = empty({1, 46341}, DType::boolean);
  expect_clean_error<ShapeError>([&] { logical_and(col, row); });
  // Step 5 alone (what the harness shapes stand-ins with) holds results to the bound too.
  const ArgPack pack = ArgPack().of(g1).of(one_g);
  EXPECT_THROW(output_spec(CallView{op_def(ids::add_id), pack, d0}), ShapeError);
  // Within the bound, the same ops still build empty results.
  EXPECT_EQ(add(g1, empty({1, 1, 0})).shape(), Shape({g, 1, 0}));
  const std::vector<Tensor> two(2, empty({1, 0, g / 2}));
  EXPECT_EQ(cat(two, 0).shape(), Shape({2, 0, g / 2}));
  EXPECT_EQ(matmul(empty({2, 1, 0, 1}), empty({1, 3, 1, 1})).shape(), Shape({2, 3, 0, 1}));
}

TEST_F(Validation, MalformedCallsAreInvalidArguments) {
  Tensor a = f32({2}, d0);
  ArgPack too_few(Arg::of(a));
  EXPECT_THROW(call(ids::add_id, too_few), InvalidArgument);
  ArgPack wrong_role(Arg::of(a), Arg::integer(3));
  EXPECT_THROW(call(ids::add_id, wrong_role), InvalidArgument);
  Tensor undefined;
  ArgPack with_undefined(Arg::of(a), Arg::of(undefined));
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { call(ids::add_id, with_undefined); }).param, "rhs");
  std::vector<Tensor> list{a, Tensor()};
  EXPECT_EQ(expect_clean_error<InvalidArgument>([&] { cat(list, 0); }).param, "tensors[1]");
}

TEST_F(Validation, ValidateRaisesWhatCallWouldWithoutRunningAnything) {
  Tensor a = f32({2}, d0), b = f32({3}, d0);
  ArgPack p(Arg::of(a), Arg::of(b));
  WorldSnapshot before = snapshot_world();
  EXPECT_THROW(validate(ids::add_id, p), ShapeError);
  ArgPack ok(Arg::of(a), Arg::of(a));
  OutputSpec s = validate(ids::add_id, ok);
  EXPECT_EQ(s.shape, Shape({2}));
  EXPECT_EQ(s.device, d0);
  EXPECT_EQ(before, snapshot_world());
}

// Inside dispatch a result travels as a raw pointer that owns one reference (Note [A call's result in a register]):
// every way in must hand it to exactly one handle. Each result below is made and dropped, so the backend's
// allocations and releases must move together, and the inputs' counts must be where they started.
TEST_F(Validation, EveryWayInReleasesItsResultExactlyOnce) {
  Tensor a = f32({3}, d0), b = f32({3}, d0);
  Tensor leaf = f32({3}, d0);
  leaf.set_requires_grad(true);
  const auto count = [](const Tensor& t) { return t.impl()->refcount.load(); };
  const uint32_t a_count = count(a), leaf_count = count(leaf);
  const BackendCounters& c = backend_for(d0).counters();
  const uint64_t allocations = c.allocations.load(), releases = c.releases.load();
  const ArgPack pack(Arg::of(a), Arg::of(b));
  {
    Tensor typed = add(a, b);                                // the typed API: the table, no range check
    Tensor generic = call(ids::add_id, pack);                // call(): the checked way in
    Tensor slow = detail::call_generic(ids::add_id, pack);   // the generic path alone
    Tensor tracked = add(leaf, b);                           // a recorded node keeps its inputs, not its output
    Tensor broadcast = add(a, f32({1}, d0));                 // the fast path's rule case
    EXPECT_EQ(count(typed), 1u);
    EXPECT_EQ(count(generic), 1u);
    EXPECT_EQ(count(slow), 1u);
    EXPECT_EQ(count(broadcast), 1u);
    EXPECT_THROW(add(a, f32({2}, d0)), ShapeError);          // fails after its input was made
    Tensor moved = std::move(typed);
    EXPECT_FALSE(typed.defined());  // NOLINT(bugprone-use-after-move): the handle moved from is empty
    EXPECT_EQ(count(moved), 1u);
  }
  EXPECT_EQ(count(a), a_count);
  EXPECT_EQ(count(leaf), leaf_count);
  EXPECT_EQ(c.allocations.load() - allocations, c.releases.load() - releases)
      << "a result was leaked or released twice";
  EXPECT_EQ(c.allocations.load() - allocations, 7u) << "5 results and the 2 inputs made in the scope";
}

}  // namespace
}  // namespace crossfire
