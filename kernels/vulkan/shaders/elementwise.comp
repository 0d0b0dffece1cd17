// SPDX-License-Identifier: Apache-2.0
#version 450
// Every elementwise op: unary, binary with numpy broadcasting, compare, logic, where and cast. Each op is a module of
// its own (CF_OP, set by kernels/vulkan/CMakeLists.txt; Note [One module per elementwise op] in vulkan_kernels.cpp)
// and the dtypes are specialization constants, so each pipeline is one straight-line kernel. Inputs are addressed through
// per-input strides over the (coalesced) output shape; a broadcast dim has stride 0. A bool output packs four
// elements per 32-bit word, so one invocation writes one whole word and no two invocations share a word.
#include "common.glsl"
#include "math.glsl"

layout(local_size_x = 256) in;
#ifndef CF_OP
#error "elementwise.comp is compiled once per op, with CF_OP set to its code (kernels/vulkan/CMakeLists.txt)"
#endif
const int OP = CF_OP;
layout(constant_id = 1) const int DT_IN = CF_F32;   // dtype of the value inputs (where: of a and b)
layout(constant_id = 2) const int DT_OUT = CF_F32;
// f16 and bf16 values are handled as the f32 of the same value (Note [Halves as f32 inside a shader]).
const bool HALF_IN = DT_IN == CF_F16 || DT_IN == CF_BF16;
const bool FLOAT_IN = DT_IN == CF_F32 || HALF_IN;
const bool HALF_OUT = DT_OUT == CF_F16 || DT_OUT == CF_BF16;
const bool FLOAT_OUT = DT_OUT == CF_F32 || HALF_OUT;

// An i32 as f32 bits rounded to odd: exact when it fits 24 bits, else truncated with the last bit set when that
// dropped anything. Narrowing that to f16 or bf16 gives the i32 rounded to nearest once (the CPU backend's rule,
// after Boldo and Melquiond); converting through a nearest f32 could round twice.
uint i32_to_f32_odd(int v) {
  const uint a = v < 0 ? uint(-v) : uint(v);  // -INT_MIN wraps to 2^31: right as a uint
  const uint sign = v < 0 ? 0x80000000u : 0u;
  const int msb = findMSB(a);
  if (msb <= 23) return sign | floatBitsToUint(float(a));
  const int shift = msb - 23;
  const uint kept = (a >> shift) << shift;
  return sign | floatBitsToUint(float(kept)) | ((a & ((1u << shift) - 1u)) != 0u ? 1u : 0u);
}

layout(push_constant) uniform Params {
  uint n;
  uint rank;
  uint shape[6];
  uint s1[6];
  uint s2[6];
  uint s3[6];
  float a;  // the op's float attributes, rounded to f32 (clamp: min, max)
  float b;
} p;

// What an op code without a case gives: unreachable, since every op of the elementwise families has a code and a
// case (vulkan_kernels.cpp checks the codes at compile time). Should one slip through, the result is this NaN, whose
// payload no arithmetic makes (an int of 2142952365 for i32), so that a campaign reports it, never an output equal
// to the input.
const uint kUnknownOp = 0x7fbadbadu;

uint unary(uint x) {
  float f = uintBitsToFloat(x);
  switch (OP) {
    case CF_NEG: return FLOAT_IN ? x ^ 0x80000000u : 0u - x;
    case CF_ABS: return FLOAT_IN ? x & 0x7fffffffu : (int(x) < 0 ? 0u - x : x);
    case CF_EXP: return floatBitsToUint(cf_exp(f));
    case CF_LOG: return floatBitsToUint(cf_log(f));
    case CF_SQRT: return floatBitsToUint(cf_sqrt(f));
    case CF_TANH: return floatBitsToUint(cf_tanh(f));
    case CF_SIGMOID: return floatBitsToUint(cf_sigmoid(f));
    case CF_RELU: return (is_nan(x) || int(x) > 0) ? x : 0u;
    case CF_NOT: return x == 0u ? 1u : 0u;
    case CF_CLAMP:  // on the bits of x where it stays: -0 and NaN keep theirs
      if (is_nan(floatBitsToUint(p.a)) || is_nan(floatBitsToUint(p.b))) return 0x7fc00000u;
      if (f < p.a) { f = p.a; x = floatBitsToUint(p.a); }  // then against max: min > max gives max
      if (f > p.b) return floatBitsToUint(p.b);
      return x;
    case CF_CAST:
      if (DT_OUT == CF_BOOL) return (FLOAT_IN ? (x & 0x7fffffffu) : x) != 0u ? 1u : 0u;
      if (DT_IN == DT_OUT) return x;
      if (DT_IN == CF_BOOL) return FLOAT_OUT ? (x != 0u ? 0x3f800000u : 0u) : x;
      if (DT_IN == CF_I32) return HALF_OUT ? i32_to_f32_odd(int(x)) : floatBitsToUint(float(int(x)));
      if (FLOAT_OUT) return x;  // between float dtypes: the value, narrowed at the store
      // f32 -> i32: truncate toward zero, saturate, NaN -> 0.
      if (is_nan(x)) return 0u;
      if (f >= 2147483648.0) return 0x7fffffffu;
      if (f <= -2147483648.0) return 0x80000000u;
      return uint(int(f));
  }
  return kUnknownOp;
}

