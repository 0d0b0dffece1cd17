// SPDX-License-Identifier: Apache-2.0
#include "crossfire/tensor.hpp"

#include <cstring>

#include <fmt/format.h>

#include "autograd_meta.hpp"
#include "crossfire/backend.hpp"
#include "crossfire/dispatch.hpp"
#include "crossfire/error.hpp"
#include "crossfire/ops.hpp"

namespace crossfire {

void release_tensor_impl(TensorImpl* impl) {
  delete impl->autograd;
  impl->autograd = nullptr;
  impl->owner->release(impl);
}

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }
bool Tensor::tracked() const { return impl_ && detail::is_tracked(impl_); }

Tensor& Tensor::set_requires_grad(bool on) {
  if (!impl_) throw AutodiffError("requires_grad", "undefined tensor");
  if (on && !is_float(impl_->dtype))
    throw AutodiffError("requires_grad",
                        fmt::format("only float tensors (f32, f16, bf16) can require gradients; this tensor is {}",
                                    dtype_name(impl_->dtype)));
  if (impl_->autograd && impl_->autograd->grad_fn)
    throw AutodiffError("requires_grad",
                        "only leaf tensors can be marked; this tensor is the result of a tracked op (detach it first)");
  if (!impl_->autograd) {
    if (!on) return *this;
    impl_->autograd = new AutogradMeta();
  }
  impl_->autograd->requires_grad = on;
  return *this;
}

// Both lock the leaf's gradient: another thread may be accumulating into it (Note [A leaf's gradient is locked]).
Tensor Tensor::grad() const { return impl_ && impl_->autograd ? impl_->autograd->grad() : Tensor(); }

void Tensor::zero_grad() {
  if (impl_ && impl_->autograd) impl_->autograd->clear_grad();
}

Tensor Tensor::detach() const {
  NoGradGuard guard;
  return to(*this, device());
}

std::vector<uint8_t> Tensor::to_host_bytes() const {
  if (!impl_) throw InvalidArgument("to_host", "", "undefined tensor");
  std::vector<uint8_t> out(impl_->nbytes);
  read_host_bytes(out);
  return out;
}

void Tensor::read_host_bytes(std::span<uint8_t> out) const {
  if (!impl_) throw InvalidArgument("to_host", "", "undefined tensor");
  if (out.size() != impl_->nbytes)
    throw InvalidArgument("to_host", "out",
                          fmt::format("{} bytes given for a tensor of {} bytes", out.size(), impl_->nbytes));
  if (impl_->nbytes) impl_->owner->read(*impl_, out.data());
}

namespace {
template <class T>
std::vector<T> typed_copy(const Tensor& t, DType want, const char* fn) {
  if (t.dtype() != want)
    throw DTypeMismatch(fn, "self", t.dtype(), DTypeSet{want});
  std::vector<T> out(size_t(t.numel()));
  t.read_host_bytes({reinterpret_cast<uint8_t*>(out.data()), out.size() * sizeof(T)});
  return out;
}
}  // namespace

std::vector<float> Tensor::to_f32() const { return typed_copy<float>(*this, DType::f32, "to_f32"); }
std::vector<int32_t> Tensor::to_i32() const { return typed_copy<int32_t>(*this, DType::i32, "to_i32"); }
std::vector<int64_t> Tensor::to_i64() const { return typed_copy<int64_t>(*this, DType::i64, "to_i64"); }
std::vector<uint8_t> Tensor::to_bool() const { return typed_copy<uint8_t>(*this, DType::boolean, "to_bool"); }

std::string Tensor::str() const {
  if (!impl_) return "Tensor(undefined)";
  return fmt::format("Tensor({}, {}, {}{})", device().str(), dtype_name(dtype()), shape().str(),
                     tracked() ? ", tracked" : "");
}

}  // namespace crossfire
