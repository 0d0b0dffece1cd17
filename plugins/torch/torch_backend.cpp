// SPDX-License-Identifier: Apache-2.0
// `torch`: a crossfire backend whose kernels are ATen's CPU operators (libtorch 1.13, Debian's libtorch-dev), built
// outside crossfire's tree against its installed package, as any framework's backend would be (docs/your-backend.md).
//
// Each kernel views crossfire's tensors as ATen tensors over the same memory (at::from_blob, no copy), calls the
// ATen operator that computes the op, and copies ATen's result into crossfire's output. What the adapter adds is only
// what crossfire's contract asks of every backend and ATen does not do the same way: the output's dtype (ATen sums
// i32 into i64 and returns i64 indices: the copy narrows, which wraps as crossfire's i32 arithmetic does), an index
// checked before use (InvalidArgument, as the contract wants, where ATen would raise its own error), and an ATen
// error turned into a BackendFailure that names the op. Anything ATen computes differently from crossfire's contract
// is left as ATen computes it: finding those is the point (plugins/torch/torch.expect, docs/your-backend.md).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "crossfire/plugin.hpp"

namespace {
using namespace crossfire;

// A parameter's position in an op's signature, looked up at compile time: a misspelt name does not compile.
consteval int param(std::string_view op, std::string_view name) {
  const OpDef& d = kOpTable[op_id(op)];
  for (int i = 0; i < d.num_params; ++i)
    if (d.params[size_t(i)].name == name) return i;
  throw "no such parameter";
}

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::f32: return at::kFloat;
    case DType::i32: return at::kInt;
    case DType::boolean: return at::kBool;
    case DType::f16: return at::kHalf;      // IEEE binary16: the same 16 bits
    case DType::bf16: return at::kBFloat16;  // the top half of an f32: the same 16 bits
    case DType::i64: return at::kLong;
  }
  throw BackendFailure("", Device{}, fmt::format("the torch backend has no ATen type for dtype {}", dtype_name(d)));
}

std::vector<int64_t> sizes(const Shape& s) { return {s.dims().begin(), s.dims().end()}; }

// crossfire's tensor as an ATen tensor over the same memory.
at::Tensor aten(const TensorImpl& t) {
  return at::from_blob(t.data, sizes(t.shape), at::TensorOptions().dtype(scalar_type(t.dtype)));
}
at::Tensor aten(const Tensor& t) { return aten(*t.impl()); }
at::Tensor input(const KernelCall& c, int p) { return aten(c.tensor(p)); }
std::vector<int64_t> ints(const KernelCall& c, int p) { return {c.args[p].ints.begin(), c.args[p].ints.end()}; }

// ATen's result into crossfire's output: the shapes must agree (a difference is ATen's, reported as such), the dtype
// is converted by the copy.
void store(const KernelCall& c, const at::Tensor& result) {
  at::Tensor out = aten(c.out);
  if (result.sizes() != out.sizes())
    throw BackendFailure(std::string(c.op.name), c.out.device,
                         fmt::format("ATen returned shape {} where crossfire's output rule gives {}",
                                     fmt::format("[{}]", fmt::join(result.sizes(), ", ")), c.out.shape.str()));
  out.copy_(result);
}

// A reduction's (x, axis?, keepdim): over one axis, or every element (then shaped as crossfire's rule says).
template <typename OneAxis, typename All>
void reduce(const KernelCall& c, OneAxis one_axis, All all) {
  at::Tensor x = input(c, 0);
  const Arg& axis = c.args[1];
  at::Tensor r = axis.present ? one_axis(x, axis.i, c.args[2].b) : all(x);
  store(c, axis.present ? r : r.reshape(sizes(c.out.shape)));
}

