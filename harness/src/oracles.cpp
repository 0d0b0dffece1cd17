// SPDX-License-Identifier: Apache-2.0
// The oracles (see oracles.hpp).
#include "crossfire/harness/oracles.hpp"

#include "oracle_internals.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace crossfire::harness {

std::string_view oracle_name(OracleKind k) {
  switch (k) {
    case OracleKind::contract: return "contract";
    case OracleKind::agreement: return "agreement";
    case OracleKind::gradients: return "gradients";
    case OracleKind::bad_input: return "bad_input";
  }
  return "?";
}

namespace {
// In SkipReason's order.
constexpr std::array<std::string_view, kNumSkipReasons> kSkipReasonNames = {
    "upstream_missing", "predicted_error",  "no_reference", "branches_differ",       "on_kink",
    "no_finite_difference", "below_resolution", "not_smooth", "nonfinite_intermediate", "adjoint_past_f32"};
}  // namespace

std::string_view skip_reason_name(SkipReason r) { return kSkipReasonNames[size_t(r)]; }

std::optional<SkipReason> parse_skip_reason(std::string_view name) {
  for (size_t i = 0; i < kNumSkipReasons; ++i)
    if (kSkipReasonNames[i] == name) return SkipReason(i);
  return std::nullopt;
}

std::optional<OracleKind> parse_oracle(std::string_view name) {
  for (OracleKind k : kAllOracles)
    if (oracle_name(k) == name) return k;
  if (name == "bad-input") return OracleKind::bad_input;
  return std::nullopt;
}

namespace {
constexpr std::pair<std::string_view, PlantedFault> kPlantedFaults[] = {
    {"none", PlantedFault::none},
    {"drop_last_offender", PlantedFault::drop_last_offender},
    {"swallow_mismatch", PlantedFault::swallow_mismatch},
    {"perturb_float_output", PlantedFault::perturb_float_output},
    {"flip_exact_output", PlantedFault::flip_exact_output},
    {"scale_gradient", PlantedFault::scale_gradient},
    {"skew_gradient", PlantedFault::skew_gradient},
    {"overflow_gradient", PlantedFault::overflow_gradient},
    {"scale_backward_rule", PlantedFault::scale_backward_rule},
    {"accept_bad_input", PlantedFault::accept_bad_input},
    {"misblame_dtype", PlantedFault::misblame_dtype},
    {"harness_out_of_memory", PlantedFault::harness_out_of_memory},
    {"crash_in_softmax", PlantedFault::crash_in_softmax},
};
}  // namespace

PlantedFault parse_planted_fault(std::string_view n) {
  for (const auto& [name, fault] : kPlantedFaults)
    if (name == n) return fault;
  return PlantedFault::none;
}

std::string_view planted_fault_name(PlantedFault f) {
  for (const auto& [name, fault] : kPlantedFaults)
    if (fault == f) return name;
  return "none";
}

std::string Failure::signature() const {
  // The kind of finding is the text of `what` up to the first colon (e.g. "wrong DeviceMismatch").
  std::string kind = what.substr(0, what.find(':'));
  return fmt::format("{}|{}|{}", oracle_name(oracle), op, kind);
}

namespace {

std::string mismatch_str(const PredictedMismatch& m) {
  std::string s = fmt::format("target {} (from `{}`), offenders [", m.target.str(), m.target_from);
  for (size_t i = 0; i < m.offenders.size(); ++i) {
    const DeviceOffender& o = m.offenders[i];
    s += fmt::format("{}`{}` (param {}, element {}) on {} ({})", i ? ", " : "", o.param, o.param_index, o.list_index,
                     o.device.str(), o.wrong_backend ? "wrong backend" : "wrong device index");
  }
  return s + "]";
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Whether every device the program names (inputs, overrides, device attributes) is `d`: mapping it onto `d` is
// then the identity (Note [One run for a program on one device]).
bool only_on(const Program& p, Device d) {
  for (const Value& v : p.values) {
    if (v.is_input()) {
      if (!(v.input().device == d)) return false;
      continue;
    }
    bool elsewhere = false;
    for_each_ref(v.node(), [&](const ValueRef& r) { elsewhere |= r.on && !(*r.on == d); });
    for (const NodeArg& a : v.node().args)
      if (const auto* x = std::get_if<Device>(&a); x && !(*x == d)) elsewhere = true;
    if (elsewhere) return false;
  }
  return true;
}

}  // namespace

// ---- the program's graph and values (oracle_internals.hpp) ------------------------------------------------

namespace internal {

// A node's reference call, each tensor argument given by `tensor_of(id)` (a copy, or a value lent: take_args).
template <class TensorOf>
reference::RefCall build_ref_call(const NodeDef& n, TensorOf&& tensor_of) {
  reference::RefCall c;
  c.op = n.op;
  c.args.reserve(n.args.size());
  for (const NodeArg& a : n.args) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, ValueRef>) {
            c.args.emplace_back(tensor_of(x.id));
          } else if constexpr (std::is_same_v<T, AbsentArg>) {
            c.args.emplace_back(reference::RefAbsent{});
          } else if constexpr (std::is_same_v<T, std::vector<ValueRef>>) {
            std::vector<reference::RefTensor> l;
            l.reserve(x.size());
            for (const ValueRef& r : x) l.push_back(tensor_of(r.id));
            c.args.emplace_back(std::move(l));
          } else if constexpr (std::is_same_v<T, ByteData>) {
            c.args.emplace_back(x.bytes);
          } else {
            c.args.emplace_back(x);
          }
        },
        a);
  }
  return c;
}

reference::RefCall ref_call_of(const NodeDef& n, const std::vector<std::optional<reference::RefTensor>>& vals,
                               bool* ok) {
  return build_ref_call(n, [&](int id) {
    if (!vals[size_t(id)]) *ok = false;
    return vals[size_t(id)] ? *vals[size_t(id)] : reference::RefTensor{};
  });
}

