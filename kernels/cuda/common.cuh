// SPDX-License-Identifier: Apache-2.0
// Device-side helpers shared by the kernel families: launch geometry, index arithmetic, NaN-aware comparisons.
// Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "launch.hpp"

namespace crossfire::cuda {

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the GPU, capped so that huge n loops instead.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;
  return unsigned(blocks < 1 ? 1 : blocks);
}

// Grid-stride loop over [0, n) (64-bit so that i + stride never wraps).
#define CROSSFIRE_CUDA_FOR(i, n)                                                                      \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

__device__ __forceinline__ bool is_nan(float x) { return x != x; }
__device__ __forceinline__ bool is_nan(int32_t) { return false; }

// Offset of output element i in input k of a broadcast (k is 0..2).
__device__ __forceinline__ uint32_t broadcast_offset(const Broadcast& ix, int k, uint32_t i) {
  if (ix.flat) return i;
  uint32_t off = 0;
  for (int d = ix.rank - 1; d >= 0; --d) {
    uint32_t dim = uint32_t(ix.shape[d]);
    uint32_t q = i / dim;
    off += (i - q * dim) * uint32_t(ix.stride[k][d]);
    i = q;
  }
  return off;
}

__device__ __forceinline__ int64_t strided_offset(const Strided& v, uint32_t i) {
  uint32_t off = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    uint32_t dim = uint32_t(v.shape[d]);
    uint32_t q = i / dim;
    off += (i - q * dim) * uint32_t(v.stride[d]);
    i = q;
  }
  return v.offset + int64_t(off);
}

// Storage type of a dtype.
template <DType D>
struct Storage;
template <>
struct Storage<DType::f32> {
  using type = float;
};
template <>
struct Storage<DType::i32> {
  using type = int32_t;
};
template <>
struct Storage<DType::boolean> {
  using type = uint8_t;
};

}  // namespace crossfire::cuda
