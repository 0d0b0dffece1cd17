// SPDX-License-Identifier: Apache-2.0
// Autodiff state of a tensor and the graph node that produced it. Private to dispatch/.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "crossfire/args.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/recycled_blocks.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire::detail {

// One recorded op call: what the backward rule needs, owned (the caller's ArgPack held only views).
//
// Note [Node slots inline]
// A node's input slots and their `needs` flags live inside the node for up to kInlineSlots slots (every op but a
// long `cat`), so recording a node costs one allocation (the node) instead of three. `inputs` and `needs` view
// whichever storage holds them; a Node never moves (it is created by allocate_shared and held by pointer), so the
// views, and the ArgPack re-pointed at `inputs`, stay valid.
struct Node {
  static constexpr size_t kInlineSlots = 4;

  OpId op;
  std::span<Tensor> inputs;                     // tensor inputs, one per input slot (list elements expanded)
  std::span<bool> needs;                        // per slot: does the gradient flow there?
  std::vector<std::vector<int64_t>> int_lists;  // owned copies of int-list attributes
  ArgPack args;                                 // the forward call, re-pointed at the copies above
  TensorImpl* output = nullptr;                 // not owned: the output owns this node (Note [Node lifetime])
  uint64_t sequence = 0;                        // creation order, for debugging only (Note [Backward order])

  Node(OpId id, const ArgPack& call_args, uint64_t seq);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

 private:
  std::array<Tensor, kInlineSlots> inline_inputs_;
  std::array<bool, kInlineSlots> inline_needs_{};
  std::unique_ptr<Tensor[]> heap_inputs_;  // only past kInlineSlots slots
  std::unique_ptr<bool[]> heap_needs_;
};

}  // namespace crossfire::detail

namespace crossfire {
// Note [Node lifetime]
// A node is owned by its output's AutogradMeta and holds its inputs (so the graph keeps itself alive from the
// outputs back to the leaves, never in a cycle). It refers to its output by raw pointer: backward() reaches a node
// only through a live tensor (the root, or a saved input of a later node), and that tensor is the node's output.
//
// Note [A leaf's gradient is locked]
// Several threads may run backward() on graphs that share a leaf (contract section 8), so the leaf's gradient is
// read and replaced only under its own mutex: accumulation is a read-modify-write (`grad = grad + g`), and
// without the lock two threads both read the old sum and one update is lost (ThreadSanitizer found the race;
// the lost updates also double-released tensors). The lock is per leaf, so unrelated leaves never contend, and
// it lives here, behind `autograd`, so untracked tensors and dispatch's fast path pay nothing for it.
// `requires_grad` and `grad_fn` are not guarded: they are set once, before the tensor is shared (see the
// "Threads" section of docs/contract.md), and only read afterwards.
struct AutogradMeta {
  // Note [Recycled blocks] (recycled_blocks.hpp): a recorded node and its output's AutogradMeta (glibc's malloc and
  // free of the two were about a fifth of a tracked 1-element add).
  static void* operator new(size_t size) {
    return size == sizeof(AutogradMeta) ? detail::RecycledBlocks<sizeof(AutogradMeta)>::take() : ::operator new(size);
  }
  static void operator delete(void* p, size_t size) noexcept {
    if (size == sizeof(AutogradMeta)) detail::RecycledBlocks<sizeof(AutogradMeta)>::give(p);
    else ::operator delete(p);
  }

  bool requires_grad = false;  // a leaf marked by the user
  std::shared_ptr<detail::Node> grad_fn;  // the op that made this tensor, when it is tracked and not a leaf
  bool tracked() const { return requires_grad || grad_fn != nullptr; }

  // The accumulated gradient (leaves); undefined until backward reaches this leaf.
  Tensor grad() const {
    std::lock_guard lock(grad_mutex_);
    return grad_;
  }
  // grad += g (or grad = g when there is none yet), atomically with respect to every other accumulation and read
  // of this leaf. Runs an `add` on the leaf's device; the caller is under no_grad (autodiff.cpp).
  void accumulate_grad(const Tensor& g);
  void clear_grad() {
    Tensor old;  // released after the lock is dropped
    std::lock_guard lock(grad_mutex_);
    old = std::move(grad_);
  }

 private:
  mutable std::mutex grad_mutex_;  // guards grad_ (Note [A leaf's gradient is locked])
  Tensor grad_;
};

namespace detail {
inline bool is_tracked(const TensorImpl* t) { return t->autograd != nullptr && t->autograd->tracked(); }
}  // namespace detail
}  // namespace crossfire
