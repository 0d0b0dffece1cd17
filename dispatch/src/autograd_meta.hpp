// Autodiff state of a tensor and the graph node that produced it. Private to dispatch/.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "crossfire/args.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire::detail {

// One recorded op call: what the backward rule needs, owned (the caller's ArgPack held only views).
//
// Note [Node slots inline]
// A node's input slots and their `needs` flags live inside the node for up to kInlineSlots slots (every op but a
// long `cat`), so recording a node costs one allocation (the node) instead of three. `inputs` and `needs` view
// whichever storage holds them; a Node never moves (it is created by make_shared and held by pointer), so the
// views, and the ArgPack re-pointed at `inputs`, stay valid.
struct Node {
  static constexpr size_t kInlineSlots = 4;

  OpId op;
  std::span<Tensor> inputs;                     // tensor inputs, one per input slot (list elements expanded)
  std::span<bool> needs;                        // per slot: does the gradient flow there?
  std::vector<std::vector<int64_t>> int_lists;  // owned copies of int-list attributes
  ArgPack args;                                 // the forward call, re-pointed at the copies above
  TensorImpl* output = nullptr;                 // not owned: the output owns this node (Note [Node lifetime])
  uint64_t sequence = 0;                        // creation order; a topological order of the graph

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
struct AutogradMeta {
  bool requires_grad = false;  // a leaf marked by the user
  std::shared_ptr<detail::Node> grad_fn;  // the op that made this tensor, when it is tracked and not a leaf
  Tensor grad;                    // accumulated gradient (leaves)
  bool tracked() const { return requires_grad || grad_fn != nullptr; }
};

namespace detail {
inline bool is_tracked(const TensorImpl* t) { return t->autograd != nullptr && t->autograd->tracked(); }
}  // namespace detail
}  // namespace crossfire
