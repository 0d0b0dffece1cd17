// The reducer (issue 4): shrinks a failing program while the same failure (Failure::signature) persists: keeps
// only what the failing node depends on, cuts producers into plain inputs, collapses devices, drops tracking and
// simplifies values. Reduced programs are typically one to three nodes.
#pragma once

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

// Removes values nobody needs (keeping `keep` and its ancestors, and the backward root) and renumbers.
Program compact_program(const Program& p, int keep);

}  // namespace crossfire::harness
