// SPDX-License-Identifier: Apache-2.0
// Hostile calls: one op call with arbitrary arguments, built from choices. fuzz/fuzz_call.cpp feeds them to
// dispatch from libFuzzer's bytes; tests/harness/fast_path_test.cpp replays them from a seeded PRNG to check that
// dispatch's specialised path and its generic path agree (Note [Specialised fast path] in dispatch.cpp).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "crossfire/dispatch.hpp"
#include "crossfire/harness/generate.hpp"

namespace crossfire::harness {

// A call and the storage its argument views point into. Made only by make_hostile_call() and never moved (it
// lives behind a unique_ptr), so the views stay valid for its whole life.
struct HostileCall {
  OpId id = 0;
  ArgPack pack;
  std::vector<Tensor> tensors;                  // every tensor argument and list element
  std::vector<std::vector<Tensor>> lists;       // one per parameter
  std::vector<std::vector<int64_t>> int_lists;  // one per parameter
  std::vector<std::vector<uint8_t>> bytes;      // one per parameter
  std::vector<Tensor> leaves;                   // every requires_grad leaf made, behind a tracked result or not

  HostileCall() = default;
  HostileCall(const HostileCall&) = delete;
  HostileCall& operator=(const HostileCall&) = delete;
};

// An op from the table and a pack for it: the op's roles almost always (sometimes a wrong role or a wrong count);
// tensors of any dtype, rank 0..5 and dims 0..4 (or empty, with dims up to 2^30 beside the 0) on any of `devices`,
// f32 ones now and then tracked (a leaf, or the result of `neg` on a leaf, which carries a node) or carrying
// autodiff state that tracks nothing, sometimes the previous tensor again; attributes with huge, negative and
// out-of-range values; lists empty or long; devices past the last one. Tensors are made with from_bytes, and a
// tracked result with `neg` on its device (the only kernel that building a call runs). `devices` must not be empty.
std::unique_ptr<HostileCall> make_hostile_call(ChoiceSource& c, std::span<const Device> devices);

}  // namespace crossfire::harness
