// SPDX-License-Identifier: Apache-2.0
// What the oracles (oracles.cpp) and the gradient oracle (gradients.cpp) share about a program's graph and its f64
// values. Internal to the harness library.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "crossfire/harness/oracles.hpp"

namespace crossfire::harness::internal {

// One f64 value per program value (nullopt: not evaluated, or not evaluable).
using Evaluation = std::vector<std::optional<reference::RefTensor>>;

// A node's call with its tensor arguments taken from `vals`; *ok becomes false when one is missing there.
reference::RefCall ref_call_of(const NodeDef& n, const Evaluation& vals, bool* ok);
// Note [Where a piecewise op's derivative jumps]: whether the node's inputs sit on its op's kink.
bool sits_on_kink(const NodeDef& n, const Evaluation& vals);
// The values `root` depends on (itself included); all false for root < 0.
std::vector<bool> ancestors_of(const Program& p, int root);
// Whether value v did not run on a device because something it depends on was unsupported there (a kernel or a
// dtype the backend lacks): counted as skipped_unsupported, not as a skip for another reason.
bool behind_unsupported(const Program& p, const RunResult& run, int v);
// The values that depend on `from` (itself included).
std::vector<bool> descendants_of(const Program& p, int from);

// The gradient oracle (gradients.cpp), run by check_program on the runs the other oracles share. `fail` records a
// failure (node, device, what, detail) and counts it.
using FailFn = std::function<void(int node, std::string device, std::string what, std::string detail)>;
void check_gradients(const Program& p, const CheckOptions& o, const std::vector<Device>& devices,
                     std::vector<RunResult>& runs, OracleCounts& counts, const FailFn& fail);

}  // namespace crossfire::harness::internal
