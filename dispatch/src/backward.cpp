// SPDX-License-Identifier: Apache-2.0
// Backward rules (contract section 5). Every rule is written with forward ops only (ops.hpp), so each backend gets
// gradients from its forward kernels and no backend has backward code of its own. The engine (autodiff.cpp) calls
// a rule under no_grad and checks that every gradient it asked for has its input's shape and device.
//
// Conventions used below:
//  - `g` is d(loss)/d(output); it lives on the op's target device, like every input but to()'s destination.
//  - Slots follow the op's signature with list elements expanded and absent optionals skipped (input_slot()); for
//    every op here but conv2d/index_select/where/cat, slot i is simply tensor parameter i.
//  - Broadcasting ops reduce their gradient back to each input's shape with sum_to().
//  - At a non-smooth point a rule picks one side, documented on the rule (relu and abs: 0 at 0; maximum/minimum
//    ties: the lhs; max: the first maximal element, as argmax reports it).
#include <numeric>
#include <vector>

#include "crossfire/error.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/ops.hpp"

namespace crossfire {
namespace {

// A rank-0 constant of `like`'s float dtype on its device; it broadcasts against anything. (Gradients have their
// input's dtype: f32, f16 or bf16. `like` is always a float tensor here.)
Tensor constant(double v, const Tensor& like) { return full({}, v, like.dtype(), like.device()); }

// Axis `a` of a rank-r tensor, negative axes counted from the end (the output rule has already checked it).
int64_t axis_of(int64_t a, int r) { return a < 0 ? a + r : a; }

// Reduces the gradient of a broadcast result back to an input's `shape` (numpy rules): sums away the leading dims
// that broadcasting added, then sums, keeping the dim, wherever `shape` has size 1 and the result does not.
Tensor sum_to(Tensor g, const Shape& shape) {
  for (int lead = g.rank() - shape.rank(); lead > 0; --lead) g = sum(g, 0);
  for (int i = 0; i < shape.rank(); ++i)
    if (shape[i] == 1 && g.shape()[i] != 1) g = sum(g, i, /*keepdim=*/true);
  return g;
}

// The gradient of a reduction (sum, mean, max) spread back over x's shape: puts the reduced dims back as size 1
// (whether or not the forward kept them) and expands.
Tensor unreduce(const Tensor& g, const Shape& x_shape, bool has_axis, int64_t axis) {
  Shape kept = x_shape;
  for (int i = 0; i < kept.rank(); ++i)
    if (!has_axis || i == axis) kept[i] = 1;
  return expand(reshape(g, kept.dims()), x_shape.dims());
}

// The last two dims swapped (matmul's transpose).
Tensor transpose_last2(const Tensor& t) {
  std::vector<int64_t> dims(size_t(t.rank()));
  std::iota(dims.begin(), dims.end(), int64_t(0));
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return permute(t, dims);
}

// Scatter-add along one axis: out has `dim` entries along `axis`, and entry index[j] receives g's entry j (summed
// when an index repeats). Built as g (axis moved last, flattened to 2-D) times a one-hot [m, dim] matrix made from
// arange + eq + cast. Only forward ops, so every backend gets it; and exact for finite g, since each output is a
// sum of the selected g's plus products with 0. Its cost is O(numel * dim), fine for gradients of the sizes the
// layout ops see; a backend that wants a linear scatter can add an op for it later.
Tensor scatter_along(const Tensor& g, int64_t axis, const Tensor& index, int64_t dim) {
  const int r = g.rank();
  const int64_t m = g.shape()[int(axis)];
  std::vector<int64_t> to_last, from_last(static_cast<size_t>(r));  // permutation moving `axis` last, and its inverse
  for (int i = 0; i < r; ++i)
    if (i != axis) to_last.push_back(i);
  to_last.push_back(axis);
  for (int i = 0; i < r; ++i) from_last[size_t(to_last[size_t(i)])] = i;

  Tensor moved = permute(g, to_last);
  Shape moved_shape = moved.shape();
  int64_t rest = 1;
  for (int i = 0; i < r - 1; ++i) rest *= moved_shape[i];
  // The columns take the index's own dtype (i32 or i64): eq does not promote.
  Tensor columns = reshape(arange(0, double(dim), 1, index.dtype(), g.device()), {1, dim});
  Tensor one_hot = cast(eq(reshape(index, {m, 1}), columns), g.dtype());  // [m, dim]
  Tensor scattered = matmul(reshape(moved, {rest, m}), one_hot);            // [rest, dim]
  moved_shape[r - 1] = dim;
  return permute(reshape(scattered, moved_shape.dims()), from_last);
}

// conv2d's input slots.
constexpr int kConvInput = 0, kConvWeight = 1, kConvBias = 2;

}  // namespace

// Each rule shares its name with its forward op, so inside this namespace a forward op of the same name as some
// rule is written crossfire::name (unqualified, the name would mean the rule).
namespace backward_rules {

// ---- unary: g * f'(x), with f' taken from the output where that is cheaper and as accurate --------------------------

void neg(const BackwardCall& b) { b.grads[0] = crossfire::neg(b.grad); }

// sign(x) * g, with sign(0) = 0 (the subgradient PyTorch and JAX use).
void abs(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  Tensor zero = constant(0, x);
  Tensor sign = crossfire::where(gt(x, zero), constant(1, x), crossfire::where(lt(x, zero), constant(-1, x), zero));
  b.grads[0] = crossfire::mul(b.grad, sign);
}

void exp(const BackwardCall& b) { b.grads[0] = crossfire::mul(b.grad, b.output); }

void log(const BackwardCall& b) { b.grads[0] = crossfire::div(b.grad, b.call.tensor(0)); }

// d sqrt(x) = 1 / (2 sqrt(x)): uses the output rather than recomputing the root.
void sqrt(const BackwardCall& b) {
  b.grads[0] = crossfire::div(b.grad, crossfire::mul(constant(2, b.output), b.output));
}

// Note [Saturating derivatives]
// sigmoid' = y (1 - y) and tanh' = 1 - y^2 are exact, but not from a rounded y: where y is within a few ulps of 1 in
// magnitude (sigmoid(15) = 1 - 3.1e-7, tanh(10) = 1 - 8.2e-9) the subtraction keeps only the rounding, so the
// gradient is off by up to 20% (or is 0) and backends that round y differently disagree. 1 - sigmoid(x) is
// sigmoid(-x), computed to full relative precision; and 1 - tanh(x)^2 = 4 sigmoid(2x) sigmoid(-2x). Both cost one
// or two more elementwise kernels. tests: AutodiffGradCheck.SaturatingActivationsKeepTheirSmallGradients.

// d tanh = 1 - tanh(x)^2 = 4 sigmoid(2x) sigmoid(-2x) (Note [Saturating derivatives]).
void tanh(const BackwardCall& b) {
  const Tensor two_x = crossfire::mul(b.call.tensor(0), constant(2, b.grad));
  const Tensor d = crossfire::mul(crossfire::sigmoid(two_x), crossfire::sigmoid(crossfire::neg(two_x)));
  b.grads[0] = crossfire::mul(b.grad, crossfire::mul(d, constant(4, d)));
}

// d sigmoid = y (1 - y) = y sigmoid(-x) (Note [Saturating derivatives]).
void sigmoid(const BackwardCall& b) {
  const Tensor& y = b.output;
  b.grads[0] = crossfire::mul(b.grad, crossfire::mul(y, crossfire::sigmoid(crossfire::neg(b.call.tensor(0)))));
}

// g where x > 0, else 0 (also at 0, and at NaN).
void relu(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  b.grads[0] = crossfire::where(gt(x, constant(0, x)), b.grad, constant(0, x));
}

// clamp passes the gradient where min <= x <= max (both ends included, as the op table says), else 0.
void clamp(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  const double lo = b.call.scalar(b.call.op.param_index("min")), hi = b.call.scalar(b.call.op.param_index("max"));
  const Tensor inside = logical_and(ge(x, constant(lo, x)), le(x, constant(hi, x)));
  b.grads[0] = crossfire::where(inside, b.grad, constant(0, x));
}

// ---- binary, broadcasting: each gradient is summed back to its input's shape ----------------------------------------

void add(const BackwardCall& b) {
  if (b.needs[0]) b.grads[0] = sum_to(b.grad, b.call.tensor(0).shape());
  if (b.needs[1]) b.grads[1] = sum_to(b.grad, b.call.tensor(1).shape());
}

void sub(const BackwardCall& b) {
  if (b.needs[0]) b.grads[0] = sum_to(b.grad, b.call.tensor(0).shape());
  if (b.needs[1]) b.grads[1] = sum_to(crossfire::neg(b.grad), b.call.tensor(1).shape());
}

void mul(const BackwardCall& b) {
  const Tensor &lhs = b.call.tensor(0), &rhs = b.call.tensor(1);
  if (b.needs[0]) b.grads[0] = sum_to(crossfire::mul(b.grad, rhs), lhs.shape());
  if (b.needs[1]) b.grads[1] = sum_to(crossfire::mul(b.grad, lhs), rhs.shape());
}

// d(l/r)/dl = 1/r; d(l/r)/dr = -l/r^2 = -out/r (the output saves a multiply and a rounding).
// Note [div's rhs gradient without overflow]
// d(l/r)/dr = -l/r^2, so the rhs gradient is -g * out / r: a product of three factors, and one order of the two
// roundings can overflow where the result fits in f32. (g * out) / r overflows when |out| > 1 and g is huge (a
// campaign found g ~ 1e36 through exp and conv2d, -inf where the true gradient was -6.7e35); (g / r) * out when
// |r| < 1 and g is huge. Choosing by |out| bounds the intermediate: where |out| >= 1, |g / r| = |result| / |out| is
// at most |result|; where |out| < 1, |g * out| is below |g|. So whenever g and the result are finite, so is the
// intermediate. g / r is lhs's gradient too, computed once.
void div(const BackwardCall& b) {
  const Tensor &lhs = b.call.tensor(0), &rhs = b.call.tensor(1);
  const Tensor g_over_rhs = crossfire::div(b.grad, rhs);
  if (b.needs[0]) b.grads[0] = sum_to(g_over_rhs, lhs.shape());
  if (b.needs[1]) {
    const Tensor out_is_large = ge(crossfire::abs(b.output), constant(1, b.output));
    const Tensor g_out_over_rhs = crossfire::where(out_is_large, crossfire::mul(g_over_rhs, b.output),
                                                   crossfire::div(crossfire::mul(b.grad, b.output), rhs));
    b.grads[1] = sum_to(crossfire::neg(g_out_over_rhs), rhs.shape());
  }
}

// d(l^r)/dl = r l^(r-1), computed as a pow rather than r*out/l so it stays finite as l -> 0 for r >= 1;
// d(l^r)/dr = out * log(l) (the op's domain is l > 0).
void pow(const BackwardCall& b) {
  const Tensor &lhs = b.call.tensor(0), &rhs = b.call.tensor(1);
  if (b.needs[0]) {
    Tensor d = crossfire::mul(rhs, crossfire::pow(lhs, crossfire::sub(rhs, constant(1, rhs))));
    b.grads[0] = sum_to(crossfire::mul(b.grad, d), lhs.shape());
  }
  if (b.needs[1])
    b.grads[1] = sum_to(crossfire::mul(b.grad, crossfire::mul(b.output, crossfire::log(lhs))), rhs.shape());
}

namespace {
// maximum / minimum: the gradient goes to lhs where `lhs_wins` (ties included: one side gets all of it, so the
// gradients still sum to g), else to rhs.
void select_backward(const BackwardCall& b, const Tensor& lhs_wins) {
  Tensor zero = constant(0, b.grad);
  if (b.needs[0]) b.grads[0] = sum_to(crossfire::where(lhs_wins, b.grad, zero), b.call.tensor(0).shape());
  if (b.needs[1]) b.grads[1] = sum_to(crossfire::where(lhs_wins, zero, b.grad), b.call.tensor(1).shape());
}
}  // namespace

void maximum(const BackwardCall& b) { select_backward(b, ge(b.call.tensor(0), b.call.tensor(1))); }
void minimum(const BackwardCall& b) { select_backward(b, le(b.call.tensor(0), b.call.tensor(1))); }

// where(cond, a, b): slot 0 is cond (a constant), slot 1 is a, slot 2 is b.
void where(const BackwardCall& b) {
  const Tensor& cond = b.call.tensor(0);
  Tensor zero = constant(0, b.grad);
  if (b.needs[1]) b.grads[1] = sum_to(crossfire::where(cond, b.grad, zero), b.call.tensor(1).shape());
  if (b.needs[2]) b.grads[2] = sum_to(crossfire::where(cond, zero, b.grad), b.call.tensor(2).shape());
}

// ---- reductions ----------------------------------------------------------------------------------------------------

void sum(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  const bool has_axis = b.call.present(1);
  b.grads[0] = unreduce(b.grad, x.shape(), has_axis, has_axis ? axis_of(b.call.integer(1), x.rank()) : 0);
}

void mean(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  const bool has_axis = b.call.present(1);
  const int64_t axis = has_axis ? axis_of(b.call.integer(1), x.rank()) : 0;
  const int64_t n = has_axis ? x.shape()[int(axis)] : x.numel();
  // n == 0 leaves no element to receive a gradient; the scale is then irrelevant (and 1/0 is avoided).
  b.grads[0] = crossfire::mul(unreduce(b.grad, x.shape(), has_axis, axis), constant(n > 0 ? 1.0 / double(n) : 0.0, x));
}

// All of g goes to the first maximal element, the one argmax reports, so max and argmax agree and ties never split
// the gradient (which would make it depend on how many elements tie).
void max(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  const bool has_axis = b.call.present(1);
  const int64_t axis = has_axis ? axis_of(b.call.integer(1), x.rank()) : 0;
  Tensor first;  // bool, x's shape: true at the element whose value became the max
  if (has_axis) {
    const int64_t n = x.shape()[int(axis)];
    Shape along = x.shape();  // [1, ..., n, ..., 1]
    for (int i = 0; i < along.rank(); ++i) along[i] = i == axis ? n : 1;
    Tensor positions = crossfire::reshape(arange(0, double(n), 1, DType::i32, x.device()), along.dims());
    first = eq(positions, argmax(x, axis, /*keepdim=*/true));
  } else {  // flat positions against argmax's flat index
    Tensor positions = arange(0, double(x.numel()), 1, DType::i32, x.device());
    first = crossfire::reshape(eq(positions, argmax(x)), x.shape().dims());
  }
  b.grads[0] = crossfire::where(first, unreduce(b.grad, x.shape(), has_axis, axis), constant(0, x));
}

// ---- matmul: [..., m, k] x [..., k, n]; batch dims broadcast, so each gradient is summed back to its shape ---------

void matmul(const BackwardCall& b) {
  const Tensor &lhs = b.call.tensor(0), &rhs = b.call.tensor(1);
  if (b.needs[0]) b.grads[0] = sum_to(crossfire::matmul(b.grad, transpose_last2(rhs)), lhs.shape());
  if (b.needs[1]) b.grads[1] = sum_to(crossfire::matmul(transpose_last2(lhs), b.grad), rhs.shape());
}

// ---- layout --------------------------------------------------------------------------------------------------------

void reshape(const BackwardCall& b) { b.grads[0] = crossfire::reshape(b.grad, b.call.tensor(0).shape().dims()); }

// The inverse permutation: out axis i came from x axis dims[i], so x axis dims[i] comes back from g axis i.
void permute(const BackwardCall& b) {
  std::span<const int64_t> dims = b.call.ints(1);
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(dims[i])] = int64_t(i);
  b.grads[0] = crossfire::permute(b.grad, inverse);
}

// Each sliced axis is scattered back to its full length, one axis at a time; axes taken whole are left alone.
void slice(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  std::span<const int64_t> starts = b.call.ints(1), stops = b.call.ints(2), steps = b.call.ints(3);
  Tensor g = b.grad;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t dim = x.shape()[i];
    if (starts[size_t(i)] == 0 && stops[size_t(i)] == dim && steps[size_t(i)] == 1) continue;
    Tensor picked = arange(double(starts[size_t(i)]), double(stops[size_t(i)]), double(steps[size_t(i)]), DType::i32,
                           x.device());
    g = scatter_along(g, i, picked, dim);
  }
  b.grads[0] = g;
}