// Every kernel runs inside this: ATen's own errors (c10::Error) become a BackendFailure naming the op, crossfire's
// pass through. An operator ATen has no CPU kernel for in a dtype ("... not implemented for 'Half'", as libtorch
// 1.13 says of exp, softmax and matmul in f16, among others) is Unsupported: the backend lacks that kernel, which
// a campaign counts as skipped, never as a failure or a pass.
template <void (*Kernel)(const KernelCall&)>
void guarded(const KernelCall& c) {
  try {
    Kernel(c);
  } catch (const crossfire::Error&) {
    throw;
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    if (size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    if (what.find("not implemented for 'Half'") != std::string::npos ||
        what.find("not implemented for 'BFloat16'") != std::string::npos)
      throw Unsupported(std::string(c.op.name), c.out.device.backend, "ATen: " + what);
    throw BackendFailure(std::string(c.op.name), c.out.device, "ATen: " + what);
  }
}

// ---- the kernels, in the op table's order ----------------------------------------------------------------------

void zeros_k(const KernelCall& c) { aten(c.out).zero_(); }
void ones_k(const KernelCall& c) { aten(c.out).fill_(1); }
void full_k(const KernelCall& c) { aten(c.out).fill_(c.args[param("full", "value")].f); }
void arange_k(const KernelCall& c) {
  const double start = c.args[0].f, stop = c.args[1].f, step = c.args[2].f;
  store(c, at::arange(start, stop, step, at::TensorOptions().dtype(scalar_type(c.out.dtype))));
}

template <at::Tensor (*F)(const at::Tensor&)>
void unary_k(const KernelCall& c) {
  store(c, F(input(c, 0)));
}
template <at::Tensor (*F)(const at::Tensor&, const at::Tensor&)>
void binary_k(const KernelCall& c) {
  store(c, F(input(c, 0), input(c, 1)));
}
at::Tensor add_f(const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }
at::Tensor sub_f(const at::Tensor& a, const at::Tensor& b) { return at::sub(a, b); }

void where_k(const KernelCall& c) { store(c, at::where(input(c, 0), input(c, 1), input(c, 2))); }
void cast_k(const KernelCall& c) { store(c, input(c, 0).to(scalar_type(c.out.dtype))); }

void sum_k(const KernelCall& c) {
  reduce(c, [](const at::Tensor& x, int64_t a, bool k) { return at::sum(x, {a}, k); },
         [](const at::Tensor& x) { return at::sum(x); });
}
void mean_k(const KernelCall& c) {
  reduce(c, [](const at::Tensor& x, int64_t a, bool k) { return at::mean(x, {a}, k); },
         [](const at::Tensor& x) { return at::mean(x); });
}
void max_k(const KernelCall& c) {
  reduce(c, [](const at::Tensor& x, int64_t a, bool k) { return at::amax(x, {a}, k); },
         [](const at::Tensor& x) { return at::max(x); });
}
void argmax_k(const KernelCall& c) {
  reduce(c, [](const at::Tensor& x, int64_t a, bool k) { return at::argmax(x, a, k); },
         [](const at::Tensor& x) { return at::argmax(x); });
}
void matmul_k(const KernelCall& c) { store(c, at::matmul(input(c, 0), input(c, 1))); }

void reshape_k(const KernelCall& c) { store(c, input(c, 0).reshape(sizes(c.out.shape))); }
void permute_k(const KernelCall& c) { store(c, input(c, 0).permute(ints(c, param("permute", "dims")))); }
void slice_k(const KernelCall& c) {
  at::Tensor r = input(c, 0);
  const auto starts = ints(c, param("slice", "starts")), stops = ints(c, param("slice", "stops")),
             steps = ints(c, param("slice", "steps"));
  for (size_t d = 0; d < starts.size(); ++d) r = r.slice(int64_t(d), starts[d], stops[d], steps[d]);
  store(c, r);
}
void expand_k(const KernelCall& c) { store(c, input(c, 0).expand(ints(c, param("expand", "shape")))); }
void cat_k(const KernelCall& c) {
  std::vector<at::Tensor> parts;
  for (const Tensor& t : c.args[param("cat", "tensors")].list) parts.push_back(aten(t));
  store(c, at::cat(parts, c.args[param("cat", "axis")].i));
}
void index_select_k(const KernelCall& c) {
  constexpr int kX = param("index_select", "x"), kAxis = param("index_select", "axis"),
                kIndex = param("index_select", "index");
  const TensorImpl& x = *c.tensor(kX).impl();
  const int axis = normalised_axis(c.args[kAxis].i, x.shape.rank());
  // The contract: an index out of range is InvalidArgument, found before anything is written (ATen would raise its
  // own error). The index is i32 or i64; ATen wants i64.
  at::Tensor index = input(c, kIndex).to(at::kLong);
  const int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t j = 0; j < index.numel(); ++j)
    if (idx[j] < 0 || idx[j] >= x.shape[axis])
      throw InvalidArgument("index_select", "index", fmt::format("value {} at position {} is out of range [0, {})",
                                                                 idx[j], j, x.shape[axis]));
  store(c, at::index_select(aten(x), axis, index));
}

