// SPDX-License-Identifier: Apache-2.0
// Replaces the global allocation functions with counting ones (see alloc_counter.hpp). Counting is a relaxed
// load+store on one global, like the backend counters (Note [Counters are cheap] in dispatch/src/backend.cpp):
// benchmarks run one thread at a time, and the counter must not add a locked instruction to the op it measures.
#include "alloc_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#if CROSSFIRE_BENCH_COUNT_ALLOCATIONS
namespace {
std::atomic<uint64_t> g_allocations{0};

inline void count() { g_allocations.store(g_allocations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

void* allocate(std::size_t n) {
  count();
  void* p = std::malloc(n ? n : 1);
  return p;
}
void* allocate_aligned(std::size_t n, std::align_val_t al) {
  count();
  std::size_t a = static_cast<std::size_t>(al);
  if (a < sizeof(void*)) a = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, a, n ? n : 1) != 0) return nullptr;
  return p;
}
}  // namespace

namespace crossfire::bench {
uint64_t heap_allocations() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace crossfire::bench

// Throwing forms.
void* operator new(std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al) {
  if (void* p = allocate_aligned(n, al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t al) {
  if (void* p = allocate_aligned(n, al)) return p;
  throw std::bad_alloc();
}
// Non-throwing forms (the CPU backend allocates its tensors with the aligned nothrow form).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, al);
}

// Every delete frees with free(): both malloc and posix_memalign memory are released that way.
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

#else  // a sanitizer build: the sanitizer runtime owns operator new
namespace crossfire::bench {
uint64_t heap_allocations() { return 0; }
}  // namespace crossfire::bench
#endif
