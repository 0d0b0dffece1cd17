// SPDX-License-Identifier: Apache-2.0
// Random family: rand and randn from Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy
// as 1, 2, 3", SC 2011), exactly as the op table's doc strings define the stream, so that every backend produces
// the same values for the same seed, in every float dtype. One thread computes one Philox block (four consecutive
// elements).
#include <cuda_runtime.h>

#include <cstdint>

#include "common.cuh"

namespace crossfire::cuda {
namespace {

struct Words {
  uint32_t w[4];
};

__device__ __forceinline__ Words philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                               uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  return {{c0, c1, c2, c3}};
}

__device__ __forceinline__ Words block(uint64_t b, uint64_t seed) {
  return philox4x32_10(uint32_t(b), uint32_t(b >> 32), 0, 0, uint32_t(seed), uint32_t(seed >> 32));
}

// The top p bits of each word, p the dtype's precision (24, 11, 8): exact in the dtype and below 1 (op table, rand).
template <class T>
__global__ void rand_kernel(T* out, int64_t n, uint64_t seed) {
  constexpr int p = std::is_same_v<T, float> ? 24 : std::is_same_v<T, __half> ? 11 : 8;
  const int64_t blocks = (n + 3) / 4;
  CROSSFIRE_CUDA_FOR(b, blocks) {
    Words r = block(uint64_t(b), seed);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t i = b * 4 + j;
      // exact: a p-bit integer times a power of two, in f32 and then in the dtype
      if (i < n) out[i] = convert<T>(float(r.w[j] >> (32 - p)) * (1.0f / float(1u << p)));
    }
  }
}

// Box-Muller in f64, rounded once to the dtype at the end: well inside randn's transcendental error bound.
template <class T>
__global__ void randn_kernel(T* out, int64_t n, uint64_t seed) {
  const int64_t blocks = (n + 3) / 4;
  CROSSFIRE_CUDA_FOR(b, blocks) {
    Words r = block(uint64_t(b), seed);
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      int64_t i = b * 4 + 2 * pair;  // elements 2j and 2j+1 use words 2j and 2j+1: the same Philox block
      if (i >= n) break;
      double u1 = (double(r.w[2 * pair] >> 8) + 0.5) * 0x1p-24;
      double u2 = double(r.w[2 * pair + 1] >> 8) * 0x1p-24;
      double radius = sqrt(-2.0 * log(u1));
      double s, c;
      sincospi(2.0 * u2, &s, &c);
      out[i] = convert<T>(radius * c);
      if (i + 1 < n) out[i + 1] = convert<T>(radius * s);
    }
  }
}

// Calls f(T{}) with the storage type of a float dtype (the output rule admits only f32, f16 and bf16).
template <class F>
void with_float(DType dt, F&& f) {
  if (dt == DType::f16) f(__half{});
  else if (dt == DType::bf16) f(__nv_bfloat16{});
  else f(float{});
}

}  // namespace

void rand(const RandomLaunch& l) {
  with_float(l.dtype, [&](auto t) {
    using T = decltype(t);
    rand_kernel<<<grid_for((l.n + 3) / 4), kThreads, 0, l.stream>>>(static_cast<T*>(l.out), l.n, l.seed);
  });
}

void randn(const RandomLaunch& l) {
  with_float(l.dtype, [&](auto t) {
    using T = decltype(t);
    randn_kernel<<<grid_for((l.n + 3) / 4), kThreads, 0, l.stream>>>(static_cast<T*>(l.out), l.n, l.seed);
  });
}

}  // namespace crossfire::cuda
