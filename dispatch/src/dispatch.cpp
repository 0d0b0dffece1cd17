// SPDX-License-Identifier: Apache-2.0
// Dispatch: validation (contract sections 3 and 4), output allocation, kernel launch, autodiff recording.
#include "crossfire/dispatch.hpp"

#include <cstdlib>
#include <optional>
#include <typeinfo>

#include <fmt/format.h>

#include "autograd_meta.hpp"
#include "cat_walk.hpp"
#include "crossfire/error.hpp"

namespace crossfire {

// Note [Why the first tensor picks the device]
// The target of an op is the device of its first present tensor argument in signature order, never a "best"
// device chosen by looking at all of them. A fixed rule makes the blame in DeviceMismatch meaningful (every other
// argument is compared against one named argument), makes the check a single pass, and matches what users of
// PyTorch and Burn expect. Creation ops have no tensor arguments and name their target explicitly.

// Note [Validation fast path]
// On the success path validation is a few integer comparisons per argument: devices compare as packed 16-bit
// values, dtypes as bit masks, and nothing is formatted or allocated. Everything that builds an error (strings,
// vectors of offenders) lives in [[gnu::cold]] functions that run only once a check has already failed. The
// order of the checks is the contract's order of precedence, and no check has a side effect, so an error always
// leaves counters, tape and inputs exactly as they were.

namespace {

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_nodes_recorded{0};

std::string param_label(const OpDef& op, int param, int list_index) {
  std::string_view name = op.params[size_t(param)].name;
  return list_index < 0 ? std::string(name) : fmt::format("{}[{}]", name, list_index);
}

// Calls f(tensor, param, list_index) for every present tensor argument, in signature order.
template <class F>
inline void for_each_tensor(const OpDef& op, const ArgPack& args, F&& f) {
  for (int i = 0; i < op.num_params; ++i) {
    switch (op.params[size_t(i)].role) {
      case ParamRole::tensor: f(*args[i].tensor, i, -1); break;
      case ParamRole::optional_tensor:
        if (args[i].present) f(*args[i].tensor, i, -1);
        break;
      case ParamRole::tensor_list: {
        const std::span<const Tensor> l = args[i].list;
        for (size_t j = 0; j < l.size(); ++j) f(l[j], i, int(j));
        break;
      }
      default: break;
    }
  }
}

// Each error of the checks is made by a [[gnu::cold]] function that returns it (Note [Nothing alive at a throw]).
[[gnu::cold]] InvalidArgument structure_error(const OpDef& op, const ArgPack& args) {
  if (args.count != op.num_params)
    return InvalidArgument(std::string(op.name), "",
                           fmt::format("takes {} arguments, got {}", op.num_params, args.count));
  for (int i = 0; i < op.num_params; ++i)
    if (args[i].role != op.params[size_t(i)].role)
      return InvalidArgument(std::string(op.name), std::string(op.params[size_t(i)].name),
                             fmt::format("expected a {} argument, got a {}",
                                         param_role_name(op.params[size_t(i)].role), param_role_name(args[i].role)));
  return InvalidArgument(std::string(op.name), "", "malformed argument pack");
}

[[gnu::cold]] InvalidArgument undefined_tensor(const OpDef& op, int param, int list_index) {
  return InvalidArgument(std::string(op.name), param_label(op, param, list_index),
                         "is an undefined tensor (default-constructed or moved from)");
}

[[gnu::cold]] NoTensorInput no_tensor_input(const OpDef& op) { return NoTensorInput(std::string(op.name)); }

// The rarer errors are thrown from a function of their own (Note [Nothing alive at a throw]): in line, their throw
// sites cost a DeviceMismatch 24,400 instructions instead of 18,250.
template <auto Make, class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void raise_error(const Args&... args) {
  throw Make(args...);
}

// Note [Nothing alive at a throw]
// A raise + catch costs what the C++ unwinder does per frame between the throw and the catch (~2,000 instructions
// per frame and phase in libgcc; docs/benchmarks.md), and a frame with a live object at the throw costs a second
// visit: the unwinder stops there to run the destructor, then starts again. So the two common errors of steps 2 and
// 3 are made by a function that returns them (device_mismatch, dtype_mismatch: every string and offender list is
// built and dropped in its frame). The call path does not throw them at all: it hands them to the caller's frame
// (Note [A raise with no crossfire frame]), so a DeviceMismatch from add() crosses no crossfire frame; validate()
// and output_spec() throw them from check_arguments, which they take in line. Every other error of dispatch is
// made the same way and thrown by raise_error, a frame of its own: each throw site in line lengthens the frame's
// table of call sites, which the C++ runtime reads entry by entry on every raise through that frame.
[[gnu::cold]] DeviceMismatch device_mismatch(const OpDef& op, const ArgPack& args, const TargetInfo& target) {
  OffenderList offenders;
  for_each_tensor(op, args, [&](const Tensor& t, int param, int li) {
    if (t.device() != target.device)
      offenders.push_back({param_label(op, param, li), param, li, t.device(),
                           t.device().backend != target.device.backend});
  });
  return DeviceMismatch(std::string(op.name), target.device, param_label(op, target.param, target.list_index),
                        std::move(offenders));
}

// Note [A raise with no crossfire frame]
// A C++ raise costs what the unwinder does for each frame between the throw and the catch, twice (once to find the
// handler, once to unwind): looking up the frame's unwind table, running its CFA program, and, for a frame with
// cleanups or handlers, the language's personality routine, which reads the frame's call-site table entry by
// entry. Thrown from the generic path, a DeviceMismatch from add() crossed one crossfire frame (call_generic_raw),
// and that frame was ~5,000 of the ~18,200 instructions of a raise + catch. So the two common errors of dispatch
// (steps 2 and 3: DeviceMismatch and DTypeMismatch) are not thrown where they are found. raised() makes the error
// as an exception object of the C++ runtime (__cxa_allocate_exception, which is what a throw expression calls
// first), and the generic path returns its address with the low bit set, through the same tail calls as a result
// (Note [A call's result in a register]). adopt_result() (dispatch.hpp), in line in the caller's function, sees the
// bit and throws the object from there with __cxa_throw, which is what a throw expression calls second: the
// unwinder goes from __cxa_throw straight to the caller's frame. The object's type for the catch clauses is its
// dynamic type (typeid of the Error, taken in the library by raised_type(): a caller built with -fno-rtti cannot
// write typeid, and tests/package_test.sh compiles the installed header so), and its destructor the Error's
// virtual one, so a catch sees exactly what a throw expression would have thrown. Every way an entry's result is
// read goes through adopt_result() (the typed API, call(), call_generic); validate() and output_spec() throw as
// before. Both runtimes crossfire is built with (libstdc++ with libsupc++, libc++ with libc++abi) have this Itanium
// C++ ABI. DeviceMismatchRaise.BehavesAsAThrowExpressionsExceptionThroughEveryWayIn (tests/contract_mismatch_test.cpp)
// holds the raise to a throw expression's behaviour.
template <class Make>
[[gnu::cold, gnu::noinline]] TensorImpl* raised(Make make) {
  using E = decltype(make());
  static_assert(std::is_base_of_v<Error, E> && std::has_virtual_destructor_v<E>);
  void* memory = __cxxabiv1::__cxa_allocate_exception(sizeof(E));
  E* e;
  try {
    e = ::new (memory) E(make());  // made in place (the prvalue is not moved)
  } catch (...) {
    __cxxabiv1::__cxa_free_exception(memory);
    throw;
  }
  // throw_raised() hands the runtime the Error's address, which must be the object's, as __cxa_allocate_exception
  // gave it: so it is for single inheritance without virtual bases (the Itanium ABI lays a primary base at offset 0).
  Error* base = e;
  if (static_cast<void*>(base) != memory) std::abort();
  return reinterpret_cast<TensorImpl*>(reinterpret_cast<uintptr_t>(base) | detail::kRaised);
}

// Re-walks the arguments to find the first offender of step 3 and say exactly what was expected of it.
[[gnu::cold]] DTypeMismatch dtype_mismatch(const OpDef& op, const ArgPack& args) {
  std::optional<DTypeMismatch> found;
  std::array<int, 8> group_first_param{};
  std::array<int, 8> group_first_list{};
  std::array<int, 8> group_dtype{};
  group_dtype.fill(-1);
  int list_dtype = -1;
  for_each_tensor(op, args, [&](const Tensor& t, int param, int li) {
    if (found) return;
    const ParamDef& p = op.params[size_t(param)];
    if (!p.dtypes.contains(t.dtype())) {
      found.emplace(std::string(op.name), param_label(op, param, li), t.dtype(), p.dtypes);
      return;
    }
    if (li >= 0) {
      if (li == 0) {
        list_dtype = int(t.dtype());
      } else if (int(t.dtype()) != list_dtype) {
        found.emplace(std::string(op.name), param_label(op, param, li), t.dtype(), DTypeSet{DType(list_dtype)},
                      fmt::format("expected {} like `{}`", dtype_name(DType(list_dtype)), param_label(op, param, 0)));
        return;
      }
    }
    if (uint8_t g = p.same_dtype_group) {
      if (group_dtype[g] < 0) {
        group_dtype[g] = int(t.dtype());
        group_first_param[g] = param;
        group_first_list[g] = li;
      } else if (group_dtype[g] != int(t.dtype())) {
        found.emplace(std::string(op.name), param_label(op, param, li), t.dtype(), DTypeSet{DType(group_dtype[g])},
                      fmt::format("expected {} like `{}` (no implicit promotion; cast first)",
                                  dtype_name(DType(group_dtype[g])),
                                  param_label(op, group_first_param[g], group_first_list[g])));
      }
    }
  });
  if (!found) throw InvalidArgument(std::string(op.name), "", "dtype check failed without an offender");
  return std::move(*found);
}

[[gnu::cold]] AutodiffError tracked_forbidden(const OpDef& op, const ArgPack& args) {
  std::optional<AutodiffError> found;
  for_each_tensor(op, args, [&](const Tensor& t, int param, int li) {
    if (!found && op.params[size_t(param)].grad == GradPolicy::forbidden && detail::is_tracked(t.impl()))
      found.emplace(std::string(op.name),
                    fmt::format("{}: input tensor `{}` is tracked by autodiff, but `{}` is not differentiable there; "
                                "call detach() first if cutting the gradient is intended",
                                op.name, param_label(op, param, li), op.name));
  });
  if (!found) throw AutodiffError(std::string(op.name), "autodiff check failed without an offender");
  return std::move(*found);
}

// Note [The element bound]
// Every tensor's shape has non-zero dims that multiply to at most kMaxElements (2^31-1). Shape::checked enforces it
// on shapes from caller data, and dispatch on every op's result after the op's rule (output_of below, the end of
// step 5), so no rule has to remember it. A shape with a 0 dim holds no elements, but the bound still counts its
// other dims: otherwise broadcasting [2^30, 1, 0] with [1, 2^30, 0] (or cat, index_select or matmul around a 0
// dim) would build a shape that zeros() refuses, the next op that drops the 0 (a sum over that axis) would ask the
// backend for 2^60 elements, and numel() could overflow on the way. With the bound, numel() never overflows and
// no chain of ops reaches a size that the caller could not have asked for directly.
[[gnu::cold]] ShapeError result_too_large(const OpDef& op, const Shape& shape) {
  return ShapeError(std::string(op.name), "",
                    fmt::format("the result's shape {} is out of range: its non-zero dims multiply to more than {}, "
                                "the most elements a tensor may have",
                                shape.str(), kMaxElements));
}

// Step 5: the op's output rule, then the element bound. Both paths call this one function.
[[gnu::always_inline]] inline OutputSpec output_of(const OpDef& op, const CallView& call) {
  OutputSpec spec = op.output(call);
  if (!spec.shape.within_element_bound()) [[unlikely]]
    raise_error<result_too_large>(op, spec.shape);
  return spec;
}

struct Checked {
  TargetInfo target;
  bool record = false;  // a differentiable input is tracked and grad mode is on
  TensorImpl* raised = nullptr;  // kRaiseInCaller: the error of step 2 or 3, for the caller to throw
};

// The per-tensor part of steps 2-4, accumulated as flags so that one pass serves all three checks and the errors
// can still be raised in the contract's order afterwards.
struct TensorChecks {
  uint16_t target;
  bool device_ok = true, dtype_ok = true, forbidden_tracked = false, diff_tracked = false;
  std::array<int8_t, 4> group_dtype{-1, -1, -1, -1};  // dtype groups 1..3 (0 means "no group")
  int8_t list_dtype = -1;