// Note [Where a piecewise op's derivative jumps]
// Whether a piecewise node's inputs (their f64 values) sit where its derivative jumps, so that finite differences
// through it say nothing about the chain rule's branch. Where that is, is the op's Kink in the op table: at 0 (relu,
// abs), at ties of lhs and rhs element by element after broadcasting (maximum, minimum: eq on the same inputs
// finds them), or at any repeated value of the input (max's ties, taken conservatively). It used to be "any 0 or
// repeated value among all of the node's inputs" for every such op, which also flagged maximum(x, w) for two equal
// elements of x that are never compared.
bool sits_on_kink(const NodeDef& n, const std::vector<std::optional<reference::RefTensor>>& vals) {
  constexpr OpId kEq = op_id("eq");
  std::vector<const reference::RefTensor*> ins;
  for (const NodeArg& arg : n.args)
    if (const auto* r = std::get_if<ValueRef>(&arg); r != nullptr)
      ins.push_back(vals[size_t(r->id)] ? &*vals[size_t(r->id)] : nullptr);
  if (ins.empty() || std::find(ins.begin(), ins.end(), nullptr) != ins.end()) return true;  // unknown: as if on one
  auto any_zero = [](const reference::RefTensor& t) {
    return std::any_of(t.values.begin(), t.values.end(), [](double x) { return x == 0; });
  };
  auto any_repeat = [](const reference::RefTensor& t) {
    std::vector<double> sorted = t.values;
    std::sort(sorted.begin(), sorted.end());
    return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  };
  switch (op_def(n.op).kink) {
    case Kink::none: return false;
    case Kink::at_zero: return any_zero(*ins[0]);
    case Kink::at_repeats: return any_repeat(*ins[0]);
    case Kink::at_attributes: {
      const reference::RefTensor& x = *ins[0];
      for (const NodeArg& arg : n.args)
        if (const double* a = std::get_if<double>(&arg); a != nullptr) {
          const double at = double(round_to_f32(*a));
          if (std::any_of(x.values.begin(), x.values.end(), [&](double v) { return v == at; })) return true;
        }
      return false;
    }
    case Kink::at_ties:
      if (ins.size() != 2) return true;
      try {
        const reference::RefResult ties = reference::evaluate(reference::RefCall{kEq, {*ins[0], *ins[1]}});
        return std::any_of(ties.value.values.begin(), ties.value.values.end(), [](double x) { return x != 0; });
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception&) {
        return true;
      }
  }
  return true;
}

std::vector<bool> ancestors_of(const Program& p, int root) {
  std::vector<bool> need(p.values.size(), false);
  if (root < 0) return need;
  need[size_t(root)] = true;
  for (int v = root; v >= 0; --v) {
    if (!need[size_t(v)] || p.values[size_t(v)].is_input()) continue;
    for (const NodeArg& a : p.values[size_t(v)].node().args) {
      if (auto* r = std::get_if<ValueRef>(&a)) need[size_t(r->id)] = true;
      if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
        for (const ValueRef& r : *l) need[size_t(r.id)] = true;
    }
  }
  return need;
}

bool behind_unsupported(const Program& p, const RunResult& run, int v) {
  const std::vector<bool> anc = ancestors_of(p, v);
  for (size_t u = 0; u < anc.size(); ++u)
    if (anc[u] && run.nodes[u].status == NodeStatus::unsupported) return true;
  return false;
}

// The values that depend on `from` (itself included).
std::vector<bool> descendants_of(const Program& p, int from) {
  std::vector<bool> dep(p.values.size(), false);
  dep[size_t(from)] = true;
  for (size_t v = size_t(from) + 1; v < p.values.size(); ++v) {
    if (p.values[v].is_input()) continue;
    for (const NodeArg& a : p.values[v].node().args) {
      if (auto* r = std::get_if<ValueRef>(&a)) dep[v] = dep[v] || dep[size_t(r->id)];
      if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
        for (const ValueRef& r : *l) dep[v] = dep[v] || dep[size_t(r.id)];
    }
  }
  return dep;
}

}  // namespace internal

using namespace internal;

// ---- contract --------------------------------------------------------------------------------------------------

std::string compare_contract(const NodePrediction& pred, NodeStatus status, const ObservedError* obs) {
  if (pred.no_tensor_input) {
    if (!obs || obs->kind != ErrorKind::no_tensor_input)
      return fmt::format("expected NoTensorInput, got {}", obs ? std::string(error_kind_name(obs->kind)) : "success");
    return "";
  }
  if (pred.mismatch) {
    if (!obs) return fmt::format("missed DeviceMismatch: the call succeeded; expected {}", mismatch_str(*pred.mismatch));
    if (obs->kind != ErrorKind::device_mismatch || !obs->mismatch)
      return fmt::format("missed DeviceMismatch: got {} ({}); expected {}", error_kind_name(obs->kind), obs->message,
                         mismatch_str(*pred.mismatch));
    if (!(*obs->mismatch == *pred.mismatch))
      return fmt::format("wrong DeviceMismatch: got {}; expected {}", mismatch_str(*obs->mismatch),
                         mismatch_str(*pred.mismatch));
    return "";
  }
  if (obs && (status == NodeStatus::failed)) {
    if (obs->kind == ErrorKind::device_mismatch)
      return fmt::format("false DeviceMismatch: every argument is on {}, got: {}", pred.device.str(), obs->message);
    // The error's kind comes before the first colon, so it is part of the failure's signature: the reducer must
    // not trade a BackendFailure for a ShapeError it made itself (Failure::signature()).
    return fmt::format("valid call rejected with {}: {}", error_kind_name(obs->kind), obs->message);
  }
  return "";
}

// ---- agreement -------------------------------------------------------------------------------------------------

std::optional<ElementMismatch> compare_with_reference(const OpDef& op, const reference::RefTensor& got,
                                                      const reference::RefResult& exact, bool accumulates_in_dtype) {
  // The bound itself (and its NaN, infinity and signed-zero rules) is the reference's: one definition of
  // contract section 6 for every test and oracle.
  std::optional<reference::Mismatch> m = reference::first_mismatch(op, exact, got, accumulates_in_dtype);
  if (!m) return std::nullopt;
  return ElementMismatch{m->index, m->got, m->exact, m->allowed, m->what};
}

