// SPDX-License-Identifier: Apache-2.0
#version 450
// rand and randn from Philox4x32-10 (Salmon et al. 2011), bit-identical to the op table's definition: block b
// uses counter (b, 0, 0, 0) and key (lo32(seed), hi32(seed)); element i takes word i % 4 of block i / 4.
// One invocation computes one block, i.e. four elements (for f16 and bf16, two whole words).
#include "common.glsl"
#include "math.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const bool NORMAL = false;
layout(constant_id = 1) const int DT = CF_F32;  // f32, f16 or bf16 (Note [Halves as f32 inside a shader])
layout(push_constant) uniform Params {
  uint n;
  uint key0;
  uint key1;
} p;

uvec4 philox(uint block) {
  uvec4 c = uvec4(block, 0u, 0u, 0u);
  uvec2 k = uvec2(p.key0, p.key1);
  for (int round = 0; round < 10; ++round) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

// Box-Muller for one pair of words: (r cos(2 pi u2), r sin(2 pi u2)).
vec2 normal_pair(uint w1, uint w2) {
  uint k1 = w1 >> 8;
#ifdef CF_F64
  double u1 = (double(k1) + 0.5LF) * 5.9604644775390625e-08LF;  // exact
  double u2 = double(w2 >> 8) * 5.9604644775390625e-08LF;
  double r = sqrt(-2.0LF * log_d(u1));
  dvec2 sc = sincos_2pi_d(u2);
  return vec2(float(r * sc.y), float(r * sc.x));
#else
  // u1 = (2 k1 + 1) 2^-25 needs 25 bits: take log(u1) from whichever of u1 and 1 - u1 is exact in f32.
  float l = k1 < 0x800000u ? cf_log(float(2u * k1 + 1u) * 2.98023223876953125e-08)
                           : cf_log1m(float(0x2000000u - 2u * k1 - 1u) * 2.98023223876953125e-08);
  float r = cf_sqrt(-2.0 * l);
  vec2 sc = cf_sincos_2pi(float(w2 >> 8) * 5.9604644775390625e-08);
  return vec2(r * sc.y, r * sc.x);
#endif
}

void main() {
  uint blocks = (p.n + 3u) / 4u;
  uint b = flat_index();
  if (b < blocks) {
    uvec4 w = philox(b);
    uint v[4];
    if (!NORMAL && DT == CF_F32) {
      for (int e = 0; e < 4; ++e) v[e] = floatBitsToUint(float(w[e] >> 8) * 5.9604644775390625e-08);
    } else if (!NORMAL) {  // the word's top 11 (f16) or 8 (bf16) bits: exact in the dtype, below 1
      const uint bits = DT == CF_F16 ? 11u : 8u;
      for (int e = 0; e < 4; ++e) v[e] = floatBitsToUint(float(w[e] >> (32u - bits)) / float(1u << bits));
    } else {
      vec2 z0 = normal_pair(w.x, w.y), z1 = normal_pair(w.z, w.w);
      v[0] = floatBitsToUint(z0.x);
      v[1] = floatBitsToUint(z0.y);
      v[2] = floatBitsToUint(z1.x);
      v[3] = floatBitsToUint(z1.y);
    }
    if (DT == CF_F32) {
      for (uint e = 0u; e < 4u; ++e)
        if (b * 4u + e < p.n) o_[b * 4u + e] = v[e];
    } else {  // words 2b and 2b + 1; a word exists when its first element does
      o_[2u * b] = narrow(DT, v[0]) | (b * 4u + 1u < p.n ? narrow(DT, v[1]) << 16 : 0u);
      if (b * 4u + 2u < p.n) o_[2u * b + 1u] = narrow(DT, v[2]) | (b * 4u + 3u < p.n ? narrow(DT, v[3]) << 16 : 0u);
    }
  }
}
