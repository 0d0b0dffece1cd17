// SPDX-License-Identifier: Apache-2.0
// `crossfire replay FILE --values OUT.json`: every value of a program on every device, with what the agreement
// oracle judged it by, so that an external oracle (numpy, another framework) can re-check a run from the file
// alone. The schema is docs/program-format.md's "Values file".
#pragma once

#include <string>

#include "crossfire/harness/oracles.hpp"

namespace crossfire::harness {

// Runs `p` on each of opts.devices (every device of the program mapped to it, as the agreement oracle does) and
// returns the values file as JSON text. Raises ProgramError as run_program() does.
std::string values_json(const Program& p, const CheckOptions& opts);

}  // namespace crossfire::harness
