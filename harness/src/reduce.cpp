// SPDX-License-Identifier: Apache-2.0
// The reducer (see reduce.hpp).
#include "crossfire/harness/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "reference/reference.hpp"

namespace crossfire::harness {

namespace {

// Keeps the leading `new_size` entries of an input along dimension `dim` (row-major data is re-gathered).
template <class T>
std::vector<T> keep_leading(const std::vector<T>& data, const Shape& shape, int dim, int64_t new_size) {
  int64_t inner = 1;
  for (int i = dim + 1; i < shape.rank(); ++i) inner *= shape[i];
  const int64_t len = shape[dim], outer = len == 0 ? 0 : shape.numel() / (len * std::max<int64_t>(inner, 1));
  std::vector<T> out;
  out.reserve(size_t(outer * new_size * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < new_size; ++k)
      for (int64_t i = 0; i < inner; ++i) out.push_back(data[size_t((o * len + k) * inner + i)]);
  return out;
}

void shrink_dim(InputDef& in, int dim, int64_t new_size) {
  if (is_float(in.dtype)) in.f32_bits = keep_leading(in.f32_bits, in.shape, dim, new_size);
  else in.ints = keep_leading(in.ints, in.shape, dim, new_size);
  in.shape[dim] = new_size;
}

}  // namespace

Program compact_program(const Program& p, int keep, int* keep_at) {
  std::vector<bool> need(p.values.size(), false);
  if (keep >= 0 && size_t(keep) < p.values.size()) need[size_t(keep)] = true;
  if (p.backward_of) need[size_t(*p.backward_of)] = true;
  for (int v = int(p.values.size()) - 1; v >= 0; --v) {
    if (!need[size_t(v)] || p.values[size_t(v)].is_input()) continue;
    NodeDef n = p.values[size_t(v)].node();
    for_each_ref(n, [&](ValueRef& r) { need[size_t(r.id)] = true; });
  }
  Program out;
  std::vector<int> remap(p.values.size(), -1);
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (!need[v]) continue;
    Value val = p.values[v];
    if (!val.is_input()) for_each_ref(val.node(), [&](ValueRef& r) { r.id = remap[size_t(r.id)]; });
    remap[v] = int(out.values.size());
    out.values.push_back(std::move(val));
  }
  if (p.backward_of) out.backward_of = remap[size_t(*p.backward_of)];
  if (keep_at) *keep_at = keep >= 0 && size_t(keep) < p.values.size() ? remap[size_t(keep)] : -1;
  return out;
}

Program reduce_program(const Program& p0, const CheckOptions& opts, const Failure& target, ReduceStats* stats,
                       int max_checks) {
  const std::string sig = target.signature();
  CheckOptions o = opts;
  o.keep_node_table = false;
  o.only(target.oracle);
  ReduceGoal goal;
  goal.node = target.node;
  goal.whole_program = target.oracle == OracleKind::gradients;
  goal.fails = [&](const Program& c) -> std::optional<int> {
    ProgramReport r = check_program(c, o);  // ProgramError(over_budget) ends the reduction (reduce_while)
    for (const Failure& f : r.failures)
      if (f.signature() == sig) return f.node;
    return std::nullopt;
  };
  return reduce_while(p0, opts, goal, stats, max_checks);
}

namespace {
// The program's values 0..k: what runs up to node k (a value refers only to earlier ones).
Program prefix_through(const Program& p, int k) {
  Program c = p;
  c.values.resize(size_t(k) + 1);
  if (c.backward_of && *c.backward_of > k) c.backward_of.reset();
  return c;
}
}  // namespace

Program reduce_while(const Program& p0, const CheckOptions& opts, const ReduceGoal& goal, ReduceStats* stats,
                     int max_checks) {
  int checks = 0;
  bool out_of_time = false;
  auto still_fails = [&](const Program& c, int* node) {
    if (checks >= max_checks) return false;
    ++checks;
    // A candidate is a reduction only if it is a program file the parser reads back (the result is saved and
    // replayed: a cut producer must fit the input limits) and it runs here. A time budget that runs out stops
    // the reduction with the smallest program found so far.
    try {
      parse_program(print_program(c));
    } catch (const ParseError&) {
      return false;
    }
    std::optional<int> failing;
    try {
      failing = goal.fails(c);
    } catch (const ProgramError& e) {
      if (e.reason == ProgramError::Reason::over_budget) out_of_time = true, checks = max_checks;
      return false;
    }
    // A check that cannot say which node fails (a crash, a hang: -1) leaves the node the reducer tracks as it was.
    if (failing && node && *failing >= 0) *node = *failing;
    return failing.has_value();
  };

  Program best = p0;
  int node = goal.node;
  if (!goal.whole_program && best.backward_of) {
    Program c = best;
    c.backward_of.reset();
    if (still_fails(c, &node)) best = c;
  }
  // 0. A failure of no known node (a crash, a hang): the smallest prefix of the program that still fails ends at
  //    the node that fails, found by bisection over the nodes (a prefix runs the same calls as the whole program,
  //    up to its end). Step 1 then keeps only what that node needs.
  if (node < 0 && !goal.whole_program) {
    std::vector<int> nodes;
    for (size_t v = 0; v < best.values.size(); ++v)
      if (!best.values[v].is_input()) nodes.push_back(int(v));
    size_t lo = 0, hi = nodes.size();  // the answer is in [lo, hi); hi: none found yet
    while (lo < hi && checks < max_checks) {
      const size_t mid = lo + (hi - lo) / 2;
      int n2 = -1;
      if (still_fails(prefix_through(best, nodes[mid]), &n2))
        hi = mid;
      else
        lo = mid + 1;
    }
    if (hi < nodes.size()) best = prefix_through(best, nodes[hi]), node = nodes[hi];
  }
  // 1. Keep only what the failing node needs.
  if (node >= 0) {
    int n2 = -1;
    Program c = compact_program(best, goal.whole_program ? -1 : node, &n2);
    if (still_fails(c, &n2)) best = c, node = n2;
  }
  // 2. Cut producers into inputs (values from the f64 reference when it can compute them, else zeros), from the
  //    failing node backwards, then drop what is no longer needed.
  bool progress = true;
  while (progress && checks < max_checks) {
    progress = false;
    std::vector<std::optional<reference::RefTensor>> f64 = evaluate_f64(best);
    std::vector<NodePrediction> pred = predict(best);
    for (int v = int(best.values.size()) - 1; v >= 0 && !progress; --v) {
      if (best.values[size_t(v)].is_input() || v == node) continue;
      if (best.backward_of && *best.backward_of == v) continue;
      // Its dtype and shape: from the f64 evaluation, else from a run on the first device.
      std::optional<reference::RefTensor> val = f64[size_t(v)];
      if (!val) {
        RunOptions ro;
        Device d = opts.devices.empty() ? Device::cpu(0) : opts.devices[0];
        ro.map_device = [d](Device) { return d; };
        ro.check_side_effects = false;
        RunResult rr = run_program(best, ro);
        if (rr.nodes[size_t(v)].output) val = rr.nodes[size_t(v)].output;
        else if (rr.tensors[size_t(v)].defined()) val = reference::RefTensor::from(rr.tensors[size_t(v)]);
      }
      if (!val) continue;
      InputDef in;
      in.dtype = val->dtype;
      in.shape = val->shape;
      in.device = pred[size_t(v)].device;
      in.tracked = pred[size_t(v)].tracked && is_float(val->dtype);
      for (size_t i = 0; i < val->values.size(); ++i) {
        // (an f16/bf16 value is an f32 value; an f64 result is rounded to the input's dtype first; an i64 is read
        // exact from `ints`)
        if (is_float(in.dtype)) in.f32_bits.push_back(f32_to_bits(float(reference::round_to(val->values[i], in.dtype))));
        else in.ints.push_back(val->int_at(i));
      }
      Program c = best;
      c.values[size_t(v)].def = in;
      int keep = goal.whole_program ? -1 : node;
      // Renumbering moves the failing node: its new number, unless the check names it.
      int n2 = -1;
      Program cc = compact_program(c, keep, &n2);
      if (still_fails(cc, &n2)) best = cc, node = n2, progress = true;
    }
  }
  // 3. Collapse devices: drop overrides, then move every input to the failing node's device.
  for (size_t v = 0; v < best.values.size() && checks < max_checks; ++v) {
    if (best.values[v].is_input()) continue;
    Program c = best;
    bool changed = false;
    for_each_ref(c.values[v].node(), [&](ValueRef& r) { changed |= r.on.has_value(), r.on.reset(); });
    int n2 = node;
    if (changed && still_fails(c, &n2)) best = c, node = n2;
  }
  {
    Program c = best;
    Device home = predict(best)[size_t(std::max(0, node))].device;
    bool changed = false;
    for (Value& val : c.values)
      if (val.is_input() && !(val.input().device == home)) val.input().device = home, changed = true;
    int n2 = node;
    if (changed && still_fails(c, &n2)) best = c, node = n2;
  }
  // 3b. Shrink shapes. Dimensions that must agree (a matmul's k, broadcast partners, cat's other dims) usually have
  //     the same size, so every dimension of one size is shrunk together first (to 1, then to half), then each
  //     dimension alone. A candidate that breaks a shape rule fails differently and is simply not taken.
  for (bool progress_shapes = true; progress_shapes && checks < max_checks;) {
    progress_shapes = false;
    std::vector<int64_t> sizes;
    for (const Value& val : best.values)
      if (val.is_input())
        for (int64_t d : val.input().shape.dims())
          if (d > 1) sizes.push_back(d);
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (int64_t size : sizes) {
      for (int64_t to : {int64_t(1), size / 2}) {
        if (to < 1 || to >= size || checks >= max_checks) continue;
        Program c = best;
        for (Value& val : c.values)
          if (val.is_input())
            for (int d = 0; d < val.input().shape.rank(); ++d)
              if (val.input().shape[d] == size) shrink_dim(val.input(), d, to);
        int n2 = node;
        if (still_fails(c, &n2)) {
          best = c, node = n2, progress_shapes = true;
          break;
        }
      }
      if (progress_shapes) break;
    }
    for (size_t v = 0; v < best.values.size() && !progress_shapes && checks < max_checks; ++v) {
      if (!best.values[v].is_input()) continue;
      for (int d = 0; d < best.values[v].input().shape.rank() && !progress_shapes; ++d) {
        if (best.values[v].input().shape[d] <= 1) continue;
        Program c = best;
        shrink_dim(c.values[v].input(), d, 1);
        int n2 = node;
        if (still_fails(c, &n2)) best = c, node = n2, progress_shapes = true;
      }
    }
  }
  // Inputs that feed a parameter with a value domain (log's x, div's rhs, index_select's index) keep their values:
  // simplifying them could leave the domain and turn the failure into a different, invalid program.
  std::vector<bool> domain_bound(best.values.size(), false);
  for (const Value& val : best.values) {
    if (val.is_input()) continue;
    NodeDef n = val.node();
    const OpDef& op = op_def(n.op);
    for (int i = 0; i < op.num_params; ++i) {
      if (op.params[size_t(i)].domain == Domain::any) continue;
      if (auto* r = std::get_if<ValueRef>(&n.args[size_t(i)])) domain_bound[size_t(r->id)] = true;
    }
  }
  // 4. Untrack inputs; 5. simplify values (small integers, then zeros).
  for (size_t v = 0; v < best.values.size() && checks < max_checks; ++v) {
    if (!best.values[v].is_input() || domain_bound[v]) continue;
    if (best.values[v].input().tracked && !goal.whole_program) {
      Program c = best;
      c.values[v].input().tracked = false;
      int n2 = node;
      if (still_fails(c, &n2)) best = c, node = n2;
    }
    for (int mode = 0; mode < 2; ++mode) {
      Program c = best;
      InputDef& in = c.values[v].input();
      bool changed = false;
      for (uint32_t& b : in.f32_bits) {
        float f = bits_to_f32(b);
        float g = mode == 0 ? std::nearbyint(f) : 0.0f;
        if (std::isfinite(f) && f32_to_bits(g) != b) b = f32_to_bits(g), changed = true;
      }
      for (int64_t& x : in.ints)
        if (mode == 1 && x != 0 && in.dtype != DType::boolean) x = 0, changed = true;
      int n2 = node;
      if (changed && still_fails(c, &n2)) best = c, node = n2;
    }
  }
  // 6. Zero what does not matter, in halving chunks (delta debugging), so the values that matter stand out.
  for (size_t v = 0; v < best.values.size() && checks < max_checks; ++v) {
    if (!best.values[v].is_input() || domain_bound[v]) continue;
    const int64_t n = best.values[v].input().shape.numel();
    for (int64_t chunk = std::max<int64_t>(1, n / 2); chunk >= 1 && checks < max_checks; chunk /= 2) {
      for (int64_t start = 0; start < n && checks < max_checks; start += chunk) {
        Program c = best;
        InputDef& in = c.values[v].input();
        bool changed = false;
        for (int64_t i = start; i < std::min(n, start + chunk); ++i) {
          if (is_float(in.dtype)) {
            if (in.f32_bits[size_t(i)] != 0) in.f32_bits[size_t(i)] = 0, changed = true;
          } else if (in.ints[size_t(i)] != 0) {
            in.ints[size_t(i)] = 0, changed = true;
          }
        }
        int n2 = node;
        if (changed && still_fails(c, &n2)) best = c, node = n2;
      }
      if (chunk == 1) break;
    }
  }
  if (stats) *stats = {checks, int(p0.values.size()), int(best.values.size()), out_of_time};
  return best;
}

}  // namespace crossfire::harness
