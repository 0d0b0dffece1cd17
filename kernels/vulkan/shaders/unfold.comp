// SPDX-License-Identifier: Apache-2.0
#version 450
// unfold: [N, C, H, W] -> [N, C*kh*kw, L], a gather of bits in every dtype (packed_main.glsl: f16 and bf16 two to
// a word, so a NaN keeps its payload): output element i copies the input element its window tap reads, or is 0
// (+0 in every float dtype) where the tap reaches into the padding.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;
layout(push_constant) uniform Params {
  uint n;
  uint N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO;
} p;

const uint kPadding = 0xffffffffu;  // source() of a tap in the padding

uint source(uint i) {
  uint L = p.HO * p.WO;
  uint l = i % L, row = (i / L) % (p.C * p.KH * p.KW), n = i / (L * p.C * p.KH * p.KW);
  uint kj = row % p.KW, ki = (row / p.KW) % p.KH, c = row / (p.KW * p.KH);
  int iy = int((l / p.WO) * p.SH + ki) - int(p.PH);
  int ix = int((l % p.WO) * p.SW + kj) - int(p.PW);
  bool inside = iy >= 0 && iy < int(p.H) && ix >= 0 && ix < int(p.W);
  return inside ? ((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix) : kPadding;
}

#define CF_SOURCE_MAY_BE_PADDING 1
#include "packed_main.glsl"