// ---- f64 evaluation --------------------------------------------------------------------------------------------

namespace {

bool all_present(const NodeDef& n, const std::vector<std::optional<reference::RefTensor>>& vals) {
  bool present = true;
  for_each_ref(n, [&](const ValueRef& r) { present = present && vals[size_t(r.id)].has_value(); });
  return present;
}

// How often node `n` reads value `id` (a value read twice, add(%1, %1), is copied into the call, not moved).
int reads_of(const NodeDef& n, int id) {
  int k = 0;
  for_each_ref(n, [&](const ValueRef& r) { k += r.id == id; });
  return k;
}

// Note [Lending values to a reference call]
// The f64 evaluator runs for every node of every finite difference, and building each call by copying its
// arguments' values was a heap block per argument (a stack trace each, in a sanitizer build). So the values a node
// reads once are moved into its call and moved back after it (give_back, which must run on every path out,
// exceptions included); a value read twice is copied, since it cannot be in two places. Every value is present
// (all_present) when a call is built.
reference::RefCall take_args(const NodeDef& n, std::vector<std::optional<reference::RefTensor>>& vals) {
  return internal::build_ref_call(n, [&](int id) {
    reference::RefTensor& t = *vals[size_t(id)];
    return reads_of(n, id) == 1 ? std::move(t) : t;
  });
}

void give_back(const NodeDef& n, reference::RefCall& c, std::vector<std::optional<reference::RefTensor>>& vals) {
  for (size_t i = 0; i < n.args.size() && i < c.args.size(); ++i) {
    if (const auto* r = std::get_if<ValueRef>(&n.args[i]); r && reads_of(n, r->id) == 1)
      *vals[size_t(r->id)] = std::move(std::get<reference::RefTensor>(c.args[i]));
    if (const auto* l = std::get_if<std::vector<ValueRef>>(&n.args[i])) {
      auto& lent = std::get<std::vector<reference::RefTensor>>(c.args[i]);
      for (size_t j = 0; j < l->size() && j < lent.size(); ++j)
        if (reads_of(n, (*l)[j].id) == 1) *vals[size_t((*l)[j].id)] = std::move(lent[j]);
    }
  }
}

}  // namespace

std::vector<std::optional<reference::RefTensor>> evaluate_f64(
    const Program& p, const std::vector<std::optional<reference::RefTensor>>& value_override, int upto,
    const std::vector<std::optional<reference::RefTensor>>* unchanged, std::vector<std::vector<double>>* magnitudes,
    const std::vector<bool>* held_in_dtype) {
  std::vector<std::optional<reference::RefTensor>> vals(p.values.size());
  if (magnitudes) magnitudes->assign(p.values.size(), {});
  std::vector<bool> need = upto >= 0 ? ancestors_of(p, upto) : std::vector<bool>(p.values.size(), true);
  // Whether a value is overridden or depends on one (values come after their arguments in a program).
  std::vector<bool> moved(p.values.size(), false);
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (!need[v]) continue;
    check_deadline();
    if (v < value_override.size() && value_override[v]) {
      vals[v] = *value_override[v];
      moved[v] = true;
      continue;
    }
    if (unchanged != nullptr && !p.values[v].is_input())
      for_each_ref(p.values[v].node(), [&](const ValueRef& r) { moved[v] = moved[v] || moved[size_t(r.id)]; });
    if (unchanged != nullptr && !moved[v] && v < unchanged->size()) {
      vals[v] = (*unchanged)[v];
      continue;
    }
    if (p.values[v].is_input()) {
      vals[v] = ref_input(p.values[v].input());
      continue;
    }
    const NodeDef& n = p.values[v].node();
    if (!all_present(n, vals)) continue;
    // The node's arguments are lent to its call and given back after it (take_args), not copied into it.
    reference::RefCall c = take_args(n, vals);
    std::optional<reference::RefTensor> out;
    try {
      reference::RefResult r = reference::evaluate(c);
      out = std::move(r.value);
      if (magnitudes) (*magnitudes)[v] = std::move(r.magnitude);
    } catch (const std::bad_alloc&) {
      give_back(n, c, vals);
      throw;  // the harness's own memory (Note [Time budgets] in model.hpp has the limits that bound it)
    } catch (const std::exception&) {
    }
    give_back(n, c, vals);
    if (out && held_in_dtype != nullptr && v < held_in_dtype->size() && (*held_in_dtype)[v] && is_float(out->dtype))
      for (double& x : out->values) x = reference::round_to(x, out->dtype);
    vals[v] = std::move(out);
  }
  return vals;
}

// ---- the checks ------------------------------------------------------------------------------------------------

namespace {

class Checker {
 public:
  Checker(const Program& p, const CheckOptions& o, ProgramReport& r) : p_(p), o_(o), r_(r) {
    pred_ = predict(p);
    devices_ = o.devices.empty() ? available_devices() : o.devices;
  }

