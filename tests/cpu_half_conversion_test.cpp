// SPDX-License-Identifier: Apache-2.0
// Note [Half conversions without branches] (kernels/cpu/kernel_support.hpp): the CPU backend's own f16/bf16 <-> f32
// conversions against Eigen's (an independent implementation of the same IEEE roundings), on every half and on
// every f32 bit pattern whose rounding could go wrong: all low bits below and at the half's last place, with the
// last place odd and even and a carry into the exponent, for every exponent and sign, and every f32 that becomes an
// f16 subnormal. A NaN must become a NaN of the same sign (Eigen's and ours: the quiet NaN 0x7e00 / 0x7fc0).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

uint16_t eigen_bits(float x, bool bf) {
  return bf ? std::bit_cast<uint16_t>(Eigen::bfloat16(x)) : std::bit_cast<uint16_t>(Eigen::half(x));
}
uint16_t ours(float x, bool bf) { return bf ? f32_to_bf16_bits(x) : f32_to_half_bits(x); }

TEST(HalfConversion, EveryHalfWidensExactly) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = uint16_t(b);
    const float want16 = float(std::bit_cast<Eigen::half>(h)), got16 = half_bits_to_f32(h);
    const float want_bf = float(std::bit_cast<Eigen::bfloat16>(h)), got_bf = bf16_bits_to_f32(h);
    if (std::isnan(want16)) {
      EXPECT_TRUE(std::isnan(got16) && std::signbit(got16) == std::signbit(want16)) << std::hex << b;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got16), std::bit_cast<uint32_t>(want16)) << "f16 0x" << std::hex << b;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got_bf), std::bit_cast<uint32_t>(want_bf)) << "bf16 0x" << std::hex << b;
  }
}

TEST(HalfConversion, NarrowingRoundsToNearestEvenLikeEigen) {
  int64_t compared = 0;
  for (const bool bf : {false, true}) {
    const int low_bits = bf ? 16 : 13;  // the bits below the half's last place
    for (uint32_t sign = 0; sign < 2; ++sign) {
      for (uint32_t exp = 0; exp < 256; ++exp) {
        // The mantissa bits above them: zero, the last place set, and all ones (a carry into the exponent).
        const uint32_t top = 0x7fffffu >> low_bits;
        for (const uint32_t hi : {0u, 1u, top - 1, top}) {
          for (uint32_t lo = 0; lo < (1u << low_bits); ++lo) {
            const uint32_t u = (sign << 31) | (exp << 23) | (hi << low_bits) | lo;
            const float x = std::bit_cast<float>(u);
            const uint16_t want = eigen_bits(x, bf), got = ours(x, bf);
            if (std::isnan(x))
              ASSERT_TRUE((got & 0x7fff) > (bf ? 0x7f80 : 0x7c00) && (got >> 15) == sign) << std::hex << u;
            else
              ASSERT_EQ(got, want) << (bf ? "bf16" : "f16") << " of f32 bits 0x" << std::hex << u;
            ++compared;
          }
        }
      }
    }
  }
  // Every positive f32 that rounds to an f16 subnormal or to the smallest normal (exponents 102..112: the
  // rounding position moves with the exponent there), all 2^23 mantissas.
  for (uint32_t u = 102u << 23; u < 113u << 23; ++u) {
    const float x = std::bit_cast<float>(u);
    ASSERT_EQ(f32_to_half_bits(x), eigen_bits(x, false)) << "f16 of f32 bits 0x" << std::hex << u;
    ASSERT_EQ(f32_to_half_bits(-x), eigen_bits(-x, false)) << "f16 of f32 bits 0x" << std::hex << u;
    compared += 2;
  }
  EXPECT_GT(compared, 100'000'000);
}

// The block conversions (vectorised where the CPU has AVX2 and F16C) give the scalar functions' results, element
// for element, at every length (the vector body and the scalar tail).
TEST(HalfConversion, BlocksAgreeWithTheScalarFunctions) {
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t b = 0; b <= 0xffff; ++b) halves[b] = uint16_t(b);
  std::vector<float> wide(halves.size());
  widen_block(reinterpret_cast<const f16*>(halves.data()), wide.data(), int64_t(halves.size()));
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float want = half_bits_to_f32(uint16_t(b));
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(wide[b]) && std::signbit(wide[b]) == std::signbit(want));
    else ASSERT_EQ(std::bit_cast<uint32_t>(wide[b]), std::bit_cast<uint32_t>(want)) << std::hex << b;
  }
  widen_block(reinterpret_cast<const bf16*>(halves.data()), wide.data(), int64_t(halves.size()));
  for (uint32_t b = 0; b <= 0xffff; ++b)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[b]), std::bit_cast<uint32_t>(bf16_bits_to_f32(uint16_t(b))));

  // f32 values whose rounding matters: the low bits of every exponent around each half's last place, and NaNs.
  std::vector<float> xs;
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 0; exp < 256; ++exp)
      for (uint32_t lo = 0; lo < (1u << 17); lo += 7)
        xs.push_back(std::bit_cast<float>((sign << 31) | (exp << 23) | (lo * 37u & 0x7fffffu)));
  std::vector<uint16_t> got(xs.size());
  for (const bool bf : {false, true}) {
    for (const int64_t len : {int64_t(xs.size()), int64_t(13), int64_t(8), int64_t(7)}) {
      if (bf) narrow_block(xs.data(), reinterpret_cast<bf16*>(got.data()), len);
      else narrow_block(xs.data(), reinterpret_cast<f16*>(got.data()), len);
      for (int64_t i = 0; i < len; ++i) {
        const uint16_t want = bf ? f32_to_bf16_bits(xs[size_t(i)]) : f32_to_half_bits(xs[size_t(i)]);
        if (std::isnan(xs[size_t(i)]))
          ASSERT_TRUE((got[size_t(i)] & 0x7fff) > (bf ? 0x7f80 : 0x7c00) && (got[size_t(i)] >> 15) == (want >> 15));
        else
          ASSERT_EQ(got[size_t(i)], want) << (bf ? "bf16" : "f16") << " of f32 bits 0x" << std::hex
                                          << std::bit_cast<uint32_t>(xs[size_t(i)]);
      }
    }
  }
}

}  // namespace
}  // namespace crossfire::cpu
