// SPDX-License-Identifier: Apache-2.0
#version 450
// arange: element i = start + i * step computed in f64 (as the op table says), then converted to the dtype
// (i32: truncated toward zero, saturated). Only built into pipelines on devices with shaderFloat64; elsewhere the
// host computes the values.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;
layout(push_constant) uniform Params {
  uint n;
  uint pad;
  uvec2 start;
  uvec2 step;
} p;

void main() {
  double start = packDouble2x32(p.start), step = packDouble2x32(p.step);
  uint i = flat_index();
  if (i < p.n) {
    precise double prod = double(i) * step;
    precise double v = start + prod;
    if (DT == CF_F32) {
      o_[i] = floatBitsToUint(float(v));
    } else {
      double t = trunc(v);
      o_[i] = t >= 2147483647.0LF ? 0x7fffffffu : t <= -2147483648.0LF ? 0x80000000u : uint(int(t));
    }
  }
}
