// SPDX-License-Identifier: Apache-2.0
// The gradient oracle (oracles.hpp), in named steps:
//   1. check_backward_rules: every backward rule on the program's gradient path, on every device, against the f64
//      derivative of its node at that device's own forward values (Note [Each backward rule at its device's own
//      values]). This is the judge: a disagreement names one rule on one device.
//   2. reverse_mode_on_devices: the program's gradient on each device (autodiff, as a user runs it).
//   3. reverse_mode_in_f64: the same chain rule in f64, through reference::vjp at the f64 values.
//   4. compare_devices: the devices' gradients against each other (a confirmation).
//   5. compare_with_f64: each device's gradient against f64 central differences where the program is smooth
//      around the point, and against the f64 chain rule of step 3 where it is not (a kink, a tie, a discrete value
//      that flips within the step, a step below f64's resolution): a confirmation that checks the documented
//      conventions at kinks instead of skipping them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "oracle_internals.hpp"

namespace crossfire::harness::internal {
namespace {

using reference::RefTensor;

// A host value on device `d` (through from_bytes, which needs no kernel).
Tensor upload(const RefTensor& t, Device d) {
  std::vector<uint8_t> bytes(t.values.size() * size_t(dtype_size(t.dtype)));
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double v = t.values[i];
    if (t.dtype == DType::f32) {
      const float f = float(v);
      std::memcpy(&bytes[4 * i], &f, 4);
    } else if (is_half(t.dtype)) {
      const uint16_t h = reference::half_bits(v, t.dtype);
      bytes[2 * i] = uint8_t(h), bytes[2 * i + 1] = uint8_t(h >> 8);
    } else if (t.dtype == DType::i32) {
      const int32_t x = int32_t(v);
      std::memcpy(&bytes[4 * i], &x, 4);
    } else if (t.dtype == DType::i64) {
      const int64_t x = t.ints[i];  // exact (RefTensor)
      std::memcpy(&bytes[8 * i], &x, 8);
    } else {
      bytes[i] = v != 0;
    }
  }
  return from_bytes(bytes, t.shape.dims(), t.dtype, d);
}

RefTensor zeros_of(const Shape& s, DType dt = DType::f32) {
  RefTensor r{dt, s, std::vector<double>(size_t(s.numel()), 0.0)};
  if (dt == DType::i64) r.ints.assign(r.values.size(), 0);  // RefTensor: an i64 holds its exact values too
  return r;
}

// The upstream gradient a node's backward rule is checked with, of the node's dtype: pseudo-random multiples of 1/4
// in [-0.875, 0.875], never 0 (every element routes something), exact in f32, f16 and bf16. Fixed by the output's
// element count alone, not by the node's id, so that the reducer, which renumbers values, keeps the failure.
RefTensor upstream_for(const Shape& s, DType dt) {
  RefTensor u{dt, s, {}};
  uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(s.numel() + 1);
  for (int64_t i = 0; i < s.numel(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    u.values.push_back((double((x >> 33) % 8) - 3.5) * 0.25);
  }
  return u;
}

// A call's tensor arguments in slot order (list elements expanded, absent optionals skipped), with the parameter
// and list index each came from.
struct Slot {
  const RefTensor* value;
  int param;
  int list_index;  // -1: not a list
};
std::vector<Slot> slots_of(const OpDef& op, const reference::RefCall& c) {
  std::vector<Slot> out;
  for (int i = 0; i < op.num_params && size_t(i) < c.args.size(); ++i) {
    if (const auto* t = std::get_if<RefTensor>(&c.args[size_t(i)])) out.push_back({t, i, -1});
    if (const auto* l = std::get_if<std::vector<RefTensor>>(&c.args[size_t(i)]))
      for (size_t j = 0; j < l->size(); ++j) out.push_back({&(*l)[j], i, int(j)});
  }
  return out;
}

bool all_finite(const std::vector<Slot>& slots) {
  for (const Slot& s : slots)
    if (is_float(s.value->dtype))
      for (double x : s.value->values)
        if (!std::isfinite(x)) return false;
  return true;
}

// Note [Branches across devices]
// At a piecewise node (OpDef::piecewise: relu, abs, maximum, minimum, max) the gradient follows a branch that the
// node's input values decide. Two devices may round those inputs differently (each within its op's bound), and a
// near-tie then goes different ways: tanh(9) is 1 on one backend and 0.99999994 on another, so maximum(tanh(9), 1)
// sends the gradient to a different argument. Their gradients then differ legitimately, and comparing them says
// nothing. This tells whether two evaluations order the values entering every piecewise node on the gradient's
// path (and 0, where relu and abs turn) the same way: sorted by one evaluation's values, no adjacent pair may
// compare differently in the other (two orders are the same exactly when all such pairs agree). It is
// conservative: elements the op never compares count too. Found by a campaign; test:
// GradientOracle.DoesNotCompareDevicesThatTakeDifferentBranches. Used on two device runs, on a device run and the
// f64 evaluation (before the f64 chain rule may judge a device), and on two f64 evaluations (finite differences,
// to see a kink between x - h and x + h).
bool same_branches(const Program& p, const Evaluation& a, const Evaluation& b, const std::vector<bool>& anc) {
  auto cmp = [](double x, double y) {
    if (std::isnan(x) || std::isnan(y)) return 2 + int(std::isnan(x)) + 2 * int(std::isnan(y));
    return int(x > y) - int(x < y);
  };
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (!anc[v] || p.values[v].is_input() || !op_def(p.values[v].node().op).piecewise()) continue;
    std::vector<double> va{0.0}, vb{0.0};
    DType dt = DType::f32;
    for (const NodeArg& arg : p.values[v].node().args) {
      const auto* r = std::get_if<ValueRef>(&arg);
      if (r == nullptr) continue;
      const std::optional<RefTensor>& ra = a[size_t(r->id)];
      const std::optional<RefTensor>& rb = b[size_t(r->id)];
      if (!ra || !rb || !is_float(ra->dtype) || !is_float(rb->dtype)) continue;
      if (ra->values.size() != rb->values.size()) return false;
      va.insert(va.end(), ra->values.begin(), ra->values.end());
      vb.insert(vb.end(), rb->values.begin(), rb->values.end());
      dt = ra->dtype;
    }
    // Where the kink sits at a float attribute (clamp's min and max), the attribute as the op rounds it (to f32,
    // then to x's dtype) is one of the values ordered: a bf16 x of -0.7207 in f64 lies below min = -0.71875 while
    // the device's x, rounded to bf16, is -0.71875 and inside (a campaign, seed 1, the first with tracked halves).
    if (op_def(p.values[v].node().op).kink == Kink::at_attributes)
      for (const NodeArg& arg : p.values[v].node().args)
        if (const double* f = std::get_if<double>(&arg)) {
          const double at = reference::round_to(reference::round_to(*f, DType::f32), dt);
          va.push_back(at), vb.push_back(at);
        }
    std::vector<size_t> order(va.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) {  // NaNs last: a strict weak order
      const bool ni = std::isnan(va[i]), nj = std::isnan(va[j]);
      if (ni != nj) return nj;
      return ni ? i < j : va[i] < va[j] || (va[i] == va[j] && i < j);
    });
    for (size_t k = 1; k < order.size(); ++k)
      if (cmp(va[order[k - 1]], va[order[k]]) != cmp(vb[order[k - 1]], vb[order[k]])) return false;
  }
  return true;
}

