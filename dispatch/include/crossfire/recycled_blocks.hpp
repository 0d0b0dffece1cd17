// SPDX-License-Identifier: Apache-2.0
// Per-thread free lists of fixed-size heap blocks: the CPU backend's small tensors (Note [Recycled tensor blocks]
// in kernels/cpu/cpu_backend.cpp) and the autodiff layer's node and AutogradMeta (dispatch/src/autograd_meta.hpp).
//
// Note [Recycled blocks]
// Released blocks of one size go to a per-thread list, at most Depth deep, and the next allocation of that size on
// the thread takes one back: a push and a pop instead of glibc's free and malloc (~20 ns a pair on the Zen 4 VM,
// docs/benchmarks.md). Any thread may free a block another allocated: blocks of one size are interchangeable. A
// thread's list is freed when the thread exits; a block released after that (a static tensor) goes straight to
// operator delete. Off under AddressSanitizer, ThreadSanitizer and MemorySanitizer, so that a use after free is
// still reported.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace crossfire::detail {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kRecycleBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kRecycleBlocks = false;
#else
inline constexpr bool kRecycleBlocks = true;
#endif
#else
inline constexpr bool kRecycleBlocks = true;
#endif

template <size_t Size, size_t Depth = 64>
class RecycledBlocks {
 public:
  static void* take() {
    if (void* p = take_cached()) return p;
    return ::operator new(Size);
  }
  // A block from the thread's list, or nullptr when it is empty (the caller allocates Size bytes itself).
  static void* take_cached() noexcept {
    if constexpr (kRecycleBlocks) {
      List& l = list();
      if (l.count > 0) return l.blocks[--l.count];
    }
    return nullptr;
  }
  static void give(void* p) noexcept {
    if constexpr (kRecycleBlocks) {
      List& l = list();
      if (l.count < kDepth && !l.closed) {
        l.blocks[l.count++] = p;
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  static constexpr size_t kDepth = Depth;
  struct List {
    void* blocks[kDepth];
    size_t count;
    bool closed;  // set when the thread's list was freed at its exit: later releases free at once
    ~List() {
      while (count > 0) ::operator delete(blocks[--count]);
      closed = true;
    }
  };
  static List& list() noexcept {
    static thread_local List l{};
    return l;
  }
};

// An allocator for std::allocate_shared that takes its one block from RecycledBlocks.
template <typename T>
struct RecyclingAllocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "operator new's alignment must do for T");
  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return n == 1 ? static_cast<T*>(RecycledBlocks<sizeof(T)>::take()) : std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1) RecycledBlocks<sizeof(T)>::give(p);
    else std::allocator<T>{}.deallocate(p, n);
  }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace crossfire::detail