  inline void check(const OpDef& op, const TensorImpl* impl, int param, int list_index) {
    if (impl == nullptr) [[unlikely]]
      raise_error<undefined_tensor>(op, param, list_index);
    const ParamDef& p = op.params[size_t(param)];
    const int8_t dt = int8_t(impl->dtype);
    device_ok &= impl->device.packed() == target;
    dtype_ok &= p.dtypes.contains(impl->dtype);
    if (list_index >= 0) {
      if (list_index == 0) list_dtype = dt;
      dtype_ok &= list_dtype == dt;
    }
    if (p.same_dtype_group) {
      int8_t& g = group_dtype[p.same_dtype_group & 3];
      if (g < 0) g = dt;
      dtype_ok &= g == dt;
    }
    if (impl->autograd != nullptr && impl->autograd->tracked()) {
      forbidden_tracked |= p.grad == GradPolicy::forbidden;
      diff_tracked |= p.grad == GradPolicy::differentiable;
    }
  }
};

// Steps 1-4 of contract section 4. Returns the target; raises the first error in the contract's order. Without
// kCheckDevices step 2 is left out (output_spec(): the call as if every tensor were on the target). With
// kRaiseInCaller the errors of steps 2 and 3 are returned raised instead of thrown (Note [A raise with no crossfire
// frame]).
template <bool kCheckDevices = true, bool kRaiseInCaller = false>
[[gnu::always_inline]] inline Checked check_arguments(const OpDef& op, const ArgPack& args) {
  // The argument pack must match the signature (cheap; the typed API always builds it right).
  if (args.count != op.num_params) [[unlikely]]
    raise_error<structure_error>(op, args);
  for (int i = 0; i < op.num_params; ++i)
    if (args[i].role != op.params[size_t(i)].role) [[unlikely]]
      raise_error<structure_error>(op, args);

  Checked out;
  TensorChecks tc;
  if (op.plain_tensors) {
    // Fast path (most ops): every tensor parameter is a plain tensor, so the first one is the target.
    const int first = op.tensor_params[0];
    const TensorImpl* t0 = args[first].tensor->impl();
    if (t0 == nullptr) [[unlikely]]
      raise_error<undefined_tensor>(op, first, -1);
    out.target = {t0->device, first, -1};
    tc.target = t0->device.packed();
    for (int k = 0; k < op.num_tensor_params; ++k) {
      const int param = op.tensor_params[size_t(k)];
      tc.check(op, args[param].tensor->impl(), param, -1);
    }
  } else {
    // 1. The target: the first present tensor argument, or the explicit device of a creation op.
    bool found = false;
    for (int k = 0; k < op.num_tensor_params && !found; ++k) {
      const int i = op.tensor_params[size_t(k)];
      const Arg& a = args[i];
      if (a.role == ParamRole::tensor || (a.role == ParamRole::optional_tensor && a.present)) {
        if (!a.tensor->defined()) [[unlikely]]
          raise_error<undefined_tensor>(op, i, -1);
        out.target = {a.tensor->device(), i, -1};
        found = true;
      } else if (a.role == ParamRole::tensor_list && !a.list.empty()) {
        if (!a.list[0].defined()) [[unlikely]]
          raise_error<undefined_tensor>(op, i, 0);
        out.target = {a.list[0].device(), i, 0};
        found = true;
      }
    }
    if (!found) {
      if (op.has_tensor_params()) raise_error<no_tensor_input>(op);
      if (const int i = op.param_with_role(ParamRole::device_attr); i >= 0) out.target = {args[i].device, i, -1};
      return out;  // creation ops: nothing else to check here
    }
    // 2-4 in one pass over every present tensor, list elements included.
    tc.target = out.target.device.packed();
    for_each_tensor(op, args, [&](const Tensor& t, int param, int li) { tc.check(op, t.impl(), param, li); });
  }
  if (kCheckDevices && !tc.device_ok) [[unlikely]] {
    if constexpr (!kRaiseInCaller) throw device_mismatch(op, args, out.target);  // Note [Nothing alive at a throw]
    out.raised = raised([&] { return device_mismatch(op, args, out.target); });
    return out;
  }
  if (!tc.dtype_ok) [[unlikely]] {
    if constexpr (!kRaiseInCaller) throw dtype_mismatch(op, args);
    out.raised = raised([&] { return dtype_mismatch(op, args); });
    return out;
  }
  if (tc.forbidden_tracked) [[unlikely]]
    raise_error<tracked_forbidden>(op, args);
  out.record = tc.diff_tracked && t_grad_enabled && op.backward != nullptr;
  return out;
}

// The backend that will run the call and the kernel it will use; raises before any side effect.
struct Plan {
  Backend* backend;
  KernelFn kernel;  // nullptr for ops that dispatch runs itself (from_data, to)
};

constexpr OpId kFromData = op_id("from_data");
constexpr OpId kTo = op_id("to");

[[gnu::cold]] Unsupported dtype_unsupported(const OpDef& op, const Backend& b, DType dt, Device d) {
  return Unsupported(std::string(op.name), b.kind(),
                     fmt::format("{} computes no {} tensors (its dtypes: {})", d.str(), dtype_name(dt),
                                 b.dtypes().str()));
}
[[gnu::cold]] Unsupported no_kernel(const OpDef& op, OpId id, const Backend& b) {
  return Unsupported(std::string(op.name), b.kind(), b.unsupported_reason(id));
}

inline Plan plan(OpId id, const OpDef& op, const OutputSpec& spec, const Checked& c) {
  Backend& b = backend_for(c.target.device);
  if (id == kTo) {
    Backend& dest = backend_for(spec.device);  // the destination must exist too
    if (!dest.dtypes().contains(spec.dtype)) [[unlikely]]
      raise_error<dtype_unsupported>(op, dest, spec.dtype, spec.device);
    return {&b, nullptr};
  }
  if (!b.dtypes().contains(spec.dtype)) [[unlikely]]
    raise_error<dtype_unsupported>(op, b, spec.dtype, spec.device);
  if (id == kFromData) return {&b, nullptr};
  KernelFn k = b.kernel(id);
  if (k == nullptr) [[unlikely]]
    raise_error<no_kernel>(op, id, b);
  return {&b, k};
}

void transfer(const TensorImpl& src, TensorImpl& dst) {
  if (src.nbytes == 0) return;
  if (src.device.backend == dst.device.backend) {
    src.owner->copy(src, dst);
  } else {
    std::vector<uint8_t> staging(src.nbytes);
    src.owner->read(src, staging.data());
    dst.owner->write(dst, staging.data());
  }
  BackendCounters::bump(src.owner->counters().transfers);
}

void record_node(OpId id, const ArgPack& args, Tensor& out) {
  auto node = std::allocate_shared<detail::Node>(detail::RecyclingAllocator<detail::Node>{}, id, args,
                                                 g_nodes_recorded.load(std::memory_order_relaxed));
  BackendCounters::bump(g_nodes_recorded);
  node->output = out.impl();
  TensorImpl* impl = out.impl();
  if (!impl->autograd) impl->autograd = new AutogradMeta();
  impl->autograd->grad_fn = std::move(node);
}

}  // namespace

namespace detail {
Node::Node(OpId id, const ArgPack& call_args, uint64_t seq) : op(id), sequence(seq) {
  const OpDef& def = op_def(id);
  // (An op whose tensor parameters are all plain tensors has one slot each: no need to walk the pack for them.)
  const size_t n = def.plain_tensors ? size_t(def.num_tensor_params) : size_t(count_input_slots(def, call_args));
  if (n <= kInlineSlots) {  // Note [Node slots inline]
    inputs = {inline_inputs_.data(), n};
    needs = {inline_needs_.data(), n};
  } else {
    heap_inputs_ = std::make_unique<Tensor[]>(n);
    heap_needs_ = std::make_unique<bool[]>(n);
    inputs = {heap_inputs_.get(), n};
    needs = {heap_needs_.get(), n};
  }
  // One pass: copy each tensor into its slot with its `needs` flag, copy each int list, and re-point the view
  // in `args` at the copy. (int_lists may grow during the pass; moving an inner vector keeps its buffer, so the
  // spans taken from earlier ones stay valid.)
  args = call_args;
  size_t slot = 0;
  for (int i = 0; i < def.num_params; ++i) {
    Arg& a = args.args[size_t(i)];
    const bool differentiable = def.params[size_t(i)].grad == GradPolicy::differentiable;
    auto keep = [&](const Tensor& t) {
      needs[slot] = differentiable && is_tracked(t.impl());
      inputs[slot] = t;
      return &inputs[slot++];
    };
    if (a.role == ParamRole::tensor || (a.role == ParamRole::optional_tensor && a.present)) {
      a.tensor = keep(*a.tensor);
    } else if (a.role == ParamRole::tensor_list) {
      const Tensor* first = inputs.data() + slot;
      for (const Tensor& t : a.list) keep(t);
      a.list = std::span<const Tensor>(first, a.list.size());
    } else if (a.role == ParamRole::int_list_attr) {
      a.ints = int_lists.emplace_back(a.ints.begin(), a.ints.end());
    } else if (a.role == ParamRole::bytes_attr) {
      a.bytes = {};  // no differentiable op takes bytes
    }
  }
}

// The generic path: every op, every kind of argument, every error. The specialised path below hands it every call
// it does not accept, so this is also where all of dispatch's errors are raised.
OutputSpec validate_generic(OpId id, const ArgPack& args) {
  const OpDef& op = op_def(id);
  Checked c = check_arguments(op, args);
  OutputSpec spec = output_of(op, CallView{op, args, c.target.device});  // 5. shape and attributes
  plan(id, op, spec, c);
  return spec;
}

namespace {
TensorImpl* call_generic_raw(OpId id, const ArgPack& args) {
  const OpDef& op = op_def(id);
  const Checked c = check_arguments<true, true>(op, args);  // 1-4
  if (c.raised != nullptr) [[unlikely]]
    return c.raised;
  const OutputSpec spec = output_of(op, CallView{op, args, c.target.device});  // 5
  const Plan p = plan(id, op, spec, c);
  // Validation is over: from here on, side effects.
  Backend& out_backend = id == kTo ? backend(spec.device.backend) : *p.backend;
  Tensor out = Tensor::adopt_new(out_backend.allocate(spec.device, spec.dtype, spec.shape, op.name));
  if (p.kernel != nullptr) {
    p.backend->launch(p.kernel, KernelCall{op, id, args, *out.impl()});
  } else if (id == kFromData) {
    if (out.impl()->nbytes) p.backend->write(*out.impl(), args[0].bytes.data());
    BackendCounters::bump(p.backend->counters().transfers);
  } else {
    transfer(*args[0].tensor->impl(), *out.impl());
  }
  if (c.record) record_node(id, args, out);
  return std::move(out).take();
}
}  // namespace

Tensor call_generic(OpId id, const ArgPack& args) { return adopt_result(call_generic_raw(id, args)); }

std::type_info* raised_type(const Error* error) noexcept { return const_cast<std::type_info*>(&typeid(*error)); }
void destroy_raised(void* error) noexcept { static_cast<Error*>(error)->~Error(); }

}  // namespace detail

namespace {

using detail::call_generic_raw;
using detail::validate_generic;

// Note [Specialised fast path]
// call() first runs code specialised at compile time for the op, generated from its kOpTable entry: the
// signature's roles, each parameter's dtype set, dtype group and role are constants, the per-argument checks are
// unrolled, the output rule is a direct call (or, for elementwise and creation ops, its common case runs in line:
// Note [A rule's common case, in line]), and the backend is the target tensor's owner (a tensor's device
// always exists, so there is nothing to look up). That is what brings dispatch plus validation near the cost of
// the kernel call itself (docs/benchmarks.md).
//
// The specialisation only ever *accepts* a call. Anything it is not sure of (a failed check, a tracked input of a
// parameter that forbids one, a missing kernel or device, no tensor where one is needed, `to` and `from_data`,
// which dispatch runs itself) goes to the generic path, which checks
// everything again from the start and raises the contract's error in the contract's order. Nothing has happened
// before the hand-over (no allocation, no counter, no tape), so the fallback cannot be observed, and the two paths
// cannot disagree about which error a call gets: only the generic one raises before step 5, and step 5 (output_of:
// the op's rule, then the element bound) is the same function on both, or in line the same case of it, raising
// through the same Shape::checked (Note [A rule's common case, in line]). (cat, the one op whose checks grow with its
// arguments, runs its rule's own walk and output function in the fast path instead of calling the rule: Note [One
// walk over cat's list] in cat_walk.hpp; it too only accepts.)
// tests/harness/fast_path_test.cpp and fuzz/fuzz_call.cpp hold the two paths to that on hostile calls, and
// SpecialisedPath.CatAgreesWithTheGenericPathOnEveryKindOfDifference holds cat's to it on every kind of difference.
//
// Note [A rule's common case, in line]
// For most ops the fast path calls the op's rule (step 5) like the generic path. Two kinds of rule it runs in line
// instead, as the op table records beside the rule (OpDef::form, RuleForm), and that saves more than the call:
//  - elementwise (same_as_input, broadcast, broadcast_bool, where, cast): when the op's tensors all have the same
//    shape, the rule returns that shape with the target device and one argument's dtype (or bool). The fast path
//    runs that case: the output's shape is an input's, within the element bound like every tensor's (Note [The
//    element bound]), so the bound check has nothing to find, and no shape is built, returned or copied, since the
//    allocation reads the input's shape where it is. Other shapes go to the rule, which broadcasts or raises.
//  - creation (zeros, ones, full): the rule is Shape::checked on the shape attribute, with the dtype attribute;
//    the fast path makes the same call, whose bound check (and ShapeError, named as the rule names it) stands for
//    output_of's, and builds the shape where the allocation reads it instead of in a returned OutputSpec.
// Measured in docs/benchmarks.md (the elementwise and creation cases). RuleForm.EveryFormIsItsRulesCommonCase holds
// each record to its rule and the two paths to each other; SpecialisedPath.AgreesWithTheGenericPathOnHostileCalls
// holds the paths to each other on hostile calls.
template <OpId Id>
struct Specialised {
  static constexpr const OpDef& op = kOpTable[Id];
  static constexpr RuleForm kForm = op.form;
  static constexpr int kDeviceParam = op.param_with_role(ParamRole::device_attr);
  // cat has its own fast path (below: one walk over its list). Any other op with a tensor list would take the
  // generic path until it has one; there is none today.
  static constexpr bool kCat = Id == op_id("cat");
  static constexpr bool kEligible = Id != kTo && Id != kFromData && (op.has_tensor_params() || kDeviceParam >= 0) &&
                                    op.param_with_role(ParamRole::tensor_list) < 0;