// A run's float values on the gradient's path, as an evaluation (read back once).
Evaluation float_values(const Program& p, const RunResult& r, const std::vector<bool>& anc) {
  Evaluation e(p.values.size());
  for (size_t v = 0; v < e.size(); ++v)
    if (anc[v] && r.tensors[v].defined() && is_float(r.tensors[v].dtype())) e[v] = RefTensor::from(r.tensors[v]);
  return e;
}

// The largest finite value of a float dtype.
double largest(DType dt) {
  const reference::FloatFormat f = reference::float_format(dt);
  return f.overflow - f.overflow * f.eps / 2;  // overflow is the largest value plus half its ulp
}

class GradientOracle {
 public:
  GradientOracle(const Program& p, const CheckOptions& o, const std::vector<Device>& devices, OracleCounts& counts,
                 const FailFn& fail)
      : p_(p), o_(o), devices_(devices), counts_(counts), fail_(fail) {}

  void run(std::vector<RunResult>& runs) {
    if (!prepare()) return;
    if (!check_backward_rules(runs)) return;
    if (!reverse_mode_on_devices(runs)) return;
    reverse_mode_in_f64();
    prepare_f64_comparisons(runs);
    for (size_t li = 0; li < leaves_.size(); ++li)
      if (!compare_devices(li, runs) || !compare_with_f64(li, runs)) return;
  }

 private:
  const Program& p_;
  const CheckOptions& o_;
  const std::vector<Device>& devices_;
  OracleCounts& counts_;
  const FailFn& fail_;

  int root_ = -1;
  std::vector<bool> anc_;       // the values the root depends on
  std::vector<int> leaves_;     // tracked inputs among them
  Evaluation base_;             // the program in f64 at the point
  std::vector<std::vector<double>> base_magnitude_;  // per node of base_: each element's sum of |terms|
  std::vector<float> seed_;     // Note [Seeding only the finite elements]
  std::vector<std::optional<std::vector<RefTensor>>> grads_;  // per device: per leaf (step 2)
  // The f64 chain rule at one point: per leaf, the gradient and each element's sum of |terms| (its magnitude).
  struct Chain {
    std::vector<RefTensor> grad, magnitude;
  };
  std::optional<Chain> chain_;  // at the f64 values (step 3)
  std::vector<std::optional<std::optional<Chain>>> own_chain_;  // per device: at its own values (when needed)
  std::vector<bool> held_;  // the root's constants, rounded to their dtypes in base_ (Note [Constants as a ...])
  bool nonfinite_intermediate_ = false;
  bool on_kink_ = false;
  std::vector<bool> device_consistent_;  // per device: the same discrete values as the f64 evaluation
  std::vector<std::optional<bool>> chain_comparable_;  // per device: also the same branches (computed when needed)
  std::vector<std::optional<bool>> same_branch_;       // per device, against the first one that has gradients
  std::vector<std::optional<Evaluation>> device_values_;  // per device: its float values on the path, read once

  const Evaluation& device_values(size_t di, const std::vector<RunResult>& runs) {
    if (!device_values_[di]) device_values_[di] = float_values(p_, runs[di], anc_);
    return *device_values_[di];
  }

  std::string dev(size_t di) const { return devices_[di].str(); }
  void skip(SkipReason r) { counts_.skip(r); }
  bool failed(int node, std::string device, std::string what, std::string detail) {
    fail_(node, std::move(device), std::move(what), std::move(detail));
    return false;
  }
  // A planted fault in an observed gradient of the whole program (PlantedFault: scale, skew, overflow; the backward
  // rules of step 1 have their own, scale_backward_rule, so that each step's catch can be shown apart).
  void plant(RefTensor& g, size_t di) const {
    if (o_.fault == PlantedFault::scale_gradient || (o_.fault == PlantedFault::skew_gradient && di > 0))
      for (double& x : g.values) x = x * 1.5 + 0.25;
    if (o_.fault == PlantedFault::overflow_gradient && !g.values.empty())
      g.values[0] = std::numeric_limits<double>::infinity();
  }

  // ---- the point -------------------------------------------------------------------------------------------------

  bool prepare() {
    if (!p_.backward_of) return false;
    root_ = *p_.backward_of;
    anc_ = ancestors_of(p_, root_);
    for (size_t v = 0; v < p_.values.size(); ++v)
      if (anc_[v] && p_.values[v].is_input() && p_.values[v].input().tracked) leaves_.push_back(int(v));
    if (leaves_.empty()) return false;
    // Note [Constants as a device holds them]
    // The values the root depends on that no tracked input reaches are constants of the gradient, and a device
    // holds each in its dtype where the reference computes it exactly. So the point of the f64 sources (steps 3 and
    // 5) holds them as a device does: each computed constant is rounded to its dtype as it is computed, before the
    // next node reads it (evaluate_f64's held_in_dtype); what the devices differentiate and what f64 differentiates
    // are then the same function of the leaves. A campaign (seed 3, --jobs 2; tests/harness/programs/fd-bf16-
    // constant-on-an-f32-path-conv2d-matmul.program): an f32 leaf x in sum(cast(conv2d(a, w), f32) @ x / 2.5), whose
    // conv2d is bf16; d/dx[18] sums three conv2d outputs of 1e29 that cancel to a tenth of their size, and one bf16
    // rounding of each, which the device's gradient was formed from and f64's was not, moved it 2% from f64's, past
    // the f32 leaf's 1%. Values a tracked input reaches stay exact (finite differences need a smooth function); they
    // have the leaf's dtype (cast is not differentiable, and the operands an op differentiates share one dtype), whose
    // roundings the judges allow.
    held_.assign(p_.values.size(), false);
    for (size_t v = 0; v < p_.values.size(); ++v) held_[v] = anc_[v] && !p_.values[v].is_input();
    for (int leaf : leaves_) {  // every tracked input the root depends on is a leaf
      const std::vector<bool> reached = descendants_of(p_, leaf);
      for (size_t v = 0; v < held_.size(); ++v) held_[v] = held_[v] && !reached[v];
    }
    base_ = evaluate_f64(p_, {}, root_, nullptr, &base_magnitude_, &held_);
    // Note [Seeding only the finite elements]
    // The loss is the sum of the root's elements whose f64 value is finite, and reverse mode is seeded with 1 at
    // exactly those elements (0 elsewhere). With a seed of ones everywhere, one infinite or NaN element of the root
    // (an inf input added in, a log of 0) left no finite loss to difference, and every element of every leaf was
    // skipped: 97% of the gradient oracle's skips in a default campaign. Seeding the same elements that finite
    // differences sum keeps the two the same function. (A 0 seed meeting an infinite local derivative gives the
    // chain rule's 0 * inf = NaN: the non-finite-intermediate rule skips that.)
    if (base_[size_t(root_)])
      for (double x : base_[size_t(root_)]->values) seed_.push_back(std::isfinite(x) ? 1.0f : 0.0f);
    return true;
  }

