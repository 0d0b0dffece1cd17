// SPDX-License-Identifier: Apache-2.0
// The f64 derivative of one op (see reference.hpp, Note [The f64 derivative of a node]). Plain loops over the same
// index arithmetic as the evaluators, one function per differentiable op, found through a name -> function table
// checked against kOpTable at compile time. Nothing here is shared with dispatch/src/backward.cpp, which it checks:
// data movement is differentiated by evaluating the op on a probe whose values name their own positions, and the
// other ops by their own loops.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/indexing.hpp"
#include "reference/reference.hpp"

namespace crossfire::reference {
namespace {
using namespace detail;

// One call's arguments and upstream gradient, and the gradients being formed, per tensor parameter.
class VjpCtx {
 public:
  VjpCtx(const OpDef& op, const RefCall& call, const RefTensor& u) : op(op), call(call), u(u) {
    grads.resize(size_t(op.num_params));
  }
  const OpDef& op;
  const RefCall& call;
  const RefTensor& u;
  // Per parameter: one gradient (a tensor, a present optional) or one per list element.
  std::vector<std::vector<std::optional<RefResult>>> grads;

  const RefArg& arg(std::string_view name) const {
    const int i = op.param_index(name);
    if (i < 0 || size_t(i) >= call.args.size())
      throw InvalidArgument(std::string(op.name), std::string(name), "the reference's derivative expected this parameter");
    return call.args[size_t(i)];
  }
  template <class T>
  const T& get(std::string_view name) const {
    const T* v = std::get_if<T>(&arg(name));
    if (v == nullptr)
      throw InvalidArgument(std::string(op.name), std::string(name), "has the wrong kind of value for its parameter role");
    return *v;
  }
  const RefTensor& tensor(std::string_view n) const { return get<RefTensor>(n); }
  const RefTensor* optional_tensor(std::string_view n) const { return std::get_if<RefTensor>(&arg(n)); }
  std::optional<int64_t> optional_integer(std::string_view n) const {
    if (const int64_t* v = std::get_if<int64_t>(&arg(n))) return *v;
    return std::nullopt;
  }

