// SPDX-License-Identifier: Apache-2.0
// Reductions (sum, mean, max, argmax) over one axis or all elements, and softmax along an axis.
//
// Every kernel here sees its input as [outer, len, inner]: the reduced axis has length len, the dims before it
// multiply to outer and those after it to inner (over all elements: [1, numel, 1]). The output is [outer, inner],
// contiguous, whatever keepdim says (keepdim only inserts a 1 into the shape).
#include <array>
#include <cmath>

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

// The geometry of a reduction call: (x, axis?, keepdim).
AxisSplit reduce_geometry(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  const Arg& axis = c.args[1];
  if (!axis.present) return {1, x.numel, 1};
  return split_at(x.shape, normalised_axis(axis.i, x.shape.rank()));
}

// ---- sum and mean --------------------------------------------------------------------------------------------------
// f32 sums accumulate in f64 (four independent accumulators along a contiguous row, so the loop is not one long
// dependency chain); i32 and i64 sums accumulate in uint32_t and uint64_t, i.e. wrap. Rows along a strided axis are summed a chunk of
// `inner` at a time into a stack buffer, walking memory in order.
template <class T>
struct SumTraits;
template <>
struct SumTraits<float> {
  using Acc = double;
};
template <>
struct SumTraits<int32_t> {
  using Acc = uint32_t;
};
template <>
struct SumTraits<int64_t> {
  using Acc = uint64_t;
};

template <class T, class Acc>
Acc sum_row(const T* x, int64_t n) {
  Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += Acc(x[i]);
    a1 += Acc(x[i + 1]);
    a2 += Acc(x[i + 2]);
    a3 += Acc(x[i + 3]);
  }
  for (; i < n; ++i) a0 += Acc(x[i]);
  return Acc((a0 + a1) + (a2 + a3));
}

// finish(acc) -> output value; called once per output element.
template <class T, class Finish>
void sum_kernel_typed(const KernelCall& c, const Finish& finish) {
  using Acc = typename SumTraits<T>::Acc;
  const AxisSplit g = reduce_geometry(c);
  const T* x = data_of<const T>(impl_of(c, 0));
  T* o = data_of<T>(c.out);
  if (c.out.numel == 0) return;
  if (g.inner == 1) {
    for (int64_t r = 0; r < g.outer; ++r) o[r] = finish(sum_row<T, Acc>(x + r * g.len, g.len));
    return;
  }
  constexpr int64_t kChunk = 256;
  std::array<Acc, kChunk> acc;
  for (int64_t r = 0; r < g.outer; ++r) {
    for (int64_t t0 = 0; t0 < g.inner; t0 += kChunk) {
      const int64_t m = std::min(kChunk, g.inner - t0);
      std::fill_n(acc.begin(), m, Acc(0));
      const T* base = x + r * g.len * g.inner + t0;
      for (int64_t j = 0; j < g.len; ++j) {
        const T* row = base + j * g.inner;
        for (int64_t t = 0; t < m; ++t) acc[size_t(t)] += Acc(row[t]);
      }
      for (int64_t t = 0; t < m; ++t) o[r * g.inner + t0 + t] = finish(acc[size_t(t)]);
    }
  }
}

void sum_kernel(const KernelCall& c) {
  if (c.out.dtype == DType::i32) sum_kernel_typed<int32_t>(c, [](uint32_t a) { return int32_t(a); });
  else if (c.out.dtype == DType::i64) sum_kernel_typed<int64_t>(c, [](uint64_t a) { return int64_t(a); });
  else sum_kernel_typed<float>(c, [](double a) { return round_to_f32(a); });
}

void mean_kernel(const KernelCall& c) {
  const double len = double(reduce_geometry(c).len);  // an empty axis gives 0 / 0 = NaN
  sum_kernel_typed<float>(c, [len](double a) { return round_to_f32(a / len); });
}