  // What the checks have seen so far. `ok` stays true while every check passes; a null tensor makes the walk stop
  // at once (there is nothing to read). `record`: a differentiable input is tracked and grad mode is on
  // (Note [A tracked call on the fast path]).
  struct Seen {
    const TensorImpl* target = nullptr;  // the first present tensor (Note [Why the first tensor picks the device])
    uint16_t device = 0;
    std::array<int8_t, 4> group{-1, -1, -1, -1};  // dtype groups 1..3
    bool ok = true;
    bool record = false;
  };

  // Note [A tracked call on the fast path]
  // An input with autodiff state (t->autograd set) is the one place where the fast path reads more than the
  // tensor's header, and it decides from that state what the generic path's check_arguments decides. A tracked
  // input of a `forbidden` parameter goes to the generic path, which raises AutodiffError. A tracked input of a
  // differentiable one, with grad mode on and a backward rule for the op (Checked::record's three conditions),
  // makes the call record a node, with the same record_node after the same allocation and launch (run_recorded).
  // cat's walk only says whether some element carries autodiff state (CatWalkResult::meta); when one does, cat_rank
  // asks the same of each element.
  // A tracked add used to take the whole generic path (its checks again, the rule, a backend lookup): 943
  // instructions under callgrind, 737 with this, 709 once a node stopped walking the pack to count its slots
  // (docs/benchmarks.md). SpecialisedPath.AgreesWithTheGenericPathOnHostile
  // Calls compares the gradients that flow back through either path's node.
  //
  // So that an untracked call pays nothing for this, the walk runs in two modes. call() first walks with
  // kRecording = false, where an input with autodiff state is accepted only where the call cannot record a node
  // because of it (accepts_autodiff_state: a `constant` parameter, or a differentiable one under no_grad, which is
  // inference with trainable weights); anything else it refuses, and call_refused() walks again with kRecording =
  // true (see_autodiff_state) before it hands the call to the generic path (both walk_and_run). A tracked add pays
  // for that second walk and frame (737 instructions against 700 with one walk and a `record` flag, when measured),
  // and a raise 55 more; the untracked calls have the code they had before (the flag cost them 2-5 instructions).
  template <size_t P>
  static bool accepts_autodiff_state() {
    constexpr GradPolicy g = op.params[P].grad;
    if constexpr (g == GradPolicy::forbidden) return false;
    else if constexpr (g == GradPolicy::constant) return true;
    else return !t_grad_enabled;
  }
  template <size_t P>
  [[gnu::always_inline]] static void see_autodiff_state(const AutogradMeta& m, Seen& s) {
    constexpr GradPolicy g = op.params[P].grad;
    if constexpr (g == GradPolicy::forbidden) s.ok &= !m.tracked();
    // (op.backward is tested at run time: g++ does not take a function's address != nullptr as a constant
    // expression under -fsanitize=undefined. Optimised, it folds away.)
    else if constexpr (g == GradPolicy::differentiable) s.record |= op.backward != nullptr && t_grad_enabled && m.tracked();
  }

