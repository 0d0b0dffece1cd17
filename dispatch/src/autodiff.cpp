// Reverse mode (contract section 5). Backward rules live in the op table and are written with forward ops, so this
// engine knows nothing about any backend: it orders the graph, calls rules and accumulates.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "autograd_meta.hpp"
#include "crossfire/dispatch.hpp"
#include "crossfire/error.hpp"
#include "crossfire/ops.hpp"

namespace crossfire {

namespace {

// Every node reachable from `root`, latest first. Node sequence numbers are a topological order (a node is created
// after all of its inputs), so sorting by them descending visits each node after every node that consumes it.
std::vector<detail::Node*> reachable_nodes(detail::Node* root) {
  std::vector<detail::Node*> out, stack{root};
  std::unordered_set<detail::Node*> seen{root};
  while (!stack.empty()) {
    detail::Node* n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const Tensor& in : n->inputs) {
      const TensorImpl* t = in.impl();
      if (t->autograd && t->autograd->grad_fn && seen.insert(t->autograd->grad_fn.get()).second)
        stack.push_back(t->autograd->grad_fn.get());
    }
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->sequence > b->sequence; });
  return out;
}

void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

[[noreturn]] void rule_bug(const OpDef& op, int slot, const std::string& what) {
  throw AutodiffError(std::string(op.name),
                      fmt::format("{}: internal error: backward rule produced {} for input slot {}", op.name, what,
                                  slot));
}

}  // namespace

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
    seed = ones(root.shape().dims(), DType::f32, root.device());
  } else {
    if (seed.device() != root.device())
      throw DeviceMismatch("backward", root.device(), "root", {{"seed", 1, -1, seed.device(),
                                                               seed.device().backend != root.device().backend}});
    if (seed.dtype() != DType::f32) throw DTypeMismatch("backward", "seed", seed.dtype(), kFloat);
    if (!(seed.shape() == root.shape()))
      throw ShapeError("backward", "seed",
                       fmt::format("has shape {}, the root has shape {}", seed.shape().str(), root.shape().str()));
  }

  NoGradGuard no_grad;  // gradients are computed untracked (no higher-order derivatives)
  AutogradMeta* root_meta = root.impl()->autograd;
  if (!root_meta->grad_fn) {  // the root is a leaf
    accumulate(root_meta->grad, seed);
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
      AutogradMeta* meta = in.impl()->autograd;
      if (meta->grad_fn) accumulate(pending[in.impl()], g);
      else accumulate(meta->grad, g);  // a leaf: its gradient lives on its own device
    }
  }
}

}  // namespace crossfire
