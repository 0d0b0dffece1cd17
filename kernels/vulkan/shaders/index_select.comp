// SPDX-License-Identifier: Apache-2.0
#version 450
// index_select: out [outer, J, inner] takes x [outer, D, inner] at index[j] along the middle axis. The host has
// already checked every index (it raises InvalidArgument); the clamp only keeps a bad index from reading outside x.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;

layout(push_constant) uniform Params {
  uint n;
  uint inner;
  uint j;
  uint d;
} p;

uint element(uint i) {
  uint ii = i % p.inner, q = i / p.inner;
  uint jj = q % p.j, outer = q / p.j;
  uint idx = min(b_[jj], p.d - 1u);
  return LOAD(a_, DT, (outer * p.d + idx) * p.inner + ii);
}

void main() {
  if (DT == CF_BOOL) {
    uint words = (p.n + 3u) / 4u;
    uint w = flat_index();
    if (w < words) {
      uint v = 0u;
      for (uint e = 0u; e < 4u; ++e) {
        uint i = w * 4u + e;
        if (i < p.n) v |= element(i) << (8u * e);
      }
      o_[w] = v;
    }
  } else {
    uint i = flat_index();
    if (i < p.n) o_[i] = element(i);
  }
}