  template <bool kRecording, size_t P>
  static bool check_tensor(const TensorImpl* t, Seen& s) {
    constexpr ParamDef p = op.params[P];
    if (t == nullptr) [[unlikely]]
      return false;
    if (s.target == nullptr) {
      s.target = t;
      s.device = t->device.packed();
    }
    const int8_t dt = int8_t(t->dtype);
    s.ok &= t->device.packed() == s.device;  // (&= rather than &&: no branch per check)
    s.ok &= p.dtypes.contains(t->dtype);
    if (t->autograd != nullptr) [[unlikely]] {
      if constexpr (kRecording) see_autodiff_state<P>(*t->autograd, s);
      else s.ok &= accepts_autodiff_state<P>();
    }
    if constexpr (p.same_dtype_group != 0) {
      int8_t& g = s.group[p.same_dtype_group & 3];
      if (g < 0) g = dt;
      s.ok &= g == dt;
    }
    return true;
  }

  // Steps 1-4 for parameter P; false stops the walk.
  template <bool kRecording, size_t P>
  static bool check_param(const ArgPack& args, Seen& s) {
    constexpr ParamRole role = op.params[P].role;
    static_assert(role != ParamRole::tensor_list, "an op with a tensor list is not eligible (kEligible)");
    const Arg& a = args[int(P)];
    if constexpr (role == ParamRole::tensor) {
      return check_tensor<kRecording, P>(a.tensor->impl(), s);
    } else if constexpr (role == ParamRole::optional_tensor) {
      return !a.present || check_tensor<kRecording, P>(a.tensor->impl(), s);
    } else {
      return true;
    }
  }

