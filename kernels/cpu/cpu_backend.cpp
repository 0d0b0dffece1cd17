// SPDX-License-Identifier: Apache-2.0
#include "cpu_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "crossfire/error.hpp"
#include "crossfire/recycled_blocks.hpp"

namespace crossfire {
namespace cpu {

namespace {
int devices_from_env() {
  const char* v = std::getenv(kDevicesEnv);
  if (v == nullptr || *v == 0) return kDefaultDevices;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != 0 || n < 1 || n > 16) {
    fmt::print(stderr, "crossfire: ignoring {}={} (want 1..16); using {}\n", kDevicesEnv, v, kDefaultDevices);
    return kDefaultDevices;
  }
  return int(n);
}

// Header and data in one block (Note [One allocation per tensor]); data is 64-byte aligned for Eigen and SIMD.
// The block comes from plain operator new, over-allocated by kAlign - 1 bytes, and the data pointer is aligned by
// hand: glibc's aligned operator new (memalign) costs ~100 ns more per call, which dominated a 1-element op.
constexpr size_t kAlign = 64;
constexpr size_t kSlack = sizeof(TensorImpl) + kAlign - 1;

// Note [Recycled tensor blocks]
// A released block whose data is at most kSmallBytes goes to a per-thread free list of its size class (data rounded
// up to a multiple of 64 bytes: four classes), at most kCachedPerClass deep (Note [Recycled blocks] in
// recycled_blocks.hpp), and the next allocation of that class on that thread takes it back: glibc's free and malloc
// were ~20 of the ~30 ns of a 1-element op's "direct + alloc" (docs/benchmarks.md).
constexpr size_t kSmallBytes = 256, kClassBytes = 64, kNumClasses = kSmallBytes / kClassBytes, kCachedPerClass = 32;

// The size class of a block with `nbytes` of data (nbytes <= kSmallBytes), and the block size it is allocated at.
constexpr size_t size_class(size_t nbytes) { return nbytes == 0 ? 0 : (nbytes - 1) / kClassBytes; }
constexpr size_t class_block_bytes(size_t cls) { return kSlack + (cls + 1) * kClassBytes; }
template <size_t Class>
using ClassBlocks = detail::RecycledBlocks<class_block_bytes(Class), kCachedPerClass>;

// A recycled block of class `cls`, or nullptr when the thread has none.
template <size_t... C>
void* take_block(size_t cls, std::index_sequence<C...>) {
  void* p = nullptr;
  (void)((cls == C && (p = ClassBlocks<C>::take_cached(), true)) || ...);
  return p;
}

// A new block for `nbytes` of data: at its class's size when it is small enough to be recycled later. Out of line,
// so that allocate()'s common case (a recycled block) calls nothing and saves no registers.
[[gnu::noinline]] void* new_block(size_t nbytes, Device device, std::string_view op) {
  const size_t bytes = nbytes <= kSmallBytes ? class_block_bytes(size_class(nbytes)) : kSlack + nbytes;
  void* block = ::operator new(bytes, std::nothrow);
  if (block == nullptr) throw OutOfMemory(std::string(op), device, nbytes);
  return block;
}
template <size_t... C>
void give_block(size_t cls, void* p, std::index_sequence<C...>) {
  (void)((cls == C && (ClassBlocks<C>::give(p), true)) || ...);
}
constexpr auto kClasses = std::make_index_sequence<kNumClasses>{};
}  // namespace

CpuBackend::CpuBackend() : devices_(devices_from_env()) {
  set_dtypes(kAnyDType);  // f16 and bf16 too (Note [Half precision on the CPU] in kernel_support.hpp)
  register_kernels(*this);
}

DeviceInfo CpuBackend::device_info(int index) const {
  return {Device::cpu(index),
          fmt::format("host (logical device {} of {}, {} hardware threads)", index, devices_,
                      std::thread::hardware_concurrency()),
          "cpu", "crossfire cpu backend (Eigen)"};
}

TensorImpl* CpuBackend::allocate(Device device, DType dtype, const Shape& shape, std::string_view op) {
  const int64_t numel = shape.numel();  // the block's size, before the header exists
  const size_t nbytes = size_t(numel) * dtype_size(dtype);
  void* block = nbytes <= kSmallBytes ? take_block(size_class(nbytes), kClasses) : nullptr;  // Note [Recycled tensor blocks]
  if (block == nullptr) [[unlikely]]
    block = new_block(nbytes, device, op);
  auto* t = new (block) TensorImpl(device, dtype, shape, this, numel);
  const uintptr_t after_header = reinterpret_cast<uintptr_t>(block) + sizeof(TensorImpl);
  t->data = reinterpret_cast<void*>((after_header + kAlign - 1) & ~uintptr_t(kAlign - 1));
  BackendCounters::bump(counters_.allocations);
  BackendCounters::bump(counters_.bytes_allocated, nbytes);
  return t;
}

void CpuBackend::release(TensorImpl* t) {
  BackendCounters::bump(counters_.releases);
  const size_t nbytes = t->nbytes;
  t->~TensorImpl();
  if (nbytes <= kSmallBytes) give_block(size_class(nbytes), t, kClasses);  // Note [Recycled tensor blocks]
  else ::operator delete(static_cast<void*>(t));
}

void CpuBackend::write(TensorImpl& t, const void* src) { std::memcpy(t.data, src, t.nbytes); }
void CpuBackend::read(const TensorImpl& t, void* dst) { std::memcpy(dst, t.data, t.nbytes); }
void CpuBackend::copy(const TensorImpl& src, TensorImpl& dst) { std::memcpy(dst.data, src.data, src.nbytes); }

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace crossfire