  // ---- step 1 ------------------------------------------------------------------------------------------------------

  // Note [Each backward rule at its device's own values]
  // Every node between a tracked leaf and the root runs its op's backward rule in the program's reverse pass. Each
  // is judged alone, on each device: the node is called again on fresh leaves holding the inputs that device gave
  // it (read back by the run), with every float input the op differentiates tracked, and backward is seeded with a
  // fixed pseudo-random upstream gradient (upstream_for). reference::vjp gives the exact gradients of the same call
  // with the same upstream gradient, with the magnitudes and bound of Note [The f64 derivative of a node]; every
  // element must lie within it. Because the point is the device's own, no rounding upstream of the node can move
  // it, kinks are checked against the op table's conventions rather than skipped, and a failure names the rule,
  // the device and the argument. For maximum, minimum and where the gradients of their inputs must also add up to
  // the upstream gradient. Inputs with an infinity or NaN are judged too; only a disagreement there is skipped as
  // a non-finite intermediate (two correct f32 formulas may meet 0 * inf differently).
  bool check_backward_rules(const std::vector<RunResult>& runs) {
    std::vector<bool> from_leaf(p_.values.size(), false);
    for (int leaf : leaves_) {
      const std::vector<bool> d = descendants_of(p_, leaf);
      for (size_t v = 0; v < d.size(); ++v) from_leaf[v] = from_leaf[v] || d[v];
    }
    for (size_t v = 0; v < p_.values.size(); ++v) {
      if (!anc_[v] || !from_leaf[v] || p_.values[v].is_input() || !reference::has_vjp(p_.values[v].node().op)) continue;
      for (size_t di = 0; di < runs.size(); ++di)
        if (!check_backward_rule(int(v), runs[di], di)) return false;
    }
    return true;
  }

