// SPDX-License-Identifier: Apache-2.0
// Reduction family: sum, mean, max, argmax over [outer, len, inner] (an axis, or every element with outer =
// inner = 1), and softmax, which is two reductions and a map along its axis. Every reduction runs in a fixed order
// (no atomics), so results are deterministic run to run.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace crossfire::cuda {

// ---- reducers: an accumulator type, its identity, how an element enters it, how two combine, the result ----
namespace {

// The best element so far for max/argmax: the op table wants the first maximal element, or the first NaN if
// there is one. combine() is associative and commutative (ties go to the lower index), so a tree reduction in
// any shape gives the same answer as a left-to-right scan.
template <class T>
struct Best {
  T v;
  int32_t i;
};
template <class T>
__device__ __forceinline__ Best<T> better(Best<T> a, Best<T> b) {
  const bool na = is_nan(a.v), nb = is_nan(b.v);
  if (na || nb) {
    if (na && nb) return a.i <= b.i ? a : b;
    return na ? a : b;
  }
  if (a.v > b.v) return a;
  if (b.v > a.v) return b;
  return a.i <= b.i ? a : b;
}
template <class T>
__device__ __forceinline__ T lowest();
template <>
__device__ __forceinline__ float lowest<float>() {
  return -__int_as_float(0x7f800000);  // -inf
}
template <>
__device__ __forceinline__ int32_t lowest<int32_t>() {
  return INT32_MIN;
}
template <>
__device__ __forceinline__ int64_t lowest<int64_t>() {
  return INT64_MIN;
}

}  // namespace

template <class Tag, class T>
struct Reducer;

// f32 sums accumulate in f64 and round once (the result is then far inside the op's bound, and close to the
// host's, which does the same); i32 and i64 sums in uint32_t and uint64_t, so that they wrap.
template <class T>
struct Reducer<fn::Sum, T> {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double,
                                 std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, uint32_t>>;
  using Out = T;
  __device__ static Acc identity() { return Acc(0); }
  __device__ static Acc load(T v, int32_t) { return Acc(v); }
  __device__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ static Out finish(Acc a, int64_t) { return Out(a); }
};
template <class T>
struct Reducer<fn::Mean, T> : Reducer<fn::Sum, T> {
  __device__ static float finish(double a, int64_t len) { return float(a / double(len)); }  // len 0: 0/0 = NaN
};
template <class T>
struct Reducer<fn::Max, T> {
  using Acc = Best<T>;
  using Out = T;
  __device__ static Acc identity() { return {lowest<T>(), INT32_MAX}; }
  __device__ static Acc load(T v, int32_t i) { return {v, i}; }
  __device__ static Acc combine(Acc a, Acc b) { return better(a, b); }
  __device__ static Out finish(Acc a, int64_t) { return a.v; }
};
template <class T>
struct Reducer<fn::Argmax, T> : Reducer<fn::Max, T> {
  using Out = int32_t;
  __device__ static int32_t finish(Best<T> a, int64_t) { return a.i; }
};

namespace {

constexpr int64_t kChunk = 8192;      // elements one block reduces in a row's first pass
constexpr int64_t kMaxChunks = 1024;  // partial results per row (the second pass reduces them in one block)

// How many chunks each row of an inner == 1 reduction is split into (1: a single pass).
int64_t chunks_for(const ReduceLaunch& l) {
  if (l.inner != 1 || l.len <= kChunk || l.outer >= 256) return 1;
  int64_t c = (l.len + kChunk - 1) / kChunk;
  return c < kMaxChunks ? c : kMaxChunks;
}

template <class R>
__device__ typename R::Acc block_reduce(typename R::Acc acc) {
  using Acc = typename R::Acc;
  __shared__ Acc buf[kThreads];
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) buf[threadIdx.x] = R::combine(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  Acc r = buf[0];
  __syncthreads();  // buf is reused by the next row of a grid-stride loop
  return r;
}

// inner == 1: block p reduces piece (row, chunk) = (p / chunks, p % chunks). With one chunk it writes the result;
// otherwise the partial accumulator.
template <class R, class T>
__global__ void rows_kernel(const T* __restrict__ x, int64_t rows, int64_t len, int64_t chunks,
                            typename R::Out* __restrict__ out, typename R::Acc* __restrict__ partial) {
  const int64_t pieces = rows * chunks;
  const int64_t per = (len + chunks - 1) / chunks;
  for (int64_t p = blockIdx.x; p < pieces; p += gridDim.x) {
    const int64_t row = p / chunks, chunk = p % chunks;
    const int64_t begin = chunk * per, end = begin + per < len ? begin + per : len;
    const T* xr = x + row * len;
    typename R::Acc acc = R::identity();
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) acc = R::combine(acc, R::load(xr[i], int32_t(i)));
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) {
      if (chunks == 1) out[row] = R::finish(acc, len);
      else partial[p] = acc;
    }
  }
}

template <class R>
__global__ void partials_kernel(const typename R::Acc* __restrict__ partial, int64_t rows, int64_t chunks,
                                int64_t len, typename R::Out* __restrict__ out) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    typename R::Acc acc = R::identity();
    for (int64_t c = threadIdx.x; c < chunks; c += kThreads) acc = R::combine(acc, partial[row * chunks + c]);
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) out[row] = R::finish(acc, len);
  }
}

