#version 450
// Direct conv2d: one invocation per output element [n, o, y, x] sums C*kh*kw products (+ bias[o]).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(push_constant) uniform Params {
  uint total;
  uint N, C, H, W, O, KH, KW, SH, SW, PH, PW, HO, WO;
  uint has_bias;
} p;

void main() {
  for (uint i = grid_index(); i < p.total; i += grid_size()) {
    uint x = i % p.WO, y = (i / p.WO) % p.HO, o = (i / (p.WO * p.HO)) % p.O, n = i / (p.WO * p.HO * p.O);
    float acc = 0.0;
    for (uint c = 0u; c < p.C; ++c) {
      for (uint ki = 0u; ki < p.KH; ++ki) {
        int iy = int(y * p.SH + ki) - int(p.PH);
        if (iy < 0 || iy >= int(p.H)) continue;
        for (uint kj = 0u; kj < p.KW; ++kj) {
          int ix = int(x * p.SW + kj) - int(p.PW);
          if (ix < 0 || ix >= int(p.W)) continue;
          float v = uintBitsToFloat(a_[((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix)]);
          float w = uintBitsToFloat(b_[((o * p.C + c) * p.KH + ki) * p.KW + kj]);
          acc += v * w;
        }
      }
    }
    if (p.has_bias != 0u) acc += uintBitsToFloat(c_[o]);
    o_[i] = floatBitsToUint(acc);
  }
}
