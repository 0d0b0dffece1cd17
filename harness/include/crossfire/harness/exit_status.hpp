// SPDX-License-Identifier: Apache-2.0
// The `crossfire` command's exit statuses: one definition for the command, its tests and the docs
// (docs/cli.md). A CI job reads them, so a run that checked nothing, was cut short or could not run its program
// never exits 0.
#pragma once

namespace crossfire::harness {

enum ExitStatus : int {
  kExitClean = 0,        // the run checked what it was asked to, and nothing failed
  kExitFailures = 1,     // at least one failure (an oracle's finding, a crash or a hang of the code under test)
  kExitUsage = 2,        // bad options or input: an unknown backend, a malformed or unrunnable program, a bad --out
  kExitInterrupted = 3,  // stopped by SIGINT, SIGTERM or SIGHUP before it finished (reports are still written)
  kExitInternal = 4,     // the harness itself failed (out of memory, a report it could not write, a budget it ran out of)
};

}  // namespace crossfire::harness
