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
  uint i = flat_index();
  if (i < p.total) {
    uint x = i % p.WO, y = (i / p.WO) % p.HO, o = (i / (p.WO * p.HO)) % p.O, n = i / (p.WO * p.HO * p.O);
    float acc = 0.0;
    for (uint c = 0u; c < p.C; ++c) {
      for (uint ki = 0u; ki < p.KH; ++ki) {
        int iy = int(y * p.SH + ki) - int(p.PH);
        bool row_in = iy >= 0 && iy < int(p.H);
        for (uint kj = 0u; kj < p.KW; ++kj) {
          int ix = int(x * p.SW + kj) - int(p.PW);
          // Zero padding is real zeros: a padded position still contributes 0 * w (NaN for a NaN or inf weight),
          // as on every backend (op table: conv2d).
          float v = (row_in && ix >= 0 && ix < int(p.W))
                        ? uintBitsToFloat(a_[((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix)]) : 0.0;
          float w = uintBitsToFloat(b_[((o * p.C + c) * p.KH + ki) * p.KW + kj]);
          acc += v * w;
        }
      }
    }
    if (p.has_bias != 0u) acc += uintBitsToFloat(c_[o]);
    o_[i] = floatBitsToUint(acc);
  }
}