void softmax_k(const KernelCall& c) { store(c, at::softmax(input(c, 0), c.args[param("softmax", "axis")].i)); }
void conv2d_k(const KernelCall& c) {
  constexpr int kBias = param("conv2d", "bias");
  c10::optional<at::Tensor> bias;
  if (c.args[kBias].present) bias = input(c, kBias);
  store(c, at::conv2d(input(c, 0), input(c, 1), bias, ints(c, param("conv2d", "stride")),
                      ints(c, param("conv2d", "padding"))));
}
void unfold_k(const KernelCall& c) {
  store(c, at::im2col(input(c, 0), ints(c, param("unfold", "kernel")), {1, 1}, ints(c, param("unfold", "padding")),
                      ints(c, param("unfold", "stride"))));
}
void fold_k(const KernelCall& c) {
  store(c, at::col2im(input(c, 0), ints(c, param("fold", "output_size")), ints(c, param("fold", "kernel")), {1, 1},
                      ints(c, param("fold", "padding")), ints(c, param("fold", "stride"))));
}

// ---- the backend -------------------------------------------------------------------------------------------------

class TorchBackend final : public Backend {
 public:
  TorchBackend() {
    // One ATen thread: campaign workers are forked from the process that loaded the plug-in, and an OpenMP pool
    // started before a fork does not survive it. A worker per core (--jobs) is crossfire's parallelism.
    at::set_num_threads(1);
    set_dtypes(kAnyDType);  // f16, bf16 and i64 where ATen's CPU operators have them (guarded: Unsupported elsewhere)
    // ATen's bf16 matmul on the CPU rounds every partial sum to bf16 (a campaign found it: 748*748 - 428*4 - 104*14
    // = 556,336 came out as 561,152); declared, so it is held to that bound (docs/your-backend.md).
    set_accumulates_in_dtype("matmul", {DType::bf16});
    // ATen's col2im (fold) adds each patch entry into its half output in the half dtype (a 120 s campaign, seed 7,
    // 2026-12-04: an f16 fold of 9 terms one f16 ulp from the exact -17); declared likewise.
    set_accumulates_in_dtype("fold", {DType::f16, DType::bf16});
    set_kernel("zeros", &guarded<zeros_k>);
    set_kernel("ones", &guarded<ones_k>);
    set_kernel("full", &guarded<full_k>);
    set_kernel("arange", &guarded<arange_k>);
    // from_data and to are dispatch's own (a write and a transfer); rand and randn have no ATen equivalent.
    set_kernel("neg", &guarded<unary_k<at::neg>>);
    set_kernel("abs", &guarded<unary_k<at::abs>>);
    set_kernel("exp", &guarded<unary_k<at::exp>>);
    set_kernel("log", &guarded<unary_k<at::log>>);
    set_kernel("sqrt", &guarded<unary_k<at::sqrt>>);
    set_kernel("tanh", &guarded<unary_k<at::tanh>>);
    set_kernel("sigmoid", &guarded<unary_k<at::sigmoid>>);
    set_kernel("relu", &guarded<unary_k<at::relu>>);
    set_kernel("add", &guarded<binary_k<add_f>>);
    set_kernel("sub", &guarded<binary_k<sub_f>>);
    set_kernel("mul", &guarded<binary_k<at::mul>>);
    set_kernel("div", &guarded<binary_k<at::div>>);
    set_kernel("pow", &guarded<binary_k<at::pow>>);
    set_kernel("maximum", &guarded<binary_k<at::maximum>>);
    set_kernel("minimum", &guarded<binary_k<at::minimum>>);
    set_kernel("eq", &guarded<binary_k<at::eq>>);
    set_kernel("ne", &guarded<binary_k<at::ne>>);
    set_kernel("lt", &guarded<binary_k<at::lt>>);
    set_kernel("le", &guarded<binary_k<at::le>>);
    set_kernel("gt", &guarded<binary_k<at::gt>>);
    set_kernel("ge", &guarded<binary_k<at::ge>>);
    set_kernel("logical_and", &guarded<binary_k<at::logical_and>>);
    set_kernel("logical_or", &guarded<binary_k<at::logical_or>>);
    set_kernel("logical_not", &guarded<unary_k<at::logical_not>>);
    set_kernel("where", &guarded<where_k>);
    set_kernel("cast", &guarded<cast_k>);
    set_kernel("sum", &guarded<sum_k>);
    set_kernel("mean", &guarded<mean_k>);
    set_kernel("max", &guarded<max_k>);
    set_kernel("argmax", &guarded<argmax_k>);
    set_kernel("matmul", &guarded<matmul_k>);
    set_kernel("reshape", &guarded<reshape_k>);
    set_kernel("permute", &guarded<permute_k>);
    set_kernel("slice", &guarded<slice_k>);
    set_kernel("expand", &guarded<expand_k>);
    set_kernel("cat", &guarded<cat_k>);
    set_kernel("index_select", &guarded<index_select_k>);
    set_kernel("softmax", &guarded<softmax_k>);
    set_kernel("conv2d", &guarded<conv2d_k>);
    set_kernel("unfold", &guarded<unfold_k>);
    set_kernel("fold", &guarded<fold_k>);
  }

