// SPDX-License-Identifier: Apache-2.0
#version 450
// Every elementwise op: unary, binary with numpy broadcasting, compare, logic, where and cast. Each op is a module of
// its own (CF_OP, set by kernels/vulkan/CMakeLists.txt; Note [One module per elementwise op] in vulkan_kernels.cpp)
// and the dtypes are specialization constants, so each pipeline is one straight-line kernel. Inputs are addressed through
// per-input strides over the (coalesced) output shape; a broadcast dim has stride 0. A bool output packs four
// elements per 32-bit word, so one invocation writes one whole word and no two invocations share a word; an i64
// output is two words an element, both written by the element's invocation (element64, Note [i64 as two words]).
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
// i64 values are uvec2s (Note [i64 as two words] in common.glsl): element64() computes them.
const bool WIDE_IN = DT_IN == CF_I64;
const bool WIDE_OUT = DT_OUT == CF_I64;

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

// 64-bit shifts by s in [0, 63] (GLSL leaves a shift by 32 undefined, so each width is its own case).
uvec2 shr64(uvec2 a, int s) {
  if (s == 0) return a;
  if (s < 32) return uvec2((a.x >> s) | (a.y << (32 - s)), a.y >> s);
  return uvec2(a.y >> (s - 32), 0u);
}
uvec2 shl64(uvec2 a, int s) {
  if (s == 0) return a;
  if (s < 32) return uvec2(a.x << s, (a.y << s) | (a.x >> (32 - s)));
  return uvec2(0u, a.x << (s - 32));
}
// Whether the low s bits of a (s in [0, 63]) are not all 0.
bool low_bits_set(uvec2 a, int s) {
  if (s < 32) return (a.x & ((1u << s) - 1u)) != 0u;
  return a.x != 0u || (a.y & ((1u << (s - 32)) - 1u)) != 0u;
}

// An i64 as f32 bits: rounded to nearest, ties to even, or (ODD) to odd, which a half output then narrows to
// nearest once (as i32_to_f32_odd above); never through another rounding.
uint i64_to_f32(uvec2 v, bool odd) {
  const bool neg = int(v.y) < 0;
  const uvec2 a = neg ? neg64(v) : v;  // -INT64_MIN wraps to 2^63: right as an unsigned
  const uint sign = neg ? 0x80000000u : 0u;
  const int msb = a.y != 0u ? 32 + findMSB(a.y) : findMSB(a.x);  // -1 for 0
  if (msb <= 23) return sign | floatBitsToUint(float(a.x));      // exact
  const int shift = msb - 24;
  const uint kept = shr64(a, shift).x;  // the top 25 bits: 24 of mantissa and the rounding bit
  const bool sticky = low_bits_set(a, shift);
  uint mant = kept >> 1;
  if (odd) {
    if ((kept & 1u) != 0u || sticky) mant |= 1u;
  } else if ((kept & 1u) != 0u && (sticky || (mant & 1u) != 0u)) {
    mant += 1u;  // may reach 2^24: the sum below then carries into the exponent, which is right
  }
  return sign | ((uint(msb + 127) << 23) + (mant - 0x800000u));
}