void expand(const BackwardCall& b) { b.grads[0] = sum_to(b.grad, b.call.tensor(0).shape()); }

// Each input gets its own stretch of g along the axis.
void cat(const BackwardCall& b) {
  std::span<const Tensor> inputs = b.call.list(0);
  const int64_t axis = axis_of(b.call.integer(1), b.grad.rank());
  std::vector<int64_t> starts(size_t(b.grad.rank()), 0), stops(b.grad.shape().dims().begin(), b.grad.shape().dims().end()),
      steps(size_t(b.grad.rank()), 1);
  int64_t offset = 0;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const int64_t len = inputs[j].shape()[int(axis)];
    if (b.needs[j]) {
      starts[size_t(axis)] = offset;
      stops[size_t(axis)] = offset + len;
      b.grads[j] = crossfire::slice(b.grad, starts, stops, steps);
    }
    offset += len;
  }
}

// index_select(x, axis, index): slot 0 is x, slot 1 the (constant) index. Repeated indices accumulate.
void index_select(const BackwardCall& b) {
  const Tensor& x = b.call.tensor(0);
  const int64_t axis = axis_of(b.call.integer(1), x.rank());
  b.grads[0] = scatter_along(b.grad, axis, b.call.tensor(2), x.shape()[int(axis)]);
}

