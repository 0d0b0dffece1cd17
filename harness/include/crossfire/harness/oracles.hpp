// SPDX-License-Identifier: Apache-2.0
// The four oracles (issue 4), each independent of the code it checks:
//  - contract:  the model (model.hpp) predicts success or the exact DeviceMismatch of every call; dispatch must
//               match it exactly, and an error must leave counters, tape and inputs unchanged.
//  - agreement: every node on every device is checked against the f64 reference evaluated on that device's own
//               inputs, within the op's ErrorBound (bitwise for exact ops); exact ops whose inputs are bitwise equal
//               on two devices must give bitwise equal outputs.
//  - gradients: reverse-mode gradients agree across devices and with f64 central finite differences; points where
//               the program is not smooth (a kink, a discrete value that flips) are detected and skipped.
//  - bad_input: deliberately invalid calls derived from the program's nodes raise the predicted typed error.
// An op a backend reports Unsupported, or the reference cannot evaluate, is counted as skipped: never as a pass and
// never as a failure.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "crossfire/harness/model.hpp"
#include "crossfire/harness/program.hpp"

namespace crossfire::harness {

enum class OracleKind : uint8_t { contract, agreement, gradients, bad_input };
inline constexpr int kNumOracles = 4;
inline constexpr std::array<OracleKind, kNumOracles> kAllOracles = {OracleKind::contract, OracleKind::agreement,
                                                                    OracleKind::gradients, OracleKind::bad_input};
std::string_view oracle_name(OracleKind k);
std::optional<OracleKind> parse_oracle(std::string_view name);

struct Failure {
  OracleKind oracle = OracleKind::contract;
  int node = -1;        // the value id of the first failing node (-1: the program as a whole)
  std::string op;       // its op
  std::string device;   // where: "cpu:0", or "cpu:0 vs vulkan:0" when two devices disagree ("" when unknown)
  std::string what;     // one line: what went wrong
  std::string detail;   // the facts: backends, element index, both values, the bound
  // What "the same failure" means to the reducer: oracle, op and kind of finding.
  std::string signature() const;
};

// Why a check did not run, other than a backend without the kernel (skipped_unsupported): report.json's
// `skipped_by_reason` (docs/report-format.md lists the same names and meanings).
enum class SkipReason : uint8_t {
  upstream_missing,        // the node's inputs do not exist on this device (an earlier node failed or was unsupported)
  predicted_error,         // agreement: the node raised the error the model predicts (the contract oracle's check)
  no_reference,            // the f64 reference cannot evaluate the node, or the program's root
  branches_differ,         // gradients: two devices took different discrete branches (Note [Branches across devices])
  on_kink,                 // gradients: an input of a piecewise op is 0 or tied with another (its kink)
  no_finite_difference,    // gradients: a step is not representable in f32, or the loss is not finite at x +- h
  below_resolution,        // gradients: the change is below f64's resolution of the loss or of a value on the way,
                           // or the slope past 1e38
  not_smooth,              // gradients: a discrete value flips within the step, or the one-sided slopes disagree
  nonfinite_intermediate,  // gradients: a non-finite value or a domain boundary upstream (the chain rule's 0 * inf)
  adjoint_past_f32,        // gradients: an adjoint past f32's range (Note [Adjoints past f32])
};
inline constexpr size_t kNumSkipReasons = size_t(SkipReason::adjoint_past_f32) + 1;
std::string_view skip_reason_name(SkipReason r);
std::optional<SkipReason> parse_skip_reason(std::string_view name);

struct OracleCounts {
  uint64_t checked = 0;  // individual checks that ran and passed or failed
  uint64_t failed = 0;
  uint64_t skipped_unsupported = 0;  // the backend had no kernel
  uint64_t skipped_other = 0;        // the sum of skipped_by
  // Time spent in this oracle. The runs of the program on each device, which agreement, gradients and bad_input
  // share, count to the first of those that is enabled.
  double seconds = 0;
  std::array<uint64_t, kNumSkipReasons> skipped_by{};  // skipped_other by reason
  // gradients: how many of `checked` judged one backward rule on one device (gradients.cpp, step 1); the rest
  // judged the program's whole gradient (the confirmations).
  uint64_t checked_backward_rules = 0;
  void skip(SkipReason r) {
    ++skipped_other;
    ++skipped_by[size_t(r)];
  }
  void add(const OracleCounts& o) {
    checked += o.checked, failed += o.failed, skipped_unsupported += o.skipped_unsupported,
        skipped_other += o.skipped_other, seconds += o.seconds, checked_backward_rules += o.checked_backward_rules;
    for (size_t i = 0; i < kNumSkipReasons; ++i) skipped_by[i] += o.skipped_by[i];
  }
};

// Faults the harness can plant in what an oracle observes, so tests prove each oracle catches a bug without a
// special build (tests/harness_oracles_test.cpp). Never set by the command.
enum class PlantedFault : uint8_t {
  none,
  drop_last_offender,     // contract: the observed DeviceMismatch loses its last offender
  swallow_mismatch,       // contract: an observed DeviceMismatch turns into success
  perturb_float_output,   // agreement: the first float element of every f32 output is off by 1%
  flip_exact_output,      // agreement: the first element of every exact output is changed
  scale_gradient,         // gradients: every observed gradient of the program is scaled by 1.5
  skew_gradient,          // gradients: the gradient observed on every device but the first is off by 1.5x
  overflow_gradient,      // gradients: the first element of every observed gradient is +inf
  scale_backward_rule,    // gradients: every backward rule run alone (step 1) gives 1.5x its gradient + 0.25
  accept_bad_input,       // bad_input: every invalid call is observed to succeed
  misblame_dtype,         // bad_input: an observed DTypeMismatch names the call's first tensor argument instead
  harness_out_of_memory,  // the harness itself: std::bad_alloc while reading results back (never a finding)
  crash_in_softmax,       // the process aborts when it runs a softmax node on a device (a kernel that crashes)
};
PlantedFault parse_planted_fault(std::string_view name);  // "" -> none; unknown -> none
std::string_view planted_fault_name(PlantedFault f);     // as parse_planted_fault reads it

struct CheckOptions {
  std::vector<Device> devices;                 // devices to run on (agreement, gradients); default: all available
  std::array<bool, kNumOracles> enabled{true, true, true, true};
  PlantedFault fault = PlantedFault::none;
  bool keep_node_table = false;                // fill ProgramReport::table (replay)
  int max_bad_inputs = 4;
  // A time budget (Note [Time budgets] in model.hpp): check_program raises ProgramError(over_budget) past it.
  std::optional<std::chrono::steady_clock::time_point> deadline;

