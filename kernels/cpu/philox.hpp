// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC 2011), and the way
// crossfire's rand/randn turn its blocks into a stream. Header-only, constexpr and dependency-free, so that any
// backend's host code (or a test) can compute the exact words the device must produce.
#pragma once

#include <array>
#include <cstdint>

namespace crossfire::philox {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

inline constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3) - 1)
inline constexpr uint32_t kW1 = 0xBB67AE85u;

// One Philox S-box/P-box round: two 32x32->64 multiplies, the high halves mixed with the other words and the key.
constexpr Counter single_round(const Counter& c, const Key& k) {
  const uint64_t p0 = uint64_t(kM0) * c[0];
  const uint64_t p1 = uint64_t(kM1) * c[2];
  return {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
}

// Ten rounds, the key bumped by (W0, W1) between rounds (Random123's philox4x32_R with R = 10).
constexpr Counter philox4x32_10(Counter c, Key k) {
  c = single_round(c, k);
  for (int r = 1; r < 10; ++r) {
    k[0] += kW0;
    k[1] += kW1;
    c = single_round(c, k);
  }
  return c;
}

// crossfire's stream (op table, `rand`): word i of the stream for `seed` is word i % 4 of the block for counter
// (lo32(i/4), hi32(i/4), 0, 0) and key (lo32(seed), hi32(seed)).
constexpr Key key_of(int64_t seed) {
  const uint64_t s = uint64_t(seed);
  return {uint32_t(s), uint32_t(s >> 32)};
}
constexpr Counter stream_block(const Key& key, uint64_t block_index) {
  return philox4x32_10({uint32_t(block_index), uint32_t(block_index >> 32), 0, 0}, key);
}

// rand's value for one word: the top 24 bits as a multiple of 2^-24, exact in f32, in [0, 1).
constexpr float uniform_f32(uint32_t word) { return float(word >> 8) * 0x1p-24f; }

// Random123's published known answers (tests/kat_vectors), checked at compile time wherever this header is used.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) == Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
static_assert(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
              Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});

}  // namespace crossfire::philox