// f32 bits as an i64: truncated toward zero, saturated at INT64_MIN/INT64_MAX, NaN -> 0 (the CPU backend's rule).
uvec2 f32_to_i64(uint x) {
  if (is_nan(x)) return uvec2(0u);
  const uint mag = x & 0x7fffffffu;
  const bool neg = (x >> 31) != 0u;
  if (mag >= 0x5f000000u) return neg ? uvec2(0u, 0x80000000u) : uvec2(0xffffffffu, 0x7fffffffu);  // |x| >= 2^63
  const int e = int(mag >> 23) - 127;
  if (e < 0) return uvec2(0u);
  const uint m = (mag & 0x7fffffu) | 0x800000u;
  const uvec2 a = e >= 23 ? shl64(uvec2(m, 0u), e - 23) : uvec2(m >> (23 - e), 0u);
  return neg ? neg64(a) : a;
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

// Each input's element offset for output element i.
void offsets(uint i, out uint o1, out uint o2, out uint o3) {
  o1 = 0u, o2 = 0u, o3 = 0u;
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
}

// ---- i64 (Note [i64 as two words]) ----------------------------------------------------------------------------------

const uvec2 kUnknownOp64 = uvec2(kUnknownOp);

// A value of DT_IN (not i64) cast to i64.
uvec2 to_i64(uint x) {
  if (FLOAT_IN) return f32_to_i64(x);
  if (DT_IN == CF_I32) return uvec2(x, int(x) < 0 ? 0xffffffffu : 0u);
  return uvec2(x, 0u);  // bool
}

// An i64 cast to DT_OUT (not i64), as the bits element() returns (a half: f32 bits rounded to odd).
uint from_i64(uvec2 v) {
  if (DT_OUT == CF_BOOL) return (v.x | v.y) != 0u ? 1u : 0u;
  if (DT_OUT == CF_I32) return v.x;  // the low 32 bits
  return i64_to_f32(v, HALF_OUT);
}

uvec2 unary64(uvec2 x) {
  switch (OP) {
    case CF_NEG: return neg64(x);
    case CF_ABS: return int(x.y) < 0 ? neg64(x) : x;  // abs(INT64_MIN) wraps to INT64_MIN
    case CF_CAST: return x;                             // to another dtype: from_i64, in element()
  }
  return kUnknownOp64;
}

uvec2 binary64(uvec2 x, uvec2 y) {
  switch (OP) {
    case CF_ADD: return add64(x, y);
    case CF_SUB: return sub64(x, y);
    case CF_MUL: return mul64(x, y);
    case CF_MAXIMUM: return less64(x, y) ? y : x;
    case CF_MINIMUM: return less64(y, x) ? y : x;
    case CF_EQ: return uvec2(x == y ? 1u : 0u, 0u);
    case CF_NE: return uvec2(x != y ? 1u : 0u, 0u);
    case CF_LT: return uvec2(less64(x, y) ? 1u : 0u, 0u);
    case CF_LE: return uvec2(!less64(y, x) ? 1u : 0u, 0u);
    case CF_GT: return uvec2(less64(y, x) ? 1u : 0u, 0u);
    case CF_GE: return uvec2(!less64(x, y) ? 1u : 0u, 0u);
  }
  return kUnknownOp64;
}

// Output element i where an input or the output is i64: the i64 result (a compare's bool in .x).
uvec2 element64(uint i) {
  uint o1, o2, o3;
  offsets(i, o1, o2, o3);
  if (OP == CF_WHERE) return LOAD(a_, CF_BOOL, o1) != 0u ? LOAD64(b_, o2) : LOAD64(c_, o3);
  if (!WIDE_IN) return to_i64(LOAD(a_, DT_IN, o1));  // a cast into i64
  const uvec2 x = LOAD64(a_, o1);
  if (OP < CF_ADD) return unary64(x);
  return binary64(x, LOAD64(b_, o2));
}

uint element(uint i) {
  if (WIDE_IN) {
    const uvec2 v = element64(i);
    return OP == CF_CAST ? from_i64(v) : v.x;
  }
  uint o1, o2, o3;
  offsets(i, o1, o2, o3);
  if (OP == CF_WHERE) return LOAD(a_, CF_BOOL, o1) != 0u ? LOAD(b_, DT_IN, o2) : LOAD(c_, DT_IN, o3);
  uint x = LOAD(a_, DT_IN, o1);
  if (OP < CF_ADD) return unary(x);
  return binary(x, LOAD(b_, DT_IN, o2));
}

void main() {
  if (WIDE_OUT) {  // one element, two words, per invocation
    uint i = flat_index();
    if (i < p.n) {
      const uvec2 v = element64(i);
      o_[2u * i] = v.x;
      o_[2u * i + 1u] = v.y;
    }
  } else if (DT_OUT == CF_BOOL) {
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