  // A zero gradient for parameter `name` (list element `j`), shaped like its tensor.
  RefResult& grad(std::string_view name, size_t j = 0) {
    const int i = op.param_index(name);
    std::vector<std::optional<RefResult>>& g = grads[size_t(i)];
    if (g.size() <= j) g.resize(j + 1);
    if (!g[j]) {
      const RefTensor& x = op.params[size_t(i)].role == ParamRole::tensor_list
                               ? get<std::vector<RefTensor>>(name)[j]
                               : tensor(name);
      RefResult r;
      r.value = {x.dtype, x.shape, std::vector<double>(x.values.size(), 0.0)};
      r.magnitude.assign(x.values.size(), 0.0);
      r.terms.assign(x.values.size(), 0);
      g[j] = std::move(r);
    }
    return *g[j];
  }
};

// Adds one term to element i of a gradient: its value, and what it adds to the magnitude (|value| by default).
void add_term(RefResult& g, size_t i, double v, double mag) {
  g.value.values[i] += v;
  g.magnitude[i] += mag;
  g.terms[i] += 1;
}
void add_term(RefResult& g, size_t i, double v) { add_term(g, i, v, std::fabs(v)); }

int axis_of(const VjpCtx& c, int64_t a, int rank) {
  if (a < -rank || a >= rank || rank == 0)
    throw InvalidArgument(std::string(c.op.name), "axis", fmt::format("axis {} is out of range for rank {}", a, rank));
  return int(a < 0 ? a + rank : a);
}

// ---------------------------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------------------------

constexpr double kInf = std::numeric_limits<double>::infinity();
// The largest finite value of a float dtype (FloatFormat::overflow is that plus half its ulp).
double largest(DType dt) {
  const FloatFormat f = float_format(dt);
  return f.overflow - f.overflow * f.eps / 2;
}
// The magnitude of an elementwise gradient term u * d, where d (or another factor a formula in the dtype forms on
// the way, `factor`) may be past the dtype's range `lim`: then an evaluation in the dtype meets an infinity where
// the exact term is finite, and the term's error cannot be bounded (magnitude +inf: any finite value, or the
// infinity of the exact term's sign, passes; NaN does not).
double term_magnitude(double u, double m, double factor, double lim) {
  return std::fabs(factor) <= lim ? std::fabs(u) * m : kInf;
}

// grad_x = u * d(x), with the magnitude |u| * m(x) (default |u * d(x)|).
template <class D, class M>
void unary(VjpCtx& c, D d, M m) {
  const RefTensor& x = c.tensor("x");
  RefResult& g = c.grad("x");
  const double lim = largest(x.dtype);
  for (size_t i = 0; i < x.values.size(); ++i) {
    const double xi = x.values[i], u = c.u.values[i], dx = d(xi);
    add_term(g, i, u * dx, std::isnan(dx) ? std::fabs(u) * m(xi) : term_magnitude(u, m(xi), dx, lim));
  }
}
template <class D>
void unary(VjpCtx& c, D d) {
  unary(c, d, [&](double x) { return std::fabs(d(x)); });
}

// A sigmoid without overflow warnings (the same value as 1 / (1 + e^-x)).
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void d_neg(VjpCtx& c) { unary(c, [](double) { return -1.0; }); }
// sign(x), 0 at 0 and at NaN.
void d_abs(VjpCtx& c) { unary(c, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }); }
void d_exp(VjpCtx& c) { unary(c, [](double x) { return std::exp(x); }); }
void d_log(VjpCtx& c) { unary(c, [](double x) { return 1.0 / x; }); }
void d_sqrt(VjpCtx& c) { unary(c, [](double x) { return 0.5 / std::sqrt(x); }); }
void d_tanh(VjpCtx& c) { unary(c, [](double x) { return 4 * sigmoid(2 * x) * sigmoid(-2 * x); }); }
void d_sigmoid(VjpCtx& c) { unary(c, [](double x) { return sigmoid(x) * sigmoid(-x); }); }
// 1 where x > 0, else 0 (0 at 0 and at NaN).
void d_relu(VjpCtx& c) { unary(c, [](double x) { return x > 0 ? 1.0 : 0.0; }); }
// 1 where min <= x <= max, both rounded as the forward rounds them (ev_clamp), else 0 (NaN: 0).
void d_clamp(VjpCtx& c) {
  const DType dt = c.tensor("x").dtype;
  const auto bound = [&](double v) { return is_half(dt) ? round_to(round_to(v, DType::f32), dt) : round_to(v, DType::f32); };
  const double lo = bound(c.get<double>("min")), hi = bound(c.get<double>("max"));
  unary(c, [&](double x) { return lo <= x && x <= hi ? 1.0 : 0.0; });
}

// Broadcasting binary ops: per output element j, lhs[sa(j)] gets u_j * dl(a, b) and rhs[sb(j)] gets u_j * dr(a, b);
// magnitudes |u_j| * ml(a, b) and |u_j| * mr(a, b).
template <class DL, class DR, class ML, class MR>
void binary(VjpCtx& c, DL dl, DR dr, ML ml, MR mr, std::string_view lhs = "lhs", std::string_view rhs = "rhs") {
  const RefTensor &a = c.tensor(lhs), &b = c.tensor(rhs);
  const Shape& out = c.u.shape;
  const BroadcastSources sa(a.shape, out), sb(b.shape, out);
  RefResult &ga = c.grad(lhs), &gb = c.grad(rhs);
  const double lim = largest(a.dtype);
  for (size_t j = 0; j < sa.size(); ++j) {
    const double x = a.values[size_t(sa[j])], y = b.values[size_t(sb[j])], u = c.u.values[j];
    const double l = dl(x, y), r = dr(x, y);
    add_term(ga, size_t(sa[j]), u * l, std::isnan(l) ? std::fabs(u) * ml(x, y) : term_magnitude(u, ml(x, y), l, lim));
    add_term(gb, size_t(sb[j]), u * r, std::isnan(r) ? std::fabs(u) * mr(x, y) : term_magnitude(u, mr(x, y), r, lim));
  }
}
template <class DL, class DR>
void binary(VjpCtx& c, DL dl, DR dr) {
  binary(
      c, dl, dr, [&](double x, double y) { return std::fabs(dl(x, y)); },
      [&](double x, double y) { return std::fabs(dr(x, y)); });
}

void d_add(VjpCtx& c) {
  binary(c, [](double, double) { return 1.0; }, [](double, double) { return 1.0; });
}
void d_sub(VjpCtx& c) {
  binary(c, [](double, double) { return 1.0; }, [](double, double) { return -1.0; });
}
void d_mul(VjpCtx& c) {
  binary(c, [](double, double y) { return y; }, [](double x, double) { return x; });
}
// d/dr = -(l / r) / r: an f32 formula forms the output l / r first, which may overflow where the gradient fits.
void d_div(VjpCtx& c) {
  const double lim = largest(c.tensor("lhs").dtype);
  binary(
      c, [](double, double y) { return 1.0 / y; }, [](double x, double y) { return -(x / y) / y; },
      [](double, double y) { return std::fabs(1.0 / y); },
      [lim](double x, double y) { return std::fabs(x / y) <= lim ? std::fabs((x / y) / y) : kInf; });
}
// d/dl = r l^(r-1); d/dr = l^r ln l (domain l > 0). An f32 evaluation rounds r - 1 before the pow, which moves
// l^(r-1) by up to eps * |(r - 1) ln l| relatively: the lhs magnitude carries that factor.
void d_pow(VjpCtx& c) {
  const double lim = largest(c.tensor("lhs").dtype);
  binary(
      c, [](double x, double y) { return y * std::pow(x, y - 1); },
      [](double x, double y) { return std::pow(x, y) * std::log(x); },
      [lim](double x, double y) {
        const double p = std::pow(x, y - 1);
        return std::fabs(p) <= lim ? std::fabs(y * p) * (1 + std::fabs((y - 1) * std::log(x))) : kInf;
      },
      [lim](double x, double y) {
        const double p = std::pow(x, y);
        return std::fabs(p) <= lim ? std::fabs(p * std::log(x)) : kInf;
      });
}
// maximum: all of u to lhs where lhs >= rhs (ties included), else to rhs (also where either is NaN).
void d_maximum(VjpCtx& c) {
  binary(c, [](double x, double y) { return x >= y ? 1.0 : 0.0; }, [](double x, double y) { return x >= y ? 0.0 : 1.0; });
}
// minimum: all of u to lhs where lhs <= rhs (ties included), else to rhs (also where either is NaN).
void d_minimum(VjpCtx& c) {
  binary(c, [](double x, double y) { return x <= y ? 1.0 : 0.0; }, [](double x, double y) { return x <= y ? 0.0 : 1.0; });
}
// where(cond, a, b): u to a where cond, else to b; cond is a constant.
void d_where(VjpCtx& c) {
  const RefTensor &cond = c.tensor("cond"), &a = c.tensor("a"), &b = c.tensor("b");
  const Shape& out = c.u.shape;
  const BroadcastSources sc(cond.shape, out), sa(a.shape, out), sb(b.shape, out);
  RefResult &ga = c.grad("a"), &gb = c.grad("b");
  for (size_t j = 0; j < sc.size(); ++j) {
    const bool pick_a = cond.values[size_t(sc[j])] != 0;
    add_term(ga, size_t(sa[j]), pick_a ? c.u.values[j] : 0.0);
    add_term(gb, size_t(sb[j]), pick_a ? 0.0 : c.u.values[j]);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reductions: element k of the reduced run (outer o, inner in) came from output element o * inner + in
// ---------------------------------------------------------------------------------------------------------------

template <class F>
void over_reduced_runs(VjpCtx& c, F f) {
  const RefTensor& x = c.tensor("x");
  RefSplit sp;
  if (std::optional<int64_t> a = c.optional_integer("axis"))
    sp = ref_split_at(x.shape, axis_of(c, *a, x.shape.rank()));
  else
    sp.len = x.numel();
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t in = 0; in < sp.inner; ++in) {
      auto at = [&](int64_t k) { return size_t((o * sp.len + k) * sp.inner + in); };
      f(c.u.values[size_t(o * sp.inner + in)], sp.len, at);
    }
}
void d_sum(VjpCtx& c) {
  RefResult& g = c.grad("x");
  over_reduced_runs(c, [&](double u, int64_t len, auto at) {
    for (int64_t k = 0; k < len; ++k) add_term(g, at(k), u);
  });
}
void d_mean(VjpCtx& c) {
  RefResult& g = c.grad("x");
  over_reduced_runs(c, [&](double u, int64_t len, auto at) {
    for (int64_t k = 0; k < len; ++k) add_term(g, at(k), u / double(len));
  });
}
// max: all of u to the first maximal element, or the first NaN (argmax's choice); the others get 0.
void d_max(VjpCtx& c) {
  const RefTensor& x = c.tensor("x");
  RefResult& g = c.grad("x");
  over_reduced_runs(c, [&](double u, int64_t len, auto at) {
    int64_t best = 0;
    for (int64_t k = 1; k < len && !std::isnan(x.values[at(best)]); ++k)
      if (std::isnan(x.values[at(k)]) || x.values[at(k)] > x.values[at(best)]) best = k;
    for (int64_t k = 0; k < len; ++k) add_term(g, at(k), k == best ? u : 0.0);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// matmul: out[b, i, j] = sum_t lhs[sa(b), i, t] * rhs[sb(b), t, j]
// ---------------------------------------------------------------------------------------------------------------

void d_matmul(VjpCtx& c) {
  const RefTensor &a = c.tensor("lhs"), &b = c.tensor("rhs");
  const int ra = a.shape.rank(), rb = b.shape.rank();
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  Shape ba, bb, batch;
  for (int i = 0; i < ra - 2; ++i) ba.push_back(a.shape[i]);
  for (int i = 0; i < rb - 2; ++i) bb.push_back(b.shape[i]);
  for (int i = 0; i < c.u.shape.rank() - 2; ++i) batch.push_back(c.u.shape[i]);
  const BroadcastSources src_a(ba, batch), src_b(bb, batch);
  RefResult &ga = c.grad("lhs"), &gb = c.grad("rhs");
  for (size_t bi = 0; bi < src_a.size(); ++bi) {
    const size_t oa = size_t(src_a[bi] * m * k), ob = size_t(src_b[bi] * k * n), ou = bi * size_t(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double u = c.u.values[ou + size_t(i * n + j)];
        for (int64_t t = 0; t < k; ++t) {
          add_term(ga, oa + size_t(i * k + t), u * b.values[ob + size_t(t * n + j)]);
          add_term(gb, ob + size_t(t * n + j), a.values[oa + size_t(i * k + t)] * u);
        }
      }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Data movement, by a probe: the op evaluated on inputs whose values are their own positions (1, 2, ... across all
// of its differentiable tensors, 0 never used) gives, per output element, the input element it copies (0: zero
// padding). Each input element's gradient is the sum of u over the output elements that copy it. No per-op code,
// and no use of the op's backward rule.
// ---------------------------------------------------------------------------------------------------------------

void d_by_probe(VjpCtx& c) {
  RefCall probe = c.call;
  struct Slot {
    int param;
    size_t list_index;
    int64_t first;  // probe value of its element 0
  };
  std::vector<Slot> slots;
  int64_t next = 1;
  auto number = [&](RefTensor& t, int param, size_t j) {
    slots.push_back({param, j, next});
    t.dtype = DType::f32;  // positions are exact in f32 below 2^24
    for (double& v : t.values) v = double(next++);
  };
  for (int i = 0; i < c.op.num_params; ++i) {
    const ParamDef& p = c.op.params[size_t(i)];
    if (p.grad != GradPolicy::differentiable) continue;
    if (auto* t = std::get_if<RefTensor>(&probe.args[size_t(i)])) number(*t, i, 0);
    if (auto* l = std::get_if<std::vector<RefTensor>>(&probe.args[size_t(i)]))
      for (size_t j = 0; j < l->size(); ++j) number((*l)[j], i, j);
  }
  if (next > (int64_t(1) << 24))
    throw InvalidArgument(std::string(c.op.name), "", "too many elements for the reference's derivative probe");
  const RefResult moved = evaluate(probe);
  // Every input element gets a (possibly zero) gradient, even one no output element copies.
  for (const Slot& s : slots)
    c.grad(c.op.params[size_t(s.param)].name, s.list_index);
  for (size_t e = 0; e < moved.value.values.size(); ++e) {
    const int64_t pos = int64_t(moved.value.values[e]);
    if (pos == 0) continue;  // zero padding
    auto s = std::upper_bound(slots.begin(), slots.end(), pos, [](int64_t p, const Slot& x) { return p < x.first; });
    --s;
    add_term(c.grad(c.op.params[size_t(s->param)].name, s->list_index), size_t(pos - s->first), c.u.values[e]);
  }
}

// fold sums patch entries into positions; each input entry lands on one position (or on padding, dropped), so its
// gradient is u at that position: unfold of u with the same geometry, itself a copy.
void d_fold(VjpCtx& c) {
  constexpr OpId kUnfold = op_id("unfold");
  const RefResult picked = evaluate(RefCall{
      kUnfold, {c.u, c.get<std::vector<int64_t>>("kernel"), c.get<std::vector<int64_t>>("stride"),
                c.get<std::vector<int64_t>>("padding")}});
  RefResult& g = c.grad("input");
  if (picked.value.values.size() != g.value.values.size())
    throw InvalidArgument("fold", "input", "its shape does not match the window (reference derivative)");
  for (size_t i = 0; i < g.value.values.size(); ++i) add_term(g, i, picked.value.values[i]);
}

// ---------------------------------------------------------------------------------------------------------------
// nn
// ---------------------------------------------------------------------------------------------------------------

// dx_i = p_i (u_i - sum_j u_j p_j) along the axis. Written with u - max(u) (the same in exact arithmetic), so the
// magnitude reflects the terms an f32 evaluation that shifts u (as softmax shifts x) adds up. An f32 backward also
// uses the forward's p, which the forward bound lets differ from the exact p_j by about eps * m_j, m_j = p_j (1 +
// |x_j - max| + sum_k p_k |x_k - max|) (ev_softmax's magnitude); the magnitude carries that too:
//   m_i (|u'_i| + sum_j p_j |u'_j|) + p_i sum_j |u'_j| m_j,   u' = u - max(u).
void d_softmax(VjpCtx& c) {
  const RefTensor& x = c.tensor("x");
  const int axis = axis_of(c, c.get<int64_t>("axis"), x.shape.rank());
  const RefSplit sp = ref_split_at(x.shape, axis);
  RefResult& g = c.grad("x");
  std::vector<double> p(size_t(sp.len)), m(size_t(sp.len)), us(size_t(sp.len));
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t in = 0; in < sp.inner; ++in) {
      auto at = [&](int64_t k) { return size_t((o * sp.len + k) * sp.inner + in); };
      double mx = -std::numeric_limits<double>::infinity(), umax = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < sp.len; ++k) {
        mx = std::isnan(mx) || std::isnan(x.values[at(k)]) ? std::numeric_limits<double>::quiet_NaN()
                                                           : std::max(mx, x.values[at(k)]);
        umax = std::max(umax, c.u.values[at(k)]);
      }
      double s = 0;
      for (int64_t k = 0; k < sp.len; ++k) s += std::exp(x.values[at(k)] - mx);
      double spread = 0, dot = 0, weighted_u = 0, weighted_m = 0;
      auto times = [](double q, double d) { return q == 0 ? 0.0 : q * d; };  // a p of 0 weighs nothing
      for (int64_t k = 0; k < sp.len; ++k) {
        p[size_t(k)] = std::exp(x.values[at(k)] - mx) / s;
        spread += times(p[size_t(k)], std::fabs(x.values[at(k)] - mx));
        us[size_t(k)] = c.u.values[at(k)] - umax;
        dot += us[size_t(k)] * p[size_t(k)];
        weighted_u += p[size_t(k)] * std::fabs(us[size_t(k)]);
      }
      for (int64_t k = 0; k < sp.len; ++k) {
        m[size_t(k)] = times(p[size_t(k)], 1 + std::fabs(x.values[at(k)] - mx) + spread);
        weighted_m += std::fabs(us[size_t(k)]) * m[size_t(k)];
      }
      for (int64_t k = 0; k < sp.len; ++k) {
        const double v = p[size_t(k)] * (us[size_t(k)] - dot);
        const double mag = m[size_t(k)] * (std::fabs(us[size_t(k)]) + weighted_u) + p[size_t(k)] * weighted_m;
        g.value.values[at(k)] = v;
        g.magnitude[at(k)] = mag;
        g.terms[at(k)] = sp.len;
      }
    }
}

// The forward loop of ev_conv2d, each product sending u * weight to the input element and u * input to the weight
// element it multiplied (a padded position's input is a real 0), and u to the bias.
void d_conv2d(VjpCtx& c) {
  const RefTensor &x = c.tensor("input"), &w = c.tensor("weight");
  const RefTensor* bias = c.optional_tensor("bias");
  const std::vector<int64_t>&stride = c.get<std::vector<int64_t>>("stride"),
  &padding = c.get<std::vector<int64_t>>("padding");
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3], kh = w.shape[2], kw = w.shape[3];
  const int64_t N = c.u.shape[0], O = c.u.shape[1], Ho = c.u.shape[2], Wo = c.u.shape[3];
  RefResult &gx = c.grad("input"), &gw = c.grad("weight");
  RefResult* gb = bias ? &c.grad("bias") : nullptr;
  size_t src = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow, ++src) {
          const double u = c.u.values[src];
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t y = oh * stride[0] - padding[0] + i, xx = ow * stride[1] - padding[1] + j;
                const bool inside = y >= 0 && y < H && xx >= 0 && xx < W;
                const size_t wi = size_t(((o * C + ch) * kh + i) * kw + j);
                const size_t xi = inside ? size_t(((n * C + ch) * H + y) * W + xx) : 0;
                if (inside) add_term(gx, xi, u * w.values[wi]);
                add_term(gw, wi, u * (inside ? x.values[xi] : 0.0));
              }
          if (gb) add_term(*gb, size_t(o), u);
        }
}

// ---------------------------------------------------------------------------------------------------------------
// The derivative table, checked against kOpTable
// ---------------------------------------------------------------------------------------------------------------

using VjpFn = void (*)(VjpCtx&);
struct VjpEntry {
  std::string_view name;
  VjpFn fn;
  // How far an f32 backward rule's result may lie from the exact one (Note [The f64 derivative of a node]).
  ErrorBound bound;
  bool conserves = false;  // see RefVjp::conserves
};
// Bounds: k_const counts the f32 roundings of a plain evaluation of the formula above, plus the forward's own error
// where the formula reads the output (exp: 4; sigmoid and tanh: 4 per sigmoid; pow: 16); k_per_term 1 where
// gradients are summed (broadcasting, reductions, matmul, conv2d, repeated indices), over all the terms summed.
constexpr ErrorBound kRouted{1, 0, false};  // u, -u, 0 or a sum of u's over one output element
constexpr ErrorBound kSummed{2, 1, false};
constexpr VjpEntry kVjps[] = {
    {"neg", d_neg, kRouted},
    {"abs", d_abs, kRouted},
    {"exp", d_exp, {6, 0, false}},
    {"log", d_log, {2, 0, false}},
    {"sqrt", d_sqrt, {4, 0, false}},
    {"tanh", d_tanh, {14, 0, false}},
    {"sigmoid", d_sigmoid, {12, 0, false}},
    {"relu", d_relu, kRouted},
    {"clamp", d_clamp, kRouted},
    {"add", d_add, kSummed},
    {"sub", d_sub, kSummed},
    {"mul", d_mul, {3, 1, false}},
    {"div", d_div, {5, 1, false}},
    {"pow", d_pow, {22, 1, false}},
    {"maximum", d_maximum, kSummed, true},
    {"minimum", d_minimum, kSummed, true},
    {"where", d_where, kSummed, true},
    {"sum", d_sum, kRouted},
    {"mean", d_mean, {2, 0, false}},
    {"max", d_max, kRouted},
    {"matmul", d_matmul, kSummed},
    {"reshape", d_by_probe, kSummed},
    {"permute", d_by_probe, kSummed},
    {"slice", d_by_probe, kSummed},
    {"expand", d_by_probe, kSummed},
    {"cat", d_by_probe, kSummed},
    {"index_select", d_by_probe, kSummed},
    {"softmax", d_softmax, {12, 2, false}},
    {"conv2d", d_conv2d, kSummed},
    {"unfold", d_by_probe, kSummed},
    {"fold", d_fold, kRouted},
    {"to", d_by_probe, kSummed},
};

// An op is differentiable when one of its tensor parameters is (its backward rule exists exactly then).
constexpr bool differentiable(const OpDef& op) {
  for (const ParamDef& p : op.signature())
    if (is_tensor_role(p.role) && p.grad == GradPolicy::differentiable) return true;
  return false;
}
constexpr int vjp_of(std::string_view name) {
  for (size_t i = 0; i < std::size(kVjps); ++i)
    if (kVjps[i].name == name) return int(i);
  return -1;
}
// Note [Coverage checks that name the op] (op_table.hpp): a differentiable op without a derivative here fails to
// compile, naming the op.
template <auto Name, bool ok>
struct reference_derivative_for {
  static_assert(ok, "this differentiable op of kOpTable has no derivative in kVjps (harness/reference/vjp.cpp)");
  static constexpr bool value = ok;
};
constexpr bool derivative_if_differentiable(const OpDef& op) { return !differentiable(op) || vjp_of(op.name) >= 0; }
static_assert(every_op_passes<reference_derivative_for, derivative_if_differentiable>());
// And every entry names a differentiable op, once.
constexpr bool every_entry_names_a_differentiable_op() {
  for (const VjpEntry& e : kVjps) {
    int found = 0;
    for (const OpDef& op : kOpTable) found += op.name == e.name && differentiable(op);
    if (found != 1 || vjp_of(e.name) != int(&e - kVjps)) return false;
  }
  return true;
}
static_assert(every_entry_names_a_differentiable_op(),
              "an entry of kVjps (harness/reference/vjp.cpp) names no differentiable op of kOpTable, or repeats one");

constexpr std::array<int, kNumOps> kVjpByOp = [] {
  std::array<int, kNumOps> t{};
  for (size_t i = 0; i < kOpTable.size(); ++i) t[i] = vjp_of(kOpTable[i].name);
  return t;
}();

}  // namespace

bool has_vjp(OpId op) { return op < kOpTable.size() && kVjpByOp[op] >= 0; }

RefVjp vjp(const RefCall& call, const RefTensor& upstream) {
  if (!has_vjp(call.op)) throw InvalidArgument("reference", "op", fmt::format("op id {} is not differentiable", call.op));
  const OpDef& op = op_def(call.op);
  // The call must be one the evaluator accepts, and u must have its output's shape.
  const RefResult out = evaluate(call);
  if (!(out.value.shape == upstream.shape) || upstream.values.size() != size_t(upstream.shape.numel()))
    throw InvalidArgument(std::string(op.name), "upstream",
                          fmt::format("has shape {}, the output has {}", upstream.shape.str(), out.value.shape.str()));
  const VjpEntry& e = kVjps[size_t(kVjpByOp[call.op])];
  VjpCtx c(op, call, upstream);
  e.fn(c);
  RefVjp r;
  r.bound = e.bound;
  r.conserves = e.conserves;
  for (int i = 0; i < op.num_params; ++i) {
    const ParamDef& p = op.params[size_t(i)];
    if (!is_tensor_role(p.role)) continue;
    const RefArg& a = call.args[size_t(i)];
    size_t n = 0;
    if (std::holds_alternative<RefTensor>(a)) n = 1;
    if (const auto* l = std::get_if<std::vector<RefTensor>>(&a)) n = l->size();
    for (size_t j = 0; j < n; ++j) {
      const bool has = p.grad == GradPolicy::differentiable && j < c.grads[size_t(i)].size() && c.grads[size_t(i)][j];
      r.grads.push_back(has ? std::move(c.grads[size_t(i)][j]) : std::nullopt);
    }
  }
  return r;
}

double vjp_allowed_error(const ErrorBound& bound, DType dt, double magnitude, int64_t terms) {
  if (!is_half(dt)) return allowed_error(bound, magnitude, terms);
  const FloatFormat f = float_format(dt);
  const double k = double(bound.k_const) + double(bound.k_per_term) * double(terms) + 1.0;
  return k * f.eps * magnitude + f.tiny;
}

bool within_vjp_bound(const ErrorBound& bound, DType dt, double got, double exact, double magnitude, int64_t terms) {
  if (!is_half(dt)) return within_bound(bound, got, exact, magnitude, terms);
  if (std::isnan(exact)) return std::isnan(got);
  // As within_bound()'s Note [Overflow in f32 intermediates], at the dtype's range: a backward rule stores its
  // partial results (a sum over broadcast dims, one dim at a time) in the dtype, so a partial sum past the dtype's
  // largest value may become inf where the whole sum fits (pow's rhs gradient in f16; a campaign, seed 2).
  if (terms > 1 && !(magnitude < float_format(dt).overflow)) return true;
  if (std::isnan(got)) return false;
  const double allowed = vjp_allowed_error(bound, dt, magnitude, terms);
  if (std::isinf(exact)) return got == exact;
  if (std::isinf(got))
    return std::signbit(got) == std::signbit(exact) && std::fabs(exact) + allowed >= float_format(dt).overflow;
  return std::fabs(got - exact) <= allowed;
}

}  // namespace crossfire::reference