  // Whether the call passes steps 1-4, and if so the backend to run it on and (kRecording) whether it records a
  // node.
  template <bool kRecording, size_t... P>
  static Backend* accept(const ArgPack& args, Device& target, bool& record, std::index_sequence<P...>) {
    // && on the count first: arguments past args.count are not constructed and must not be read.
    if (!(args.count == op.num_params && ((args[int(P)].role == op.params[P].role) && ...))) return nullptr;
    if constexpr (op.has_tensor_params()) {
      Seen s;
      if (!(check_param<kRecording, P>(args, s) && ...) || !s.ok || s.target == nullptr) return nullptr;
      target = s.target->device;
      record = s.record;
      return s.target->owner;
    } else {
      target = args[kDeviceParam].device;
      return find_backend(target);
    }
  }

  // The backend and kernel for an accepted call, or nullptr.
  template <bool kRecording>
  static Backend* plan(const ArgPack& args, Device& target, KernelFn& kernel, bool& record) {
    Backend* b = accept<kRecording>(args, target, record, std::make_index_sequence<size_t(op.num_params)>());
    if (b == nullptr) [[unlikely]]
      return nullptr;
    kernel = b->kernel(Id);
    return kernel != nullptr ? b : nullptr;
  }

  // Whether backend b may make an output of dtype dt (Backend::dtypes()). Only an op with a dtype attribute (the
  // creation ops, cast) can ask a backend for a dtype it has no tensor of: every other output's dtype is an input's
  // or bool, so for them this is no check at all. A refusal goes to the generic path, which raises Unsupported.
  [[gnu::always_inline]] static bool makes_dtype(const Backend* b, DType dt) {
    if constexpr (kDTypeParam >= 0) return b->dtypes().contains(dt);
    else return true;
  }

