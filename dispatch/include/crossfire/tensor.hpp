// SPDX-License-Identifier: Apache-2.0
// Tensors: a handle (Tensor) onto one contiguous buffer owned by a backend (TensorImpl).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "crossfire/device.hpp"

namespace crossfire {

class Backend;
struct AutogradMeta;

// Note [One allocation per tensor]
// A TensorImpl is the tensor's metadata and the backend's buffer in one object: tensors are always contiguous and
// never alias one another, so there is no separate Storage. The backend allocates it (on the CPU, header and data
// in one aligned block, so an op's output costs exactly one heap allocation) and frees it when the last handle
// goes; `owner->release(this)` is the only way it dies. Autodiff state lives behind `autograd`, allocated only for
// tracked tensors, so untracked tensors pay nothing for it.
//
// Note [Hot fields]
// What dispatch reads of every argument (device, dtype, rank, autograd, owner and the first dims) sits in the
// first 64-byte cache line: `autograd` and `owner` come before the shape, and a Shape stores its rank before its
// dims. Moving `autograd` there took ~1 ns off `cat` of 8 tensors (docs/benchmarks.md) with no instruction
// changed. Fields only the backends read (numel, nbytes, data, backend_state) come after.
//
// Note [A tensor's signature]
// Device, dtype and rank are fixed when a tensor is made (they are const: nothing may change them afterwards), and
// they sit together in one 32-bit word, the rank as a byte copy of `shape.rank()`, so that the dispatch fast path
// compares a list element's device, dtype and rank with one load and one xor (`signature()`; g++ and clang read it
// as one 32-bit load). The copy cannot go stale: the constructor is the only place either is set.
struct TensorImpl {
  std::atomic<int32_t> refcount{0};
  const Device device;
  const DType dtype;
  const uint8_t rank;  // == shape.rank() (Note [A tensor's signature])
  AutogradMeta* autograd = nullptr;  // owned; non-null only for tracked tensors and leaves with a gradient
  Backend* const owner;
  const Shape shape;  // rank first, then dims (Note [Hot fields])
  const int64_t numel;
  const size_t nbytes;
  void* data = nullptr;        // host-addressable data (CPU backend), else nullptr
  void* backend_state = nullptr;  // anything else the owning backend needs (a buffer handle, an offset)

  // What a backend's allocate() knows; `data` and `backend_state` are the backend's to fill in.
  TensorImpl(Device d, DType t, const Shape& s, Backend* o) : TensorImpl(d, t, s, o, s.numel()) {}
  // The same for a backend that sized its block first: `n` is s.numel(), which it has computed already (built in
  // the block, the header's stores may alias `s`, so the compiler would read the shape and multiply again).
  TensorImpl(Device d, DType t, const Shape& s, Backend* o, int64_t n)
      : device(d), dtype(t), rank(uint8_t(s.rank())), owner(o), shape(s), numel(n), nbytes(size_t(n) * dtype_size(t)) {}
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  // Device, dtype and rank as one word: two tensors' signatures are equal exactly when all three are.
  uint32_t signature() const { return uint32_t(device.packed()) | uint32_t(dtype) << 16 | uint32_t(rank) << 24; }

  // The bytes of a tensor's data: what the constructor sets `nbytes` to, for a backend that sizes its block first.
  static constexpr size_t nbytes_of(DType t, const Shape& s) { return size_t(s.numel()) * dtype_size(t); }
};
static_assert(sizeof(Device) == 2 && sizeof(DType) == 1 && kMaxRank <= 255,
              "signature() packs a Device, a DType and the rank in one word");

void release_tensor_impl(TensorImpl* impl);  // called when the refcount drops to zero

// A shared handle. Copying a Tensor shares the tensor (like torch::Tensor); ops always return new tensors.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorImpl* impl) : impl_(impl) { retain(); }
  // The handle of a TensorImpl that a backend's allocate() has just made: refcount 0 and seen by no other thread
  // yet, so its count becomes 1 by a plain store (Note [A result's count without locked instructions]).
  static Tensor adopt_new(TensorImpl* fresh) {
    Tensor t;
    if (fresh) fresh->refcount.store(1, std::memory_order_relaxed);
    t.impl_ = fresh;
    return t;
  }
  // take() and adopt() move one reference between a handle and a raw pointer without touching the count: dispatch
  // returns results as raw pointers inside itself (Note [A call's result in a register] in dispatch.cpp).
  static Tensor adopt(TensorImpl* owned) {
    Tensor t;
    t.impl_ = owned;
    return t;
  }
  TensorImpl* take() && { return std::exchange(impl_, nullptr); }
  Tensor(const Tensor& o) : impl_(o.impl_) { retain(); }
  Tensor(Tensor&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  Tensor& operator=(const Tensor& o) {
    Tensor(o).swap(*this);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    Tensor(std::move(o)).swap(*this);
    return *this;
  }
  ~Tensor() { release(); }
  void swap(Tensor& o) noexcept { std::swap(impl_, o.impl_); }

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_; }
  Device device() const { return impl_->device; }
  DType dtype() const { return impl_->dtype; }
  const Shape& shape() const { return impl_->shape; }
  int rank() const { return impl_->shape.rank(); }
  int64_t numel() const { return impl_->numel; }

  // Autodiff (contract section 5).
  bool requires_grad() const;  // a leaf marked requires_grad
  bool tracked() const;        // requires_grad leaf or result of a tracked op
  // Marks an f32 leaf; raises AutodiffError for i32/bool or a non-leaf. Returns *this for chaining.
  Tensor& set_requires_grad(bool on = true);
  Tensor grad() const;  // undefined Tensor until backward reaches this leaf
  void zero_grad();
  // A copy with no autodiff history (same device, same values).
  Tensor detach() const;

  // Values out, in the C++ type of the dtype (f32 -> float, i32 -> int32_t, i64 -> int64_t, bool -> uint8_t); the
  // tensor must have that dtype. Synchronises.
  std::vector<float> to_f32() const;
  std::vector<int32_t> to_i32() const;
  std::vector<int64_t> to_i64() const;
  std::vector<uint8_t> to_bool() const;
  // Raw bytes in dtype layout.
  std::vector<uint8_t> to_host_bytes() const;
  // The same bytes into memory the caller owns, which must be exactly numel() * dtype_size(dtype()) bytes
  // (InvalidArgument otherwise). For a reader that keeps its own buffer: nothing is allocated. Synchronises.
  void read_host_bytes(std::span<uint8_t> out) const;
  std::string str() const;  // "Tensor(cpu:0, f32, [2, 3])"

 private:
  void retain() {
    if (impl_) impl_->refcount.fetch_add(1, std::memory_order_relaxed);
  }
  // Note [A result's count without locked instructions]
  // A locked read-modify-write costs several nanoseconds even uncontended, and a 1-element op's result used to pay
  // two: the increment when its handle was made and the decrement when it was dropped. A new result's count is
  // stored (adopt_new), and a handle that finds the count at 1 is the only one: no other thread can hold, and so
  // copy, a handle to the tensor, so it frees without decrementing. The acquire load still orders the free after
  // every other owner's last use (each of those released with the decrement's release half).
  void release() {
    if (impl_ && (impl_->refcount.load(std::memory_order_acquire) == 1 ||
                  impl_->refcount.fetch_sub(1, std::memory_order_acq_rel) == 1))
      release_tensor_impl(impl_);
    impl_ = nullptr;
  }
  TensorImpl* impl_ = nullptr;
};

}  // namespace crossfire
