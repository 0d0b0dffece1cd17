// SPDX-License-Identifier: Apache-2.0
#version 450
// One input of cat: the output is [outer, total, inner]; this input fills axis slots [off, off + d) of it.
// 4-byte dtypes scatter one element per invocation, i64 one word per invocation. Bool packs four elements per word, f16 and bf16 two, and two
// inputs may share a word, so each invocation owns one output word and rewrites only the elements of this input's
// slots (the dispatches of one cat are ordered by barriers).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int DT = CF_F32;

layout(push_constant) uniform Params {
  uint n;      // elements of this input
  uint inner;
  uint total;  // the output's axis dim
  uint off;
  uint d;      // this input's axis dim
  uint word_begin;
  uint word_end;
  uint out_n;
} p;

void main() {
  if (DT == CF_I64) {  // two words an element (Note [i64 as two words]), one invocation each
    uint w = flat_index();
    if (w < 2u * p.n) {
      uint i = w >> 1, slab = p.d * p.inner;
      uint outer = i / slab, rest = i % slab;
      o_[2u * ((outer * p.total + p.off) * p.inner + rest) + (w & 1u)] = a_[w];
    }
    return;
  }
  const uint k = per_word(DT);
  if (k == 1u) {
    uint slab = p.d * p.inner;
    uint i = flat_index();
    if (i < p.n) {
      uint outer = i / slab, rest = i % slab;
      o_[(outer * p.total + p.off) * p.inner + rest] = a_[i];
    }
    return;
  }
  const uint width = 32u / k, mask = element_mask(DT);
  uint w = p.word_begin + flat_index();
  if (w < p.word_end) {
    uint v = o_[w];
    for (uint e = 0u; e < k; ++e) {
      uint i = w * k + e;
      if (i >= p.out_n) break;
      uint q = i / p.inner, ii = i % p.inner;
      uint a = q % p.total, outer = q / p.total;
      if (a < p.off || a >= p.off + p.d) continue;
      uint src = (outer * p.d + (a - p.off)) * p.inner + ii;
      v = (v & ~(mask << (width * e))) | (BITS(a_, DT, src) << (width * e));
    }
    o_[w] = v;
  }
}
