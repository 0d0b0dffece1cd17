// SPDX-License-Identifier: Apache-2.0
#version 450
// sum, mean, max and argmax of x viewed as [outer, R, inner] over the middle axis, out [outer, inner].
// GROUP = false: one invocation per output walks R in order (many short rows). GROUP = true: one workgroup per
// output, 256 strided partial results combined by a tree in shared memory (few long rows). Ties and NaN follow
// the op table: max and argmax take the first NaN, else the first maximal element (lowest index).
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

shared uint s_v[256];
shared uint s_i[256];

struct Acc {
  uint v;    // value bits (sum: f32 or i32 bits)
  uint idx;  // max / argmax: index of the value
};

Acc acc_init() {
  Acc a;
  a.v = (OP == CF_SUM || OP == CF_MEAN) ? 0u : (DT == CF_F32 ? 0xff800000u : 0x80000000u);  // 0, -inf, INT_MIN
  a.idx = 0xffffffffu;
  return a;
}

// Whether (v2, i2) should replace (v1, i1) as the running max.
bool better(uint v1, uint i1, uint v2, uint i2) {
  if (i1 == 0xffffffffu) return true;
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
    a.v = DT == CF_F32 ? floatBitsToUint(uintBitsToFloat(a.v) + uintBitsToFloat(b.v)) : a.v + b.v;
    return a;
  }
  if (b.idx != 0xffffffffu && better(a.v, a.idx, b.v, b.idx)) return b;
  return a;
}

Acc leaf(uint v, uint k) {
  Acc a;
  a.v = v;
  a.idx = k;
  return a;
}

// An element as the accumulation reads it: a mean's second pass scales it (Note [A mean whose f32 sum overflows]).
Acc element(uint v, uint k, float scale) {
  return leaf(OP == CF_MEAN ? floatBitsToUint(uintBitsToFloat(v) * scale) : v, k);
}

bool finite_bits(uint b) { return (b & 0x7f800000u) != 0x7f800000u; }

// The scale of a mean's second pass: 2^-s with s = ceil(log2 r) + 1.
float mean_scale() { return exp2(-float(findMSB(max(p.r, 1u) - 1u) + 2)); }

uint finish(Acc a, float scale) {
  if (OP == CF_ARGMAX) return a.idx;
  if (OP == CF_MEAN) return floatBitsToUint((uintBitsToFloat(a.v) / float(p.r)) / scale);
  return a.v;
}

// One pass of the GROUP path: 256 strided partial results, then a tree; the result is left in s_v[0], s_i[0].
void group_pass(uint base, uint t, float scale) {
  Acc a = acc_init();
  for (uint k = t; k < p.r; k += 256u) a = combine(a, element(a_[base + k * p.inner], k, scale));
  s_v[t] = a.v;
  s_i[t] = a.idx;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      Acc x = leaf(s_v[t], s_i[t]);
      Acc y = leaf(s_v[t + s], s_i[t + s]);
      Acc z = combine(x, y);
      s_v[t] = z.v;
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
      for (uint k = 0u; k < p.r; ++k) a = combine(a, leaf(a_[base + k * p.inner], k));
      float scale = 1.0;
      if (OP == CF_MEAN && !finite_bits(a.v)) {  // Note [A mean whose f32 sum overflows]
        scale = mean_scale();
        a = acc_init();
        for (uint k = 0u; k < p.r; ++k) a = combine(a, element(a_[base + k * p.inner], k, scale));
      }
      o_[o] = finish(a, scale);
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
    if (t == 0u) o_[o] = finish(leaf(s_v[0], s_i[0]), scale);
    barrier();
  }
}
