// SPDX-License-Identifier: Apache-2.0
// A campaign's result, and the one module that renders it and reads it back. The campaign fills a CampaignReport
// in as it runs and writes it to its --out directory as report.json (for tools; the schema is
// docs/report-format.md), junit.xml (for CI test-result tools) and report.html (for a person triaging); `crossfire
// merge` reads shards' report.json back, adds them up and renders the sum through the same functions.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "crossfire/harness/oracles.hpp"

namespace crossfire::harness {

// report.json's `schema`: bumped whenever a key changes meaning or goes away (a new key does not bump it).
inline constexpr std::string_view kReportSchema = "crossfire-report/1";

// The `oracle` of a failure that no oracle found: a crash or hang of the worker (the supervisor saw it), and the
// harness's own error on a program (it could not check it).
inline constexpr std::string_view kSupervisorFinding = "supervisor";
inline constexpr std::string_view kHarnessFinding = "harness";

// Which of the disjoint slices of a seed's programs a campaign runs: program i belongs to shard i % count.
// At most kMaxShards slices (a merge lists the missing ones, so the count must stay a list a page can hold).
inline constexpr uint64_t kMaxShards = 65536;
struct Shard {
  uint64_t index = 0, count = 1;
  bool operator==(const Shard&) const = default;
  std::string str() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// A known difference (`--expect FILE`, docs/report-format.md): a failure on a backend or device, of an op and an
// oracle, whose signature matches a pattern, is expected for a reason. Matching failures are reported as expected
// and do not fail the run; an expectation that matched nothing in a run is reported too.
struct Expectation {
  std::string where = "*";   // a backend ("vulkan"), a device ("cpu:1") or "*"
  std::string op = "*";      // an op name or "*"
  std::string oracle = "*";  // an oracle name (or supervisor, harness) or "*"
  std::string pattern = "*";  // over the failure's signature (oracle|op|kind): `*` any run, `?` one character
  std::string reason;
  std::string source;        // FILE:LINE it came from
  uint64_t matched = 0;      // occurrences it matched in the run (a report's, not the file's)
  bool operator==(const Expectation& o) const {
    return where == o.where && op == o.op && oracle == o.oracle && pattern == o.pattern && reason == o.reason;
  }
};
// Whether failure `info` (its oracle, op, device and signature) is what `e` expects.
bool expectation_matches(const Expectation& e, const nlohmann::json& info);
// Reads an expect file: ReportError naming FILE:LINE for a line that is not an expectation.
std::vector<Expectation> read_expect_file(const std::string& path);

// What a campaign was asked to do: what `merge` requires to be the same in every shard (all but `shard`).
struct ReportConfig {
  uint64_t seed = 1;
  std::vector<std::string> devices;
  std::array<bool, kNumOracles> oracles{};
  double seconds_limit = 0;    // 0: none
  uint64_t programs_limit = 0;  // 0: none
  double hang_seconds = 60;
  Shard shard;
  std::string planted_fault = "none";
  nlohmann::json generator = nlohmann::json::object();  // max_nodes, mismatches, ops, large programs' settings
  std::vector<Expectation> expect;                      // --expect (the matched counts are in the report's copy)
};

// Where, when and by what the run was made.
struct Provenance {
  std::string version, commit;       // crossfire's (commit "" when built outside git)
  std::string started;               // UTC, ISO 8601: 2026-12-02T15:30:00Z
  std::string host;
  std::vector<std::string> command;  // the command line, one element per argument
  std::vector<std::string> plugins;  // the plug-ins loaded, by path as given (plugin.hpp), in load order
};

// This build's version and commit, the time now, this host, and `command`.
Provenance make_provenance(std::vector<std::string> command);

struct BackendStatus {
  std::string name;
  bool available = false;
  std::string reason;                // why not, when unavailable
  std::vector<std::string> devices;  // the campaign's devices of this backend
};

struct FailureRecord {
  // oracle, op, device, node, what, detail, signature, program, reduced, reduced_nodes; `expected` (the reason)
  // when an expectation matched it
  nlohmann::json info;
  uint64_t program_index = 0;  // the first program that showed it
  uint64_t occurrences = 1;
  std::string file;           // its saved program, relative to the report's directory
  double seconds = 0;         // time spent on the first program that showed it (checking and reducing)
  std::string oracle() const { return info.value("oracle", ""); }
  std::string signature() const { return info.value("signature", ""); }
  bool expected() const { return info.contains("expected"); }
};

// One shard's run, as a merged report lists them.
struct ShardRun {
  Shard shard;
  std::string source;  // the directory its report.json was read from
  std::string host, started;
  double seconds = 0;
  uint64_t programs = 0;
  bool complete = false, interrupted = false;
};

// Per op name and device: node runs checked and unsupported (the agreement oracle's coverage).
using Coverage = std::map<std::string, std::map<std::string, std::array<uint64_t, 2>>>;

struct CampaignReport {
  Provenance provenance;
  ReportConfig config;
  std::vector<BackendStatus> backends;
  uint64_t jobs = 1;         // workers side by side (--jobs; a merge: the shards' added up)
  bool complete = false;     // false: written while the campaign runs (it may yet be killed)
  bool interrupted = false;  // a signal stopped it
  double seconds = 0;        // wall time (a merged report: the longest shard's)
  uint64_t programs = 0, nodes = 0, crashes = 0, hangs = 0;
  uint64_t harness_errors = 0;  // programs the harness itself could not check (saved with oracle "harness")
  std::array<OracleCounts, kNumOracles> counts{};
  Coverage coverage;
  // Per op name and device: the programs in which a check of that op failed on that device (a disagreement
  // between two devices counts for both). With `coverage`, the per-op scores a backend's author reads first.
  std::map<std::string, std::map<std::string, uint64_t>> failing;
  std::map<std::string, std::map<std::string, uint64_t>> expected_failing;  // of those, the expected ones
  // One per distinct signature, ordered by the first program that showed it (then by signature): the same order
  // however many workers checked the programs, and in whichever order they finished (add_failure keeps it).
  std::vector<FailureRecord> failures;
  std::vector<ShardRun> shards;         // a merged report: the shards it was made of