// ---- nn ------------------------------------------------------------------------------------------------------------

// dx = y * (g - sum(g * y)) along the axis (the softmax Jacobian, diag(y) - y y^T, applied to g), computed with
// g - max(g) in place of g. The Jacobian sends a g that is constant along the axis to 0 (sum(y) = 1), so the shift
// changes nothing in exact arithmetic; in f32, sum(y) is 1 only up to rounding, and g - sum(g * y) for a large g
// that is (nearly) constant along the axis is then rounding noise of size |g| * eps, different on every backend.
// After the shift the terms are only as large as g's spread along the axis, and a constant g gives exactly 0 (the
// same trick as softmax's own max subtraction). tests: AutodiffGradCheck.SoftmaxOfAConstantUpstreamGradient...
void softmax(const BackwardCall& b) {
  const Tensor& y = b.output;
  const int64_t axis = b.call.integer(1);
  Tensor g = b.grad;
  if (y.shape()[int(axis_of(axis, y.rank()))] > 0)  // max is not defined over an empty axis (nor needed)
    g = crossfire::sub(g, crossfire::max(g, axis, /*keepdim=*/true));
  Tensor dot = crossfire::sum(crossfire::mul(g, y), axis, /*keepdim=*/true);
  b.grads[0] = crossfire::mul(y, crossfire::sub(g, dot));
}

