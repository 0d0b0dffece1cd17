// SPDX-License-Identifier: Apache-2.0
#version 450
// sum, mean, max and argmax of x viewed as [outer, R, inner] over the middle axis, out [outer, inner].
// GROUP = false: one invocation per output walks R in order (many short rows). GROUP = true: one workgroup per
// output, 256 strided partial results combined by a tree in shared memory (few long rows). Ties and NaN follow
// the op table: max and argmax take the first NaN, else the first maximal element (lowest index). An i64 x is two
// words an element (Note [i64 as two words]): its sum wraps mod 2^64, and its sum and max are two words an output.
//
// Note [A mean whose f32 sum overflows]
// mean sums in f32 and divides once. Where that sum is not finite, the pass is run again on every element scaled
// by 2^-s, s = ceil(log2 r) + 1 (so no partial sum of r finite f32 values can overflow), and the result is
// (sum / r) * 2^s: the mean of two 1.5 * 2^127 is 1.5 * 2^127, not inf. Scaling by a power of two is exact apart
// from elements it pushes below the normal range, which are negligible next to a sum that overflowed. A NaN or
// infinite element gives the same NaN or infinity in the second pass. Dividing each element by r instead would
// flush small elements to zero on a device without denormals (lavapipe), far outside the op's bound.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = CF_SUM;
layout(constant_id = 1) const int DT = CF_F32;
layout(constant_id = 2) const bool GROUP = false;

layout(push_constant) uniform Params {
  uint n_out;
  uint r;
  uint inner;
} p;

const bool WIDE = DT == CF_I64;

shared uint s_v[256];
shared uint s_h[256];
shared uint s_i[256];

struct Acc {
  uint v;    // value bits (sum: f32 or i32 bits; i64: the low word)
  uint hi;   // i64: the high word
  uint idx;  // max / argmax: index of the value
};

Acc acc_init() {
  Acc a;
  const bool sum = OP == CF_SUM || OP == CF_MEAN;
  // 0, -inf, INT32_MIN, INT64_MIN
  a.v = sum ? 0u : (DT == CF_F32 ? 0xff800000u : WIDE ? 0u : 0x80000000u);
  a.hi = (WIDE && !sum) ? 0x80000000u : 0u;
  a.idx = 0xffffffffu;
  return a;
}

// Whether (v2, h2, i2) should replace (v1, h1, i1) as the running max.
bool better(uint v1, uint h1, uint i1, uint v2, uint h2, uint i2) {
  if (i1 == 0xffffffffu) return true;
  if (WIDE) {
    const uvec2 a = uvec2(v1, h1), b = uvec2(v2, h2);
    return less64(a, b) || (a == b && i2 < i1);
  }
  if (DT == CF_F32) {
    bool n1 = is_nan(v1), n2 = is_nan(v2);
    if (n1 || n2) return n2 && (!n1 || i2 < i1);
    int k1 = fkey(v1), k2 = fkey(v2);
    return k2 > k1 || (k2 == k1 && i2 < i1);
  }
  return int(v2) > int(v1) || (v2 == v1 && i2 < i1);
}

Acc combine(Acc a, Acc b) {
  if (OP == CF_SUM || OP == CF_MEAN) {
    if (WIDE) {
      const uvec2 s = add64(uvec2(a.v, a.hi), uvec2(b.v, b.hi));
      a.v = s.x;
      a.hi = s.y;
    } else {
      a.v = DT == CF_F32 ? floatBitsToUint(uintBitsToFloat(a.v) + uintBitsToFloat(b.v)) : a.v + b.v;
    }
    return a;
  }
  if (b.idx != 0xffffffffu && better(a.v, a.hi, a.idx, b.v, b.hi, b.idx)) return b;
  return a;
}

Acc leaf(uint v, uint hi, uint k) {
  Acc a;
  a.v = v;
  a.hi = hi;
  a.idx = k;
  return a;
}

// Element q of x as the accumulation reads it (position k along the row): a mean's second pass scales it (Note [A
// mean whose f32 sum overflows]).
Acc element(uint q, uint k, float scale) {
  if (WIDE) return leaf(a_[2u * q], a_[2u * q + 1u], k);
  const uint v = a_[q];
  return leaf(OP == CF_MEAN && scale != 1.0 ? floatBitsToUint(uintBitsToFloat(v) * scale) : v, 0u, k);
}

bool finite_bits(uint b) { return (b & 0x7f800000u) != 0x7f800000u; }

// The scale of a mean's second pass: 2^-s with s = ceil(log2 r) + 1.
float mean_scale() { return exp2(-float(findMSB(max(p.r, 1u) - 1u) + 2)); }

void store(uint o, Acc a, float scale) {
  if (OP == CF_ARGMAX) {
    o_[o] = a.idx;
  } else if (WIDE) {
    o_[2u * o] = a.v;
    o_[2u * o + 1u] = a.hi;
  } else {
    o_[o] = OP == CF_MEAN ? floatBitsToUint((uintBitsToFloat(a.v) / float(p.r)) / scale) : a.v;
  }
}

// One pass of the GROUP path: 256 strided partial results, then a tree; the result is left in s_v[0], s_i[0].
void group_pass(uint base, uint t, float scale) {
  Acc a = acc_init();
  for (uint k = t; k < p.r; k += 256u) a = combine(a, element(base + k * p.inner, k, scale));
  s_v[t] = a.v;
  s_h[t] = a.hi;
  s_i[t] = a.idx;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      Acc x = leaf(s_v[t], s_h[t], s_i[t]);
      Acc y = leaf(s_v[t + s], s_h[t + s], s_i[t + s]);
      Acc z = combine(x, y);
      s_v[t] = z.v;
      s_h[t] = z.hi;
      s_i[t] = z.idx;
    }
    barrier();
  }
}

void main() {
  if (!GROUP) {
    uint o = flat_index();
    if (o < p.n_out) {
      uint base = (o / p.inner) * p.r * p.inner + o % p.inner;
      Acc a = acc_init();
      for (uint k = 0u; k < p.r; ++k) a = combine(a, element(base + k * p.inner, k, 1.0));
      float scale = 1.0;
      if (OP == CF_MEAN && !finite_bits(a.v)) {  // Note [A mean whose f32 sum overflows]
        scale = mean_scale();
        a = acc_init();
        for (uint k = 0u; k < p.r; ++k) a = combine(a, element(base + k * p.inner, k, scale));
      }
      store(o, a, scale);
    }
    return;
  }
  uint t = gl_LocalInvocationID.x;
  uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (o < p.n_out) {
    uint base = (o / p.inner) * p.r * p.inner + o % p.inner;
    group_pass(base, t, 1.0);
    float scale = 1.0;
    // s_v[0] is the same for the whole workgroup, so every invocation takes the same branch (barriers inside).
    if (OP == CF_MEAN && !finite_bits(s_v[0])) {  // Note [A mean whose f32 sum overflows]
      scale = mean_scale();
      barrier();  // every invocation has read s_v[0] before the second pass writes it
      group_pass(base, t, scale);
    }
    if (t == 0u) store(o, leaf(s_v[0], s_h[0], s_i[0]), scale);
    barrier();
  }
}
