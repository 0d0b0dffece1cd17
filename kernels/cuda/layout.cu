// SPDX-License-Identifier: Apache-2.0
// Layout family: data movement, bit-exact. permute, slice and expand are one strided gather (launch.hpp's
// Strided); index_select checks its indices on the device before it gathers. reshape and cat need no kernel
// (cuda_ops.cpp does them with cudaMemcpyAsync / cudaMemcpy2DAsync).
#include <cuda_runtime.h>

#include <cstdint>

#include "common.cuh"

namespace crossfire::cuda {
namespace {

template <class T>
__global__ void gather_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, Strided v) {
  CROSSFIRE_CUDA_FOR(i, n) out[i] = x[strided_offset(v, uint32_t(i))];
}

template <class I>  // int32_t or int64_t
__global__ void index_check_kernel(const I* __restrict__ index, int64_t count, int64_t dim, int32_t* first_bad) {
  CROSSFIRE_CUDA_FOR(j, count) {
    const I v = index[j];
    if (v < 0 || int64_t(v) >= dim) atomicMin(first_bad, int32_t(j));
  }
}

template <class T, class I>
__global__ void index_select_kernel(const T* __restrict__ x, const I* __restrict__ index, T* __restrict__ out,
                                    int64_t n, int64_t dim, int64_t inner, int64_t count) {
  CROSSFIRE_CUDA_FOR(o, n) {
    const int64_t r = o % inner, j = (o / inner) % count, a = o / (inner * count);
    out[o] = x[(a * dim + int64_t(index[j])) * inner + r];
  }
}

// Calls f(I{}) with the index's integer type.
template <class F>
void with_index(int index_size, F&& f) {
  if (index_size == 8) f(int64_t{});
  else f(int32_t{});
}

}  // namespace

void gather(const GatherLaunch& l) {
  with_bits(l.elem_size, [&](auto t) {
    using T = decltype(t);
    gather_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<const T*>(l.x), static_cast<T*>(l.out), l.n,
                                                            l.view);
  });
}

void index_check(const IndexSelectLaunch& l, int32_t* first_bad) {
  with_index(l.index_size, [&](auto i) {
    using I = decltype(i);
    index_check_kernel<<<grid_for(l.count), kThreads, 0, l.stream>>>(static_cast<const I*>(l.index), l.count, l.dim,
                                                                     first_bad);
  });
}

void index_select(const IndexSelectLaunch& l) {
  const int64_t n = l.outer * l.count * l.inner;
  with_bits(l.elem_size, [&](auto t) {
    with_index(l.index_size, [&](auto i) {
      using T = decltype(t);
      using I = decltype(i);
      index_select_kernel<<<grid_for(n), kThreads, 0, l.stream>>>(static_cast<const T*>(l.x),
                                                                  static_cast<const I*>(l.index),
                                                                  static_cast<T*>(l.out), n, l.dim, l.inner, l.count);
    });
  });
}

}  // namespace crossfire::cuda