// inner > 1: one thread per output element walks its column; neighbouring threads read neighbouring addresses.
template <class R, class T>
__global__ void columns_kernel(const T* __restrict__ x, int64_t outer, int64_t len, int64_t inner,
                               typename R::Out* __restrict__ out) {
  CROSSFIRE_CUDA_FOR(o, outer * inner) {
    const int64_t a = o / inner, r = o % inner;
    const T* col = x + a * len * inner + r;
    typename R::Acc acc = R::identity();
    for (int64_t i = 0; i < len; ++i) acc = R::combine(acc, R::load(col[i * inner], int32_t(i)));
    out[o] = R::finish(acc, len);
  }
}

unsigned blocks_for(int64_t n) { return unsigned(n < 65535 ? (n < 1 ? 1 : n) : 65535); }

// f32, i32 or i64: f16/bf16 arrive widened to f32 (Note [Halves through the f32 kernels] in cuda_ops.cpp).
template <class Tag, class F>
void with_reduce_type(DType dt, F&& f) {
  if (dt == DType::f32) f(float{});
  else if constexpr (!std::is_same_v<Tag, fn::Mean>) {  // mean is f32 only
    if (dt == DType::i64) f(int64_t{});
    else f(int32_t{});
  }
}

}  // namespace

template <class Tag>
size_t reduce_scratch_bytes(const ReduceLaunch& l) {
  size_t bytes = 0;
  with_reduce_type<Tag>(l.dtype, [&](auto t) {
    using R = Reducer<Tag, decltype(t)>;
    int64_t chunks = chunks_for(l);
    bytes = chunks > 1 ? size_t(l.outer * chunks) * sizeof(typename R::Acc) : 0;
  });
  return bytes;
}

template <class Tag>
void reduce(const ReduceLaunch& l) {
  with_reduce_type<Tag>(l.dtype, [&](auto t) {
    using T = decltype(t);
    using R = Reducer<Tag, T>;
    using Out = typename R::Out;
    const T* x = static_cast<const T*>(l.x);
    Out* out = static_cast<Out*>(l.out);
    if (l.inner != 1) {
      columns_kernel<R, T><<<grid_for(l.outer * l.inner), kThreads, 0, l.stream>>>(x, l.outer, l.len, l.inner, out);
      return;
    }
    const int64_t chunks = chunks_for(l);
    auto* partial = static_cast<typename R::Acc*>(l.scratch);
    rows_kernel<R, T><<<blocks_for(l.outer * chunks), kThreads, 0, l.stream>>>(x, l.outer, l.len, chunks, out,
                                                                               partial);
    if (chunks > 1)
      partials_kernel<R><<<blocks_for(l.outer), kThreads, 0, l.stream>>>(partial, l.outer, chunks, l.len, out);
  });
}

#define CROSSFIRE_CUDA_INSTANTIATE_REDUCE(name, Tag, types)                     \
  template size_t reduce_scratch_bytes<fn::Tag>(const ReduceLaunch&);      \
  template void reduce<fn::Tag>(const ReduceLaunch&);
CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_INSTANTIATE_REDUCE)

// ---- softmax: exp(x - max) / sum(exp(x - max)) along the axis -------------------------------------------------
namespace {

// max that propagates NaN (fmaxf would drop it, and a NaN row must give NaN, as the formula does).
struct NanMax {
  using Acc = float;
  __device__ static float combine(float a, float b) { return is_nan(a) ? a : is_nan(b) ? b : (a < b ? b : a); }
};
struct DoubleSum {
  using Acc = double;
  __device__ static double combine(double a, double b) { return a + b; }
};

// exp(x - max) is taken in f64: x - max is then exact or nearly so, whereas in f32 its rounding error would be
// amplified by |x - max| in exp's result, beyond the op's bound. The sum is f64 too, and the result rounds once.
__device__ __forceinline__ double shifted_exp(float x, float m) { return exp(double(x) - double(m)); }

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows,
                                    int64_t len) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * len;
    float m = lowest<float>();
    for (int64_t i = threadIdx.x; i < len; i += kThreads) m = NanMax::combine(m, xr[i]);
    m = block_reduce<NanMax>(m);
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < len; i += kThreads) s += shifted_exp(xr[i], m);
    s = block_reduce<DoubleSum>(s);
    const double inv = 1.0 / s;
    for (int64_t i = threadIdx.x; i < len; i += kThreads) out[row * len + i] = float(shifted_exp(xr[i], m) * inv);
  }
}

__global__ void softmax_columns_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t outer,
                                       int64_t len, int64_t inner) {
  CROSSFIRE_CUDA_FOR(o, outer * inner) {
    const int64_t base = (o / inner) * len * inner + o % inner;
    float m = lowest<float>();
    for (int64_t i = 0; i < len; ++i) m = NanMax::combine(m, x[base + i * inner]);
    double s = 0.0;
    for (int64_t i = 0; i < len; ++i) s += shifted_exp(x[base + i * inner], m);
    const double inv = 1.0 / s;
    for (int64_t i = 0; i < len; ++i) out[base + i * inner] = float(shifted_exp(x[base + i * inner], m) * inv);
  }
}

}  // namespace

void softmax(const SoftmaxLaunch& l) {
  if (l.inner == 1)
    softmax_rows_kernel<<<blocks_for(l.outer), kThreads, 0, l.stream>>>(l.x, l.out, l.outer, l.len);
  else
    softmax_columns_kernel<<<grid_for(l.outer * l.inner), kThreads, 0, l.stream>>>(l.x, l.out, l.outer, l.len,
                                                                                   l.inner);
}

}  // namespace crossfire::cuda
