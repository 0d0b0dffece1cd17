// SPDX-License-Identifier: Apache-2.0
// The contract model (an independent reading of contract sections 3-4) and the program executor.
#include "crossfire/harness/model.hpp"

#include <bit>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

namespace crossfire::harness {

// ---- the call in flight (Note [The call in flight]) -------------------------------------------------------------
namespace {
std::atomic<uint32_t> g_unshared_word{0};
std::atomic<uint32_t>* g_call_word = &g_unshared_word;

// The target device as dispatch picks it (contract section 3), without raising: the first present tensor argument,
// else a device argument (creation ops), else cpu:0.
Device target_of(const OpDef& op, const ArgPack& args) {
  for (int i = 0; i < op.num_params && i < args.count; ++i) {
    const Arg& a = args[i];
    switch (op.params[size_t(i)].role) {
      case ParamRole::tensor:
        if (a.tensor && a.tensor->defined()) return a.tensor->device();
        break;
      case ParamRole::optional_tensor:
        if (a.present && a.tensor && a.tensor->defined()) return a.tensor->device();
        break;
      case ParamRole::tensor_list:
        if (!a.list.empty() && a.list[0].defined()) return a.list[0].device();
        break;
      default: break;
    }
  }
  for (int i = 0; i < op.num_params && i < args.count; ++i)
    if (op.params[size_t(i)].role == ParamRole::device_attr) return args[i].device;
  return Device::cpu(0);
}
}  // namespace

void set_call_in_flight_word(std::atomic<uint32_t>* word) { g_call_word = word ? word : &g_unshared_word; }

// The word: the op id + 1 in the low 16 bits (0: no call), the target device's two bytes in the high 16.
std::optional<CallInFlight> decode_call_in_flight(uint32_t word) {
  const uint32_t op = word & 0xffffu;
  if (op == 0 || op > uint32_t(kNumOps)) return std::nullopt;
  const uint16_t packed = uint16_t(word >> 16);
  return CallInFlight{OpId(op - 1), std::bit_cast<Device>(packed)};
}

InFlight::InFlight(OpId op, const ArgPack& args) {
  const uint32_t word = (uint32_t(op) + 1) | uint32_t(target_of(op_def(op), args).packed()) << 16;
  g_call_word->store(word, std::memory_order_relaxed);
}
InFlight::~InFlight() { g_call_word->store(0, std::memory_order_relaxed); }

// ---- the model -------------------------------------------------------------------------------------------------

std::string arg_label(const OpDef& op, int param, int list_index) {
  const std::string_view name = op.params[size_t(param)].name;
  return list_index < 0 ? std::string(name) : fmt::format("{}[{}]", name, list_index);
}

Device ref_device(const std::vector<NodePrediction>& pred, const ValueRef& r) {
  return r.on ? *r.on : pred[size_t(r.id)].device;
}

std::vector<NodePrediction> predict(const Program& p) {
  std::vector<NodePrediction> out(p.values.size());
  // Every present tensor argument of a node in signature order, list elements expanded: (label, param, index,
  // device); one vector for all nodes, so that it allocates once.
  struct Present {
    std::string label;
    int param, list_index;
    Device device;
    bool tracked;
  };
  std::vector<Present> present;
  for (size_t v = 0; v < p.values.size(); ++v) {
    NodePrediction& np = out[v];
    if (p.values[v].is_input()) {
      np.device = p.values[v].input().device;
      np.tracked = p.values[v].input().tracked;
      continue;
    }
    const NodeDef& n = p.values[v].node();
    const OpDef& op = op_def(n.op);
    present.clear();
    bool has_tensor_param = false;
    Device explicit_device;
    bool has_device_attr = false;
    for (int i = 0; i < op.num_params && size_t(i) < n.args.size(); ++i) {
      const ParamDef& pd = op.params[size_t(i)];
      const NodeArg& a = n.args[size_t(i)];
      if (is_tensor_role(pd.role)) has_tensor_param = true;
      if (pd.role == ParamRole::device_attr) {
        if (auto* d = std::get_if<Device>(&a)) explicit_device = *d, has_device_attr = true;
      }
      auto add = [&](const ValueRef& r, int li) {
        present.push_back({arg_label(op, i, li), i, li,
                           ref_device(out, r), out[size_t(r.id)].tracked && pd.grad == GradPolicy::differentiable});
      };
      if (auto* r = std::get_if<ValueRef>(&a)) add(*r, -1);
      if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
        for (size_t j = 0; j < l->size(); ++j) add((*l)[j], int(j));
    }
    if (present.empty()) {
      np.no_tensor_input = has_tensor_param;
      np.device = explicit_device;
      continue;
    }
    const Present& t = present[0];
    np.device = t.device;
    PredictedMismatch mm{t.device, t.label, {}};
    for (const Present& a : present)
      if (!(a.device == t.device))
        mm.offenders.push_back({a.label, a.param, a.list_index, a.device, a.device.backend != t.device.backend});
    if (!mm.offenders.empty()) np.mismatch = std::move(mm);
    // `to` is the one op whose result lives elsewhere (contract section 3).
    if (op.family == OpFamily::transfer && has_device_attr) np.device = explicit_device;
    if (op.backward != nullptr)
      for (const Present& a : present) np.tracked |= a.tracked;
  }
  return out;
}

// ---- observation -----------------------------------------------------------------------------------------------

ObservedError observe(const std::exception& e) {
  ObservedError o;
  o.message = e.what();
  if (auto* ce = dynamic_cast<const Error*>(&e)) {
    o.kind = ce->kind();
    if (auto* dm = dynamic_cast<const DeviceMismatch*>(&e))
      o.mismatch = PredictedMismatch{dm->target, dm->target_from, {dm->offenders.begin(), dm->offenders.end()}};
    if (auto* d = dynamic_cast<const DTypeMismatch*>(&e)) o.param = d->param;
    if (auto* s = dynamic_cast<const ShapeError*>(&e)) o.param = s->param;
    if (auto* s = dynamic_cast<const InvalidArgument*>(&e)) o.param = s->param;
  } else {
    o.kind = ErrorKind::backend_failure;
    o.message = fmt::format("not a crossfire::Error: {}", e.what());
  }
  return o;
}

void read_world_counters(WorldCounters& w) {
  w.backends.clear();
  w.backends.reserve(backend_kinds().size());  // once: later reads into the same `w` keep its storage
  for (BackendKind k : backend_kinds()) w.backends.push_back(backend(k).snapshot());
  w.autodiff_nodes = autodiff_nodes_recorded();
}

WorldCounters world_counters() {
  WorldCounters w;
  read_world_counters(w);
  return w;
}

// ---- execution -------------------------------------------------------------------------------------------------

reference::RefTensor ref_input(const InputDef& in) {
  reference::RefTensor r{in.dtype, in.shape, {}};
  int64_t n = in.shape.numel();
  r.values.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    r.values[size_t(i)] = is_float(in.dtype) ? double(bits_to_f32(in.f32_bits[size_t(i)])) : double(in.ints[size_t(i)]);
  if (in.dtype == DType::i64) r.ints = in.ints;  // exact (RefTensor: values holds them rounded to f64)
  return r;
}

namespace {

// The bytes of an input whose dtype is not held as it is (bool, the halves, i32); make_input() takes f32 and i64
// straight from the InputDef.
std::vector<uint8_t> input_bytes(const InputDef& in) {
  const size_t n = size_t(in.shape.numel());
  std::vector<uint8_t> b(n * dtype_size(in.dtype));
  for (size_t i = 0; i < n; ++i) {
    if (in.dtype == DType::boolean) {
      b[i] = uint8_t(in.ints[i] != 0);
    } else if (is_half(in.dtype)) {  // held as f32 values that the dtype represents (the parser checks)
      const uint16_t h = reference::half_bits_of_f32(in.f32_bits[i], in.dtype);  // a NaN as its bits
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else {  // i32, each value within the dtype's range (the parser and the generator keep it)
      const int32_t v = int32_t(in.ints[i]);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  }
  return b;
}

// A stand-in for a value whose node did not run: deterministic, harmless values of the right dtype and shape.
Tensor make_standin(const OutputSpec& spec, bool tracked, uint64_t salt) {
  int64_t n = spec.shape.numel();
  std::vector<uint8_t> bytes(size_t(n) * dtype_size(spec.dtype));
  uint64_t s = salt * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    if (spec.dtype == DType::f32) {
      float f = float(int64_t(s % 33) - 16) / 8.0f;
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else if (is_half(spec.dtype)) {  // k/8 for |k| <= 16: exact in both
      const uint16_t h = reference::half_bits(double(int64_t(s % 33) - 16) / 8.0, spec.dtype);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else if (spec.dtype == DType::i32) {
      int32_t v = int32_t(s % 7) - 3;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else if (spec.dtype == DType::i64) {
      int64_t v = int64_t(s % 7) - 3;
      std::memcpy(bytes.data() + 8 * i, &v, 8);
    } else {
      bytes[size_t(i)] = uint8_t(s & 1);
    }
  }
  Tensor t = from_bytes(bytes, spec.shape.dims(), spec.dtype, spec.device);
  if (tracked && is_float(spec.dtype)) t.set_requires_grad(true);
  return t;
}

// The work of one call in element-steps, for ProgramLimits::kMaxWork: every element it reads and writes, and for
// the two contractions every product (matmul: the output times the contracted length; conv2d: the output times
// one filter's size). By family, from the op table, so an op added to a family is counted without a line here.
int64_t node_work(const OpDef& op, const ArgPack& args, const OutputSpec& out) {
  int64_t in_elements = 0;
  for (int i = 0; i < op.num_params; ++i) {
    const Arg& a = args[i];
    if (a.role == ParamRole::tensor || (a.role == ParamRole::optional_tensor && a.present))
      in_elements += a.tensor->numel();
    else if (a.role == ParamRole::tensor_list)
      for (const Tensor& t : a.list) in_elements += t.numel();
  }
  const int64_t n = out.shape.numel();
  int64_t products = 0;
  if (op.family == OpFamily::matmul) {
    const Shape& lhs = args[0].tensor->shape();
    products = lhs.rank() == 0 ? n : n * lhs[lhs.rank() - 1];
  } else if (op.family == OpFamily::conv2d) {
    const Shape& w = args[op.param_index("weight")].tensor->shape();
    products = w.rank() == 0 || w[0] == 0 ? 0 : n * (w.numel() / w[0]);
  }
  return in_elements + n + products;  // each term is within the element bound, so no sum overflows int64
}

// Holds node v's result `out`, of `steps` element-steps of work, to the program limits; `work` is the run's total
// so far.
void hold_to_limits(const OpDef& op, const OutputSpec& out, int64_t steps, size_t v, int64_t& work) {
  const int64_t n = out.shape.numel();
  if (n > ProgramLimits::kMaxNodeElements)
    throw ProgramError(ProgramError::Reason::over_limit, int(v),
                       fmt::format("{} would make {} elements ({}); a node's result may have at most {} "
                                   "(ProgramLimits::kMaxNodeElements)",
                                   op.name, n, out.shape.str(), ProgramLimits::kMaxNodeElements));
  work += steps;
  if (work > ProgramLimits::kMaxWork)
    throw ProgramError(ProgramError::Reason::over_limit, int(v),
                       fmt::format("{} takes the program's work past {} element-steps (ProgramLimits::kMaxWork)",
                                   op.name, ProgramLimits::kMaxWork));
}

// Holds a node to the program limits before it runs. False when the call will raise before any work (dispatch's
// own bound covers what it would have allocated): its stand-in, if it gets one, is held then (Note [A stand-in is
// held to the limits]).
bool check_node_limits(OpId id, const OpDef& op, const ArgPack& pack, size_t v, int64_t& work) {
  OutputSpec spec;
  try {
    spec = validate(id, pack);
  } catch (const Error&) {
    return false;
  }
  hold_to_limits(op, spec, node_work(op, pack, spec), v, work);
  return true;
}

thread_local std::optional<std::chrono::steady_clock::time_point> t_deadline;

}  // namespace

Deadline::Deadline(std::optional<std::chrono::steady_clock::time_point> at) : previous_(t_deadline) {
  if (at && (!t_deadline || *at < *t_deadline)) t_deadline = at;
}
Deadline::~Deadline() { t_deadline = previous_; }

void check_deadline() {
  if (t_deadline && std::chrono::steady_clock::now() >= *t_deadline) [[unlikely]]
    throw ProgramError(ProgramError::Reason::over_budget, -1, "the check ran past its time budget");
}

Tensor make_input(const InputDef& in, Device device) {
  // f32 and i64 inputs hold their bytes as they are (f32_bits, ints); the other dtypes are converted first.
  std::span<const uint8_t> bytes;
  std::vector<uint8_t> converted;
  if (in.dtype == DType::f32)
    bytes = {reinterpret_cast<const uint8_t*>(in.f32_bits.data()), in.f32_bits.size() * sizeof(uint32_t)};
  else if (in.dtype == DType::i64)
    bytes = {reinterpret_cast<const uint8_t*>(in.ints.data()), in.ints.size() * sizeof(int64_t)};
  else
    bytes = converted = input_bytes(in);
  Tensor t = from_bytes(bytes, in.shape.dims(), in.dtype, device);
  if (in.tracked) t.set_requires_grad(true);
  return t;
}

RunResult run_on_device(const Program& p, Device d, const std::vector<NodePrediction>* prediction) {
  RunOptions ro;
  ro.map_device = [d](Device) { return d; };
  ro.check_side_effects = false;
  ro.prediction = prediction;
  return run_program(p, ro);
}

// Note [Reading results back at the end of a run]
// The agreement oracle needs every node's inputs and output on the host. Read right after each call, every node
// of an asynchronous backend was a round trip: submit the batch, wake the driver's thread, wait for it to signal
// back (on lavapipe in a VM, tens of microseconds, and most of a campaign's time with vulkan in it). So a run keeps
// each node's arguments (NodeCall: the tensors, and the pack that points into them) and reads everything back after
// the last node, when one wait covers the whole program. Results are functional values, never written after their
// node ran, so what is read is what the node produced. An error raised by the read (a device lost) is recorded on
// the node whose output it was reading, as before.

void bind_node(NodeCall& into, const NodeDef& n, FunctionRef<Tensor(const ValueRef&)> resolve,
               FunctionRef<Device(Device)> map) {
  const OpDef& op = op_def(n.op);
  if (into.pack.count != 0) throw std::logic_error("bind_node: the NodeCall is already bound (bind into a fresh one)");
  auto& singles = into.singles;
  auto& lists = into.lists;
  ArgPack& pack = into.pack;
  for (int i = 0; i < op.num_params; ++i) {
    const NodeArg& a = n.args[size_t(i)];
    const ParamRole role = op.params[size_t(i)].role;
    Arg arg;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, ValueRef>) {
            singles[size_t(i)] = resolve(x);
            arg = role == ParamRole::optional_tensor ? Arg::optional(&singles[size_t(i)]) : Arg::of(singles[size_t(i)]);
          } else if constexpr (std::is_same_v<T, AbsentArg>) {
            arg = role == ParamRole::optional_tensor ? Arg::optional(nullptr) : Arg::optional_integer(false, 0);
          } else if constexpr (std::is_same_v<T, std::vector<ValueRef>>) {
            for (const ValueRef& r : x) lists[size_t(i)].push_back(resolve(r));
            arg = Arg::of(std::span<const Tensor>(lists[size_t(i)]));
          } else if constexpr (std::is_same_v<T, int64_t>) {
            arg = role == ParamRole::optional_int_attr ? Arg::optional_integer(true, x) : Arg::integer(x);
          } else if constexpr (std::is_same_v<T, double>) {
            arg = Arg::scalar(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            arg = Arg::flag(x);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            arg = Arg::of(IntList(x));
          } else if constexpr (std::is_same_v<T, DType>) {
            arg = Arg::of(x);
          } else if constexpr (std::is_same_v<T, Device>) {
            arg = Arg::of(map(x));
          } else if constexpr (std::is_same_v<T, ByteData>) {
            arg = Arg::of(std::span<const uint8_t>(x.bytes));
          }
        },
        a);
    pack.push(arg);
  }
}

RunResult run_program(const Program& p, const RunOptions& opts) {
  auto map = [&](Device d) { return opts.map_device ? opts.map_device(d) : d; };
  // Each node's arguments, kept for the reads at the end when capturing (never resized: the packs point into them);
  // otherwise one NodeCall made afresh in place for every node.
  std::vector<NodeCall> calls(opts.capture ? p.values.size() : 0);
  std::optional<NodeCall> scratch;
  std::vector<NodePrediction> own_prediction;
  if (opts.prediction == nullptr) own_prediction = predict(p);
  const std::vector<NodePrediction>& pred = opts.prediction != nullptr ? *opts.prediction : own_prediction;
  RunResult res;
  res.nodes.resize(p.values.size());
  res.tensors.resize(p.values.size());
  res.standin.assign(p.values.size(), false);
  std::optional<NoGradGuard> no_grad;
  if (!opts.grad_enabled) no_grad.emplace();

  int64_t work = 0;
  for (size_t v = 0; v < p.values.size(); ++v) {
    check_deadline();
    NodeRecord& rec = res.nodes[v];
    if (p.values[v].is_input()) {
      // An input that cannot be made stops the run: a program that cannot be run here checks nothing, and saying
      // "no failure" about it would be a silent pass.
      const InputDef& in = p.values[v].input();
      try {
        res.tensors[v] = make_input(in, map(in.device));
      } catch (const Unsupported& e) {
        // A dtype the device does not compute (an f16 program mapped to vulkan:0): the input and everything that
        // needs it are skipped there as unsupported, never a pass or a failure.
        rec.status = NodeStatus::unsupported;
        rec.error = observe(e);
        continue;
      } catch (const Error& e) {
        throw ProgramError(ProgramError::Reason::not_runnable, int(v),
                           fmt::format("input {} {} cannot be made on {}: {}", dtype_name(in.dtype), in.shape.str(),
                                       map(in.device).str(), e.what()));
      }
      continue;
    }
    const NodeDef& n = p.values[v].node();
    const OpDef& op = op_def(n.op);
    // Arguments: the live values, moved to their override device (outside the checked call).
    bool missing = false;
    auto resolve = [&](const ValueRef& r) -> Tensor {
      const Tensor& t = res.tensors[size_t(r.id)];
      if (!t.defined()) {
        missing = true;
        return Tensor();
      }
      rec.used_standin |= res.standin[size_t(r.id)];
      if (r.on && !(t.device() == map(*r.on))) {
        try {
          return to(t, map(*r.on));
        } catch (const Error& e) {
          if (!find_backend(map(*r.on)))  // a move to a device this machine lacks: the program cannot run here
            throw ProgramError(ProgramError::Reason::not_runnable, int(v),
                               fmt::format("%{}@{}: {}", r.id, map(*r.on).str(), e.what()));
          missing = true;
          return Tensor();
        }
      }
      return t;
    };
    NodeCall& node_call = opts.capture ? calls[v] : scratch.emplace();
    bind_node(node_call, n, resolve, map);
    const auto& singles = node_call.singles;
    const auto& lists = node_call.lists;
    const ArgPack& pack = node_call.pack;
    if (missing) {
      rec.status = NodeStatus::missing;
      continue;
    }
    const bool held = check_node_limits(n.op, op, pack, v, work);
    // Inputs' bytes and counters before the call, to prove "no side effect" if it raises: taken only before a call
    // the model predicts to raise, since those are the errors whose "no side effect" the contract oracle checks
    // (a call predicted to succeed that raises is a finding by itself), and copying every input before every
    // successful call cost the fuzzers and campaigns for nothing.
    const bool snapshot = opts.check_side_effects && (pred[v].mismatch || pred[v].no_tensor_input);
    std::vector<std::vector<uint8_t>> before_bytes;
    WorldCounters before;
    if (snapshot) {
      for (int i = 0; i < op.num_params; ++i) {
        if (singles[size_t(i)].defined()) before_bytes.push_back(singles[size_t(i)].to_host_bytes());
        for (const Tensor& t : lists[size_t(i)]) before_bytes.push_back(t.to_host_bytes());
      }
      before = world_counters();
    }
    try {
      InFlight in_flight(n.op, pack);
      res.tensors[v] = call(n.op, pack);
      rec.status = NodeStatus::ok;
    } catch (const std::exception& e) {
      rec.error = observe(e);
      rec.status = rec.error->kind == ErrorKind::unsupported ? NodeStatus::unsupported : NodeStatus::failed;
    }
    if (rec.status != NodeStatus::ok && snapshot) {
      WorldCounters after = world_counters();
      if (!(after == before)) {
        rec.side_effects_ok = false;
        for (size_t k = 0; k < after.backends.size(); ++k) {
          const CounterSnapshot &a = before.backends[k], &b = after.backends[k];
          if (!(a == b))
            rec.side_effect_detail += fmt::format(
                "{}: allocations {}->{}, releases {}->{}, launches {}->{}, transfers {}->{}; ",
                backend_name(BackendKind(k)), a.allocations, b.allocations, a.releases, b.releases, a.kernel_launches,
                b.kernel_launches, a.transfers, b.transfers);
        }
        if (after.autodiff_nodes != before.autodiff_nodes)
          rec.side_effect_detail += fmt::format("autodiff tape {}->{}; ", before.autodiff_nodes, after.autodiff_nodes);
      }
      size_t k = 0;
      for (int i = 0; i < op.num_params; ++i) {
        auto check = [&](const Tensor& t, std::string label) {
          if (k < before_bytes.size() && t.to_host_bytes() != before_bytes[k]) {
            rec.side_effects_ok = false;
            rec.side_effect_detail += fmt::format("input `{}` changed; ", label);
          }
          ++k;
        };
        if (singles[size_t(i)].defined()) check(singles[size_t(i)], arg_label(op, i, -1));
        for (size_t j = 0; j < lists[size_t(i)].size(); ++j) check(lists[size_t(i)][j], arg_label(op, i, int(j)));
      }
    }
    if (rec.status == NodeStatus::ok) continue;
    // A stand-in, so that later nodes are still checked: the output rule gives its dtype and shape.
    std::optional<OutputSpec> standin;
    try {
      Device target = map(pred[v].device);
      standin = output_spec(CallView{op, pack, target});  // never a size no tensor may have
      standin->device = target;
    } catch (const Error&) {  // no stand-in (the call is invalid beyond its devices): later nodes are missing
    }
    if (standin) {
      // Note [A stand-in is held to the limits]
      // A call that raises before any work was not held to the program limits (dispatch bounds what it would have
      // allocated), but its stand-in is a result the harness makes in the node's place, as large as the output
      // rule says: `arange stop=1644167168 dtype=i64 device=cpu:5` (no such device) asked the harness for 13 GB
      // (fuzz_program_run), and 4,096 failing nodes of 2^20 elements each would ask for 16 GB. So a stand-in is held
      // to the limits as the node's own result would have been, its elements counted as work (a result that was
      // held before its call is not counted twice).
      if (!held) hold_to_limits(op, *standin, standin->shape.numel(), v, work);
      try {
        res.tensors[v] = make_standin(*standin, pred[v].tracked && grad_enabled(), v);
        res.standin[v] = true;
      } catch (const Error&) {  // no stand-in (its device is not there): later nodes are missing
      }
    }
  }
  // Note [Reading results back at the end of a run]
  for (size_t v = 0; v < calls.size(); ++v) {
    NodeRecord& rec = res.nodes[v];
    if (p.values[v].is_input() || rec.status == NodeStatus::missing) continue;  // nothing was called
    try {
      rec.ref_call = reference::RefCall::from(p.values[v].node().op, calls[v].pack);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception&) {
    }
    if (rec.status != NodeStatus::ok) continue;
    try {
      rec.output = reference::RefTensor::from(res.tensors[v]);
    } catch (const std::bad_alloc&) {
      throw;  // the harness's own memory, not the backend's failure
    } catch (const std::exception& e) {
      rec.status = NodeStatus::failed;
      rec.error = observe(e);
    }
  }
  return res;
}

}  // namespace crossfire::harness
