// SPDX-License-Identifier: Apache-2.0
// f16/bf16 through the f32 kernels (Note [Half precision on the CPU] in kernel_support.hpp).
#include <memory>
#include <vector>

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

// The owner of scratch tensors: plain aligned host blocks that no device holds and no counter sees. Only
// allocate() and release() are ever called (by widen() and by the scratch handles' release).
class Scratch final : public Backend {
 public:
  Scratch() { set_dtypes(kAnyDType); }
  std::string unavailable_reason() const override { return "scratch memory of the CPU backend's kernels"; }
  int device_count() const override { return 0; }
  DeviceInfo device_info(int) const override { return {}; }
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view) override {
    auto impl = std::make_unique<TensorImpl>(device, dtype, shape, this);
    impl->data = ::operator new(std::max<size_t>(impl->nbytes, 1), std::align_val_t(64));
    return impl.release();
  }
  void release(TensorImpl* t) override {
    ::operator delete(t->data, std::align_val_t(64));
    delete t;
  }
  void write(TensorImpl&, const void*) override {}
  void read(const TensorImpl&, void*) override {}
  void copy(const TensorImpl&, TensorImpl&) override {}
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

// An f32 copy of an f16/bf16 tensor (exact).
Tensor widen(const TensorImpl& x) {
  Tensor w = Tensor::adopt_new(scratch().allocate(x.device, DType::f32, x.shape, "widen"));
  float* o = data_of<float>(*w.impl());
  visit_dtype(x.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (kIsHalf<T>) {
      const T* in = data_of<const T>(x);
      for (int64_t i = 0; i < x.numel; ++i) o[i] = static_cast<float>(in[i]);
    }
  });
  return w;
}

}  // namespace

bool touches_half(const KernelCall& c) {
  if (is_half(c.out.dtype)) return true;
  for (int k = 0; k < c.op.num_tensor_params; ++k) {
    const Arg& a = c.args[c.op.tensor_params[size_t(k)]];
    if (a.role != ParamRole::tensor_list && a.present && is_half(a.tensor->dtype())) return true;
  }
  return false;
}

void run_widened(KernelFn f32_kernel, const KernelCall& c) {
  ArgPack args = c.args;
  std::array<Tensor, kMaxParams> wide;
  for (int i = 0; i < c.op.num_params; ++i) {
    Arg& a = args.args[size_t(i)];
    if ((a.role == ParamRole::tensor || (a.role == ParamRole::optional_tensor && a.present)) &&
        is_half(a.tensor->dtype())) {
      wide[size_t(i)] = widen(*a.tensor->impl());
      a.tensor = &wide[size_t(i)];
    }
  }
  if (!is_half(c.out.dtype)) {
    f32_kernel(KernelCall{c.op, c.id, args, c.out});
    return;
  }
  Tensor out = Tensor::adopt_new(scratch().allocate(c.out.device, DType::f32, c.out.shape, c.op.name));
  f32_kernel(KernelCall{c.op, c.id, args, *out.impl()});
  const float* r = data_of<const float>(*out.impl());
  visit_dtype(c.out.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (kIsHalf<T>) {
      T* o = data_of<T>(c.out);
      for (int64_t i = 0; i < c.out.numel; ++i) o[i] = T(r[i]);
    }
  });
}

}  // namespace crossfire::cpu
