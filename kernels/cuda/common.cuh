// SPDX-License-Identifier: Apache-2.0
// Device-side helpers shared by the kernel families: launch geometry, index arithmetic, NaN-aware comparisons.
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

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
__device__ __forceinline__ bool is_nan(int64_t) { return false; }

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

// ---- dtypes: storage types and crossfire's conversions (Note [Conversions never hit undefined behaviour] in
// dispatch/include/crossfire/device.hpp, which these follow bit for bit; float -> int is its float_to_int) ---------
// f16 and bf16 are stored as __half and __nv_bfloat16 and computed in f32 (Note [Half precision] in device.hpp):
// load() widens (exactly), narrow() rounds once to nearest even (cvt.rn: a NaN becomes a NaN, |x| at or past the
// largest finite value plus half an ulp the infinity of its sign; subnormals are kept, nvcc's -ftz=false).
template <class T>
inline constexpr bool kIsHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

__device__ __forceinline__ float load(__half h) { return __half2float(h); }
__device__ __forceinline__ float load(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class T>
__device__ __forceinline__ T load(T v) {
  return v;
}
template <class H>
__device__ __forceinline__ H narrow(float f) {
  if constexpr (std::is_same_v<H, __half>) return __float2half_rn(f);
  else return __float2bfloat16_rn(f);
}

// f64 (or an i64) cut to an f32 rounded to odd: toward zero, with the last bit set when that was inexact. Rounding
// it to a half then rounds the exact value once (24 >= 11 + 2 bits; Note [i64 to a half, rounded once] in
// kernel_support.hpp). Past FLT_MAX toward zero gives FLT_MAX, which every half rounds to infinity, as it should.
__device__ __forceinline__ float f64_to_f32_odd(double v) {
  const float f = __double2float_rz(v);
  return double(f) == v || v != v ? f : __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ float i64_to_f32_odd(int64_t v) {
  const float f = __ll2float_rz(v);  // |f| <= |v| <= 2^63, so converting f back cannot overflow
  return __float2ll_rz(f) == v ? f : __uint_as_float(__float_as_uint(f) | 1u);
}

// x converted to D as cast converts (bool is uint8_t, 0 or 1).
template <class D, class S>
__device__ __forceinline__ D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (kIsHalf<S>) {
    return convert<D>(load(x));  // exact
  } else if constexpr (kIsHalf<D>) {
    if constexpr (std::is_same_v<S, float>) return narrow<D>(x);
    else if constexpr (std::is_same_v<S, int64_t>) return narrow<D>(i64_to_f32_odd(x));
    else return narrow<D>(f64_to_f32_odd(double(x)));  // f64, i32 (exact in f64), bool
  } else if constexpr (std::is_same_v<D, uint8_t>) {
    return x != S(0) ? 1 : 0;
  } else if constexpr (std::is_same_v<D, int32_t> || std::is_same_v<D, int64_t>) {
    if constexpr (std::is_floating_point_v<S>) return float_to_int<D>(x);  // device.hpp: every backend's rule
    else return D(x);  // widening, or i64 -> i32: the low 32 bits
  } else if constexpr (std::is_same_v<S, double>) {
    return __double2float_rn(x);  // overflow to the infinity of its sign
  } else if constexpr (std::is_same_v<S, int64_t>) {
    return __ll2float_rn(x);
  } else {
    return __int2float_rn(int32_t(x));  // i32, bool
  }
}

// Calls f(T{}) with T the unsigned integer of `size` bytes (1, 2, 4 or 8): data movement copies bits.
template <class F>
void with_bits(int size, F&& f) {
  switch (size) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 8: f(uint64_t{}); break;
    default: f(uint32_t{}); break;
  }
}

}  // namespace crossfire::cuda
