// SPDX-License-Identifier: Apache-2.0
// See hostile_call.hpp.
#include "crossfire/harness/hostile_call.hpp"

#include <climits>
#include <cmath>

#include "crossfire/harness/generate.hpp"
#include "crossfire/ops.hpp"

namespace crossfire::harness {

namespace {

int64_t hostile_int(ChoiceSource& c) {
  switch (c.range(0, 5)) {
    case 0: return c.range(-3, 6);
    case 1: return int64_t(1) << c.range(20, 62);
    case 2: return -(int64_t(1) << c.range(0, 62));
    case 3: return INT64_MIN;
    case 4: return INT64_MAX;
    default: return c.range(0, 4);
  }
}

}  // namespace

std::unique_ptr<HostileCall> make_hostile_call(ChoiceSource& c, std::span<const Device> devices) {
  auto call = std::make_unique<HostileCall>();
  HostileCall& h = *call;
  h.id = draw_op(c);  // by name: Note [Draws that name what they pick] in generate.hpp
  const OpDef& op = op_def(h.id);
  h.tensors.reserve(size_t(kMaxParams) * 6);  // at most one tensor or a list of 5 per parameter: never reallocates
  h.lists.resize(kMaxParams);
  h.int_lists.resize(kMaxParams);
  h.bytes.resize(kMaxParams);

  // A device argument: one of `devices`, one past the last index of the first device's backend, or a device of
  // no known backend (Note [A device of no known backend] in dispatch/src/backend.cpp).
  auto device = [&] {
    const int64_t i = c.range(0, int64_t(devices.size()) + 1);
    if (i < int64_t(devices.size())) return devices[size_t(i)];
    if (i == int64_t(devices.size()))
      return Device{devices[0].backend, uint8_t(backend(devices[0].backend).device_count())};
    return Device{BackendKind(c.range(int64_t(backend_kinds().size()), 255)), 0};
  };
  auto tensor = [&]() -> const Tensor& {
    // Now and then the previous tensor again: add(x, x), cat([x, x, x]).
    if (!h.tensors.empty() && c.coin(1, 4)) {
      h.tensors.push_back(h.tensors.back());
      return h.tensors.back();
    }
    const DType dt = draw_dtype(c, kAnyDType);
    Shape s;
    const int rank = int(c.range(0, 5));
    if (rank > 0 && c.coin(1, 8)) {
      // Empty, with huge dims beside the 0: free to build, and what broadcasting, cat or matmul could multiply
      // past the element bound (Note [The element bound] in dispatch.cpp). The tensor itself keeps the bound.
      const int zero_at = int(c.range(0, rank - 1));
      int64_t product = 1;
      for (int i = 0; i < rank; ++i) {
        int64_t d = i == zero_at ? 0 : c.coin(1, 2) ? c.range(1, 4) : int64_t(1) << c.range(10, 30);
        if (d > kMaxElements / product) d = 1;
        product *= d == 0 ? 1 : d;
        s.push_back(d);
      }
    } else {
      for (int i = 0; i < rank; ++i) s.push_back(c.range(0, 4));
    }
    std::vector<uint8_t> bytes(size_t(s.numel()) * dtype_size(dt));
    for (auto& b : bytes) b = uint8_t(c.range(0, dt == DType::boolean ? 1 : 255));
    h.tensors.push_back(from_bytes(bytes, s.dims(), dt, devices[size_t(c.range(0, int64_t(devices.size()) - 1))]));
    if (dt == DType::f32 && c.coin(1, 2)) {
      Tensor& t = h.tensors.back();
      switch (c.range(0, 2)) {
        case 0:  // a tracked leaf
          h.leaves.push_back(t.set_requires_grad(true));
          break;
        case 1:  // a tracked result: an op's output, which carries its node
          h.leaves.push_back(t.set_requires_grad(true));
          t = neg(t);
          break;
        default:  // autodiff state that tracks nothing
          t.set_requires_grad(false);
          break;
      }
    }
    return h.tensors.back();
  };

  const int count = c.coin(1, 16) ? int(c.range(0, kMaxParams)) : op.num_params;
  for (int i = 0; i < count; ++i) {
    const ParamRole role =
        i < op.num_params && !c.coin(1, 16) ? op.params[size_t(i)].role : ParamRole(c.range(0, kNumParamRoles - 1));
    switch (role) {
      case ParamRole::tensor: h.pack.push(Arg::of(tensor())); break;
      case ParamRole::optional_tensor: h.pack.push(c.coin(1, 2) ? Arg::optional(nullptr) : Arg::optional(&tensor())); break;
      case ParamRole::tensor_list: {
        const int n = int(c.range(0, 5));
        for (int j = 0; j < n; ++j) h.lists[size_t(i)].push_back(tensor());
        h.pack.push(Arg::of(std::span<const Tensor>(h.lists[size_t(i)])));
        break;
      }
      case ParamRole::int_attr: h.pack.push(Arg::integer(hostile_int(c))); break;
      case ParamRole::optional_int_attr: h.pack.push(Arg::optional_integer(c.coin(1, 2), hostile_int(c))); break;
      case ParamRole::float_attr: {
        static constexpr double kValues[] = {0.0, 1.0, -1.0, 0.5, 1e300, -1e300, 1e-300, INFINITY, NAN, 3.0};
        h.pack.push(Arg::scalar(kValues[size_t(c.range(0, 9))]));
        break;
      }
      case ParamRole::bool_attr: h.pack.push(Arg::flag(c.coin(1, 2))); break;
      case ParamRole::int_list_attr: {
        const int n = int(c.range(0, 8));
        for (int j = 0; j < n; ++j) h.int_lists[size_t(i)].push_back(hostile_int(c));
        h.pack.push(Arg::of(IntList(h.int_lists[size_t(i)])));
        break;
      }
      case ParamRole::dtype_attr: h.pack.push(Arg::of(draw_dtype(c, kAnyDType))); break;
      case ParamRole::device_attr: h.pack.push(Arg::of(device())); break;
      case ParamRole::bytes_attr: {
        h.bytes[size_t(i)].resize(size_t(c.range(0, 64)));
        for (auto& b : h.bytes[size_t(i)]) b = uint8_t(c.range(0, 2));
        h.pack.push(Arg::of(std::span<const uint8_t>(h.bytes[size_t(i)])));
        break;
      }
    }
  }
  return call;
}

}  // namespace crossfire::harness