  // Enables oracle `k` and no other (the reducer checks one failure's oracle; tests prove one oracle at a time).
  CheckOptions& only(OracleKind k) {
    enabled.fill(false);
    enabled[size_t(k)] = true;
    return *this;
  }
};

struct NodeRow {  // one line of replay's per-node comparison table
  int id;
  std::string op;
  std::string device;
  std::string status;  // ok, unsupported, expected DeviceMismatch, FAIL, ...
  std::string note;    // max error / bound, or the error
};

struct ProgramReport {
  std::vector<Failure> failures;
  std::array<OracleCounts, kNumOracles> counts{};
  // Coverage: per op and device, how many node runs were checked (ok) and how many were unsupported. A flat list
  // in first-seen order (a program has a few ops on a few devices; a map of names allocated per node).
  struct OpCoverage {
    OpId op;
    Device device;
    std::array<uint64_t, 2> counts{};  // checked, unsupported
  };
  std::vector<OpCoverage> coverage;
  std::array<uint64_t, 2>& coverage_of(OpId op, Device device) {
    for (OpCoverage& c : coverage)
      if (c.op == op && c.device == device) return c.counts;
    coverage.push_back({op, device});
    return coverage.back().counts;
  }
  std::vector<NodeRow> table;
  bool failed() const { return !failures.empty(); }
};

// Whether any enabled oracle checked something: a run (a campaign, a replay) that checked nothing is never a pass.
bool checked_anything(const std::array<OracleCounts, kNumOracles>& counts,
                      const std::array<bool, kNumOracles>& enabled);

// Raises ProgramError when the program cannot be checked as asked (model.hpp's run_program says when).
ProgramReport check_program(const Program& p, const CheckOptions& opts);

// ---- the oracles' pure parts, exposed so tests can feed them fabricated observations -------------------------

// Contract: "" when the observation matches the prediction, else what differs.
std::string compare_contract(const NodePrediction& predicted, NodeStatus status, const ObservedError* observed);

// Agreement: the first element of `got` outside the bound of `exact` (exact ops: equal after rounding to f32).
struct ElementMismatch {
  int64_t index = -1;  // -1: the shapes or dtypes differ
  double got = 0, exact = 0, allowed = 0;
  std::string why;
};
// `accumulates_in_dtype`: the device's backend declares that the op rounds its partial results to the output's
// half dtype (Backend::accumulates_in_dtype), and is held to that bound.
std::optional<ElementMismatch> compare_with_reference(const OpDef& op, const reference::RefTensor& got,
                                                      const reference::RefResult& exact,
                                                      bool accumulates_in_dtype = false);

// Evaluates a program in f64 with the reference evaluator up to `upto` (inclusive, -1: all). A value given in
// `value_override` replaces that value, an input's or a node's (a node's is then not computed, and everything
// downstream is computed from the replacement). Values the evaluator cannot compute are nullopt (and so is
// everything downstream). `unchanged`, when given, is an evaluation of the same program without the overrides (and
// the same `upto`): a value that depends on no overridden value is taken from it instead of being computed again,
// which gives the same result (the evaluator is deterministic) for the cost of a copy. Finite differences perturb
// one leaf at a time, and most of a program does not depend on any one leaf.
// `magnitudes`, when given, receives per computed node the reference's magnitude of each element (the sum of
// |terms| that formed it: reference::RefResult); a partial sum far larger than the value it ends in loses what is
// added to it, and the gradient oracle's finite differences need to know how much.
// `held_in_dtype`, when given, marks the computed values to round to their dtype once computed, as a device holds
// them, before anything downstream reads them (the gradient oracle's constants: Note [Constants as a device holds
// them] in gradients.cpp); every other value stays exact.
std::vector<std::optional<reference::RefTensor>> evaluate_f64(
    const Program& p, const std::vector<std::optional<reference::RefTensor>>& value_override = {}, int upto = -1,
    const std::vector<std::optional<reference::RefTensor>>* unchanged = nullptr,
    std::vector<std::vector<double>>* magnitudes = nullptr, const std::vector<bool>* held_in_dtype = nullptr);

}  // namespace crossfire::harness
