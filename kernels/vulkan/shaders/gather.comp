// SPDX-License-Identifier: Apache-2.0
#version 450
// Strided gather: out[i] = x[base + sum_d coord_d(i) * stride_d]. Serves permute, slice and expand (and any other
// view-shaped copy): the kernel only differs in the strides the host computes. Bit-exact for every dtype.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;

layout(push_constant) uniform Params {
  uint n;
  uint rank;
  uint base;
  uint shape[6];
  uint stride[6];
} p;

uint source(uint i) {
  uint off = p.base, rem = i;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint c = rem % p.shape[d];
    rem /= p.shape[d];
    off += c * p.stride[d];
  }
  return off;
}

#include "packed_main.glsl"
