// SPDX-License-Identifier: Apache-2.0
#version 450
// Direct conv2d: one invocation per output element [n, o, y, x] sums C*kh*kw products (+ bias[o]), in the order
// (c, ki, kj). The host splits that sum into passes of at most kConvTermsPerPass terms ([j0, j1) of the flattened
// (c, ki, kj) index, Note [A driver's loop limit] in vulkan_kernels.cpp): a pass after the first continues from the
// f32 partial sum the previous one stored, so the result is bit for bit that of one pass.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(push_constant) uniform Params {
  uint total;
  uint N, C, H, W, O, KH, KW, SH, SW, PH, PW, HO, WO;
  uint has_bias;
  uint j0, j1;  // the terms of this pass
} p;

void main() {
  uint i = flat_index();
  if (i < p.total) {
    uint x = i % p.WO, y = (i / p.WO) % p.HO, o = (i / (p.WO * p.HO)) % p.O, n = i / (p.WO * p.HO * p.O);
    float acc = p.j0 == 0u ? 0.0 : uintBitsToFloat(o_[i]);
    uint window = p.KH * p.KW;
    uint c = p.j0 / window, ki = (p.j0 % window) / p.KW, kj = p.j0 % p.KW;
    for (uint j = p.j0; j < p.j1; ++j) {
      int iy = int(y * p.SH + ki) - int(p.PH);
      int ix = int(x * p.SW + kj) - int(p.PW);
      // Zero padding is real zeros: a padded position still contributes 0 * w (NaN for a NaN or inf weight),
      // as on every backend (op table: conv2d).
      float v = (iy >= 0 && iy < int(p.H) && ix >= 0 && ix < int(p.W))
                    ? uintBitsToFloat(a_[((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix)]) : 0.0;
      float w = uintBitsToFloat(b_[((o * p.C + c) * p.KH + ki) * p.KW + kj]);
      acc += v * w;
      if (++kj == p.KW) {
        kj = 0u;
        if (++ki == p.KH) {
          ki = 0u;
          ++c;
        }
      }
    }
    if (p.j1 == p.C * window && p.has_bias != 0u) acc += uintBitsToFloat(c_[o]);
    o_[i] = floatBitsToUint(acc);
  }
}