  // The common end of an accepted call: the output allocated and the kernel launched.
  [[gnu::always_inline]] static TensorImpl* run(Backend* b, KernelFn kernel, Device device, DType dtype,
                                                const Shape& shape, const ArgPack& args) {
    Tensor out = Tensor::adopt_new(b->allocate(device, dtype, shape, op.name));
    b->launch(kernel, KernelCall{op, Id, args, *out.impl()});
    return std::move(out).take();
  }
  [[gnu::always_inline]] static TensorImpl* run(Backend* b, KernelFn kernel, const OutputSpec& spec, const ArgPack& args) {
    return run(b, kernel, spec.device, spec.dtype, spec.shape, args);
  }
  // run() for a call that records a node, as the generic path records it (Note [A tracked call on the fast path]).
  static TensorImpl* run_recorded(Backend* b, KernelFn kernel, Device device, DType dtype,
                                    const Shape& shape, const ArgPack& args) {
    Tensor out = Tensor::adopt(run(b, kernel, device, dtype, shape, args));
    record_node(Id, args, out);
    return std::move(out).take();
  }

  // The shape of an elementwise call that needs no broadcasting, or nullptr (Note [A rule's common case, in line]).
  // Only for an accepted call: its tensors are defined.
  template <size_t... P>
  static const Shape* common_shape(const ArgPack& args, std::index_sequence<P...>) {
    const Shape& first = args[0].tensor->shape();
    return ((args[int(P) + 1].tensor->shape() == first) && ...) ? &first : nullptr;
  }
  // A creation op's shape: rules::creation's Shape::checked (Note [A rule's common case, in line]).
  static constexpr int kShapeParam = op.param_with_role(ParamRole::int_list_attr);
  static constexpr int kDTypeParam = op.param_with_role(ParamRole::dtype_attr);
  static Shape created_shape(const ArgPack& args) {
    return Shape::checked(args[kShapeParam].ints, op.name, op.params[size_t(kShapeParam)].name);
  }
  static DType common_dtype(const ArgPack& args) {
    if constexpr (kForm.dtype_from < 0) return DType::boolean;
    else if constexpr (op.params[size_t(kForm.dtype_from)].role == ParamRole::dtype_attr) return args[kForm.dtype_from].dtype;
    else return args[kForm.dtype_from].tensor->dtype();
  }

