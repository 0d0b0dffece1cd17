// SPDX-License-Identifier: Apache-2.0
#version 450
// softmax of x viewed as [outer, R, inner] along the middle axis.
// GROUP = false: one invocation per row walks it three times (max, sum, write): short rows.
// GROUP = true: one workgroup per row, 256 invocations each taking every 256th element, the max and the sum
// combined by trees in shared memory: long rows. lavapipe ends an invocation's loops after 65,535 iterations in
// all (Note [A driver's loop limit] in vulkan_kernels.cpp), so one invocation must not walk a long row three times.
#include "common.glsl"
#include "math.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const bool GROUP = false;
layout(push_constant) uniform Params {
  uint rows;
  uint r;
  uint inner;
} p;

// The larger of two values as bits, NaN winning (a row with a NaN is all NaN, as the formula gives).
uint max_bits(uint a, uint b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return fkey(b) > fkey(a) ? b : a;
}

shared uint s_max[256];
shared float s_sum[256];

void main() {
  if (!GROUP) {
    uint row = flat_index();
    if (row < p.rows) {
      uint base = (row / p.inner) * p.r * p.inner + row % p.inner;
      uint mbits = 0xff800000u;
      for (uint k = 0u; k < p.r; ++k) mbits = max_bits(mbits, a_[base + k * p.inner]);
      float m = uintBitsToFloat(mbits);
      float s = 0.0;
      for (uint k = 0u; k < p.r; ++k) s += cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m);
      for (uint k = 0u; k < p.r; ++k)
        o_[base + k * p.inner] = floatBitsToUint(cf_div(cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m), s));
    }
    return;
  }
  uint t = gl_LocalInvocationID.x;
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;  // uniform across the workgroup
  uint base = (row / p.inner) * p.r * p.inner + row % p.inner;
  uint mbits = 0xff800000u;
  for (uint k = t; k < p.r; k += 256u) mbits = max_bits(mbits, a_[base + k * p.inner]);
  s_max[t] = mbits;
  barrier();
  for (uint h = 128u; h > 0u; h >>= 1) {
    if (t < h) s_max[t] = max_bits(s_max[t], s_max[t + h]);
    barrier();
  }
  float m = uintBitsToFloat(s_max[0]);
  float s = 0.0;
  for (uint k = t; k < p.r; k += 256u) s += cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m);
  s_sum[t] = s;
  barrier();
  for (uint h = 128u; h > 0u; h >>= 1) {
    if (t < h) s_sum[t] += s_sum[t + h];
    barrier();
  }
  s = s_sum[0];
  for (uint k = t; k < p.r; k += 256u)
    o_[base + k * p.inner] = floatBitsToUint(cf_div(cf_exp(uintBitsToFloat(a_[base + k * p.inner]) - m), s));
}