bool less(uint x, uint y) { return FLOAT_IN ? fkey(x) < fkey(y) : int(x) < int(y); }
bool equal(uint x, uint y) { return FLOAT_IN ? fkey(x) == fkey(y) : x == y; }

uint binary(uint x, uint y) {
  float a = uintBitsToFloat(x), b = uintBitsToFloat(y);
  const bool f32 = FLOAT_IN;
  const bool nan = f32 && (is_nan(x) || is_nan(y));
  switch (OP) {
    case CF_ADD: return f32 ? floatBitsToUint(a + b) : x + y;
    case CF_SUB: return f32 ? floatBitsToUint(a - b) : x - y;
    case CF_MUL: return f32 ? floatBitsToUint(a * b) : x * y;
    case CF_DIV: return floatBitsToUint(cf_div(a, b));
#ifdef CF_F64
    case CF_POW: return floatBitsToUint(cf_pow_f64(a, b));
#else
    case CF_POW: return floatBitsToUint(cf_pow_f32(a, b));
#endif
    case CF_MAXIMUM: return nan ? (is_nan(x) ? x : y) : (f32 ? (tkey(x) < tkey(y) ? y : x) : (less(x, y) ? y : x));
    case CF_MINIMUM: return nan ? (is_nan(x) ? x : y) : (f32 ? (tkey(y) < tkey(x) ? y : x) : (less(y, x) ? y : x));
    case CF_EQ: return (!nan && equal(x, y)) ? 1u : 0u;
    case CF_NE: return (nan || !equal(x, y)) ? 1u : 0u;
    case CF_LT: return (!nan && less(x, y)) ? 1u : 0u;
    case CF_LE: return (!nan && !less(y, x)) ? 1u : 0u;
    case CF_GT: return (!nan && less(y, x)) ? 1u : 0u;
    case CF_GE: return (!nan && !less(x, y)) ? 1u : 0u;
    case CF_AND: return (x != 0u && y != 0u) ? 1u : 0u;
    case CF_OR: return (x != 0u || y != 0u) ? 1u : 0u;
  }
  return kUnknownOp;
}

uint element(uint i) {
  uint o1 = 0u, o2 = 0u, o3 = 0u;
  if (p.rank == 1u) {
    o1 = i * p.s1[0];
    o2 = i * p.s2[0];
    o3 = i * p.s3[0];
  } else {
    uint rem = i;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
      uint c = rem % p.shape[d];
      rem /= p.shape[d];
      o1 += c * p.s1[d];
      o2 += c * p.s2[d];
      o3 += c * p.s3[d];
    }
  }
  if (OP == CF_WHERE) return LOAD(a_, CF_BOOL, o1) != 0u ? LOAD(b_, DT_IN, o2) : LOAD(c_, DT_IN, o3);
  uint x = LOAD(a_, DT_IN, o1);
  if (OP < CF_ADD) return unary(x);
  return binary(x, LOAD(b_, DT_IN, o2));
}

void main() {
  if (DT_OUT == CF_BOOL) {
    uint words = (p.n + 3u) / 4u;
    uint w = flat_index();
    if (w < words) {
      uint v = 0u;
      for (uint e = 0u; e < 4u; ++e) {
        uint i = w * 4u + e;
        if (i < p.n) v |= (element(i) & 0xffu) << (8u * e);
      }
      o_[w] = v;
    }
  } else if (HALF_OUT) {  // two elements per word, element 2w in the low half
    uint w = flat_index();
    if (w < (p.n + 1u) / 2u) {
      uint v = narrow(DT_OUT, element(2u * w));
      if (2u * w + 1u < p.n) v |= narrow(DT_OUT, element(2u * w + 1u)) << 16;
      o_[w] = v;
    }
  } else {
    uint i = flat_index();
    if (i < p.n) o_[i] = element(i);
  }
}
