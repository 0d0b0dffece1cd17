#version 450
// sum, mean, max and argmax of x viewed as [outer, R, inner] over the middle axis, out [outer, inner].
// GROUP = false: one invocation per output walks R in order (many short rows). GROUP = true: one workgroup per
// output, 256 strided partial results combined by a tree in shared memory (few long rows). Ties and NaN follow
// the op table: max and argmax take the first NaN, else the first maximal element (lowest index).
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

uint finish(Acc a) {
  if (OP == CF_ARGMAX) return a.idx;
  if (OP == CF_MEAN) return floatBitsToUint(uintBitsToFloat(a.v) / float(p.r));
  return a.v;
}

shared uint s_v[256];
shared uint s_i[256];

void main() {
  if (!GROUP) {
    uint o = flat_index();
    if (o < p.n_out) {
      uint base = (o / p.inner) * p.r * p.inner + o % p.inner;
      Acc a = acc_init();
      for (uint k = 0u; k < p.r; ++k) a = combine(a, leaf(a_[base + k * p.inner], k));
      o_[o] = finish(a);
    }
    return;
  }
  uint t = gl_LocalInvocationID.x;
  uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (o < p.n_out) {
    uint base = (o / p.inner) * p.r * p.inner + o % p.inner;
    Acc a = acc_init();
    for (uint k = t; k < p.r; k += 256u) a = combine(a, leaf(a_[base + k * p.inner], k));
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
    if (t == 0u) o_[o] = finish(leaf(s_v[0], s_i[0]));
    barrier();
  }
}
