#version 450
// softmax of x viewed as [outer, R, inner] along the middle axis: one invocation per row.
#include "common.glsl"
#include "math.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Params {
  uint rows;
  uint r;
  uint inner;
} p;

void main() {
  uint row = flat_index();
  if (row < p.rows) {
    uint base = (row / p.inner) * p.r * p.inner + row % p.inner;
    uint mbits = 0xff800000u;
    bool nan = false;
    for (uint k = 0u; k < p.r; ++k) {
      uint v = a_[base + k * p.inner];
      if (is_nan(v)) nan = true;
      else if (fkey(v) > fkey(mbits)) mbits = v;
    }
    float m = nan ? CF_NAN : uintBitsToFloat(mbits);
    float s = 0.0;
    for (uint k = 0u; k < p.r; ++k) s += cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m);
    for (uint k = 0u; k < p.r; ++k)
      o_[base + k * p.inner] = floatBitsToUint(cf_div(cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m), s));
  }
}
