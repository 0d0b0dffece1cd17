// SPDX-License-Identifier: Apache-2.0
#version 450
// index_select: out [outer, J, inner] takes x [outer, D, inner] at index[j] along the middle axis. The host has
// already checked every index (it raises InvalidArgument); the clamp only keeps a bad index from reading outside x.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;
layout(constant_id = 1) const int DT_INDEX = CF_I32;  // i32 or i64 (its low word: the host checked the range)

layout(push_constant) uniform Params {
  uint n;
  uint inner;
  uint j;
  uint d;
} p;

uint source(uint i) {
  uint ii = i % p.inner, q = i / p.inner;
  uint jj = q % p.j, outer = q / p.j;
  uint idx = min(DT_INDEX == CF_I64 ? b_[2u * jj] : b_[jj], p.d - 1u);
  return (outer * p.d + idx) * p.inner + ii;
}

#include "packed_main.glsl"
