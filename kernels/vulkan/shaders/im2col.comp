// SPDX-License-Identifier: Apache-2.0
#version 450
// unfold (FOLD = false): [N, C, H, W] -> [N, C*kh*kw, L], one invocation per output element (zero padding).
// fold (FOLD = true): its adjoint [N, C*kh*kw, L] -> [N, C, H, W], one invocation per output element summing the
// patch entries that cover it (a gather, so no atomics).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const bool FOLD = false;
layout(push_constant) uniform Params {
  uint total;
  uint N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO;
} p;

void main() {
  uint L = p.HO * p.WO;
  uint i = flat_index();
  if (i < p.total) {
    if (!FOLD) {
      uint l = i % L, row = (i / L) % (p.C * p.KH * p.KW), n = i / (L * p.C * p.KH * p.KW);
      uint kj = row % p.KW, ki = (row / p.KW) % p.KH, c = row / (p.KW * p.KH);
      int iy = int((l / p.WO) * p.SH + ki) - int(p.PH);
      int ix = int((l % p.WO) * p.SW + kj) - int(p.PW);
      bool inside = iy >= 0 && iy < int(p.H) && ix >= 0 && ix < int(p.W);
      o_[i] = inside ? a_[((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix)] : 0u;
    } else {
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
  }
}
