// SPDX-License-Identifier: Apache-2.0
#version 450
// fold (col2im): unfold's adjoint [N, C*kh*kw, L] -> [N, C, H, W] in f32, one invocation per output element summing
// the patch entries that cover it (a gather, so no atomics). unfold itself moves bits in every dtype: unfold.comp.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(push_constant) uniform Params {
  uint total;
  uint N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO;
} p;

void main() {
  uint L = p.HO * p.WO;
  uint i = flat_index();
  if (i >= p.total) return;
  uint x = i % p.W, y = (i / p.W) % p.H, c = (i / (p.W * p.H)) % p.C, n = i / (p.W * p.H * p.C);
  float acc = 0.0;
  for (uint ki = 0u; ki < p.KH; ++ki) {
    int ty = int(y + p.PH) - int(ki);
    if (ty < 0 || uint(ty) % p.SH != 0u) continue;
    uint oy = uint(ty) / p.SH;
    if (oy >= p.HO) continue;
    for (uint kj = 0u; kj < p.KW; ++kj) {
      int tx = int(x + p.PW) - int(kj);
      if (tx < 0 || uint(tx) % p.SW != 0u) continue;
      uint ox = uint(tx) / p.SW;
      if (ox >= p.WO) continue;
      uint row = (c * p.KH + ki) * p.KW + kj;
      acc += uintBitsToFloat(a_[(n * p.C * p.KH * p.KW + row) * L + oy * p.WO + ox]);
    }
  }
  o_[i] = floatBitsToUint(acc);
}
