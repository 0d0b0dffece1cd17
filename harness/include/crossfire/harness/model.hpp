// SPDX-License-Identifier: Apache-2.0
// The contract model and the program executor.
//
// The model is the contract oracle's independent prediction (contract sections 3 and 4), computed from the
// program alone, never from dispatch: which device every value lives on, which values are tracked, and for every
// node either success or the exact DeviceMismatch (every offender, in signature order, with its parameter name,
// device and wrong_backend flag; the target and the argument it came from).
//
// The executor runs a program through dispatch on some device mapping and records what happened at every node.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "crossfire/harness/program.hpp"
#include "reference/reference.hpp"

namespace crossfire::harness {

struct PredictedMismatch {
  Device target;
  std::string target_from;
  std::vector<DeviceOffender> offenders;
  friend bool operator==(const PredictedMismatch&, const PredictedMismatch&) = default;
};

struct NodePrediction {
  Device device;                              // where the value lives (its target, or `device` for creation/to)
  bool tracked = false;
  bool no_tensor_input = false;               // an op with tensor parameters but none present
  std::optional<PredictedMismatch> mismatch;  // the exact DeviceMismatch, when one is due
};

// How the contract names a tensor argument in an error (section 4): the parameter's name, with `[i]` for element i
// of a list (list_index >= 0): `rhs`, `tensors[3]`. The model's own spelling, not dispatch's.
std::string arg_label(const OpDef& op, int param, int list_index);

// One entry per value (inputs too: their device and tracked flag).
std::vector<NodePrediction> predict(const Program& p);

// The device each ValueRef resolves to: its override, or the value's own device.
Device ref_device(const std::vector<NodePrediction>& pred, const ValueRef& r);

// ---- execution -------------------------------------------------------------------------------------------------

// What an error looked like, as fields (structure, not strings).
struct ObservedError {
  ErrorKind kind = ErrorKind::invalid_argument;
  std::string message;
  std::string param;                          // DTypeMismatch / ShapeError / InvalidArgument
  std::optional<PredictedMismatch> mismatch;  // DeviceMismatch's fields
};
ObservedError observe(const std::exception& e);

enum class NodeStatus : uint8_t {
  ok,           // dispatch returned a tensor
  failed,       // dispatch raised (see error)
  unsupported,  // the backend has no kernel for the op (skipped, never a pass or a failure)
  missing,      // an argument was unavailable and no stand-in could be made
};

struct NodeRecord {
  NodeStatus status = NodeStatus::ok;
  std::optional<ObservedError> error;
  bool side_effects_ok = true;  // after an error: counters, tape and inputs exactly as before
  std::string side_effect_detail;
  bool used_standin = false;    // an argument was a stand-in for an upstream value that did not run
  std::optional<reference::RefCall> ref_call;  // the node's own inputs, read back (when capturing)
  std::optional<reference::RefTensor> output;  // the node's result, read back (when capturing)
};

// Note [Time budgets]
// `crossfire replay` and `reduce` run a program from a file, which may ask for much more work than a generated
// one. A Deadline set around a check gives it a time budget: the executor and the f64 evaluator call
// check_deadline() between nodes, which raises ProgramError(over_budget) once the innermost deadline on this
// thread has passed. One node runs to its end (the program limits bound its work).
class Deadline {
 public:
  explicit Deadline(std::optional<std::chrono::steady_clock::time_point> at);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::optional<std::chrono::steady_clock::time_point> previous_;
};
void check_deadline();

struct RunOptions {
  // Maps every device of the program (inputs, overrides, device attributes); identity when empty.
  std::function<Device(Device)> map_device;
  bool capture = true;          // read inputs and outputs back for the agreement oracle
  bool check_side_effects = true;  // around calls the model predicts to raise: counters, tape and inputs unchanged
  bool grad_enabled = true;
  // predict(p) when the caller has it already (the oracles do): the run then does not work it out again.
  const std::vector<NodePrediction>* prediction = nullptr;
};

struct RunResult {
  std::vector<NodeRecord> nodes;   // one per value (inputs: status ok)
  std::vector<Tensor> tensors;     // the live value (or its stand-in), per value
  std::vector<bool> standin;       // tensors[i] is a stand-in
};

// Runs every node. Never throws for an error raised by dispatch (it is recorded); stand-ins replace values whose
// node did not run (an expected DeviceMismatch, an unsupported kernel), so later nodes are still checked. Raises
// ProgramError when the program cannot be run here (an input that cannot be made on its device), when a node's
// result or the run's work is past ProgramLimits, or past the thread's Deadline; and lets std::bad_alloc of the
// harness's own work through, so that it is never recorded as a node's error.
RunResult run_program(const Program& p, const RunOptions& opts);

// A non-owning reference to a callable, for parameters called only while the call that takes them runs (C++26's
// std::function_ref). Binding a node happens for every node of every run; a std::function holding a lambda with
// more than two captures allocates, and each allocation costs a sanitizer build a stack trace (docs/fuzzing.md).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, A...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda, like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// A node's arguments as a dispatch call: the tensors and the pack that views them (never moved or copied once
// bound: the pack points into the arrays). bind_node() fills a fresh NodeCall, resolving each ValueRef through
// `resolve` (in signature order, list elements in order) and mapping each device attribute through `map`. The
// executor binds every node this way, and the gradient oracle binds a node to fresh leaves to run its backward rule
// alone.
struct NodeCall {
  NodeCall() = default;
  NodeCall(const NodeCall&) = delete;
  NodeCall& operator=(const NodeCall&) = delete;
  // Parameter i's tensor (undefined where it takes none) and tensor list; fixed arrays, so that binding a node
  // allocates only what its lists hold (entries past the op's parameters stay empty).
  std::array<Tensor, kMaxParams> singles;
  std::array<std::vector<Tensor>, kMaxParams> lists;
  ArgPack pack;
};
void bind_node(NodeCall& into, const NodeDef& n, FunctionRef<Tensor(const ValueRef&)> resolve,
               FunctionRef<Device(Device)> map);

// The program with every device mapped to `d`, values read back, no side-effect snapshots: how the agreement and
// gradient oracles and `replay --values` run it on one device (`prediction`: as in RunOptions).
RunResult run_on_device(const Program& p, Device d, const std::vector<NodePrediction>* prediction = nullptr);

// Builds the tensor for an input on `device`.
Tensor make_input(const InputDef& in, Device device);
// Reference (f64) value of an input.
reference::RefTensor ref_input(const InputDef& in);
// Every counter of every backend plus the autodiff tape length.
struct WorldCounters {
  std::vector<CounterSnapshot> backends;
  uint64_t autodiff_nodes = 0;
  friend bool operator==(const WorldCounters&, const WorldCounters&) = default;
};
WorldCounters world_counters();
void read_world_counters(WorldCounters& into);  // the same into `into`, whose storage it reuses

// Note [The call in flight]
// A supervised worker keeps, in one word of memory it shares with its supervisor (campaign.cpp maps it before the
// fork), which op it is calling and on which device. When the worker crashes or hangs, the supervisor reads the word
// and blames the op ("exp crashed on torch:0"), which is what a backend's author needs, instead of the program as a
// whole. Outside a supervised worker the word is a private one nobody reads. Keeping it costs two stores per call.
// Only calls the harness makes itself are marked (a node's forward call, the bad-input oracle's calls); a crash in
// backward() or in reading a result blames the program.
void set_call_in_flight_word(std::atomic<uint32_t>* word);
struct CallInFlight {
  OpId op;
  Device device;  // the call's target: its first tensor argument's device, or its device argument's
};
// What a word says: the call in progress, or nullopt between calls.
std::optional<CallInFlight> decode_call_in_flight(uint32_t word);
// Marks `op` on `args` as in flight while it lives.
class InFlight {
 public:
  InFlight(OpId op, const ArgPack& args);
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

}  // namespace crossfire::harness