// ---- max and argmax ------------------------------------------------------------------------------------------------
// One scan rule for both: the running best is replaced by a strictly greater value, or by a NaN while the best is
// not NaN yet. So the result is the first maximal element, or the first NaN if there is one, and max is exactly
// x[argmax] (its gradient goes there). Rules reject empty reductions, so len >= 1.
template <class T>
inline bool replaces(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) return v > best || (v != v && best == best);
  else return v > best;
}

template <class T, bool kIndex>
void max_kernel_typed(const KernelCall& c) {
  const AxisSplit g = reduce_geometry(c);
  const T* x = data_of<const T>(impl_of(c, 0));
  if (c.out.numel == 0) return;
  using Out = std::conditional_t<kIndex, int32_t, T>;
  Out* o = data_of<Out>(c.out);
  for (int64_t r = 0; r < g.outer; ++r) {
    const T* base = x + r * g.len * g.inner;
    if (g.inner == 1) {
      T best = base[0];
      int64_t at = 0;
      for (int64_t j = 1; j < g.len; ++j)
        if (replaces(base[j], best)) best = base[j], at = j;
      if constexpr (kIndex) o[r] = int32_t(at);
      else o[r] = best;
      continue;
    }
    // Strided axis: keep the running best in the output row (as an index for argmax), walking rows in order.
    Out* orow = o + r * g.inner;
    for (int64_t t = 0; t < g.inner; ++t) {
      if constexpr (kIndex) orow[t] = 0;
      else orow[t] = base[t];
    }
    for (int64_t j = 1; j < g.len; ++j) {
      const T* row = base + j * g.inner;
      for (int64_t t = 0; t < g.inner; ++t) {
        if constexpr (kIndex) {
          if (replaces(row[t], base[int64_t(orow[t]) * g.inner + t])) orow[t] = int32_t(j);
        } else {
          if (replaces(row[t], orow[t])) orow[t] = row[t];
        }
      }
    }
  }
}

template <bool kIndex>
void max_kernel(const KernelCall& c) {
  if (impl_of(c, 0).dtype == DType::i32) max_kernel_typed<int32_t, kIndex>(c);
  else if (impl_of(c, 0).dtype == DType::i64) max_kernel_typed<int64_t, kIndex>(c);
  else max_kernel_typed<float, kIndex>(c);
}

// ---- softmax -------------------------------------------------------------------------------------------------------
// exp(x - max) / sum(exp(x - max)) per row, in f64: x - max is exact or nearly so in f64, so exp's argument carries
// no f32 rounding error (which exp would amplify by |x - max|). Each exp is stored once, rounded, and rescaled.
void softmax_kernel(const KernelCall& c) {
  const TensorImpl& xt = impl_of(c, 0);
  if (xt.numel == 0) return;
  const AxisSplit g = split_at(xt.shape, normalised_axis(c.args[1].i, xt.shape.rank()));
  const float* x = data_of<const float>(xt);
  float* o = data_of<float>(c.out);
  for (int64_t r = 0; r < g.outer; ++r) {
    for (int64_t t = 0; t < g.inner; ++t) {
      const int64_t s = g.inner;
      const float* xr = x + r * g.len * g.inner + t;
      float* orow = o + r * g.len * g.inner + t;
      float m = xr[0];
      for (int64_t j = 1; j < g.len; ++j)
        if (replaces(xr[j * s], m)) m = xr[j * s];
      double total = 0;
      for (int64_t j = 0; j < g.len; ++j) {
        const double e = std::exp(double(xr[j * s]) - double(m));
        total += e;
        orow[j * s] = float(e);
      }
      const double inv = 1.0 / total;
      for (int64_t j = 0; j < g.len; ++j) orow[j * s] = float(double(orow[j * s]) * inv);
    }
  }
}

}  // namespace

void register_reduce_kernels(CpuBackend& b) {
  b.set_kernel("sum", widened<sum_kernel>);
  b.set_kernel("mean", widened<mean_kernel>);
  b.set_kernel("max", widened<max_kernel<false>>);
  b.set_kernel("argmax", widened<max_kernel<true>>);
  b.set_kernel("softmax", widened<softmax_kernel>);
}

}  // namespace crossfire::cpu