  bool check_backward_rule(int v, const RunResult& run, size_t di) {
    const NodeDef& nd = p_.values[size_t(v)].node();
    const OpDef& op = op_def(nd.op);
    const NodeRecord& rec = run.nodes[size_t(v)];
    if (rec.status == NodeStatus::unsupported) {
      counts_.skipped_unsupported++;
      return true;
    }
    if (rec.status != NodeStatus::ok || !rec.ref_call || !rec.output || run.standin[size_t(v)] || rec.used_standin) {
      if (behind_unsupported(p_, run, v))  // an f16 input on a backend without f16, say
        counts_.skipped_unsupported++;
      else
        skip(SkipReason::upstream_missing);
      return true;
    }
    const DType dt = rec.output->dtype;
    if (!is_float(dt)) return true;  // only float tensors are ever tracked
    const std::vector<Slot> slots = slots_of(op, *rec.ref_call);
    const RefTensor u = upstream_for(rec.output->shape, dt);
    reference::RefVjp exact;
    try {
      exact = reference::vjp(*rec.ref_call, u);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception&) {
      skip(SkipReason::no_reference);
      return true;
    }
    // The rule alone on fresh leaves: every slot the reference differentiates, where it is f32, is tracked.
    std::vector<bool> tracked(slots.size());
    for (size_t s = 0; s < slots.size(); ++s)
      tracked[s] = s < exact.grads.size() && exact.grads[s] && is_float(slots[s].value->dtype);
    if (std::find(tracked.begin(), tracked.end(), true) == tracked.end()) return true;
    std::vector<Tensor> fresh;
    std::vector<std::optional<RefTensor>> got(slots.size());
    const Device d = devices_[di];
    try {
      auto resolve = [&](const ValueRef&) {
        const size_t s = fresh.size();
        Tensor t = upload(*slots.at(s).value, d);
        if (tracked[s]) t.set_requires_grad(true);
        fresh.push_back(t);
        return t;
      };
      NodeCall c;
      bind_node(c, nd, resolve, [d](Device) { return d; });
      const Tensor out = call(nd.op, c.pack);
      backward(out, upload(u, d));
      for (size_t s = 0; s < slots.size(); ++s) {
        if (!tracked[s]) continue;
        const Tensor g = fresh[s].grad();
        got[s] = g.defined() ? RefTensor::from(g) : zeros_of(slots[s].value->shape, slots[s].value->dtype);
        if (o_.fault == PlantedFault::scale_backward_rule)
          for (double& x : got[s]->values) x = x * 1.5 + 0.25;
      }
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::unsupported) {
        counts_.skipped_unsupported++;
        return true;
      }
      counts_.checked++;
      return failed(v, dev(di),
                    fmt::format("backward rule raised: %{} ({}) on {}: {}: {}", v, op.name, dev(di),
                                error_kind_name(e.kind()), e.what()),
                    "the node called alone on fresh leaves holding its inputs on that device");
    }
    const bool finite_inputs = all_finite(slots);
    for (size_t s = 0; s < slots.size(); ++s) {
      if (!got[s]) continue;
      const reference::RefResult& want = *exact.grads[s];
      counts_.checked++;
      counts_.checked_backward_rules++;
      for (size_t i = 0; i < want.value.values.size() && i < got[s]->values.size(); ++i) {
        const double g = got[s]->values[i], e = want.value.values[i];
        if (reference::within_vjp_bound(exact.bound, dt, g, e, want.magnitude[i], want.terms[i])) continue;
        if (!finite_inputs) {
          skip(SkipReason::nonfinite_intermediate);
          break;
        }
        const std::string arg = arg_label(op, slots[s].param, slots[s].list_index);
        return failed(
            v, dev(di),
            // (The value ids come after the first colon: Failure::signature() must not change when the reducer
            // renumbers values.)
            fmt::format("backward rule disagrees with the f64 derivative: %{} ({}) on {}, d/d{}[{}] is {}, exact {}",
                        v, op.name, dev(di), arg, i, format_float(g), format_float(e)),
            fmt::format("allowed error {} (magnitude {}, {} terms); at {}'s own inputs of the node, upstream "
                        "gradient {}",
                        format_float(reference::vjp_allowed_error(exact.bound, dt, want.magnitude[i], want.terms[i])),
                        format_float(want.magnitude[i]), want.terms[i], dev(di), format_values(u)));
      }
    }
    if (exact.conserves && finite_inputs) return check_conservation(v, op, u, got, di);
    return true;
  }

  // maximum, minimum, where: all of each upstream element goes to one input, so the inputs' gradients add up to
  // the upstream gradient (summed over broadcast dims: compared as totals).
  bool check_conservation(int v, const OpDef& op, const RefTensor& u, const std::vector<std::optional<RefTensor>>& got,
                          size_t di) {
    double total = 0, want = 0, mag = 0;
    size_t terms = 0;
    for (const std::optional<RefTensor>& g : got)
      if (g)
        for (double x : g->values) total += x, mag += std::fabs(x), ++terms;
    for (double x : u.values) want += x, mag += std::fabs(x), ++terms;
    counts_.checked++;
    counts_.checked_backward_rules++;
    const double tol = double(terms + 2) * 0x1p-23 * mag + 0x1p-126;
    if (std::fabs(total - want) <= tol) return true;
    return failed(v, dev(di),
                  fmt::format("backward rule loses gradient: %{} ({}) on {}, its inputs' gradients add up to {}, the "
                              "upstream gradient to {}",
                              v, op.name, dev(di), format_float(total), format_float(want)),
                  fmt::format("tolerance {}; the op table says every upstream element goes to one input",
                              format_float(tol)));
  }

  static std::string format_values(const RefTensor& t) {
    std::string s = "[";
    for (size_t i = 0; i < t.values.size() && i < 8; ++i) s += (i ? ", " : "") + format_float(t.values[i]);
    return s + (t.values.size() > 8 ? ", ...]" : "]");
  }

  // ---- step 2 ------------------------------------------------------------------------------------------------------

  bool reverse_mode_on_devices(std::vector<RunResult>& runs) {
    grads_.assign(runs.size(), std::nullopt);
    for (size_t di = 0; di < runs.size(); ++di) {
      RunResult& run = runs[di];
      bool usable = run.tensors[size_t(root_)].defined() && !run.standin[size_t(root_)];
      for (size_t v = 0; v < p_.values.size() && usable; ++v)
        if (anc_[v] && (run.standin[v] || run.nodes[v].status != NodeStatus::ok)) usable = false;
      if (!usable) {
        counts_.skipped_unsupported++;
        continue;
      }
      try {
        const Tensor& out = run.tensors[size_t(root_)];
        RefTensor mask = zeros_of(out.shape(), out.dtype());
        for (size_t i = 0; i < mask.values.size(); ++i) mask.values[i] = i < seed_.size() ? seed_[i] : 1.0;
        Tensor seed = upload(mask, out.device());
        backward(out, seed);
        std::vector<RefTensor> g;
        for (int leaf : leaves_) {
          Tensor gt = run.tensors[size_t(leaf)].grad();
          const InputDef& in = p_.values[size_t(leaf)].input();
          RefTensor rt = gt.defined() ? RefTensor::from(gt) : zeros_of(in.shape, in.dtype);
          plant(rt, di);
          g.push_back(std::move(rt));
        }
        grads_[di] = std::move(g);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::unsupported) {
          counts_.skipped_unsupported++;
        } else {
          counts_.checked++;
          return failed(root_, dev(di),
                        fmt::format("backward raised on {}: {}: {}", dev(di), error_kind_name(e.kind()), e.what()), "");
        }
      }
    }
    return true;
  }

  // ---- step 3 ------------------------------------------------------------------------------------------------------

  // Reverse mode in f64 with the reference's derivatives at the f64 values (chain_at: at any point's values; a
  // device's own, Note [The f64 chain rule at a device's own values]), seeded like the devices: the exact
  // gradient of the loss under the op table's conventions at kinks. None when a node on the path has no f64 value
  // or derivative. Beside each adjoint it carries a magnitude: the sum of the absolute values of every term that
  // formed it (the vjp's magnitude, fed the downstream magnitude as its upstream gradient). A device's gradient
  // rounds every one of those terms, so a leaf whose exact gradient cancels to 0 out of terms of 1e31 (two bf16
  // matmuls; a campaign, seed 1) is judged against that magnitude, not against 0.
  void reverse_mode_in_f64() { chain_ = chain_at(base_); }

  std::optional<Chain> chain_at(const Evaluation& at) const {
    if (!at[size_t(root_)]) return std::nullopt;
    Evaluation adj(p_.values.size()), mag(p_.values.size());
    adj[size_t(root_)] = zeros_of(at[size_t(root_)]->shape);
    for (size_t i = 0; i < seed_.size(); ++i) adj[size_t(root_)]->values[i] = seed_[i];
    mag[size_t(root_)] = adj[size_t(root_)];
    for (int v = root_; v >= 0; --v) {
      if (!adj[size_t(v)] || p_.values[size_t(v)].is_input()) continue;
      const NodeDef& nd = p_.values[size_t(v)].node();
      if (!reference::has_vjp(nd.op)) continue;
      bool ok = true;
      const reference::RefCall c = ref_call_of(nd, at, &ok);
      if (!ok) return std::nullopt;
      reference::RefVjp g, m;
      try {
        g = reference::vjp(c, *adj[size_t(v)]);
        m = reference::vjp(c, *mag[size_t(v)]);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception&) {
        return std::nullopt;
      }
      size_t slot = 0;
      auto flow = [&](const ValueRef& r) {
        const size_t s = slot++;
        if (s >= g.grads.size() || !g.grads[s] || !m.grads[s]) return;
        std::optional<RefTensor>& a = adj[size_t(r.id)];
        std::optional<RefTensor>& am = mag[size_t(r.id)];
        if (!a) a = am = zeros_of(g.grads[s]->value.shape);
        for (size_t i = 0; i < a->values.size() && i < g.grads[s]->value.values.size(); ++i) {
          a->values[i] += g.grads[s]->value.values[i];
          am->values[i] += m.grads[s]->magnitude[i];
        }
      };
      for (const NodeArg& arg : nd.args) {
        if (const auto* r = std::get_if<ValueRef>(&arg)) flow(*r);
        if (const auto* l = std::get_if<std::vector<ValueRef>>(&arg))
          for (const ValueRef& r : *l) flow(r);
      }
    }
    Chain out;
    for (int leaf : leaves_) {
      const Shape& s = p_.values[size_t(leaf)].input().shape;
      out.grad.push_back(adj[size_t(leaf)] ? *adj[size_t(leaf)] : zeros_of(s));
      out.magnitude.push_back(mag[size_t(leaf)] ? *mag[size_t(leaf)] : zeros_of(s));
    }
    return out;
  }

  // ---- steps 4 and 5 -----------------------------------------------------------------------------------------------

  void prepare_f64_comparisons(const std::vector<RunResult>& runs) {
    // Non-finite intermediates (an inf from an untracked input, an overflow) make the chain rule produce 0 * inf
    // where the true derivative is 0; a non-finite gradient there is skipped, not reported. (An f64 value past the
    // largest f32 is infinite on the devices.)
    for (size_t v = 0; v < base_.size(); ++v)
      if (anc_[v] && base_[v] && is_float(base_[v]->dtype))
        for (double x : base_[v]->values) nonfinite_intermediate_ |= !(std::fabs(x) <= largest(base_[v]->dtype));
    // The same holds at the boundary of a parameter's domain (sqrt at 0: the derivative is unbounded there, and the
    // chain rule meets 0 * inf even where the loss does not depend on the input). The op table's Domain says where
    // the boundary is, so no op is named here.
    for (size_t v = 0; v < base_.size() && !nonfinite_intermediate_; ++v) {
      if (!anc_[v] || p_.values[v].is_input()) continue;
      const NodeDef& nd = p_.values[v].node();
      const OpDef& op = op_def(nd.op);
      for (int a = 0; a < op.num_params && size_t(a) < nd.args.size(); ++a) {
        if (op.params[size_t(a)].domain == Domain::any || op.params[size_t(a)].domain == Domain::index) continue;
        const auto* r = std::get_if<ValueRef>(&nd.args[size_t(a)]);
        if (r == nullptr || !base_[size_t(r->id)]) continue;
        for (double x : base_[size_t(r->id)]->values) nonfinite_intermediate_ |= x == 0;
      }
    }
    // A kink of a piecewise op (OpDef::piecewise) inside the graph: the composite may still be smooth there
    // (min(relu(x), x) is x), so the one-sided slopes cannot see it, but the chain rule takes one branch: finite
    // differences say nothing, and the f64 chain rule judges instead.
    for (size_t v = 0; v < base_.size() && !on_kink_; ++v)
      if (anc_[v] && !p_.values[v].is_input() && op_def(p_.values[v].node().op).piecewise())
        on_kink_ = sits_on_kink(p_.values[v].node(), base_);
    // The device runs must take the same discrete branches as the f64 evaluation, or f64 says nothing about them.
    device_consistent_.assign(runs.size(), true);
    if (base_[size_t(root_)])
      for (size_t di = 0; di < runs.size(); ++di)
        for (size_t v = 0; v < p_.values.size(); ++v)
          if (anc_[v] && base_[v] && !is_float(base_[v]->dtype) && runs[di].nodes[v].output &&
              runs[di].nodes[v].output->values != base_[v]->values)
            device_consistent_[di] = false;
    chain_comparable_.assign(runs.size(), std::nullopt);
    own_chain_.assign(runs.size(), std::nullopt);
    same_branch_.assign(runs.size(), std::nullopt);
    device_values_.assign(runs.size(), std::nullopt);
  }

  // Step 4: the whole gradient of one leaf, device against device.
  bool compare_devices(size_t li, const std::vector<RunResult>& runs) {
    const int leaf = leaves_[li];
    std::optional<size_t> first;
    for (size_t di = 0; di < runs.size(); ++di) {
      if (!grads_[di]) continue;
      if (!first) {
        first = di;
        continue;
      }
      if (!same_branch_[di])
        same_branch_[di] = same_branches(p_, device_values(*first, runs), device_values(di, runs), anc_);
      if (!*same_branch_[di]) {  // Note [Branches across devices]
        skip(SkipReason::branches_differ);
        continue;
      }
      const auto &ga = (*grads_[*first])[li].values, &gb = (*grads_[di])[li].values;
      counts_.checked++;
      const reference::FloatFormat f = reference::float_format(p_.values[size_t(leaf)].input().dtype);
      for (size_t i = 0; i < ga.size() && i < gb.size(); ++i) {
        const double rel = std::max(1e-2, 32 * f.eps);
        double tol = rel * (std::fabs(ga[i]) + std::fabs(gb[i])) + 1e-4;
        // Note [Devices disagree within the terms' rounding]
        // Each device is allowed 64 roundings of the dtype on the magnitude of the terms that formed the element
        // when it is judged against the f64 chain rule (judge()), so two devices may differ by twice that: where
        // the terms cancel, the gradient's own size says nothing of how far two roundings of them may part (the
        // torch plug-in's bf16 matmul, which accumulates in bf16, gave +2^-6 against the CPU's -2^-6 for an element
        // whose terms cancel; a campaign on cpu,torch, seed 7). Each device is still held to the chain rule there.
        if (chain_ && std::isfinite(chain_->magnitude[li].values[i]))
          tol += 2 * 64 * f.eps * chain_->magnitude[li].values[i];
        if (std::isfinite(ga[i]) && std::isfinite(gb[i]) && std::fabs(ga[i] - gb[i]) > tol)
          return failed(root_, dev(*first) + " vs " + dev(di),
                        fmt::format("devices disagree on a gradient: d(sum %{})/d%{}, element {} is {} on {} and {} "
                                    "on {}",
                                    root_, leaf, i, format_float(ga[i]), dev(*first), format_float(gb[i]), dev(di)),
                        fmt::format("tolerance {}", format_float(tol)));
      }
    }
    return true;
  }

  // Whether device di may be judged by the f64 chain rule: it took the f64 evaluation's discrete values and
  // branches (Note [Branches across devices], on the device's values against f64's).
  bool chain_comparable(size_t di, const std::vector<RunResult>& runs) {
    if (!chain_ || !device_consistent_[di]) return false;
    if (!chain_comparable_[di]) chain_comparable_[di] = same_branches(p_, device_values(di, runs), base_, anc_);
    return *chain_comparable_[di];
  }

  // Note [The f64 chain rule at a device's own values]
  // A device computes its gradient at its own forward values, which are the f64 ones rounded at every node (each
  // within its op's bound, as the agreement oracle holds it). Usually that moves the exact gradient by far less
  // than the judges allow, and the f64 sources at the f64 values judge the device. Where the program is
  // ill-conditioned or a piecewise node sits near its kink, those roundings move the exact gradient itself:
  //  - clamp(exp(x), 0.623, 1) with a bf16 x of 2^-10: exp(x) is 1.000977 in f64, above max (gradient 0), and 1 in
  //    bf16, at max, where clamp passes the gradient (1); maximum(x + 27, 27) at x = -0.0059 in bf16 likewise ties;
  //  - pow(3.375, exp(conv2d(x, w))) in bf16: pow's exponent, rounded to bf16, moves the gradient by 2.9x.
  // (Three findings of one campaign, seed 20261207, 2.5 million programs; tests/harness/programs/own-values-*.)
  // So where the f64 sources at the f64 values would not pass a device's element, or cannot judge it (its branches
  // differ), the f64 chain rule also runs at that device's own forward values (the f64 values with every float
  // value on the path replaced by the device's, when the device took the f64 evaluation's discrete values; once
  // per device, and only then, so a program that passes pays nothing for it). Where the two chain rules part by
  // more than the judge's tolerance, the device is judged by the one at its own values: the exact gradient of the
  // computation the device made. Step 1 and the agreement oracle hold each rule and each forward value to its
  // bound at that device's inputs; this judges how the device composed them. Where they do not part, the f64
  // values judge as before, and a wrong gradient is reported against them.
  const std::optional<Chain>& own_chain(size_t di, const std::vector<RunResult>& runs) {
    if (!own_chain_[di]) {
      own_chain_[di].emplace();
      if (device_consistent_[di]) {
        Evaluation at = base_;
        const Evaluation& own = device_values(di, runs);
        for (size_t v = 0; v < at.size(); ++v)
          if (own[v] && at[v] && own[v]->values.size() == at[v]->values.size()) at[v] = own[v];
        *own_chain_[di] = chain_at(at);
      }
    }
    return *own_chain_[di];
  }

  // The tolerance of judge() for an element whose exact value is `want` and whose terms' magnitude is `m`, for a
  // leaf of dtype dt.
  static double tolerance(double want, double m, DType dt) {
    // f32: 1e-2 relative and 1e-3 absolute. A half gradient is formed by rounding to the dtype at every node of the
    // path (and its forward values are rounded too), so its confirmation allows 32 of its eps both ways (f16 3%,
    // bf16 25%): loose, but a sign, a factor or a lost term still shows, and step 1 holds each rule to its bound.
    const double rel = std::max(1e-2, 32 * reference::float_format(dt).eps);
    double tol = rel * std::fabs(want) + std::max(1e-3, rel) * (1 + std::fabs(want));
    // Also 64 roundings of the dtype on the magnitude of the terms that formed the element (reverse_mode_in_f64):
    // the device rounds each of them, and they may cancel. That is the device's error whatever it is compared
    // with: an f16 gradient of 0.1875 whose exact value, 0.1445 by both f64 sources, cancels from terms of 157 was
    // once judged by finite differences without it (fuzz_generate_check, tests/harness/programs/fd-cancellation-
    // f16-exp-matmul.program).
    if (std::isfinite(m)) tol += 64 * reference::float_format(dt).eps * m;
    return tol;
  }

  // Step 5: sampled elements of each device's gradient of one leaf against f64.
  bool compare_with_f64(size_t li, const std::vector<RunResult>& runs) {
    if (!base_[size_t(root_)]) {
      skip(SkipReason::no_reference);
      return true;
    }
    const int leaf = leaves_[li];
    const RefTensor x0 = ref_input(p_.values[size_t(leaf)].input());
    const int64_t n = x0.numel();
    const int64_t budget = std::min<int64_t>(n, 6);
    adjoint_checked_ = adjoint_overflows_ = false;
    // The f64 resolution of the values between the leaf and the root: a step added to 1e30 on the way is lost
    // there (sub(add(1e30, x), 1e30) is 0 in f64 for any small x), however small the root's own values are, and
    // finite differences would then see a slope of 0 (a campaign, seed 1). Twice the rounding of the largest
    // value the leaf reaches, one per side of the step, joins the root's resolution below. A value is as large as
    // the partial sums that formed it, which the reference's magnitude (the sum of |terms|) bounds: a conv2d
    // element of -1 summed from terms of +-2.5e37 loses any step to its weight there, and finite differences gave 0
    // where the gradient is -1 (fuzz_generate_check, tests/harness/programs/fd-absorbed-in-partial-sums-bf16-
    // conv2d.program).
    double path_resolution = 0;
    const std::vector<bool> reach = descendants_of(p_, leaf);
    auto resolve = [&](double x) {
      if (std::isfinite(x)) path_resolution = std::max(path_resolution, 2 * std::fabs(x) * 0x1p-52);
    };
    for (size_t v = 0; v < base_.size(); ++v)
      if (anc_[v] && reach[v] && size_t(leaf) != v && base_[v] && is_float(base_[v]->dtype)) {
        for (double x : base_[v]->values) resolve(x);
        for (double m : base_magnitude_[v]) resolve(m);
      }
    for (int64_t k = 0; k < budget; ++k) {
      const int64_t i = budget == n ? k : (k * (n - 1)) / std::max<int64_t>(1, budget - 1);
      std::optional<SkipReason> no_fd;
      double fd = 0, h = 0;
      if (on_kink_)
        no_fd = SkipReason::on_kink;
      else
        no_fd = finite_difference(leaf, x0, i, path_resolution, &fd, &h);
      for (size_t di = 0; di < runs.size(); ++di) {
        if (!grads_[di]) continue;
        const double g = (*grads_[di])[li].values[size_t(i)];
        const Chain* at_f64 = chain_ ? &*chain_ : nullptr;
        const DType dt = p_.values[size_t(leaf)].input().dtype;
        // What judges the element at the f64 values: finite differences, else the f64 chain rule where the device
        // took its branches; none (a skip) otherwise.
        std::optional<double> want;
        Source source = kFiniteDifferences;
        std::string how;
        if (!no_fd) {
          if (!device_consistent_[di]) continue;
          want = fd, how = fmt::format("h = {}", format_float(h));
        } else if (chain_comparable(di, runs)) {
          want = at_f64->grad[li].values[size_t(i)], source = kChainRule;
          how = fmt::format("finite differences: {}", skip_reason_name(*no_fd));
        }
        // Note [The f64 chain rule at a device's own values]: where that would not pass, and the device's roundings
        // moved the exact gradient past the tolerance, the chain rule at the device's own values judges instead.
        const double m = at_f64 ? at_f64->magnitude[li].values[size_t(i)] : 0.0;
        if ((!want || !(std::fabs(g - *want) <= tolerance(*want, m, dt))) && at_f64) {
          const std::optional<Chain>& own = own_chain(di, runs);
          const double c = at_f64->grad[li].values[size_t(i)];
          const double o = own ? own->grad[li].values[size_t(i)] : c;
          if (std::isfinite(c) && std::isfinite(o) && std::fabs(o - c) > tolerance(c, m, dt)) {
            if (!judge(li, i, di, g, o, fmt::format("the f64 chain rule at the f64 values gives {}", format_float(c)),
                       kOwnChainRule, &*own, true))
              return false;
            continue;
          }
        }
        if (!want)
          skip(*no_fd);
        else if (!judge(li, i, di, g, *want, how, source, at_f64,
                        source.chain_rule || (!std::isfinite(g) && chain_comparable(di, runs))))
          return false;
      }
    }
    return true;
  }

  // The loss at a point: the root's values, 0 where the seed is (the loss is their sum; differences are taken
  // element by element, so one huge element cannot swamp the change in the others). None when a seeded element is
  // not finite there, or no element is seeded (Note [Seeding only the finite elements]). (An empty root is a loss
  // of 0 whose gradient is exactly 0 everywhere: that is checked.)
  std::optional<std::vector<double>> loss_at(const Evaluation& over, Evaluation* all) const {
    const bool any_seeded = seed_.empty() || std::find(seed_.begin(), seed_.end(), 1.0f) != seed_.end();
    if (!any_seeded) return std::nullopt;
    Evaluation vals = evaluate_f64(p_, over, root_, &base_);
    if (!vals[size_t(root_)] || vals[size_t(root_)]->values.size() != seed_.size()) return std::nullopt;
    std::vector<double> out = vals[size_t(root_)]->values;
    for (size_t j = 0; j < out.size(); ++j) {
      if (seed_[j] == 0.0f)
        out[j] = 0;
      else if (!std::isfinite(out[j]))
        return std::nullopt;
    }
    if (all) *all = std::move(vals);
    return out;
  }

  // f64 central differences of the loss in element i of a leaf, or why there are none: the step is not
  // representable or the loss is not finite around x (no_finite_difference), the change is below f64's resolution
  // (below_resolution), or the program is not smooth within the step (not_smooth).
  std::optional<SkipReason> finite_difference(int leaf, const RefTensor& x0, int64_t i, double path_resolution,
                                              double* fd_out, double* h_out) {
    if (!l0_) l0_ = loss_at({}, nullptr);
    const std::optional<std::vector<double>>& l0 = *l0_;
    // Steps are taken on points the leaf's dtype can hold (the reference reads inputs as they are), and the slopes
    // divide by the step actually taken. Also accumulates the f64 resolution of the difference: a change smaller
    // than the rounding of a huge element (1e30 - h == 1e30) is invisible, and such points are not judged by it.
    const double xi = x0.values[size_t(i)];
    double resolution = 0;
    auto diff = [&](const std::vector<double>& a, const std::vector<double>& b) {
      double s = 0;
      for (size_t j = 0; j < a.size() && j < b.size(); ++j) {
        s += a[j] - b[j];
        resolution += (std::fabs(a[j]) + std::fabs(b[j])) * 0x1p-52;
      }
      return s;
    };
    auto loss_step = [&](double h, double* fwd, double* bwd, double* fd, Evaluation* vp, Evaluation* vm) -> bool {
      const double xp = reference::round_to(xi + h, x0.dtype), xm = reference::round_to(xi - h, x0.dtype);
      if (!(xp > xi) || !(xm < xi)) return false;
      Evaluation over(p_.values.size());
      over[size_t(leaf)] = x0;
      over[size_t(leaf)]->values[size_t(i)] = xp;
      auto lp = loss_at(over, vp);
      over[size_t(leaf)]->values[size_t(i)] = xm;
      auto lm = loss_at(over, vm);
      if (!lp || !lm) return false;
      *fwd = diff(*lp, *l0) / (xp - xi);
      *bwd = diff(*l0, *lm) / (xi - xm);
      *fd = diff(*lp, *lm) / (xp - xm);
      return true;
    };
    const double h = 1e-3 * std::max(1.0, std::fabs(xi));
    double fwd = 0, bwd = 0, fd = 0, fwd2 = 0, bwd2 = 0, fd2 = 0;
    Evaluation vp, vm, vp2, vm2;
    if (!l0 || !loss_step(h / 4, &fwd, &bwd, &fd, &vp, &vm) || !loss_step(h / 16, &fwd2, &bwd2, &fd2, &vp2, &vm2))
      return SkipReason::no_finite_difference;
    // Non-smooth point: a discrete value flips inside [x-h, x+h], or the one-sided slopes differ by a gap that
    // does not shrink with the step (a kink; on a smooth function the gap is about h * f'' and shrinks 4x).
    const double gap = std::fabs(fwd - bwd), gap2 = std::fabs(fwd2 - bwd2);
    const double scale = 1 + std::fabs(fd);
    if ((resolution + path_resolution) / (h / 16) > 1e-4 * scale || std::fabs(fd) > 1e38)
      return SkipReason::below_resolution;
    // A discrete value (a comparison, an argmax) must be the same at x - h, x and x + h: compared with the point
    // itself, not only the two sides with each other, since it can differ at x alone (where(x != y, y, x) at
    // x = y = 0 is x there and y on both sides, so the function is 0 around x while the chain rule at x says 1; a
    // campaign, seed 20261207). A piecewise node whose inputs are ordered differently at x - h and x + h has a kink
    // in between (Note [Branches across devices]'s test, on the two f64 evaluations): the central difference
    // averages two branches there. The gap test misses a kink close to x, inside both steps (maximum(x, 1.5) at
    // x = 1.49993 gave 9.88 against the exact 10; a campaign, seed 20261204).
    auto discrete_equal = [&](const Evaluation& a, const Evaluation& b) {
      for (size_t v = 0; v < a.size(); ++v)
        if (anc_[v] && a[v] && b[v] && !is_float(a[v]->dtype) && a[v]->values != b[v]->values) return false;
      return true;
    };
    const bool discrete_steady = discrete_equal(base_, vp) && discrete_equal(base_, vm) &&
                                 discrete_equal(base_, vp2) && discrete_equal(base_, vm2);
    if (!discrete_steady || !same_branches(p_, vp, vm, anc_) || !same_branches(p_, vp2, vm2, anc_) ||
        (gap > 1e-3 * scale && gap2 > 0.5 * gap) || std::fabs(fd - fd2) > 1e-3 * scale + 0.05 * std::fabs(fd))
      return SkipReason::not_smooth;
    *fd_out = fd2;
    *h_out = h / 16;
    return std::nullopt;
  }

  // Note [Adjoints past f32]
  // Reverse mode forms d(loss)/d(v) for every value v between a leaf and the root, in v's dtype. Where one of those
  // adjoints is past that dtype's largest value (f32's, or a half's), every implementation gets inf there and at
  // everything upstream, while the leaf's true gradient (what finite differences measure) may fit:
  // sum(exp(conv2d(l / r, w))) with exp's outputs near 2.4e38 gave an adjoint of 3.97e38 at l / r and a gradient
  // of -6.7e35 for r (harness/open-findings had it as a div bug). So before reporting a non-finite gradient against
  // f64, this measures those adjoints in f64, by central differences on each element of each float node on the
  // path (evaluate_f64 with the node's value replaced), and skips the comparison where one is past its dtype's
  // range. It runs only on that failure path, and stops at the first adjoint past the range.
  bool adjoint_past_f32(int leaf) const {
    const std::vector<bool> dep = descendants_of(p_, leaf);
    int64_t budget = 4096;  // elements, so two evaluations each
    for (size_t v = size_t(leaf) + 1; v < size_t(root_) && budget > 0; ++v) {
      if (!anc_[v] || !dep[v] || !base_[v] || !is_float(base_[v]->dtype)) continue;
      Evaluation over(p_.values.size());
      over[v] = base_[v];
      for (size_t j = 0; j < base_[v]->values.size() && budget-- > 0; ++j) {
        const double x = base_[v]->values[j], h = 1e-3 * std::max(1.0, std::fabs(x));
        over[v]->values[j] = x + h;
        const auto lp = loss_at(over, nullptr);
        over[v]->values[j] = x - h;
        const auto lm = loss_at(over, nullptr);
        over[v]->values[j] = x;
        if (!lp || !lm) continue;
        double s = 0;
        for (size_t k = 0; k < lp->size() && k < lm->size(); ++k) s += (*lp)[k] - (*lm)[k];
        if (std::fabs(s / (2 * h)) > largest(base_[v]->dtype)) return true;
      }
    }
    return false;
  }
  bool adjoint_checked_ = false, adjoint_overflows_ = false;  // adjoint_past_f32(leaf), once it is needed
  std::optional<std::optional<std::vector<double>>> l0_;      // loss_at the point itself, once it is needed

  // Judges one element of a device's gradient against an f64 value (`source`: finite differences or a chain rule);
  // false when that recorded a failure. `ch` is the f64 chain rule whose magnitudes bound the device's rounding
  // (none when step 3 gave none), and `ch_comparable` says whether the device took its branches.
  struct Source {
    std::string_view name, gives;
    bool chain_rule;
  };
  static constexpr Source kFiniteDifferences{"f64 central differences", "finite differences give", false};
  static constexpr Source kChainRule{"the f64 chain rule", "the f64 chain rule gives", true};
  static constexpr Source kOwnChainRule{"the f64 chain rule at the device's own values",
                                        "the f64 chain rule at its own values gives", true};
  // A non-finite gradient is the chain rule's own result where the f64 chain rule (same conventions, same
  // branches) gives the same non-finite value: a NaN from 0 * inf behind an infinite intermediate, an infinity
  // carried from an infinite input. That is checked and passes, whatever finite differences say (they measure the
  // function, which may be smooth there). Where f64 stays finite and f32 did not (an f32 overflow), or the other way
  // round, nothing can judge the element: skipped.
  bool judge(size_t li, int64_t i, size_t di, double g, double want, const std::string& how, Source source,
             const Chain* ch, bool ch_comparable) {
    const int leaf = leaves_[li];
    if (!std::isfinite(g) && ch && ch_comparable) {
      const double c = ch->grad[li].values[size_t(i)];
      if ((std::isnan(g) && std::isnan(c)) || (std::isinf(g) && g == c)) {
        counts_.checked++;
        return true;
      }
    }
    const DType dt = p_.values[size_t(leaf)].input().dtype;
    if (!std::isfinite(want) || std::fabs(want) > largest(dt)) {  // the f64 chain rule met a non-finite value
      skip(SkipReason::nonfinite_intermediate);
      return true;
    }
    if (!std::isfinite(g) && nonfinite_intermediate_) {
      skip(SkipReason::nonfinite_intermediate);
      return true;
    }
    if (!std::isfinite(g) && !adjoint_checked_) {
      adjoint_checked_ = true;
      adjoint_overflows_ = adjoint_past_f32(leaf);
    }
    if (!std::isfinite(g) && adjoint_overflows_) {  // Note [Adjoints past f32]
      skip(SkipReason::adjoint_past_f32);
      return true;
    }
    // Note [Partial sums past the range]
    // An element summed from terms whose magnitudes add up past the dtype's range may come back infinite from a
    // device whose kernel sums in that dtype (every f32 kernel does), though the whole sum fits: terms of
    // -1.08 * 2^127 and +1.1 * 2^124 in conv2d's weight gradient overflowed a partial sum where the f64 sum was
    // 1.66 * 2^127 (fuzz_generate_check). The per-node check already lets such an element be infinite
    // (within_bound's Note [Overflow in f32 intermediates]); so does this judge, for either f64 source, with the
    // magnitude reverse_mode_in_f64 recorded: such an element cannot be judged.
    if (!std::isfinite(g) && ch && !(ch->magnitude[li].values[size_t(i)] < reference::float_format(dt).overflow)) {
      skip(SkipReason::nonfinite_intermediate);
      return true;
    }
    // tolerance(): against a chain rule a magnitude that is not finite is a skip; finite differences then judge
    // with the relative tolerance alone.
    const double m = ch ? ch->magnitude[li].values[size_t(i)] : 0.0;
    if (source.chain_rule && !std::isfinite(m)) {  // a term past the range (or 0 * inf) formed it
      skip(SkipReason::nonfinite_intermediate);
      return true;
    }
    const double tol = tolerance(want, m, dt);
    counts_.checked++;
    if (std::isfinite(g) && std::fabs(g - want) <= tol) return true;
    return failed(root_, dev(di),
                  fmt::format("gradient disagrees with {}: d(sum %{})/d%{}[{}] is {} on {}, {} {}", source.name, root_,
                              leaf, i, format_float(g), dev(di), source.gives, format_float(want)),
                  fmt::format("{}, tolerance {}", how, format_float(tol)));
  }
};

}  // namespace

void check_gradients(const Program& p, const CheckOptions& o, const std::vector<Device>& devices,
                     std::vector<RunResult>& runs, OracleCounts& counts, const FailFn& fail) {
  GradientOracle(p, o, devices, counts, fail).run(runs);
}

}  // namespace crossfire::harness::internal
