// SPDX-License-Identifier: Apache-2.0
// The program generator (issue 4): builds valid programs constructively from the op table (OpFamily says how
// argument shapes relate, ParamDef says which dtypes, value domains and gradients each tensor parameter takes).
// Every decision is one call to a ChoiceSource, so one generator core serves libFuzzer (bytes), RapidCheck
// (shrinkable picks) and the campaign (a seeded PRNG). There is no rejection loop: each choice is drawn from a set
// that is valid by construction, and a source that runs out of choices answers the lowest one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "crossfire/harness/program.hpp"

namespace crossfire::harness {

// Where the generator's decisions come from.
class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  // A value in [lo, hi] (lo <= hi). Must terminate and never throw for lo <= hi.
  virtual int64_t range(int64_t lo, int64_t hi) = 0;
  bool coin(int num, int den) { return range(0, den - 1) < num; }
};

// libFuzzer's front end: choices taken from the start of a byte string, like FuzzedDataProvider; when the bytes
// run out every answer is `lo`, so any input, even an empty one, yields a valid program.
class ByteChoices final : public ChoiceSource {
 public:
  explicit ByteChoices(std::span<const uint8_t> data) : data_(data) {}
  int64_t range(int64_t lo, int64_t hi) override;
  size_t remaining() const { return data_.size(); }

 private:
  std::span<const uint8_t> data_;
};

// The campaign's front end: a seeded SplitMix64 stream.
class PrngChoices final : public ChoiceSource {
 public:
  explicit PrngChoices(uint64_t seed) : state_(seed) {}
  int64_t range(int64_t lo, int64_t hi) override;
  uint64_t next();

 private:
  uint64_t state_;
};

struct GenConfig {
  int min_nodes = 1;
  int max_nodes = 30;
  int max_rank = 4;
  std::vector<Device> devices;   // devices the program may use; the first is the default home
  bool mismatches = true;        // allow programs with deliberately mismatched devices
  bool tracked = true;           // allow tracked inputs
  bool backward = true;          // allow a `backward` line
  // Some untracked inputs hold specials: 0, -0, +-1, 1e30, -1e-30, +-inf, NaN, and the stressing values of large
  // programs at ordinary sizes: huge (|x| in [2^120, 2^128), mostly positive), denormals, and an element that
  // cancels the one before it (x, -x).
  bool special_values = true;
  std::vector<OpId> ops;         // restrict node ops (empty: every op of the table)
  // Note [Large programs]: the share of programs that are one long-axis node (softmax, a reduction, conv2d or
  // matmul over many terms) on values chosen to stress f32 (huge, denormal, cancelling). 0 (the fuzz targets and
  // property tests: no choice is spent on it) to 1. Their lengths come from `extents` (what the devices' kernels
  // branch on, Backend::kernel_extents(), with their neighbours e-1, e, e+1) or are long axes past 2^16, and no
  // tensor of theirs has more than `large_elements` elements.
  double large_rate = 0;
  std::vector<int64_t> extents;
  int64_t large_elements = int64_t(1) << 17;
};

Program generate_program(ChoiceSource& choices, const GenConfig& config);

// Note [Draws that name what they pick]
// A generated program is a function of its seed, and a fuzz target's call a function of its input bytes. Were an op
// drawn by its index in kOpTable, adding one op would renumber every later op and change what every seed and every
// corpus file makes. So ops and dtypes are drawn by name, by rendezvous hashing (Thaler and Ravishankar, 1998): one
// draw w in [0, 65535] (two bytes of a fuzz input), every candidate scored by a fixed hash of (its name, w), the
// highest score wins. Each candidate wins 1/N of the draws on average; adding one changes only the draws it wins
// (1 in N+1), and every other draw picks what it picked before, with the same number of choices spent, so the rest
// of the program is unchanged too. The hash is FNV-1a of the name mixed with w by SplitMix64's finaliser: the same
// on every platform and in every build.
// `among`: the candidates (empty: every op of the table).
OpId draw_op(ChoiceSource& choices, std::span<const OpId> among = {});
// One of the dtypes in `among` (f32 when it is empty).
DType draw_dtype(ChoiceSource& choices, DTypeSet among);

}  // namespace crossfire::harness
