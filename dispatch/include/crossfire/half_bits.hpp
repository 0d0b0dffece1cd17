// SPDX-License-Identifier: Apache-2.0
// f16 and bf16 bit patterns to and from f32, and an f64 rounded once to either, on the host: the scalar roundings
// every backend's host code and the CPU kernels share (Note [Half precision] in device.hpp). The f64 reference
// has its own (harness/reference), since it is what these are checked against.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "crossfire/device.hpp"

namespace crossfire {

// Note [Half conversions without branches]
// Eigen's half <-> float conversions use F16C only when the whole build targets it (-mf16c), and otherwise a
// branchy software path that kept f16 add at a seventh of f32's throughput. These are the same roundings written
// without branches (every case is computed and one is selected), so a loop over them vectorises on baseline
// x86-64: f16 and bf16 -> f32 are exact; f32 -> f16 and f32 -> bf16 round to nearest, ties to even, overflow to
// the infinity of the sign, and send a NaN to the quiet NaN of its sign (0x7e00, 0x7fc0), as Eigen does.
// tests/cpu/half_conversion_test.cpp checks them against Eigen on every half and on 2^24 spread floats.
inline float half_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = uint32_t(h & 0x7fffu) << 13;  // exponent and mantissa in f32's place
  const uint32_t exp = em & (0x1fu << 23);
  const float normal = std::bit_cast<float>(em + (112u << 23));              // rebias 15 -> 127
  const float special = std::bit_cast<float>(em + (224u << 23));             // inf and NaN: exponent 255
  const float sub = std::bit_cast<float>(em + (113u << 23)) - 0x1p-14f;      // zero and subnormals, exactly
  const float r = exp == (0x1fu << 23) ? special : exp == 0 ? sub : normal;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | sign);
}
inline uint16_t f32_to_half_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  const uint32_t big = u > 0x7f800000u ? 0x7e00u : 0x7c00u;                 // NaN, or inf and |x| >= 2^16
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + 0.5f) - 0x3f000000u;  // the FPU rounds
  const uint32_t odd = (u >> 13) & 1u;
  const uint32_t normal = (u - (112u << 23) + 0xfffu + odd) >> 13;          // a carry may reach inf: correct
  const uint32_t r = u >= 0x47800000u ? big : u < (113u << 23) ? sub : normal;
  return uint16_t(r | (sign >> 16));
}
inline float bf16_bits_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
inline uint16_t f32_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// f64 -> f32 rounded to odd: the f32 nearest toward zero, with its last bit set when that was inexact. Rounding
// that to f16 or bf16 (to nearest) then gives the f64 value rounded to nearest directly: an intermediate with at
// least two more bits than the target, rounded to odd, cannot create a false tie (Boldo and Melquiond 2008). Plain
// f64 -> f32 -> bf16 can: 2^24 + 2^16 + 1 becomes 2^24 + 2^16, a tie, then 2^24 instead of 2^24 + 2^17.
inline float f64_to_f32_odd(double v) {
  if (v != v || std::fabs(v) == std::numeric_limits<double>::infinity()) return float(v);
  if (std::fabs(v) > double(std::numeric_limits<float>::max()))
    return std::copysign(std::numeric_limits<float>::max(), float(v));  // past it: both halves overflow anyway
  float f = float(v);
  if (double(f) == v) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// v rounded once to nearest (ties to even) as f16 or bf16 bits: through an f32 rounded to odd, which cannot create
// a false tie (a rounding through the nearest f32 could round twice).
inline uint16_t half_bits_of(double v, DType dt) {
  const float f = f64_to_f32_odd(v);
  return dt == DType::bf16 ? f32_to_bf16_bits(f) : f32_to_half_bits(f);
}

}  // namespace crossfire
