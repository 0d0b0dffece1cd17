// SPDX-License-Identifier: Apache-2.0
// Shared by every shader: the four storage buffers of the common pipeline layout (binding 0 is the output), dtype
// loads, and NaN-aware float ordering done on bit patterns.
//
// Note [Floats compared as bits]
// Ordering, comparisons, max/min, relu, neg and abs work on the IEEE bit patterns, never on float comparisons: a
// driver may flush denormals to zero (lavapipe does), which would make `denormal > 0` false and break the
// bitwise agreement that contract section 6 asks of compare ops and data movement.
#extension GL_GOOGLE_include_directive : require

#include "op_codes.h"

layout(std430, set = 0, binding = 0) buffer Out0 { uint o_[]; };
layout(std430, set = 0, binding = 1) readonly buffer In1 { uint a_[]; };
layout(std430, set = 0, binding = 2) readonly buffer In2 { uint b_[]; };
layout(std430, set = 0, binding = 3) readonly buffer In3 { uint c_[]; };

uint byte_at(uint word, uint i) { return (word >> ((i & 3u) * 8u)) & 0xffu; }
uint half_at(uint word, uint i) { return (word >> ((i & 1u) * 16u)) & 0xffffu; }

// Note [Halves as f32 inside a shader]
// f16 and bf16 elements are stored two to a 32-bit word (element 2k in the low half) and read and written with
// integer operations only: a load widens one to the bits of the f32 of the same value (exact), the op computes in
// f32, and a store narrows to nearest, ties to even, overflowing to the infinity of the sign and sending a NaN to
// the quiet NaN of its sign (0x7e00, 0x7fc0), as the CPU backend does. So no device feature is needed (no
// shaderFloat16, no 16-bit storage), and no driver's own f16 conversion, whose rounding GLSL leaves open.
uint f16_to_f32_bits(uint h) {
  const uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return s | 0x7f800000u | (m << 13);                          // inf, NaN (payload kept)
  if (e == 0u) return s | (m == 0u ? 0u : floatBitsToUint(float(m) * 5.9604644775390625e-8));  // m * 2^-24: exact
  return s | ((e + 112u) << 23) | (m << 13);
}
uint f32_bits_to_f16(uint u) {
  const uint sign = u & 0x80000000u;
  u ^= sign;
  uint r;
  if (u >= 0x47800000u) r = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN; inf and |x| >= 2^16
  else if (u < (113u << 23)) r = floatBitsToUint(uintBitsToFloat(u) + 0.5) - 0x3f000000u;  // subnormal: the add rounds
  else r = (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;  // a carry into the exponent may reach inf: right
  return r | (sign >> 16);
}
uint f32_bits_to_bf16(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) & 0x8000u) | 0x7fc0u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
// A float dtype's element as f32 bits, and f32 bits as a float dtype's element (f32: itself).
uint widen(int dt, uint h) { return dt == CF_F16 ? f16_to_f32_bits(h) : dt == CF_BF16 ? h << 16 : h; }
uint narrow(int dt, uint u) { return dt == CF_F16 ? f32_bits_to_f16(u) : dt == CF_BF16 ? f32_bits_to_bf16(u) : u; }

// Element i of a buffer of dtype dt as it is stored, for data movement, which copies bits (a half's own 16 bits,
// never widened: a NaN keeps its payload).
#define BITS(buf, dt, i) (((dt) == CF_F16 || (dt) == CF_BF16) ? half_at(buf[(i) >> 1], (i)) : LOAD(buf, dt, i))
// How many elements of dtype dt share a 32-bit word (bool 4, f16 and bf16 2, else 1), and one's mask.
uint per_word(int dt) { return dt == CF_BOOL ? 4u : (dt == CF_F16 || dt == CF_BF16) ? 2u : 1u; }
uint element_mask(int dt) { return dt == CF_BOOL ? 0xffu : (dt == CF_F16 || dt == CF_BF16) ? 0xffffu : 0xffffffffu; }

// Element i of a buffer of dtype dt, as its bit pattern (bool: 0 or 1; f16, bf16: the bits of the same f32).
#define LOAD(buf, dt, i)                                                                                     \
  ((dt) == CF_BOOL ? byte_at(buf[(i) >> 2], (i))                                                           \
                   : ((dt) == CF_F16 || (dt) == CF_BF16) ? widen((dt), half_at(buf[(i) >> 1], (i))) : buf[(i)])

// Note [i64 as two words]
// An i64 element is two 32-bit words, the low one first (little-endian, as the host writes it), handled as a uvec2
// (x: low, y: high) with 32-bit integer operations only: carries and borrows by uaddCarry/usubBorrow, products by
// umulExtended, signed order on the high word first. So no shaderInt64 is needed, and any device computes i64.
#define LOAD64(buf, i) uvec2(buf[2u * (i)], buf[2u * (i) + 1u])
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  const uint lo = uaddCarry(a.x, b.x, carry);
  return uvec2(lo, a.y + b.y + carry);
}
uvec2 sub64(uvec2 a, uvec2 b) {
  uint borrow;
  const uint lo = usubBorrow(a.x, b.x, borrow);
  return uvec2(lo, a.y - b.y - borrow);
}
uvec2 neg64(uvec2 a) { return sub64(uvec2(0u), a); }  // wraps: -INT64_MIN is INT64_MIN
uvec2 mul64(uvec2 a, uvec2 b) {  // the low 64 bits of the product: the same for signed and unsigned operands
  uint hi, lo;
  umulExtended(a.x, b.x, hi, lo);
  return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}
bool less64(uvec2 a, uvec2 b) { return int(a.y) < int(b.y) || (a.y == b.y && a.x < b.x); }

bool is_nan(uint b) { return (b & 0x7fffffffu) > 0x7f800000u; }
// A key whose integer order is the float order of non-NaN values; -0 and +0 share key 0.
int fkey(uint b) {
  int m = int(b & 0x7fffffffu);
  return (b >> 31) != 0u ? -m : m;
}

// The same, but -0 < +0 (IEEE 754-2019 maximum/minimum: max(+0, -0) = +0, min(+0, -0) = -0).
int tkey(uint b) {
  int m = int(b & 0x7fffffffu);
  return (b >> 31) != 0u ? -m - 1 : m;
}

// Note [No grid-stride loops]
// Each invocation handles one item at flat_index(); the host spreads the workgroups over x and y (65535 each).
// A grid-stride loop (`for (i = id; i < n; i += grid)`) is the usual idiom, but llvmpipe runs a loop with a store
// in it several hundred times slower (measured: 1M-element gather 6.5 s looped, 16 ms flat).
uint flat_index() { return gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x; }