  void run() {
    std::optional<OracleKind> runs_for;  // the first enabled oracle of those that share the runs
    for (OracleKind k : {OracleKind::agreement, OracleKind::gradients, OracleKind::bad_input})
      if (!runs_for && o_.enabled[size_t(k)]) runs_for = k;
    // Note [One run for a program on one device]
    // The contract oracle runs the program as written; the others run it mapped onto each checked device. When
    // every device the program names (its inputs', its overrides', its device attributes') is one checked device,
    // mapping changes nothing: the two runs are the same calls on the same values, and the second would repeat the
    // first. The contract run then captures what the others read, and stands in for that device's run. (It also
    // checks side effects around calls predicted to raise, which a mapped run skips; nothing reads that there.)
    std::optional<RunResult> as_written;
    std::optional<size_t> as_written_for;  // the index in devices_ of the run it stands in for
    if (runs_for)
      for (size_t i = 0; i < devices_.size() && !as_written_for; ++i)
        if (only_on(p_, devices_[i])) as_written_for = i;
    if (o_.enabled[size_t(OracleKind::contract)])
      timed(OracleKind::contract, [&] { contract(as_written_for ? &as_written : nullptr); });
    std::vector<RunResult> runs;
    if (o_.fault == PlantedFault::harness_out_of_memory && runs_for) throw std::bad_alloc();
    if (o_.fault == PlantedFault::crash_in_softmax && runs_for)
      for (const Value& v : p_.values)
        if (!v.is_input() && op_def(v.node().op).name == "softmax") std::abort();
    if (runs_for)
      timed(*runs_for, [&] {
        for (size_t i = 0; i < devices_.size(); ++i)
          runs.push_back(as_written && as_written_for == i ? std::move(*as_written)
                                                           : run_on_device(p_, devices_[i], &pred_));
      });
    if (o_.enabled[size_t(OracleKind::agreement)]) timed(OracleKind::agreement, [&] { agreement(runs); });
    if (o_.enabled[size_t(OracleKind::gradients)]) timed(OracleKind::gradients, [&] { gradients(runs); });
    if (o_.enabled[size_t(OracleKind::bad_input)] && !runs.empty())
      timed(OracleKind::bad_input, [&] { bad_input(runs[0], devices_[0]); });
  }

