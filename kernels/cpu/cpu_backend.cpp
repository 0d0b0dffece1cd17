// SPDX-License-Identifier: Apache-2.0
#include "cpu_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "crossfire/error.hpp"

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
// up to a multiple of 64 bytes: four classes), at most kCachedPerClass deep, and the next allocation of that class
// on that thread takes it back: a push and a pop instead of glibc's free and malloc, which were ~20 of the ~30 ns of
// a 1-element op's "direct + alloc" (docs/benchmarks.md). Any thread may release a block any thread allocated: the
// blocks of one class are interchangeable. A thread's cached blocks are freed when it exits. Under AddressSanitizer,
// ThreadSanitizer and MemorySanitizer there is no cache, so that a use after release is still reported.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRecycle = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kRecycle = false;
#else
constexpr bool kRecycle = true;
#endif
#else
constexpr bool kRecycle = true;
#endif
constexpr size_t kSmallBytes = 256, kClassBytes = 64, kNumClasses = kSmallBytes / kClassBytes, kCachedPerClass = 32;

struct BlockCache {
  void* blocks[kNumClasses][kCachedPerClass];
  uint32_t count[kNumClasses];
  bool closed;  // set when the thread's cache is drained at its exit: later releases (static tensors) free at once
  ~BlockCache() {
    for (size_t c = 0; c < kNumClasses; ++c)
      while (count[c] > 0) ::operator delete(blocks[c][--count[c]]);
    closed = true;
  }
};
thread_local BlockCache t_blocks{};

// The size class of a block with `nbytes` of data (nbytes <= kSmallBytes), and the block size it is allocated at.
constexpr size_t size_class(size_t nbytes) { return nbytes == 0 ? 0 : (nbytes - 1) / kClassBytes; }
constexpr size_t class_block_bytes(size_t cls) { return kSlack + (cls + 1) * kClassBytes; }
}  // namespace

CpuBackend::CpuBackend() : devices_(devices_from_env()) {
  register_kernels(*this);
}

DeviceInfo CpuBackend::device_info(int index) const {
  return {Device::cpu(index),
          fmt::format("host (logical device {} of {}, {} hardware threads)", index, devices_,
                      std::thread::hardware_concurrency()),
          "cpu", "crossfire cpu backend (Eigen)"};
}

TensorImpl* CpuBackend::allocate(Device device, DType dtype, const Shape& shape, std::string_view op) {
  const size_t nbytes = TensorImpl::nbytes_of(dtype, shape);  // the block's size, before the header exists
  void* block = nullptr;
  if (kRecycle && nbytes <= kSmallBytes) {  // Note [Recycled tensor blocks]
    const size_t cls = size_class(nbytes);
    BlockCache& cache = t_blocks;
    block = cache.count[cls] > 0 ? cache.blocks[cls][--cache.count[cls]]
                                 : ::operator new(class_block_bytes(cls), std::nothrow);
  } else {
    block = ::operator new(kSlack + nbytes, std::nothrow);
  }
  if (block == nullptr) throw OutOfMemory(std::string(op), device, nbytes);
  auto* t = new (block) TensorImpl(device, dtype, shape, this);
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
  if (kRecycle && nbytes <= kSmallBytes) {  // Note [Recycled tensor blocks]
    const size_t cls = size_class(nbytes);
    BlockCache& cache = t_blocks;
    if (cache.count[cls] < kCachedPerClass && !cache.closed) {
      cache.blocks[cls][cache.count[cls]++] = t;
      return;
    }
  }
  ::operator delete(static_cast<void*>(t));
}

void CpuBackend::write(TensorImpl& t, const void* src) { std::memcpy(t.data, src, t.nbytes); }
void CpuBackend::read(const TensorImpl& t, void* dst) { std::memcpy(dst, t.data, t.nbytes); }
void CpuBackend::copy(const TensorImpl& src, TensorImpl& dst) { std::memcpy(dst.data, src.data, src.nbytes); }

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace crossfire