  // Step 5 of an accepted call, which may still raise: `accepted(device, dtype, shape)` of the output, from the
  // rule's common case in line where the op table records one, else from the rule (output_of).
  template <class Accepted>
  [[gnu::always_inline]] static auto output(const ArgPack& args, Device target, Accepted&& accepted) {
    if constexpr (kForm.kind == RuleForm::elementwise) {
      if (const Shape* shape = common_shape(args, std::make_index_sequence<size_t(kForm.tensors - 1)>())) [[likely]]
        return accepted(target, common_dtype(args), *shape);
    } else if constexpr (kForm.kind == RuleForm::creation) {
      return accepted(target, args[kDTypeParam].dtype, created_shape(args));
    }
    const OutputSpec spec = output_of(op, CallView{op, args, target});
    return accepted(spec.device, spec.dtype, spec.shape);
  }

  // cat: steps 1-5 in one walk of the list (Note [One walk over cat's list] in cat_walk.hpp). `accepted(backend,
  // kernel, spec, record)` gives the result of an accepted call, `otherwise()` that of any other.

  template <int R, class Accepted, class Otherwise>
  static auto cat_rank(const ArgPack& args, int axis, Accepted&& accepted, Otherwise&& otherwise) {
    const std::span<const Tensor> ts = args[0].list;
    const detail::CatWalkResult w = detail::cat_walk<R, true>(ts, axis);
    if (w.undefined || w.differs) [[unlikely]]
      return otherwise();
    bool record = false;
    if (w.meta != 0) [[unlikely]] {  // an element carries autodiff state (Note [A tracked call on the fast path])
      Seen s;
      for (const Tensor& t : ts)
        if (const AutogradMeta* m = t.impl()->autograd) see_autodiff_state<0>(*m, s);
      if (!s.ok) return otherwise();
      record = s.record;
    }
    const TensorImpl* first = ts[0].impl();
    Backend* b = first->owner;
    const KernelFn kernel = b->kernel(Id);
    if (kernel == nullptr) [[unlikely]]
      return otherwise();
    const OutputSpec spec = detail::cat_output<R>(ts, axis, w.total, first->device);
    // (A total over kMaxElements fails this too, and the generic path raises the rule's error for it.)
    if (!spec.shape.within_element_bound()) [[unlikely]]
      return otherwise();  // the generic path raises (Note [The element bound])
    return accepted(b, kernel, spec, record);
  }

  template <class Accepted, class Otherwise>
  static auto cat(const ArgPack& args, Accepted&& accepted, Otherwise&& otherwise) {
    static_assert(op.params[0].role == ParamRole::tensor_list && op.params[1].role == ParamRole::int_attr);
    if (!(args.count == 2 && args[0].role == ParamRole::tensor_list && args[1].role == ParamRole::int_attr))
      return otherwise();
    const std::span<const Tensor> ts = args[0].list;
    if (ts.empty() || ts.size() > detail::kMaxCatList) return otherwise();
    const TensorImpl* first = ts[0].impl();
    if (first == nullptr) return otherwise();
    if constexpr (op.params[0].dtypes.bits != kAnyDType.bits)
      if (!op.params[0].dtypes.contains(first->dtype)) return otherwise();
    const int rank = first->shape.rank();
    int64_t axis = args[1].i;
    // axis in [-rank, rank) (none for rank 0), in one unsigned compare that cannot overflow
    if (uint64_t(axis) + uint64_t(rank) >= uint64_t(2 * rank)) return otherwise();
    if (axis < 0) axis += rank;
    static_assert(kMaxRank == 6, "one case per rank below");
    switch (rank) {
      case 1: return cat_rank<1>(args, int(axis), accepted, otherwise);
      case 2: return cat_rank<2>(args, int(axis), accepted, otherwise);
      case 3: return cat_rank<3>(args, int(axis), accepted, otherwise);
      case 4: return cat_rank<4>(args, int(axis), accepted, otherwise);
      case 5: return cat_rank<5>(args, int(axis), accepted, otherwise);
      case 6: return cat_rank<6>(args, int(axis), accepted, otherwise);
      default: return otherwise();  // rank 0: the generic path raises
    }
  }

  static TensorImpl* call(const ArgPack& args) {
    if constexpr (kCat) {
      return cat(
          args,
          [&](Backend* b, KernelFn kernel, const OutputSpec& spec, bool record) {
            if (record) [[unlikely]]
              return run_recorded(b, kernel, spec.device, spec.dtype, spec.shape, args);
            return run(b, kernel, spec, args);
          },
          [&] { return call_generic_raw(Id, args); });
    } else if constexpr (kEligible) {
      return walk_and_run<false>(args, [&] { return call_refused(args); });
    }
    return call_generic_raw(Id, args);
  }