 private:
  OracleCounts& counts(OracleKind k) { return r_.counts[size_t(k)]; }
  template <class F>
  void timed(OracleKind k, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    counts(k).seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // `device`: where it failed ("cpu:0"; "cpu:0 vs vulkan:0" when two devices disagree).
  void fail(OracleKind k, int node, std::string device, std::string what, std::string detail) {
    counts(k).failed++;
    Failure f{k, node, node >= 0 && !p_.values[size_t(node)].is_input()
                           ? std::string(op_def(p_.values[size_t(node)].node().op).name) : "", std::move(device),
              std::move(what), std::move(detail)};
    r_.failures.push_back(std::move(f));
  }
  std::string op_of(size_t v) const {
    return p_.values[v].is_input() ? "input" : std::string(op_def(p_.values[v].node().op).name);
  }
  // A line of replay's table. Views, copied only when the table is kept: a campaign and the fuzz targets check
  // every node without one, and a note such as "agrees with the f64 reference" would otherwise be a heap string
  // per node and device.
  void row(int id, Device device, std::string_view status, std::string_view note) {
    if (o_.keep_node_table)
      r_.table.push_back({id, op_of(size_t(id)), device.str(), std::string(status), std::string(note)});
  }

  // Contract: the program as written, devices and overrides as they are. With `keep`, the run captures values
  // and is left there for the other oracles (Note [One run for a program on one device]).
  void contract(std::optional<RunResult>* keep) {
    RunOptions ro;
    ro.capture = keep != nullptr;
    ro.prediction = &pred_;
    RunResult res = run_program(p_, ro);
    for (size_t v = 0; v < p_.values.size(); ++v) {
      if (p_.values[v].is_input()) continue;
      const NodeRecord& rec = res.nodes[v];
      if (rec.status == NodeStatus::missing) {
        counts(OracleKind::contract).skip(SkipReason::upstream_missing);
        continue;
      }
      // An unsupported kernel: the validation before it still had to pass, so a predicted error is a miss.
      if (rec.status == NodeStatus::unsupported && !pred_[v].mismatch && !pred_[v].no_tensor_input) {
        counts(OracleKind::contract).skipped_unsupported++;
        row(int(v), pred_[v].device, "unsupported", rec.error->message);
        continue;
      }
      // What the oracle judges: the observation, or (a planted fault) a changed copy of it.
      NodeStatus status = rec.status;
      const ObservedError* error = rec.error ? &*rec.error : nullptr;
      std::optional<ObservedError> changed;
      if (o_.fault == PlantedFault::drop_last_offender && error && error->mismatch &&
          !error->mismatch->offenders.empty()) {
        changed = *error;
        changed->mismatch->offenders.pop_back();
        error = &*changed;
      }
      if (o_.fault == PlantedFault::swallow_mismatch && error && error->kind == ErrorKind::device_mismatch) {
        error = nullptr;
        status = NodeStatus::ok;
      }
      counts(OracleKind::contract).checked++;
      std::string diff = compare_contract(pred_[v], status, error);
      if (diff.empty() && error && !rec.side_effects_ok)
        diff = fmt::format("side effect after {}: {}", error_kind_name(error->kind), rec.side_effect_detail);
      if (!diff.empty()) {
        fail(OracleKind::contract, int(v), pred_[v].device.str(), diff, fmt::format("node %{} ({}) with the program's own devices", v, op_of(v)));
        row(int(v), pred_[v].device, "FAIL", diff);
      } else {
        row(int(v), pred_[v].device, pred_[v].mismatch ? "expected DeviceMismatch" : "ok", "contract");
      }
    }
    if (keep) *keep = std::move(res);
  }

  // Agreement: every node on every device against the reference on its own inputs.
  void agreement(const std::vector<RunResult>& runs) {
    bool reported = false;
    r_.coverage.reserve(p_.values.size() * runs.size());  // at most one entry per node and device: one block
    for (size_t v = 0; v < p_.values.size(); ++v) {
      if (p_.values[v].is_input()) continue;
      const OpDef& op = op_def(p_.values[v].node().op);
      for (size_t di = 0; di < runs.size(); ++di) {
        const NodeRecord& rec = runs[di].nodes[v];
        const Device dev = devices_[di];
        std::array<uint64_t, 2>& cov = r_.coverage_of(p_.values[v].node().op, dev);
        if (rec.status == NodeStatus::unsupported) {
          counts(OracleKind::agreement).skipped_unsupported++;
          cov[1]++;
          row(int(v), dev, "unsupported", rec.error ? std::string_view(rec.error->message) : "");
          continue;
        }
        if (rec.status == NodeStatus::missing) {
          if (behind_unsupported(p_, runs[di], int(v)))  // the backend lacks a kernel or dtype upstream
            counts(OracleKind::agreement).skipped_unsupported++;
          else
            counts(OracleKind::agreement).skip(SkipReason::upstream_missing);
          continue;
        }
        if (rec.status == NodeStatus::failed && pred_[v].no_tensor_input &&
            rec.error->kind == ErrorKind::no_tensor_input) {
          counts(OracleKind::agreement).skip(SkipReason::predicted_error);
          continue;
        }
        if (rec.status == NodeStatus::failed) {
          // On one device every call of a generated program is valid: an error is a finding.
          // (The error's kind is in the signature, as in the contract oracle's "valid call rejected with".)
          std::string what = fmt::format("valid call raised {} on {}: {}", error_kind_name(rec.error->kind), dev.str(),
                                         rec.error->message);
          counts(OracleKind::agreement).checked++;
          if (!reported)
            fail(OracleKind::agreement, int(v), dev.str(), what, fmt::format("node %{} ({}) on {}", v, op.name, dev.str()));
          reported = true;
          row(int(v), dev, "FAIL", what);
          continue;
        }
        cov[0]++;
        if (!rec.output || !rec.ref_call) continue;
        // The device's output as read, or (a planted fault) a copy of it changed.
        std::optional<reference::RefTensor> changed;
        if (o_.fault == PlantedFault::perturb_float_output && rec.output->dtype == DType::f32 && !op.bound.bitwise) {
          changed = *rec.output;
          for (double& x : changed->values)
            if (std::isfinite(x)) {
              x = x == 0 ? 1e-3 : x * 1.01;
              break;
            }
        }
        if (o_.fault == PlantedFault::flip_exact_output && (op.bound.bitwise || rec.output->dtype != DType::f32) &&
            !rec.output->values.empty())
        {
          changed = *rec.output;
          changed->values[0] = changed->dtype == DType::boolean ? 1 - changed->values[0] : changed->values[0] + 1;
          if (changed->dtype == DType::i64)  // what i64 compares
            changed->ints[0] = int64_t(uint64_t(changed->ints[0]) + 1);
        }
        const reference::RefTensor& got = changed ? *changed : *rec.output;
        std::optional<reference::RefResult> exact;
        try {
          exact = reference::evaluate(*rec.ref_call);
        } catch (const std::bad_alloc&) {
          throw;
        } catch (const std::exception& e) {
          counts(OracleKind::agreement).skip(SkipReason::no_reference);
          row(int(v), dev, "ok (no reference)", e.what());
          continue;
        }
        counts(OracleKind::agreement).checked++;
        // The backend is held to the accumulation precision it declares for the op (Backend::accumulates_in_dtype).
        const Backend* b = find_backend(devices_[di]);
        const bool own = b != nullptr && b->accumulates_in_dtype(p_.values[v].node().op, got.dtype);
        if (auto m = compare_with_reference(op, got, *exact, own)) {
          std::string what =
              m->index < 0 ? fmt::format("disagrees with the f64 reference: {}", m->why)
                           : fmt::format("disagrees with the f64 reference: element {} is {} on {}, exact {}, allowed "
                                         "error {} ({})",
                                         m->index, format_float(m->got), dev.str(), format_float(m->exact),
                                         format_float(m->allowed), m->why);
          if (!reported)
            fail(OracleKind::agreement, int(v), dev.str(), what,
                 fmt::format("first disagreeing node %{} ({}) on {}; bound k_const={} k_per_term={} bitwise={}", v,
                             op.name, dev.str(), op.bound.k_const, op.bound.k_per_term, op.bound.bitwise));
          reported = true;
          row(int(v), dev, "FAIL", what);
        } else {
          row(int(v), dev, "ok", "agrees with the f64 reference");
        }
      }
      // Exact ops with bitwise equal inputs must give bitwise equal outputs on every device (no reference needed).
      const bool exact_op = op.bound.bitwise;
      for (size_t a = 0; a < runs.size() && exact_op; ++a)
        for (size_t b = a + 1; b < runs.size(); ++b) {
          const NodeRecord &ra = runs[a].nodes[v], &rb = runs[b].nodes[v];
          if (ra.status != NodeStatus::ok || rb.status != NodeStatus::ok || !ra.output || !rb.output || !ra.ref_call ||
              !rb.ref_call || !same_inputs(*ra.ref_call, *rb.ref_call))
            continue;
          reference::RefTensor oa = *ra.output;
          if (o_.fault == PlantedFault::flip_exact_output && !oa.values.empty())
            oa.values[0] = oa.dtype == DType::boolean ? 1 - oa.values[0] : oa.values[0] + 1;
          counts(OracleKind::agreement).checked++;
          if (!(oa.shape == rb.output->shape) || oa.values.size() != rb.output->values.size()) {
            if (!reported)
              fail(OracleKind::agreement, int(v), devices_[a].str() + " vs " + devices_[b].str(),
                   "devices disagree: shapes differ",
                   fmt::format("%{} ({}): {} {} vs {} {}", v, op.name, devices_[a].str(), oa.shape.str(),
                               devices_[b].str(), rb.output->shape.str()));
            reported = true;
            continue;
          }
          for (size_t i = 0; i < oa.values.size(); ++i) {
            double x = oa.values[i], y = rb.output->values[i];
            // Data movement must copy bits (a zero's sign, a NaN's payload); other exact ops compare values.
            if (same_bits(x, y) || (!moves_data(op.family) && std::isnan(x) && std::isnan(y))) continue;
            if (!reported)
              fail(OracleKind::agreement, int(v), devices_[a].str() + " vs " + devices_[b].str(),
                   fmt::format("devices disagree: element {} is {} on {} and {} on {} (exact op, same inputs)", i,
                               format_float(x), devices_[a].str(), format_float(y), devices_[b].str()),
                   fmt::format("first disagreeing node %{} ({}); bound: bitwise", v, op.name));
            reported = true;
            break;
          }
        }
    }
  }
  static bool same_tensor(const reference::RefTensor& a, const reference::RefTensor& b) {
    if (a.dtype != b.dtype || !(a.shape == b.shape) || a.values.size() != b.values.size()) return false;
    for (size_t i = 0; i < a.values.size(); ++i)
      if (!same_bits(a.values[i], b.values[i])) return false;
    return true;
  }
  static bool same_inputs(const reference::RefCall& a, const reference::RefCall& b) {
    if (a.args.size() != b.args.size()) return false;
    for (size_t i = 0; i < a.args.size(); ++i) {
      if (auto* x = std::get_if<reference::RefTensor>(&a.args[i])) {
        auto* y = std::get_if<reference::RefTensor>(&b.args[i]);
        if (!y || !same_tensor(*x, *y)) return false;
      } else if (auto* xl = std::get_if<std::vector<reference::RefTensor>>(&a.args[i])) {
        auto* yl = std::get_if<std::vector<reference::RefTensor>>(&b.args[i]);
        if (!yl || xl->size() != yl->size()) return false;
        for (size_t j = 0; j < xl->size(); ++j)
          if (!same_tensor((*xl)[j], (*yl)[j])) return false;
      }
    }
    return true;
  }

  // Gradients: gradients.cpp.
  void gradients(std::vector<RunResult>& runs) {
    check_gradients(p_, o_, devices_, runs, counts(OracleKind::gradients),
                    [&](int node, std::string device, std::string what, std::string detail) {
                      fail(OracleKind::gradients, node, std::move(device), std::move(what), std::move(detail));
                    });
  }

  // Bad input: mutate valid calls from the program into invalid ones and predict the typed error.
  void bad_input(const RunResult& run, Device d) {
    int done = 0;
    std::optional<Device> other;
    for (const Device& x : available_devices())
      if (!(x == d)) {
        other = x;
        break;
      }
    // Scratch reused from node to node and attempt to attempt: assigning into a vector keeps its storage, so after
    // the first node these allocate nothing (the oracle runs on every program, and each allocation costs a
    // sanitizer build a stack trace: docs/fuzzing.md, Speed).
    std::vector<Tensor> singles, s2;
    std::vector<std::vector<Tensor>> lists, l2;
    std::vector<std::vector<int64_t>> ints;
    WorldCounters before, after;
    for (size_t v = 0; v < p_.values.size() && done < o_.max_bad_inputs; ++v) {
      if (p_.values[v].is_input()) continue;
      const NodeDef& n = p_.values[v].node();
      const OpDef& op = op_def(n.op);
      // The node's arguments, all on d (a stand-in is as good as the real value for validation).
      singles.assign(size_t(op.num_params), Tensor());
      lists.resize(size_t(op.num_params));
      for (std::vector<Tensor>& l : lists) l.clear();
      bool ok = true;
      for (int i = 0; i < op.num_params && ok; ++i) {
        const NodeArg& a = n.args[size_t(i)];
        if (auto* r = std::get_if<ValueRef>(&a)) {
          singles[size_t(i)] = run.tensors[size_t(r->id)];
          ok = singles[size_t(i)].defined();
        }
        if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
          for (const ValueRef& r : *l) {
            lists[size_t(i)].push_back(run.tensors[size_t(r.id)]);
            ok = ok && lists[size_t(i)].back().defined();
          }
      }
      if (!ok) continue;
      // Mutations, first applicable wins; the value id varies which kind each node tries first.
      for (int attempt = 0; attempt < kBadInputKinds && done < o_.max_bad_inputs; ++attempt) {
        int kind = int((v + size_t(attempt)) % kBadInputKinds);
        s2 = singles;
        l2 = lists;
        ints.resize(size_t(op.num_params));
        for (std::vector<int64_t>& x : ints) x.clear();
        std::optional<int64_t> int_override;
        int int_param = -1;
        bool drop_last = false;
        ErrorKind want;
        std::string want_param;
        bool check_param = true;
        std::string what;
        auto tensor_of = [&](DType dt, const Shape& s, Device dev) {
          std::vector<uint8_t> bytes(size_t(s.numel()) * dtype_size(dt), 0);
          return from_bytes(bytes, s.dims(), dt, dev);
        };
        if (kind == 0) {  // a dtype the parameter does not accept
          int p = -1;
          DType bad = DType::f32;
          for (int i = 0; i < op.num_params && p < 0; ++i) {
            const ParamDef& pd = op.params[size_t(i)];
            if (!is_tensor_role(pd.role) || (pd.role != ParamRole::tensor_list && !s2[size_t(i)].defined())) continue;
            for (DType dt : kAllDTypes)
              if (!pd.dtypes.contains(dt) && backend_for(d).dtypes().contains(dt)) {
                bad = dt, p = i;
                break;
              }
          }
          if (p < 0) continue;
          const ParamDef& pd = op.params[size_t(p)];
          if (pd.role == ParamRole::tensor_list) {
            if (l2[size_t(p)].empty()) continue;
            l2[size_t(p)][0] = tensor_of(bad, l2[size_t(p)][0].shape(), d);
            want_param = arg_label(op, p, 0);
          } else {
            s2[size_t(p)] = tensor_of(bad, s2[size_t(p)].shape(), d);
            want_param = std::string(pd.name);
          }
          want = ErrorKind::dtype_mismatch;
          what = fmt::format("`{}` given {}", want_param, dtype_name(bad));
        } else if (kind == 1) {  // an axis out of range
          int p = op.param_index("axis");
          if (p < 0) continue;
          int rank = -1;
          for (int i = 0; i < op.num_params && rank < 0; ++i) {
            if (s2[size_t(i)].defined()) rank = s2[size_t(i)].rank();
            if (!l2[size_t(i)].empty()) rank = l2[size_t(i)][0].rank();
          }
          if (rank < 0) continue;
          int_param = p;
          int_override = rank + 2;
          want = ErrorKind::invalid_argument;
          want_param = "axis";
          what = fmt::format("axis {} for rank {}", rank + 2, rank);
        } else if (kind == 2) {  // an empty list and no other tensor
          int p = -1, others = 0;
          for (int i = 0; i < op.num_params; ++i) {
            if (op.params[size_t(i)].role == ParamRole::tensor_list) p = i;
            else if (s2[size_t(i)].defined()) ++others;
          }
          if (p < 0 || others) continue;
          l2[size_t(p)].clear();
          want = ErrorKind::no_tensor_input;
          check_param = false;
          what = "an empty tensor list";
        } else if (kind == 3) {  // a tracked input where the parameter forbids it
          int p = -1;
          for (int i = 0; i < op.num_params; ++i)
            if (op.params[size_t(i)].grad == GradPolicy::forbidden && op.params[size_t(i)].dtypes.contains(DType::f32) &&
                s2[size_t(i)].defined())
              p = i;
          if (p < 0) continue;
          Tensor t = tensor_of(DType::f32, s2[size_t(p)].shape(), d);
          t.set_requires_grad(true);
          s2[size_t(p)] = t;
          want = ErrorKind::autodiff;
          check_param = false;
          what = fmt::format("a tracked `{}`", op.params[size_t(p)].name);
        } else if (kind == 4) {  // a negative or huge size for a creation op
          if (op.family != OpFamily::creation) continue;
          int p = op.param_index("shape");
          if (p < 0) continue;
          ints[size_t(p)] = (v % 2) ? std::vector<int64_t>{2, -3} : std::vector<int64_t>{1 << 20, 1 << 20, 1 << 20};
          want = ErrorKind::shape;
          want_param = "shape";
          what = fmt::format("shape [{}]", fmt::join(ints[size_t(p)], ", "));
        } else if (kind == 6) {  // one member of a dtype group or a list given another dtype its parameter accepts
          const std::optional<GroupMutation> m = group_mutation(op, s2, l2, d, v);
          if (!m) continue;
          Tensor& t = m->list_index < 0 ? s2[size_t(m->param)] : l2[size_t(m->param)][size_t(m->list_index)];
          t = tensor_of(m->dtype, t.shape(), d);
          want = ErrorKind::dtype_mismatch;
          want_param = first_dtype_offender(op, s2, l2);
          what = fmt::format("`{}` given {}", arg_label(op, m->param, m->list_index), dtype_name(m->dtype));
          if (want_param.empty()) continue;  // (cannot happen: the mutation made two members differ)
        } else {  // a wrong device and a wrong dtype at once: the device error takes precedence
          if (!other) continue;
          int p = -1, count = 0;
          DType bad = DType::f32;
          for (int i = 0; i < op.num_params; ++i) {
            if (!s2[size_t(i)].defined()) continue;
            if (count++ == 0) continue;  // not the target
            for (DType dt : kAllDTypes)
              if (!op.params[size_t(i)].dtypes.contains(dt) && backend_for(d).dtypes().contains(dt) && p < 0)
                bad = dt, p = i;
          }
          if (p < 0) {
            drop_last = true;  // no such argument: a wrong argument count instead
            want = ErrorKind::invalid_argument;
            check_param = false;
            what = "one argument too few";
          } else {
            s2[size_t(p)] = tensor_of(bad, s2[size_t(p)].shape(), *other);
            want = ErrorKind::device_mismatch;
            check_param = false;
            what = fmt::format("`{}` on {} and of dtype {}", op.params[size_t(p)].name, other->str(), dtype_name(bad));
          }
        }
        ArgPack pack = build(n, s2, l2, ints, int_param, int_override, d);
        if (drop_last) pack.count--;
        read_world_counters(before);
        std::optional<ObservedError> obs = call_observing(n.op, pack);
        read_world_counters(after);
        if (obs && obs->kind == ErrorKind::unsupported && want != ErrorKind::unsupported) {
          // Unsupported comes after validation: the invalid call got past it.
        }
        if (o_.fault == PlantedFault::accept_bad_input) obs.reset();
        if (o_.fault == PlantedFault::misblame_dtype && obs && obs->kind == ErrorKind::dtype_mismatch)
          obs->param = first_tensor_label(op, s2, l2);
        ++done;
        counts(OracleKind::bad_input).checked++;
        std::string diff;
        if (!obs) diff = fmt::format("invalid call accepted: {} should raise {}", what, error_kind_name(want));
        else if (obs->kind != want)
          diff = fmt::format("wrong error for an invalid call: {} should raise {}, got {}: {}", what,
                             error_kind_name(want), error_kind_name(obs->kind), obs->message);
        else if (check_param && obs->param != want_param)
          diff = fmt::format("wrong blame for an invalid call: {} should name `{}`, got `{}`", what, want_param,
                             obs->param);
        else if (!(before == after))
          diff = fmt::format("side effect after {} for {}", error_kind_name(want), what);
        if (!diff.empty()) {
          fail(OracleKind::bad_input, int(v), d.str(), diff, fmt::format("node %{} ({}) on {}", v, op.name, d.str()));
          return;
        }
        break;
      }
    }
  }

  static constexpr int kBadInputKinds = 7;

  // The call, and the error it raised. A function of its own so that the frame that catches is small: on every
  // raise the C++ runtime reads the catching frame's table of call sites entry by entry, and bad_input's is long
  // (Note [Nothing alive at a throw] in dispatch.cpp).
  [[gnu::noinline]] static std::optional<ObservedError> call_observing(OpId op, const ArgPack& pack) {
    try {
      InFlight in_flight(op, pack);
      Tensor t = call(op, pack);
    } catch (const std::exception& e) {
      return observe(e);
    }
    return std::nullopt;
  }

  // The call's first present tensor argument (the planted fault misblame_dtype names it).
  static std::string first_tensor_label(const OpDef& op, const std::vector<Tensor>& s,
                                        const std::vector<std::vector<Tensor>>& l) {
    for (int i = 0; i < op.num_params; ++i) {
      if (op.params[size_t(i)].role == ParamRole::tensor_list && !l[size_t(i)].empty()) return arg_label(op, i, 0);
      if (s[size_t(i)].defined()) return arg_label(op, i, -1);
    }
    return "";
  }
  // Contract section 4, step 3, written from the contract, not from dispatch: in signature order (list elements in
  // order), the first tensor whose dtype its parameter does not accept, or that differs from the first element of
  // its list, or from the first tensor of its dtype group, is the one DTypeMismatch names. "" when there is none.
  static std::string first_dtype_offender(const OpDef& op, const std::vector<Tensor>& s,
                                          const std::vector<std::vector<Tensor>>& l) {
    std::array<std::optional<DType>, 8> group;
    for (int i = 0; i < op.num_params; ++i) {
      const ParamDef& pd = op.params[size_t(i)];
      if (!is_tensor_role(pd.role)) continue;
      std::vector<std::pair<const Tensor*, int>> ts;
      if (pd.role == ParamRole::tensor_list) {
        for (size_t j = 0; j < l[size_t(i)].size(); ++j) ts.push_back({&l[size_t(i)][j], int(j)});
      } else if (s[size_t(i)].defined()) {
        ts.push_back({&s[size_t(i)], -1});
      }
      for (const auto& [t, li] : ts) {
        const DType dt = t->dtype();
        if (!pd.dtypes.contains(dt) || (li > 0 && dt != ts[0].first->dtype())) return arg_label(op, i, li);
        if (pd.same_dtype_group) {
          std::optional<DType>& g = group[pd.same_dtype_group & 7];
          if (g && *g != dt) return arg_label(op, i, li);
          if (!g) g = dt;
        }
      }
    }
    return "";
  }
  // For bad input kind 6: a tensor that shares a dtype group or a list with another, and a dtype its parameter
  // accepts, the device computes and it does not have. `salt` varies which member and which dtype.
  struct GroupMutation {
    int param, list_index;
    DType dtype;
  };
  static std::optional<GroupMutation> group_mutation(const OpDef& op, const std::vector<Tensor>& s,
                                                     const std::vector<std::vector<Tensor>>& l, Device d,
                                                     size_t salt) {
    std::vector<GroupMutation> members;  // (dtype left unset)
    std::array<int, 8> group_size{};
    for (int i = 0; i < op.num_params; ++i)
      if (op.params[size_t(i)].same_dtype_group && s[size_t(i)].defined())
        group_size[op.params[size_t(i)].same_dtype_group & 7]++;
    for (int i = 0; i < op.num_params; ++i) {
      const ParamDef& pd = op.params[size_t(i)];
      if (pd.role == ParamRole::tensor_list && l[size_t(i)].size() >= 2)
        for (size_t j = 0; j < l[size_t(i)].size(); ++j) members.push_back({i, int(j), DType::f32});
      else if (pd.same_dtype_group && s[size_t(i)].defined() && group_size[pd.same_dtype_group & 7] >= 2)
        members.push_back({i, -1, DType::f32});
    }
    if (members.empty()) return std::nullopt;
    GroupMutation m = members[salt / kBadInputKinds % members.size()];
    const Tensor& t = m.list_index < 0 ? s[size_t(m.param)] : l[size_t(m.param)][size_t(m.list_index)];
    std::vector<DType> choices;
    for (DType dt : kAllDTypes)
      if (dt != t.dtype() && op.params[size_t(m.param)].dtypes.contains(dt) && backend_for(d).dtypes().contains(dt))
        choices.push_back(dt);
    if (choices.empty()) return std::nullopt;
    m.dtype = choices[salt % choices.size()];
    return m;
  }

  ArgPack build(const NodeDef& n, const std::vector<Tensor>& s, const std::vector<std::vector<Tensor>>& l,
                const std::vector<std::vector<int64_t>>& ints, int int_param, std::optional<int64_t> int_value,
                Device d) {
    const OpDef& op = op_def(n.op);
    ArgPack pack;
    for (int i = 0; i < op.num_params; ++i) {
      const NodeArg& a = n.args[size_t(i)];
      const ParamRole role = op.params[size_t(i)].role;
      if (i == int_param && int_value) {
        pack.push(role == ParamRole::optional_int_attr ? Arg::optional_integer(true, *int_value)
                                                       : Arg::integer(*int_value));
        continue;
      }
      if (!ints[size_t(i)].empty()) {
        pack.push(Arg::of(IntList(ints[size_t(i)])));
        continue;
      }
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, ValueRef>) {
              pack.push(role == ParamRole::optional_tensor ? Arg::optional(&s[size_t(i)]) : Arg::of(s[size_t(i)]));
            } else if constexpr (std::is_same_v<T, AbsentArg>) {
              pack.push(role == ParamRole::optional_tensor ? Arg::optional(nullptr) : Arg::optional_integer(false, 0));
            } else if constexpr (std::is_same_v<T, std::vector<ValueRef>>) {
              pack.push(Arg::of(std::span<const Tensor>(l[size_t(i)])));
            } else if constexpr (std::is_same_v<T, int64_t>) {
              pack.push(role == ParamRole::optional_int_attr ? Arg::optional_integer(true, x) : Arg::integer(x));
            } else if constexpr (std::is_same_v<T, double>) {
              pack.push(Arg::scalar(x));
            } else if constexpr (std::is_same_v<T, bool>) {
              pack.push(Arg::flag(x));
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              pack.push(Arg::of(IntList(x)));
            } else if constexpr (std::is_same_v<T, DType>) {
              pack.push(Arg::of(x));
            } else if constexpr (std::is_same_v<T, Device>) {
              pack.push(Arg::of(d));
            } else if constexpr (std::is_same_v<T, ByteData>) {
              pack.push(Arg::of(std::span<const uint8_t>(x.bytes)));
            }
          },
          a);
    }
    return pack;
  }

  const Program& p_;
  const CheckOptions& o_;
  ProgramReport& r_;
  std::vector<NodePrediction> pred_;
  std::vector<Device> devices_;
};

}  // namespace

bool checked_anything(const std::array<OracleCounts, kNumOracles>& counts,
                      const std::array<bool, kNumOracles>& enabled) {
  for (OracleKind k : kAllOracles)
    if (enabled[size_t(k)] && counts[size_t(k)].checked > 0) return true;
  return false;
}

ProgramReport check_program(const Program& p, const CheckOptions& opts) {
  Deadline budget(opts.deadline);
  ProgramReport r;
  Checker(p, opts, r).run();
  return r;
}

}  // namespace crossfire::harness
