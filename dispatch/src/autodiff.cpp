// SPDX-License-Identifier: Apache-2.0
// Reverse mode (contract section 5). Backward rules live in the op table and are written with forward ops, so this
// engine knows nothing about any backend: it orders the graph, calls rules and accumulates.
#include <unordered_map>

#include <fmt/format.h>

#include "autograd_meta.hpp"
#include "crossfire/dispatch.hpp"
#include "crossfire/error.hpp"
#include "crossfire/ops.hpp"

namespace crossfire {

namespace {

// Note [Backward order]
// backward() visits each node after every node that consumes its output, so a node's gradient is complete when
// its rule runs. The order is computed from the graph itself (Kahn's algorithm over the reachable nodes), not
// from the nodes' creation numbers: dispatch numbers nodes with a cheap relaxed counter (Note [Counters are
// cheap] in backend.cpp), and when several threads record at once two nodes can get the same number, or a node a
// smaller one than its input's, which would run a rule before all of its gradient had arrived and lose the rest.

// Every node reachable from `root`, each after all of its consumers (Note [Backward order]).
std::vector<detail::Node*> reachable_nodes(detail::Node* root) {
  auto producer = [](const Tensor& in) -> detail::Node* {
    const TensorImpl* t = in.impl();
    return t->autograd ? t->autograd->grad_fn.get() : nullptr;
  };
  // Pass 1: every reachable node, with the number of graph edges that consume it.
  std::unordered_map<detail::Node*, size_t> consumers{{root, 0}};
  std::vector<detail::Node*> stack{root};
  while (!stack.empty()) {
    detail::Node* n = stack.back();
    stack.pop_back();
    for (const Tensor& in : n->inputs)
      if (detail::Node* p = producer(in)) {
        auto [it, first] = consumers.try_emplace(p, 0);
        ++it->second;
        if (first) stack.push_back(p);
      }
  }
  // Pass 2: a node is ready once every edge into it has been visited.
  std::vector<detail::Node*> out, ready{root};
  out.reserve(consumers.size());
  while (!ready.empty()) {
    detail::Node* n = ready.back();
    ready.pop_back();
    out.push_back(n);
    for (const Tensor& in : n->inputs)
      if (detail::Node* p = producer(in); p && --consumers[p] == 0) ready.push_back(p);
  }
  return out;
}

// A non-leaf's pending gradient: local to one backward() call, so it needs no lock (a leaf's does).
void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

[[noreturn]] void rule_bug(const OpDef& op, int slot, const std::string& what) {
  throw AutodiffError(std::string(op.name),
                      fmt::format("{}: internal error: backward rule produced {} for input slot {}", op.name, what,
                                  slot));
}

}  // namespace

// Note [A leaf's gradient is locked]. The add runs under the lock: the new sum must be computed from the sum it
// replaces. A backend's own locks (Vulkan's, CUDA's) are taken inside this one and never the other way round, and
// no backward() holds two leaves' locks at once, so this cannot deadlock.
void AutogradMeta::accumulate_grad(const Tensor& g) {
  std::lock_guard lock(grad_mutex_);
  grad_ = grad_.defined() ? add(grad_, g) : g;
}

void backward(const Tensor& root, const Tensor& seed_in) {
  if (!root.defined()) throw AutodiffError("backward", "backward: the root is an undefined tensor");
  if (!root.tracked())
    throw AutodiffError("backward",
                        "backward: the root tensor is not tracked (no input requires_grad, or it was made under "
                        "no_grad)");
  Tensor seed = seed_in;
  if (!seed.defined()) {
    if (root.numel() != 1)
      throw AutodiffError("backward", fmt::format("backward: the root has shape {} ({} elements); a non-scalar root "
                                                  "needs a seed gradient of that shape",
                                                  root.shape().str(), root.numel()));
    NoGradGuard g;
    seed = ones(root.shape().dims(), root.dtype(), root.device());
  } else {
    if (seed.device() != root.device())
      throw DeviceMismatch("backward", root.device(), "root", {{"seed", 1, -1, seed.device(),
                                                               seed.device().backend != root.device().backend}});
    if (seed.dtype() != root.dtype())
      throw DTypeMismatch("backward", "seed", seed.dtype(), DTypeSet{root.dtype()});
    if (!(seed.shape() == root.shape()))
      throw ShapeError("backward", "seed",
                       fmt::format("has shape {}, the root has shape {}", seed.shape().str(), root.shape().str()));
  }

  NoGradGuard no_grad;  // gradients are computed untracked (no higher-order derivatives)
  AutogradMeta* root_meta = root.impl()->autograd;
  if (!root_meta->grad_fn) {  // the root is a leaf
    root_meta->accumulate_grad(seed);
    return;
  }

  std::unordered_map<const TensorImpl*, Tensor> pending;  // gradients of non-leaf tensors, by tensor
  pending[root.impl()] = seed;
  for (detail::Node* node : reachable_nodes(root_meta->grad_fn.get())) {
    auto it = pending.find(node->output);
    if (it == pending.end()) continue;  // no gradient reached this node
    Tensor grad_out = std::move(it->second);
    pending.erase(it);

    const OpDef& op = op_def(node->op);
    std::vector<Tensor> grads(node->inputs.size());
    const std::span<const bool> needs = node->needs;
    Tensor output(node->output);
    CallView view{op, node->args, node->output->device};
    op.backward(BackwardCall{view, output, grad_out, needs, grads});

    for (size_t s = 0; s < grads.size(); ++s) {
      if (!needs[s]) continue;
      const Tensor& in = node->inputs[s];
      const Tensor& g = grads[s];
      if (!g.defined()) rule_bug(op, int(s), "no gradient");
      if (!(g.shape() == in.shape())) rule_bug(op, int(s), "shape " + g.shape().str() + " for " + in.shape().str());
      if (g.device() != in.device()) rule_bug(op, int(s), "a gradient on " + g.device().str());
      if (g.dtype() != in.dtype()) rule_bug(op, int(s), std::string("a gradient of dtype ") + std::string(dtype_name(g.dtype())));
      AutogradMeta* meta = in.impl()->autograd;
      if (meta->grad_fn) accumulate(pending[in.impl()], g);
      else meta->accumulate_grad(g);  // a leaf: its gradient lives on its own device
    }
  }
}

}  // namespace crossfire
