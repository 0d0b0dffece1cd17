// SPDX-License-Identifier: Apache-2.0
// `mirror`: a backend registered at run time, as a plug-in's would be, so that the contract, ops and autodiff
// suites check registration itself (their test_<suite>_mirror binaries; tests/CMakeLists.txt). It has memory of its
// own and borrows the CPU backend's kernels, which read only a tensor's data: whatever differs from the cpu
// binaries' results is the registry's doing.
#include "support/mirror_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire::testing {
namespace {

class MirrorBackend final : public Backend {
 public:
  MirrorBackend() {
    const Backend& cpu = backend(BackendKind::cpu);
    for (size_t id = 0; id < kNumOps; ++id) kernels_[id] = cpu.kernel(OpId(id));
  }
  std::string unavailable_reason() const override { return {}; }
  int device_count() const override { return kMirrorDevices; }
  DeviceInfo device_info(int index) const override {
    return {Device{kind(), uint8_t(index)}, fmt::format("mirror of the CPU backend ({} of {})", index, kMirrorDevices),
            "virtual", "crossfire test backend"};
  }
  std::vector<int64_t> kernel_extents() const override { return backend(BackendKind::cpu).kernel_extents(); }

  // Header and data in one block, 64-byte aligned data, as the CPU backend allocates (so that bench_dispatch's
  // dispatch/mirror/... differs from dispatch/cpu/... only in the backend being registered), but a block of its own.
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) override {
    constexpr size_t kAlign = 64;
    const size_t nbytes = TensorImpl::nbytes_of(dtype, shape);
    void* block = ::operator new(sizeof(TensorImpl) + kAlign - 1 + nbytes, std::nothrow);
    if (block == nullptr) throw OutOfMemory(std::string(op), device, nbytes);
    auto* t = new (block) TensorImpl(device, dtype, shape, this);
    const uintptr_t after_header = reinterpret_cast<uintptr_t>(block) + sizeof(TensorImpl);
    t->data = reinterpret_cast<void*>((after_header + kAlign - 1) & ~uintptr_t(kAlign - 1));
    BackendCounters::bump(counters_.allocations);
    BackendCounters::bump(counters_.bytes_allocated, nbytes);
    return t;
  }
  void release(TensorImpl* t) override {
    BackendCounters::bump(counters_.releases);
    t->~TensorImpl();
    ::operator delete(static_cast<void*>(t));
  }
  void write(TensorImpl& t, const void* src) override { std::memcpy(t.data, src, t.nbytes); }
  void read(const TensorImpl& t, void* dst) override { std::memcpy(dst, t.data, t.nbytes); }
  void copy(const TensorImpl& src, TensorImpl& dst) override { std::memcpy(dst.data, src.data, src.nbytes); }
};

}  // namespace

std::unique_ptr<Backend> make_mirror_backend() { return std::make_unique<MirrorBackend>(); }

BackendKind mirror_backend() {
  static const BackendKind kind = register_backend(kMirrorName, make_mirror_backend());
  return kind;
}

}  // namespace crossfire::testing
