// Autodiff state of a tensor and the graph node that produced it. Private to dispatch/.
#pragma once

#include <memory>
#include <vector>

#include "crossfire/args.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire::detail {

// One recorded op call: what the backward rule needs, owned (the caller's ArgPack held only views).
struct Node {
  OpId op;
  std::vector<Tensor> inputs;                  // tensor inputs, one per input slot (list elements expanded)
  std::vector<std::vector<int64_t>> int_lists;  // owned copies of int-list attributes
  ArgPack args;                                 // the forward call, re-pointed at the copies above
  std::unique_ptr<bool[]> needs;                // per slot (inputs.size()): does the gradient flow there?
  TensorImpl* output = nullptr;                 // not owned: the output owns this node (Note [Node lifetime])
  uint64_t sequence = 0;                        // creation order; a topological order of the graph

  Node(OpId id, const ArgPack& call_args, uint64_t seq);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
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
