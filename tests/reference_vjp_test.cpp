// SPDX-License-Identifier: Apache-2.0
// The reference's f64 derivatives (reference.hpp, Note [The f64 derivative of a node]): every differentiable op's
// vjp() against central differences of the reference's own evaluator on the per-op test cases, away from kinks,
// and the documented conventions at the kinks themselves, worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops_cases.hpp"
#include "reference/reference.hpp"

namespace crossfire::testing::ops {
namespace {

namespace ref = crossfire::reference;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// sum(u * op(call)) in f64.
double loss(const ref::RefCall& call, const ref::RefTensor& u) {
  const ref::RefResult r = ref::evaluate(call);
  double s = 0;
  for (size_t i = 0; i < u.values.size(); ++i) s += u.values[i] * r.value.values[i];
  return s;
}

// The tensors of a call in slot order (list elements expanded, absent optionals skipped).
std::vector<ref::RefTensor*> slots_of(ref::RefCall& call) {
  std::vector<ref::RefTensor*> out;
  for (ref::RefArg& a : call.args) {
    if (auto* t = std::get_if<ref::RefTensor>(&a)) out.push_back(t);
    if (auto* l = std::get_if<std::vector<ref::RefTensor>>(&a))
      for (ref::RefTensor& t : *l) out.push_back(&t);
  }
  return out;
}

ref::RefTensor upstream_for(const ref::RefCall& call, uint64_t seed) {
  ref::RefTensor u = ref::evaluate(call).value;
  u.dtype = DType::f32;
  for (size_t i = 0; i < u.values.size(); ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    u.values[i] = double(int((seed >> 33) % 7) - 3) * 0.5 + 0.25;  // -1.25 .. 1.75, never 0
  }
  return u;
}

TEST(ReferenceVjp, EveryDifferentiableOpMatchesCentralDifferences) {
  const Device cpu{BackendKind::cpu, 0};
  int ops_checked = 0;
  for (OpId id = 0; id < OpId(kNumOps); ++id) {
    if (!ref::has_vjp(id)) continue;
    Calls calls = cases_for(id, cpu, cpu);
    int elements = 0;
    for (const auto& cb : calls) {
      ref::RefCall call = ref::RefCall::from(id, cb->args());
      const std::vector<ref::RefTensor*> all = slots_of(call);
      if (std::none_of(all.begin(), all.end(), [](const ref::RefTensor* t) { return t->dtype == DType::f32; }))
        continue;  // the i32 and half cases: gradients are f32 only
      const ref::RefTensor u = upstream_for(call, id);
      if (!std::isfinite(loss(call, u))) continue;  // the cases with NaN and infinity: no differences there
      const ref::RefVjp got = ref::vjp(call, u);
      std::vector<ref::RefTensor*> slots = slots_of(call);
      ASSERT_EQ(got.grads.size(), slots.size()) << cb->label();
      for (size_t s = 0; s < slots.size(); ++s) {
        if (!got.grads[s] || slots[s]->dtype != DType::f32) continue;
        const ref::RefResult& g = *got.grads[s];
        ASSERT_TRUE(g.value.shape == slots[s]->shape) << cb->label() << " slot " << s;
        for (size_t i = 0; i < slots[s]->values.size(); ++i) {
          const double x = slots[s]->values[i];
          if (!std::isfinite(x)) continue;
          // Two step sizes: where the one-sided slopes or the two central differences disagree, a kink lies
          // within the step and differences say nothing (the conventions test below covers kinks).
          auto central = [&](double h, double* fwd, double* bwd) {
            slots[s]->values[i] = x + h;
            const double lp = loss(call, u);
            slots[s]->values[i] = x - h;
            const double lm = loss(call, u);
            slots[s]->values[i] = x;
            const double l0 = loss(call, u);
            *fwd = (lp - l0) / h;
            *bwd = (l0 - lm) / h;
            return (lp - lm) / (2 * h);
          };
          const double h = 1e-4 * std::max(1.0, std::fabs(x));
          double f1, b1, f2, b2;
          const double d1 = central(h, &f1, &b1), d2 = central(h / 4, &f2, &b2);
          const double scale = 1 + std::fabs(d2);
          if (!std::isfinite(d1) || !std::isfinite(d2)) continue;  // a domain's edge (sqrt at 0) within the step
          if (std::fabs(f2 - b2) > 1e-3 * scale || std::fabs(d1 - d2) > 1e-4 * scale) continue;
          EXPECT_NEAR(g.value.values[i], d2, 1e-5 * scale)
              << cb->label() << ": d/d(slot " << s << ")[" << i << "] at " << x;
          EXPECT_GE(g.magnitude[i], std::fabs(g.value.values[i]) * (1 - 1e-12)) << cb->label();
          ++elements;
        }
      }
    }
    EXPECT_GT(elements, 0) << "no element of `" << op_def(id).name << "` was compared with central differences";
    ++ops_checked;
  }
  EXPECT_GE(ops_checked, 30);
}

Shape shape_of(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(d);
  return s;
}
ref::RefTensor f32(std::vector<double> v, const std::vector<int64_t>& shape) {
  return ref::RefTensor{DType::f32, shape_of(shape), std::move(v)};
}

std::vector<double> grad_values(const ref::RefVjp& v, size_t slot) { return v.grads.at(slot)->value.values; }

// The conventions the op table's doc strings state, at the kinks themselves.
TEST(ReferenceVjp, ConventionsAtKinks) {
  const ref::RefTensor u = f32({1, 2, 3, 4}, {4});
  EXPECT_EQ(grad_values(ref::vjp({op_id("relu"), {f32({-1, 0, 2, kNaN}, {4})}}, u), 0),
            (std::vector<double>{0, 0, 3, 0}));
  EXPECT_EQ(grad_values(ref::vjp({op_id("abs"), {f32({-1, 0, 2, -0.0}, {4})}}, u), 0),
            (std::vector<double>{-1, 0, 3, 0}));
  // Ties go to lhs; a NaN on either side sends u to rhs.
  const ref::RefTensor l = f32({1, 2, kNaN, 5}, {4}), r = f32({1, 3, 0, kNaN}, {4});
  const ref::RefVjp mx = ref::vjp({op_id("maximum"), {l, r}}, u);
  EXPECT_EQ(grad_values(mx, 0), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(grad_values(mx, 1), (std::vector<double>{0, 2, 3, 4}));
  const ref::RefVjp mn = ref::vjp({op_id("minimum"), {l, r}}, u);
  EXPECT_EQ(grad_values(mn, 0), (std::vector<double>{1, 2, 0, 0}));
  EXPECT_EQ(grad_values(mn, 1), (std::vector<double>{0, 0, 3, 4}));
  // max: the first maximal element, or the first NaN.
  EXPECT_EQ(grad_values(ref::vjp({op_id("max"), {f32({3, 1, 3, 2}, {4}), ref::RefAbsent{}, false}}, f32({5}, {})), 0),
            (std::vector<double>{5, 0, 0, 0}));
  EXPECT_EQ(grad_values(ref::vjp({op_id("max"), {f32({3, kNaN, 9, kNaN}, {4}), ref::RefAbsent{}, false}}, f32({5}, {})), 0),
            (std::vector<double>{0, 5, 0, 0}));
  // clamp: both ends pass the gradient.
  EXPECT_EQ(grad_values(ref::vjp({op_id("clamp"), {f32({-1, 0, 1, 2}, {4}), 0.0, 1.0}}, u), 0),
            (std::vector<double>{0, 2, 3, 0}));
  // where: cond picks the side; cond itself has no gradient.
  const ref::RefVjp w = ref::vjp(
      {op_id("where"), {ref::RefTensor{DType::boolean, shape_of({4}), {1, 0, 0, 1}}, f32({0, 0, 0, 0}, {4}), f32({7}, {1})}},
      u);
  EXPECT_FALSE(w.grads[0].has_value());
  EXPECT_EQ(grad_values(w, 1), (std::vector<double>{1, 0, 0, 4}));
  EXPECT_EQ(grad_values(w, 2), (std::vector<double>{5}));
}

TEST(ReferenceVjp, RejectsAnUpstreamOfTheWrongShapeAndNonDifferentiableOps) {
  EXPECT_THROW(ref::vjp({op_id("exp"), {f32({1, 2}, {2})}}, f32({1}, {1})), InvalidArgument);
  EXPECT_THROW(ref::vjp({op_id("argmax"), {f32({1, 2}, {2}), ref::RefAbsent{}, false}}, f32({1}, {})),
               InvalidArgument);
}

}  // namespace
}  // namespace crossfire::testing::ops
