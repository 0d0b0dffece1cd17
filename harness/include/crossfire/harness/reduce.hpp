// SPDX-License-Identifier: Apache-2.0
// The reducer (issue 4): shrinks a failing program while the same failure (Failure::signature) persists: keeps
// only what the failing node depends on, cuts producers into plain inputs, collapses devices, drops tracking and
// simplifies values. Reduced programs are typically one to three nodes.
#pragma once

#include <functional>
#include <optional>

#include "crossfire/harness/oracles.hpp"

namespace crossfire::harness {

struct ReduceStats {
  int checks = 0;
  int values_before = 0, values_after = 0;
  bool out_of_time = false;  // CheckOptions::deadline passed: the result is the smallest program found by then
};

// `target` is the failure to preserve; a program that no longer shows it is never returned.
Program reduce_program(const Program& p, const CheckOptions& opts, const Failure& target, ReduceStats* stats = nullptr,
                       int max_checks = 400);

// What a reduction must preserve, for a failure that is not one oracle's finding (a crash, a hang: the campaign's
// supervisor reduces those with each candidate run in a child process).
struct ReduceGoal {
  int node = -1;               // the failing node; -1: not known (the smallest failing prefix is found first)
  bool whole_program = false;  // the backward root and tracking are part of the failure (gradients)
  // Whether a candidate still fails: the failing node (-1 when not known), or nullopt when it does not fail. May
  // raise ProgramError(over_budget) to end the reduction with the smallest program found so far.
  std::function<std::optional<int>(const Program&)> fails;
};
Program reduce_while(const Program& p, const CheckOptions& opts, const ReduceGoal& goal, ReduceStats* stats = nullptr,
                     int max_checks = 400);

// Removes values nobody needs (keeping `keep` and its ancestors, and the backward root) and renumbers; `keep_at`,
// when given, receives `keep`'s new number (-1 when keep is -1).
Program compact_program(const Program& p, int keep, int* keep_at = nullptr);

}  // namespace crossfire::harness