  uint64_t total_failures() const;  // every occurrence of every distinct failure
  uint64_t unexpected_failures() const;  // those no expectation matched: what fails a run
  // The record of this signature, or nullptr.
  FailureRecord* find(const std::string& signature);
  // Counts one occurrence of a failure of `op` on `device` ("cpu:0", or "cpu:0 vs vulkan:0") in `failing` (and, when
  // it was expected, in `expected_failing`).
  void count_failing(const std::string& op, const std::string& device, bool expected = false);
  // Marks `info` expected when one of config.expect matches it (the first), counting the match; whether one did.
  bool apply_expectations(nlohmann::json& info);
  // Inserts a new record where the order above puts it.
  FailureRecord& add_failure(FailureRecord f);
  // Puts `failures` back in the order above (after a record's first program changed).
  void sort_failures();
};

// Where a failure's program is saved, relative to the report's directory:
// failures/failure-<first program, 6 digits or more>-<oracle>-<op>-<8 hex digits of the signature's hash>.program.
// A function of the failure alone, so a campaign names it the same whatever the number of workers, and the names
// of a sharded campaign's failures do not clash when merged.
std::string failure_file_name(uint64_t program_index, const std::string& oracle, const std::string& op,
                              const std::string& signature);

// The command that checks a saved failure again: `crossfire replay DIR/FILE --backends ... --oracles ...`.
std::string replay_command(const CampaignReport& r, const FailureRecord& f, const std::string& dir);

nlohmann::json report_json(const CampaignReport& r, const std::string& dir);
std::string junit_xml(const CampaignReport& r, const std::string& dir);
std::string report_html(const CampaignReport& r, const std::string& dir);

// Writes junit.xml, report.html and report.json (last: whoever sees a report.json sees the other two of the same
// write or a later one) to `dir`, each on its own, so one that cannot be written does not keep the others from
// being tried. Returns one line per report that could not be written.
std::vector<std::string> write_reports(const std::string& dir, const CampaignReport& r);

// A report.json that cannot be read back as a campaign's report (truncated, edited by hand, of another schema).
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads DIR/report.json back; ReportError naming the file and what is wrong.
CampaignReport read_report(const std::string& dir);

// `crossfire merge`: adds up the reports of shards of one campaign (same crossfire version and configuration but
// for the shard; no shard twice) into one, copying each distinct failure's saved program to `out_dir`/failures/.
// Counts add up; failures are deduplicated by signature (occurrences add up; the record of the earliest program
// that showed it is kept, as in a campaign of one shard).
// ReportError, naming the file, for anything that would make the total wrong.
CampaignReport merge_reports(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace crossfire::harness
