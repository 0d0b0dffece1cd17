// SPDX-License-Identifier: Apache-2.0
// A campaign (`crossfire run`): programs generated from a seed, checked by the oracles in supervised worker
// processes (`--jobs`; a crash or hang is a recorded failure with its program saved and reduced, and the campaign
// goes on), failures reduced and saved, reports (report.hpp) written atomically to DIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/oracles.hpp"
#include "crossfire/harness/report.hpp"

namespace crossfire::harness {

struct CampaignConfig {
  double seconds = 0;         // stop after this long (0: no time limit)
  uint64_t programs = 0;      // stop after this many programs (0: no count limit); one of the two must be set
  uint64_t seed = 1;
  std::vector<Device> devices;                  // devices to check on
  std::array<bool, kNumOracles> oracles{true, true, true, true};
  std::string out_dir;                          // empty: no reports
  double hang_seconds = 60;                     // a program running longer is a hang
  int progress = -1;                            // 1: live line, 0: periodic plain lines, -1: decide by isatty
  PlantedFault fault = PlantedFault::none;
  // Test aids for the supervisor: the worker aborts (crash) or spins (hang) on this program; -1: never.
  int64_t crash_at = -1, hang_at = -1;
  GenConfig gen = [] {
    GenConfig g;
    g.large_rate = 1.0 / 128;  // Note [Large programs]: a campaign reaches past tiny tensors by default
    return g;
  }();
  // Keep every `save_every`-th generated program in this directory (program-NNNNNN.program, as `crossfire generate`
  // writes it), before it is checked, so a crash still leaves it; empty: none.
  std::string save_programs;
  uint64_t save_every = 1;
  // `--shard I/N`: only programs i with i % N == I (Note [Shards]); `programs` still counts the whole campaign's.
  Shard shard;
  // `--expect FILE`: known differences (report.hpp's Expectation).
  std::vector<Expectation> expect;
  // `--jobs N`: workers side by side over disjoint programs of the shard (Note [Parallel jobs] in campaign.cpp).
  uint64_t jobs = 1;
  std::vector<std::string> command;  // the command line, for the reports' provenance

  // The first program of worker `lane`; the same worker's next program after program i; how many of programs
  // 0..programs-1 are the shard's.
  uint64_t lane_start(uint64_t lane) const { return shard.index + shard.count * lane; }
  uint64_t next_index(uint64_t i) const { return i + shard.count * jobs; }
  uint64_t programs_in_shard() const {
    return programs <= shard.index ? 0 : (programs - shard.index + shard.count - 1) / shard.count;
  }
};

// Note [Shards]
// A nightly campaign is split across a CI job matrix by program number: shard I of N checks programs I, I + N,
// I + 2N, ... of the seed. Programs are generated from (seed, number) alone, so the shards are disjoint, and for a
// program count P their union is exactly programs 0..P-1, the unsharded campaign's. With a time limit each shard
// checks as many of its own programs as it has time for, and N shards together check N times as many as one.
// `crossfire merge` adds the shards' reports up (report.hpp).

// The program a campaign checks as number `index` (deterministic: replaying a seed gives the same programs).
Program campaign_program(const CampaignConfig& c, uint64_t index);

// The extents the devices' backends declare (Backend::kernel_extents()), sorted, each once: what large programs
// draw their long axes from when GenConfig::extents is not given (campaign_program then asks the backends for every
// program; the command fills it in once).
std::vector<int64_t> kernel_extents_of(const std::vector<Device>& devices);

// That program as a file: comment lines naming the seed, the number and the devices it was generated for, then
// the program text (`crossfire replay` reads it back).
std::string program_file(const CampaignConfig& c, uint64_t index);
std::string program_file_name(uint64_t index);  // program-NNNNNN.program

// Checks that the output directory can be written (creating it and its missing parents); "" when it can, else why
// not.
std::string check_out_dir(const std::string& dir);

// Removes what an earlier campaign wrote to `dir` (report.json, junit.xml, report.html, failures/failure-*.program
// and their temp files), so no stale failure reads as this run's; files crossfire did not write stay. Returns the
// removed files' paths relative to `dir`.
std::vector<std::string> remove_earlier_run(const std::string& dir);

// Runs the campaign and returns its exit status (exit_status.hpp): kExitInternal when a final report could not be
// written, else kExitInterrupted when a signal stopped it, else kExitFailures when anything failed, else kExitClean.
// The reports in out_dir are written at the start, after each new failure, every 10 s (`"complete": false`) and at
// the end (`"complete": true`).
int run_campaign(const CampaignConfig& c);

// Writes `text` to `path` atomically (temp file in the same directory + rename).
using crossfire::harness::save_text_atomically;

}  // namespace crossfire::harness