  // A call the first walk refused: a tracked one runs here (Note [A tracked call on the fast path]), every other
  // goes to the generic path. (Both hand-overs are tail calls, so an error the generic path raises reaches the caller
  // through no frame of this: Note [A raise with no crossfire frame].)
  [[gnu::noinline]] static TensorImpl* call_refused(const ArgPack& args) {
    return walk_and_run<true>(args, [&] { return call_generic_raw(Id, args); });
  }

  // Steps 1-5 of an eligible op's call and its run, or `refused()` for a call the walk does not accept. With
  // kRecording = false the walk refuses a call that would record a node (Note [A tracked call on the fast path]).
  template <bool kRecording, class Refused>
  [[gnu::always_inline]] static TensorImpl* walk_and_run(const ArgPack& args, Refused&& refused) {
    Device target;
    KernelFn kernel;
    bool record = false;  // (stays false without kRecording)
    if (Backend* b = plan<kRecording>(args, target, kernel, record)) [[likely]]
      return output(args, target, [&](Device d, DType dt, const Shape& s) {
        if (!makes_dtype(b, dt)) [[unlikely]]
          return call_generic_raw(Id, args);
        if constexpr (kRecording)
          if (record) return run_recorded(b, kernel, d, dt, s, args);
        return run(b, kernel, d, dt, s, args);
      });
    return refused();
  }

  static OutputSpec validate(const ArgPack& args) {
    if constexpr (kCat) {
      return cat(
          args, [](Backend*, KernelFn, const OutputSpec& spec, bool) { return spec; },
          [&] { return validate_generic(Id, args); });
    } else if constexpr (kEligible) {
      Device target;
      KernelFn kernel;
      bool record = false;  // validation records nothing
      if (Backend* b = plan<true>(args, target, kernel, record)) [[likely]]
        return output(args, target, [&](Device d, DType dt, const Shape& s) {
          if (!makes_dtype(b, dt)) [[unlikely]]
            return validate_generic(Id, args);
          return OutputSpec{dt, s, d};
        });
    }
    return validate_generic(Id, args);
  }
};

template <size_t... I>
constexpr auto make_call_table(std::index_sequence<I...>) {
  return std::array<detail::CallFn, sizeof...(I)>{&Specialised<OpId(I)>::call...};
}
template <size_t... I>
constexpr auto make_validate_table(std::index_sequence<I...>) {
  return std::array<OutputSpec (*)(const ArgPack&), sizeof...(I)>{&Specialised<OpId(I)>::validate...};
}
constexpr auto kValidateTable = make_validate_table(std::make_index_sequence<size_t(kNumOps)>());

[[gnu::cold]] InvalidArgument no_such_op(OpId id) {
  return InvalidArgument(fmt::format("op #{}", id), "", fmt::format("no such op (the table has {})", kNumOps));
}

}  // namespace

// Note [A call's result in a register]
// Every op's entry (Specialised<Id>::call, the generic path behind it) returns its result as a TensorImpl* that
// owns one reference, not as a Tensor. A class with a destructor is returned through memory the caller passes,
// and neither g++ nor clang turns `return f(...)` into a jump for such a return; a pointer comes back in a
// register, so the fast path's hand-over to the generic path is a jump, and the typed API (ops.hpp) calls the
// table itself (detail::call_in_table) instead of through call(). An allocating add runs 13 fewer instructions
// (327 against 340 under callgrind), and a DeviceMismatch from add() reached the caller's catch through one
// crossfire frame instead of four (Note [Nothing alive at a throw]; now through none: Note [A raise with no
// crossfire frame], whose raised errors come back the same way). A result becomes a handle again by adopt_result
// (Tensor::adopt, which does not touch the count, once it has checked for a raised error);
// EveryWayInReleasesItsResultExactlyOnce checks each way in.
//
// constinit: filled at compile time, so an op called from another file's static initialiser finds it ready.
constinit const std::array<detail::CallFn, size_t(kNumOps)> detail::kCallTable =
    make_call_table(std::make_index_sequence<size_t(kNumOps)>());

// Note [Output rules see only checked calls]
// An output rule may assume steps 1-4 passed: a present target tensor, accepted dtypes, lists that are not empty
// where a tensor is needed (cat's rule reads element 0). So no public entry point hands a rule a call it has not
// checked: output_spec() runs steps 1, 3 and 4 itself and leaves out only the device check, which no rule reads
// (once it ran the rule alone, and the harness's stand-in for a failed `cat tensors=[]` read past an empty list).
OutputSpec output_spec(const CallView& call) {
  check_arguments<false>(call.op, call.args);
  return output_of(call.op, call);
}

OutputSpec validate(OpId id, const ArgPack& args) {
  if (id >= kNumOps) [[unlikely]]
    raise_error<no_such_op>(id);
  return kValidateTable[id](args);
}

Tensor call(OpId id, const ArgPack& args) {
  if (id >= kNumOps) [[unlikely]]
    raise_error<no_such_op>(id);
  return detail::call_in_table(id, args);
}

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

uint64_t autodiff_nodes_recorded() { return g_nodes_recorded.load(std::memory_order_relaxed); }

std::string_view param_role_name(ParamRole r) {
  switch (r) {
    case ParamRole::tensor: return "tensor";
    case ParamRole::optional_tensor: return "optional tensor";
    case ParamRole::tensor_list: return "tensor list";
    case ParamRole::int_attr: return "integer";
    case ParamRole::optional_int_attr: return "optional integer";
    case ParamRole::float_attr: return "float";
    case ParamRole::bool_attr: return "bool";
    case ParamRole::int_list_attr: return "integer list";
    case ParamRole::dtype_attr: return "dtype";
    case ParamRole::device_attr: return "device";
    case ParamRole::bytes_attr: return "bytes";
  }
  return "?";
}

}  // namespace crossfire