// conv2d as im2col + GEMM: out[n] = W2 [O, C*kh*kw] x unfold(input)[n] [C*kh*kw, L] (+ bias). So
// dW2 = sum_n g[n] x unfold(input)[n]^T, d unfold(input)[n] = W2^T x g[n] (folded back: fold is unfold's adjoint),
// and d bias = g summed over batch and positions.
void conv2d(const BackwardCall& b) {
  const Tensor &input = b.call.tensor(0), &weight = b.call.tensor(1);
  std::span<const int64_t> stride = b.call.ints(3), padding = b.call.ints(4);
  const Shape &in = input.shape(), &w = weight.shape();
  const int64_t n = in[0], out_ch = w[0], patch = w[1] * w[2] * w[3];
  const int64_t positions = b.grad.shape()[2] * b.grad.shape()[3];
  Tensor g = crossfire::reshape(b.grad, {n, out_ch, positions});  // [N, O, L]
  if (b.needs[kConvInput]) {
    Tensor w2t = transpose_last2(crossfire::reshape(weight, {out_ch, patch}));  // [C*kh*kw, O]
    b.grads[kConvInput] = crossfire::fold(crossfire::matmul(w2t, g), {in[2], in[3]}, {w[2], w[3]}, stride, padding);
  }
  if (b.needs[kConvWeight]) {
    Tensor cols = crossfire::unfold(input, {w[2], w[3]}, stride, padding);  // [N, C*kh*kw, L]
    Tensor per_batch = crossfire::matmul(g, transpose_last2(cols));          // [N, O, C*kh*kw]
    b.grads[kConvWeight] = crossfire::reshape(crossfire::sum(per_batch, 0), w.dims());
  }
  if (b.call.present(2) && b.needs[kConvBias]) b.grads[kConvBias] = crossfire::sum(crossfire::sum(g, 2), 0);
}

// unfold and fold are adjoint linear maps, so each one's backward is the other with the same geometry.
void unfold(const BackwardCall& b) {
  const Shape& in = b.call.tensor(0).shape();
  b.grads[0] = crossfire::fold(b.grad, {in[2], in[3]}, b.call.ints(1), b.call.ints(2), b.call.ints(3));
}

void fold(const BackwardCall& b) {
  b.grads[0] = crossfire::unfold(b.grad, b.call.ints(2), b.call.ints(3), b.call.ints(4));
}

// ---- transfer: the gradient goes back to where x lives ---------------------------------------------------------------

void to(const BackwardCall& b) { b.grads[0] = crossfire::to(b.grad, b.call.tensor(0).device()); }

}  // namespace backward_rules
}  // namespace crossfire