  std::string unavailable_reason() const override { return {}; }
  int device_count() const override { return 1; }
  DeviceInfo device_info(int index) const override {
    return {Device{kind(), uint8_t(index)}, fmt::format("ATen CPU operators (libtorch {})", TORCH_VERSION), "cpu",
            "crossfire torch plug-in"};
  }
  std::string unsupported_reason(OpId id) const override {
    const std::string_view name = op_def(id).name;
    if (name == "rand" || name == "randn")
      return fmt::format("`{}` is crossfire's Philox4x32-10 stream, which no ATen generator reproduces", name);
    return Backend::unsupported_reason(id);
  }

  // Memory is ATen's: each tensor's buffer is an at::Tensor the TensorImpl holds (backend_state).
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) override {
    at::Tensor* buffer = nullptr;
    try {
      buffer = new at::Tensor(at::empty(sizes(shape), at::TensorOptions().dtype(scalar_type(dtype))));
    } catch (const std::exception& e) {
      throw OutOfMemory(std::string(op), device, TensorImpl::nbytes_of(dtype, shape), e.what());
    }
    auto* t = new TensorImpl(device, dtype, shape, this);
    t->backend_state = buffer;
    t->data = buffer->data_ptr();
    BackendCounters::bump(counters_.allocations);
    BackendCounters::bump(counters_.bytes_allocated, t->nbytes);
    return t;
  }
  void release(TensorImpl* t) override {
    BackendCounters::bump(counters_.releases);
    delete static_cast<at::Tensor*>(t->backend_state);
    delete t;
  }
  void write(TensorImpl& t, const void* src) override { std::memcpy(t.data, src, t.nbytes); }
  void read(const TensorImpl& t, void* dst) override { std::memcpy(dst, t.data, t.nbytes); }
  void copy(const TensorImpl& src, TensorImpl& dst) override { aten(dst).copy_(aten(src)); }
};

void register_torch(PluginHost& host) { host.add_backend("torch", std::make_unique<TorchBackend>()); }

}  // namespace

CROSSFIRE_PLUGIN("crossfire-torch", register_torch)
