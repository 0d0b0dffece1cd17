// SPDX-License-Identifier: Apache-2.0
// The dispatch entry point: every op call, typed (ops.hpp) or generic (the harness), goes through call().
#pragma once

#include <array>
#include <cstdint>
#include <cxxabi.h>

#include "crossfire/args.hpp"
#include "crossfire/backend.hpp"
#include "crossfire/error.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire {

// Validates the call exactly as contract section 4 says (no-tensor, device, dtype, autodiff, shape, in that
// order, before any side effect), allocates the output on the target device, runs the backend's kernel, and
// records an autodiff node when a differentiable input is tracked and grad mode is on.
Tensor call(OpId id, const ArgPack& args);

// Validation alone, with no side effect: raises what call() would raise before running anything, else returns
// the output spec. The harness's bad-input oracle and the benchmarks use it.
OutputSpec validate(OpId id, const ArgPack& args);

// Validation without the device check: steps 1, 3, 4 and 5 on the call as if every tensor were on call.device (the
// op's output rule, then the bound on every tensor's size: Note [The element bound] in dispatch.cpp). Raises what
// call() would raise after step 2, else returns the output spec; no side effect. The harness shapes stand-ins
// with it for values whose node raised DeviceMismatch (Note [Output rules see only checked calls]).
OutputSpec output_spec(const CallView& call);

namespace detail {
// Every op's entry in dispatch, indexed by OpId: the result comes back as a raw pointer that owns one reference
// (Note [A call's result in a register] in dispatch.cpp). call() is the checked way in.
using CallFn = TensorImpl* (*)(const ArgPack&);
extern const std::array<CallFn, size_t(kNumOps)> kCallTable;

// An entry may return, instead of a result, an error that dispatch made and did not throw: an exception object of
// the C++ runtime, its address tagged with kRaised. The caller throws it from its own frame, so the unwinder has no
// crossfire frame to visit between the throw and the caller's catch (Note [A raise with no crossfire frame] in
// dispatch.cpp). Only adopt_result() reads an entry's result.
inline constexpr uintptr_t kRaised = 1;
// The raised error's dynamic type, and the runtime's destructor for it. (Out of line: a caller built with -fno-rtti
// cannot write typeid, and this header must compile there too.)
std::type_info* raised_type(const Error* error) noexcept;
void destroy_raised(void* error) noexcept;

// Throws a raised error from the frame this is inlined into.
[[noreturn, gnu::always_inline]] inline void throw_raised(TensorImpl* result) {
  auto* e = reinterpret_cast<Error*>(reinterpret_cast<uintptr_t>(result) ^ kRaised);
  __cxxabiv1::__cxa_throw(e, raised_type(e), &destroy_raised);
}

// An entry's result as a handle, or its raised error thrown.
[[gnu::always_inline]] inline Tensor adopt_result(TensorImpl* result) {
  if (reinterpret_cast<uintptr_t>(result) & kRaised) [[unlikely]]
    throw_raised(result);
  return Tensor::adopt(result);
}

// call() for an id that is in the table by construction (the typed API's ids::*): no range check, and no frame
// between the caller and dispatch.
inline Tensor call_in_table(OpId id, const ArgPack& args) { return adopt_result(kCallTable[id](args)); }

// Dispatch's generic path alone, which call() and validate() hand every call they do not take themselves (Note
// [Specialised fast path] in dispatch.cpp). For the test that checks the two paths agree; use call() and
// validate(). `id` must be an op of the table.
Tensor call_generic(OpId id, const ArgPack& args);
OutputSpec validate_generic(OpId id, const ArgPack& args);
}  // namespace detail

// Which parameter the target device comes from ("lhs", "tensors[0]", "device"); for messages and oracles.
struct TargetInfo {
  Device device;
  int param = -1;       // index in the signature
  int list_index = -1;  // element of a tensor list, or -1
};

// Autodiff mode (contract section 5). no_grad is a scope: results made inside it are untracked.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Runs reverse mode from `root`: a tracked scalar, or any tracked tensor with a seed gradient of its shape and
// device. Gradients accumulate into leaves' grad(); each lives on its leaf's device.
void backward(const Tensor& root, const Tensor& seed = Tensor());

// How many autodiff nodes have been recorded since the process started (the "tape length"); an error path must
// leave it unchanged.
uint64_t autodiff_nodes_recorded();

}  // namespace crossfire
