// SPDX-License-Identifier: Apache-2.0
#version 450
// Batched matmul [.., M, K] x [.., K, N] -> [.., M, N] for small outputs: one invocation per output element, summing
// its K products in order into an f32 (as matmul.comp does, tile by tile), with no shared memory and no barrier
// (Note [Small matmuls without tiles] in vulkan_kernels.cpp). The push constants are matmul.comp's, with its tile
// offsets holding the products [k0, k1) of this pass: a long K is summed in passes, each starting from the f32
// partial sum the one before stored (as conv2d does), so no loop nears llvmpipe's limit.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Params {
  uint m;
  uint n;
  uint k;
  uint batch;
  uint brank;
  uint bshape[4];
  uint sa[4];  // lhs batch strides, in matrices
  uint sb[4];
  uint k0, k1, unused;
} p;

void main() {
  const uint i = flat_index();
  if (i >= p.batch * p.m * p.n) return;
  const uint c = i % p.n, r = (i / p.n) % p.m, b = i / (p.m * p.n);
  uint ba = 0u, bb = 0u, rem = b;
  for (int d = int(p.brank) - 1; d >= 0; --d) {
    const uint x = rem % p.bshape[d];
    rem /= p.bshape[d];
    ba += x * p.sa[d];
    bb += x * p.sb[d];
  }
  const uint arow = ba * p.m * p.k + r * p.k, bcol = bb * p.k * p.n + c;
  float acc = p.k0 == 0u ? 0.0 : uintBitsToFloat(o_[i]);
  for (uint kk = p.k0; kk < p.k1; ++kk) acc += uintBitsToFloat(a_[arow + kk]) * uintBitsToFloat(b_[bcol + kk * p.n]);
  o_[i] = floatBitsToUint(acc);
}
