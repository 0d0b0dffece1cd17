// SPDX-License-Identifier: Apache-2.0
// The `crossfire` command: backends, run (a campaign), replay, reduce. See docs/program-format.md for programs.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/harness/campaign.hpp"
#include "crossfire/harness/exit_status.hpp"
#include "crossfire/harness/reduce.hpp"
#include "crossfire/harness/report.hpp"
#include "crossfire/harness/values.hpp"
#include "crossfire/plugin.hpp"
#include "crossfire/version.hpp"

using namespace crossfire;
using namespace crossfire::harness;

namespace {

// The failure a program file was saved for: its first line, `# oracle|op|kind` (Failure::signature()), as the
// campaign and `crossfire reduce` write it; nullopt for a file without one.
std::optional<std::string> recorded_signature(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line) || line.size() > 4096 || line.rfind("# ", 0) != 0) return std::nullopt;
  line.erase(0, 2);
  if (std::count(line.begin(), line.end(), '|') < 2) return std::nullopt;
  return line;
}

// What replay concludes: whether the failure the file was saved for is still there, rather than any failure.
std::string replay_verdict(const ProgramReport& r, const std::optional<std::string>& recorded) {
  if (r.failures.empty()) return "no failure reproduces";
  if (!recorded) return "the failure reproduces";
  for (const Failure& f : r.failures)
    if (f.signature() == *recorded) return fmt::format("the recorded failure reproduces ({})", printable(*recorded, 256));
  return fmt::format("the recorded failure ({}) does not reproduce; {} other failure{} above", printable(*recorded, 256),
                     r.failures.size(), r.failures.size() == 1 ? "" : "s");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t c = s.find(',', start);
    std::string item = s.substr(start, c == std::string::npos ? std::string::npos : c - start);
    if (!item.empty()) out.push_back(item);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

// A bad option value: main prints it as one line and exits kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The names in a comma-separated list option. A list given explicitly must name something: `--oracles ,` would
// otherwise run a campaign that checks nothing, and its exit status 0 would read as clean. Not given: {} (all).
std::vector<std::string> option_list(const char* option, const CLI::Option* opt, const std::string& value,
                                     const char* what) {
  std::vector<std::string> items = split(value);
  if (opt->count() > 0 && items.empty())
    throw UsageError(fmt::format("{}: `{}` names no {} (say `all` for every one)", option, printable(value), what));
  return items;
}

// A count or seed: decimal digits only. CLI11 would read `-1` into a uint64_t as 2^64-1 (a campaign without end,
// or a seed nobody asked for), so the text is parsed here; std::from_chars rejects signs and overflow.
uint64_t parse_unsigned(const char* option, const std::string& text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError(
        fmt::format("{}: `{}` is not a whole number from 0 to 18446744073709551615", option, printable(text)));
  return v;
}

// A duration: finite and above zero. nan compares false with everything, so a campaign given it never stops, and
// a hang limit of nan or inf never fires; zero or less means no time at all.
double parse_seconds(const char* option, const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v <= 0)
    throw UsageError(fmt::format("{}: `{}` is not a number of seconds above 0", option, printable(text)));
  return v;
}

// `--shard I/N`: 0 <= I < N, both whole numbers.
Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format("--shard: `{}` {} (want I/N with 0 <= I < N, e.g. 0/4)", printable(text), why));
  };
  if (slash == std::string::npos) throw bad("is not I/N");
  uint64_t i = 0, n = 0;
  try {
    i = parse_unsigned("--shard", text.substr(0, slash));
    n = parse_unsigned("--shard", text.substr(slash + 1));
  } catch (const UsageError&) {
    throw bad("is not two whole numbers");
  }
  if (n == 0) throw bad("splits the campaign into 0 shards");
  if (n > kMaxShards) throw bad(fmt::format("splits the campaign into more than {} shards", kMaxShards));
  if (i >= n) throw bad(fmt::format("names shard {} of {}, but shards are numbered 0 to {}", i, n, n - 1));
  return {i, n};
}

// parse_planted_fault reads every unknown name as `none`, which would silently plant nothing: a test that meant to
// prove an oracle catches a fault would pass without one.
PlantedFault planted_fault(const std::string& name) {
  if (name.empty() || name == "none") return PlantedFault::none;
  PlantedFault f = parse_planted_fault(name);
  if (f == PlantedFault::none)
    throw UsageError(fmt::format("--plant-fault: unknown fault `{}` (docs/program-format.md, \"Planted faults\", lists "
                                 "them)", printable(name)));
  return f;
}

// The ops a campaign's programs may use (`--ops`); empty (every op of the table) when not given or `all`.
std::vector<OpId> select_ops(const std::vector<std::string>& items) {
  std::vector<OpId> out;
  if (items.empty() || items == std::vector<std::string>{"all"}) return out;
  for (const std::string& item : items) {
    const int id = find_op(item);
    if (id < 0) {
      std::string names;
      for (const OpDef& op : kOpTable) names += (names.empty() ? "" : ",") + std::string(op.name);
      throw UsageError(fmt::format("--ops: no op is named `{}` (the ops: {})", printable(item), names));
    }
    if (std::find(out.begin(), out.end(), OpId(id)) == out.end()) out.push_back(OpId(id));
  }
  return out;
}

// The plug-ins of CROSSFIRE_PLUGINS, then those of --plugin (plugin.hpp). Raises PluginError on the first that fails.
void load_plugins(const std::vector<std::string>& from_options) {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("CROSSFIRE_PLUGINS")) paths = split_plugin_paths(env);
  paths.insert(paths.end(), from_options.begin(), from_options.end());
  for (const std::string& p : paths) load_plugin(p);
}

// Devices of the named backends (or devices: "cpu:1"); every available device when the list is empty or `all`.
std::vector<Device> select_devices(const std::vector<std::string>& items) {
  std::vector<Device> all = available_devices();
  if (items.empty() || items == std::vector<std::string>{"all"}) return all;
  std::vector<Device> out;
  for (const std::string& item : items) {
    if (item.find(':') != std::string::npos) {
      Device d = Device::parse(item);
      backend_for(d);  // raises when it does not exist
      out.push_back(d);
      continue;
    }
    const std::optional<BackendKind> k = backend_kind_named(item);
    if (!k) throw UsageError(fmt::format("--backends: unknown backend `{}` (known: {})", printable(item), backend_names()));
    Backend& b = backend(*k);
    if (!b.available()) throw BackendUnavailable(*k, b.unavailable_reason());
    for (const Device& d : all)
      if (d.backend == *k) out.push_back(d);
  }
  return out;
}

std::array<bool, kNumOracles> select_oracles(const std::vector<std::string>& items) {
  std::array<bool, kNumOracles> on{};
  if (items.empty() || items == std::vector<std::string>{"all"}) return {true, true, true, true};
  for (const std::string& item : items) {
    auto k = parse_oracle(item);
    if (!k) throw UsageError(
          fmt::format("--oracles: unknown oracle `{}` (contract, agreement, gradients, bad_input)", printable(item)));
    on[size_t(*k)] = true;
  }
  return on;
}

// `backends --json`: every backend, available or not (with why), and its devices, for jobs that gate on them.
int cmd_backends_json() {
  nlohmann::json j = nlohmann::json::array();
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    nlohmann::json jb{{"name", backend_name(k)}, {"available", b.available()}, {"devices", nlohmann::json::array()}};
    if (!b.available()) jb["reason"] = b.unavailable_reason();
    for (int i = 0; b.available() && i < b.device_count(); ++i) {
      DeviceInfo info = b.device_info(i);
      jb["devices"].push_back({{"device", Device{k, uint8_t(i)}.str()}, {"type", info.type}, {"name", info.name},
                               {"driver", info.driver}});
    }
    j.push_back(jb);
  }
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

int cmd_backends() {
  std::printf("%-10s %-8s %-11s %-10s %s\n", "device", "backend", "available", "type", "name / reason");
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    if (!b.available()) {
      std::printf("%-10s %-8s %-11s %-10s %s\n", "-", std::string(backend_name(k)).c_str(), "no", "-",
                  b.unavailable_reason().c_str());
      continue;
    }
    for (int i = 0; i < b.device_count(); ++i) {
      DeviceInfo info = b.device_info(i);
      std::string name = info.name + (info.driver.empty() ? "" : " (" + info.driver + ")");
      std::printf("%-10s %-8s %-11s %-10s %s\n", Device{k, uint8_t(i)}.str().c_str(), std::string(backend_name(k)).c_str(),
                  "yes", info.type.c_str(), name.c_str());
    }
  }
  return 0;
}

// `crossfire merge DIR... --out OUT`: the shards' reports added up, written to OUT as a campaign's are.
int cmd_merge(const std::vector<std::string>& dirs, const std::string& out, std::vector<std::string> command) {
  if (std::string why = check_out_dir(out); !why.empty()) throw UsageError("--out: " + why);
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (std::filesystem::equivalent(d, out, ec))
      throw UsageError(fmt::format("--out {} is one of the shards' directories; merge into a new one", out));
  }
  remove_earlier_run(out);
  CampaignReport m;
  try {
    m = merge_reports(dirs, out);
  } catch (const ReportError& e) {
    throw UsageError(e.what());
  }
  m.provenance.command = std::move(command);
  for (const std::string& e : write_reports(out, m)) throw std::runtime_error(e);
  std::printf("merged %zu shard report%s: %llu programs, %llu failure%s (%zu distinct)%s\nreports: %s/report.json, "
              "junit.xml, report.html\n",
              dirs.size(), dirs.size() == 1 ? "" : "s", (unsigned long long)m.programs,
              (unsigned long long)m.total_failures(), m.total_failures() == 1 ? "" : "s", m.failures.size(),
              m.shards.size() < m.shards.front().shard.count
                  ? fmt::format("; {} of {} shards", m.shards.size(), m.shards.front().shard.count).c_str()
                  : "",
              out.c_str());
  // A shard interrupted, still running or missing leaves a record of less than the campaign: status 3, as for a
  // campaign cut short (docs/cli.md).
  const bool partial = m.interrupted || !m.complete || m.shards.size() < m.shards.front().shard.count;
  if (partial)
    std::fprintf(stderr, "crossfire: merge: the merged record is partial (a shard interrupted, incomplete or "
                         "missing; report.html lists them)\n");
  if (m.harness_errors > 0) return kExitInternal;
  if (partial) return kExitInterrupted;
  return m.unexpected_failures() == 0 ? kExitClean : kExitFailures;
}

void print_table(const ProgramReport& r) {
  std::printf("%-5s %-13s %-9s %-24s %s\n", "node", "op", "device", "status", "note");
  for (const NodeRow& row : r.table)
    std::printf("%%%-4d %-13s %-9s %-24s %s\n", row.id, row.op.c_str(), row.device.c_str(), row.status.c_str(),
                row.note.c_str());
}

void print_counts(const ProgramReport& r) {
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = r.counts[size_t(k)];
    std::printf("  %-10s checked %llu, failed %llu, skipped %llu unsupported + %llu other\n",
                std::string(oracle_name(k)).c_str(), (unsigned long long)n.checked, (unsigned long long)n.failed,
                (unsigned long long)n.skipped_unsupported, (unsigned long long)n.skipped_other);
  }
}

// The footer of every --help: the exit statuses a CI job reads (exit_status.hpp, docs/cli.md).
constexpr const char* kExitStatusHelp =
    "Exit status:\n"
    "  0  the run checked what it was asked to, and nothing failed\n"
    "  1  at least one failure (an oracle's finding, a crash or a hang of the code under test)\n"
    "  2  bad options or input (an unknown backend, a malformed program, an unusable --out)\n"
    "  3  interrupted by SIGINT, SIGTERM or SIGHUP before it finished (the reports are still written)\n"
    "  4  the harness itself failed (a report it could not write, out of memory)\n"
    "When more than one applies, the highest wins. See docs/cli.md.";

// `crossfire run`'s options as given. Numbers are kept as text and checked by campaign_config(), since CLI11 reads
// `-1` into an unsigned option as 2^64-1 and accepts nan and inf for a double.
struct RunArgs {
  std::string seconds, programs, seed = "1", hang_seconds = "60";
  std::string backends, oracles, out_dir, plant, save_programs, save_every = "1", ops, large_rate, shard, jobs;
  std::string expect;
  bool no_mismatch = false;
  int max_nodes = 30;
  int64_t crash_at = -1, hang_at = -1;
  CLI::Option *seconds_opt = nullptr, *programs_opt = nullptr, *backends_opt = nullptr, *oracles_opt = nullptr,
              *ops_opt = nullptr, *jobs_opt = nullptr, *shard_opt = nullptr;
};

// The options that decide which programs a seed gives: `run` and `generate` share them, so `generate` writes
// exactly the programs a campaign with the same options checks.
void add_program_options(CLI::App* cmd, RunArgs& o) {
  cmd->add_option("--seed", o.seed, "Seed of the campaign, 0..18446744073709551615 (the same seed gives the same "
                                    "programs; default 1)")->type_name("SEED");
  o.backends_opt = cmd->add_option("--backends", o.backends,
                                   "Backends or devices to check: cpu,vulkan,cuda or cpu:1 (default: all available)");
  cmd->add_option("--max-nodes", o.max_nodes, "Largest program (1..30 nodes)")->check(CLI::Range(1, 30));
  cmd->add_flag("--no-mismatch", o.no_mismatch, "Only programs whose devices all agree");
  o.ops_opt = cmd->add_option("--ops", o.ops, "Ops the programs' nodes may use, e.g. softmax,conv2d (default: all)");
  cmd->add_option("--large-rate", o.large_rate, "Share of programs that are one long-axis node on stressing values, "
                                                "0..1 (default 0.0078125: one in 128)")->type_name("F");
}

void add_run_options(CLI::App* cmd, RunArgs& o) {
  o.seconds_opt = cmd->add_option("--seconds", o.seconds, "Stop after this many seconds (default: 10, when --programs "
                                                          "is not given)")->type_name("SECONDS");
  o.programs_opt = cmd->add_option("--programs", o.programs, "Stop after this many programs")->type_name("N");
  o.seconds_opt->excludes(o.programs_opt);
  add_program_options(cmd, o);
  o.oracles_opt = cmd->add_option("--oracles", o.oracles, "Oracles: contract,agreement,gradients,bad_input (default: all)");
  cmd->add_option("--out", o.out_dir, "Directory for reports and failing programs (created with its parents; an "
                                      "earlier run's reports and failures there are removed)");
  cmd->add_option("--expect", o.expect, "Known differences: failures this file lists (docs/report-format.md) are "
                                        "reported as expected and do not fail the run")->type_name("FILE");
  o.jobs_opt = cmd->add_option("--jobs", o.jobs,
                               "Workers side by side, each over its own programs of the seed (default: the machine's "
                               "cores; with --programs, at most one per program)")
                   ->type_name("N");
  o.shard_opt = cmd->add_option("--shard", o.shard,
                                "Run shard I of N: programs I, I+N, I+2N, ... of the seed (merge the shards' reports "
                                "with `crossfire merge`)")
                    ->type_name("I/N");
  cmd->add_option("--hang-seconds", o.hang_seconds, "A program running longer than this is a hang (default 60)")
      ->type_name("SECONDS");
  cmd->add_option("--save-programs", o.save_programs, "Keep the generated programs in this directory "
                                                      "(program-NNNNNN.program, as `crossfire generate` writes them)")
      ->type_name("DIR");
  cmd->add_option("--save-every", o.save_every, "With --save-programs: keep one program in N (default 1: every one)")
      ->type_name("N");
  cmd->add_option("--plant-fault", o.plant, "Developer aid: plant a fault in the oracles' observations")->group("");
  cmd->add_option("--crash-at", o.crash_at, "Test aid: the worker crashes on this program")->group("");
  cmd->add_option("--hang-at", o.hang_at, "Test aid: the worker hangs on this program")->group("");
}

// Checks every option (UsageError on the first bad one) and builds the campaign they ask for.
CampaignConfig campaign_config(const RunArgs& o) {
  CampaignConfig c;
  if (o.seconds_opt && *o.seconds_opt) c.seconds = parse_seconds("--seconds", o.seconds);
  if (o.programs_opt && *o.programs_opt) {
    c.programs = parse_unsigned("--programs", o.programs);
    if (c.programs == 0) throw UsageError("--programs: 0 programs would check nothing");
  }
  if (c.seconds == 0 && c.programs == 0) c.seconds = 10;
  c.seed = parse_unsigned("--seed", o.seed);
  c.hang_seconds = parse_seconds("--hang-seconds", o.hang_seconds);
  if (o.oracles_opt) c.oracles = select_oracles(option_list("--oracles", o.oracles_opt, o.oracles, "oracle"));
  c.devices = select_devices(option_list("--backends", o.backends_opt, o.backends, "backend"));
  c.fault = planted_fault(o.plant);
  c.out_dir = o.out_dir;
  c.save_programs = o.save_programs;
  c.save_every = parse_unsigned("--save-every", o.save_every);
  if (c.save_every == 0) throw UsageError("--save-every: 0 would keep no program; say 1 for every one");
  c.crash_at = o.crash_at;
  c.hang_at = o.hang_at;
  c.gen.max_nodes = o.max_nodes;
  c.gen.mismatches = !o.no_mismatch;
  c.gen.ops = select_ops(option_list("--ops", o.ops_opt, o.ops, "op"));
  c.gen.extents = kernel_extents_of(c.devices);  // once, not for every program (campaign_program's fallback)
  if (o.shard_opt && *o.shard_opt) c.shard = parse_shard(o.shard);
  if (!o.expect.empty()) {
    try {
      c.expect = read_expect_file(o.expect);
    } catch (const ReportError& e) {
      throw UsageError(fmt::format("--expect: {}", e.what()));
    }
  }
  // --jobs: 1..1024 (Note [Parallel jobs]); by default one per core. More workers than the campaign has programs
  // would have nothing to do: they are clamped to the programs (documented in docs/cli.md).
  if (!o.jobs_opt || !*o.jobs_opt) {
    c.jobs = std::max(1u, std::thread::hardware_concurrency());
  } else {
    c.jobs = parse_unsigned("--jobs", o.jobs);
    if (c.jobs == 0 || c.jobs > 1024)
      throw UsageError(fmt::format("--jobs: {} workers; want 1 to 1024", c.jobs));
  }
  if (c.programs > 0) c.jobs = std::max<uint64_t>(1, std::min(c.jobs, c.programs_in_shard()));
  if (!o.large_rate.empty()) {
    double r = -1;
    auto [end, ec] = std::from_chars(o.large_rate.data(), o.large_rate.data() + o.large_rate.size(), r);
    if (ec != std::errc() || end != o.large_rate.data() + o.large_rate.size() || !(r >= 0 && r <= 1))
      throw UsageError(fmt::format("--large-rate: `{}` is not a share from 0 to 1", printable(o.large_rate)));
    c.gen.large_rate = r;
  }
  return c;
}

// CLI11 reports --help as a ParseError whose exit code is 0: print it, exit 0. Every real parse error (unknown
// option, missing or malformed value) is a usage error; CLI11's own codes (105-114) would read as something else.
int exit_for_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == int(CLI::ExitCodes::Success)) return app.exit(e);
  // CLI11's message quotes what was typed, which may hold a newline: printable() keeps it one line.
  std::fprintf(stderr, "crossfire: %s (crossfire --help lists the options)\n", printable(e.what(), 512).c_str());
  return kExitUsage;
}

// The exit status for an error that ended the command. A crossfire error about what was asked for (an unknown
// backend or device, a malformed or unrunnable program) is bad input; running out of memory or of a time budget, a
// backend failing and anything else (a file that cannot be written, a failed fork) is the harness's own failure.
int exit_status_for(const std::exception& e) {
  if (dynamic_cast<const UsageError*>(&e)) return kExitUsage;
  if (auto* p = dynamic_cast<const ProgramError*>(&e); p && p->reason == ProgramError::Reason::over_budget)
    return kExitInternal;
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const OutOfMemory*>(&e) ||
      dynamic_cast<const BackendFailure*>(&e))
    return kExitInternal;
  if (dynamic_cast<const Error*>(&e)) return kExitUsage;
  return kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"crossfire: checks a multi-backend tensor dispatch core with random op-graph programs"};
  app.require_subcommand(1);
  app.footer(kExitStatusHelp);

  app.set_version_flag("--version", fmt::format("crossfire {}{}", kVersion,
                                                 build_commit().empty() ? "" : fmt::format(" ({})", build_commit())));
  // Plug-ins (docs/your-backend.md) load before any subcommand runs, so that their backends are known to every one.
  // fallthrough(): `--plugin` may come before or after the subcommand.
  std::vector<std::string> plugin_paths;
  app.add_option("--plugin", plugin_paths, "Load a backend plug-in (a shared library); repeatable. Also: "
                                           "CROSSFIRE_PLUGINS=PATH:PATH...")
      ->type_name("PATH")
      ->allow_extra_args(false);  // one path per --plugin, so `--plugin x.so run` leaves `run` alone
  app.fallthrough();
  auto* backends_cmd = app.add_subcommand("backends", "List every backend and device, with the reason when unavailable");
  bool backends_json = false;
  backends_cmd->add_flag("--json", backends_json, "As JSON: [{name, available, reason, devices: [{device, type, name, "
                                                  "driver}]}]");

  auto* run_cmd = app.add_subcommand("run", "Run a campaign of generated programs");
  RunArgs run_opts;
  add_run_options(run_cmd, run_opts);

  auto* generate_cmd = app.add_subcommand("generate", "Write the programs a campaign with these options checks, "
                                                       "without running them");
  RunArgs gen_opts;
  add_program_options(generate_cmd, gen_opts);
  std::string gen_count, gen_first = "0", gen_out;
  generate_cmd->add_option("--count", gen_count, "How many programs")->type_name("N")->required();
  generate_cmd->add_option("--first", gen_first, "The campaign's program number to start at (default 0)")
      ->type_name("I");
  generate_cmd->add_option("--out", gen_out, "Directory for the programs (created with its parents)")->required();

  auto* replay_cmd = app.add_subcommand("replay", "Rerun one program and print the per-node comparison table");
  std::string replay_file, replay_backends, replay_oracles;
  replay_cmd->add_option("FILE", replay_file, "Program file")->required();
  auto* replay_backends_opt =
      replay_cmd->add_option("--backends", replay_backends, "Backends or devices (default: all available)");
  auto* replay_oracles_opt = replay_cmd->add_option("--oracles", replay_oracles, "Oracles (default: all)");
  std::string replay_plant;
  replay_cmd->add_option("--plant-fault", replay_plant, "Developer aid")->group("");
  // Note [Time budgets] in model.hpp: a file may ask for far more work than a generated program.
  std::string replay_seconds = "120";
  replay_cmd->add_option("--seconds", replay_seconds, "Time budget of the check (default 120); past it, exit 4");
  std::string replay_values;
  replay_cmd->add_option("--values", replay_values, "Also write every value on every device, with the f64 reference "
                                                    "on that device's own inputs and its bound, to this JSON file "
                                                    "(docs/program-format.md, Values file)")->type_name("OUT.json");

  auto* merge_cmd = app.add_subcommand("merge", "Add up the reports of a sharded campaign's shards into one");
  std::vector<std::string> merge_dirs;
  std::string merge_out;
  merge_cmd->add_option("DIR", merge_dirs, "Each shard's --out directory (report.json and failures/)")->required();
  merge_cmd->add_option("--out", merge_out, "Directory for the merged reports and failing programs")->required();

  auto* reduce_cmd = app.add_subcommand("reduce", "Shrink a failing program while its failure persists");
  std::string reduce_file, reduce_out, reduce_backends;
  reduce_cmd->add_option("FILE", reduce_file, "Program file")->required();
  reduce_cmd->add_option("-o,--output", reduce_out, "Where to write the reduced program")->required();
  auto* reduce_backends_opt =
      reduce_cmd->add_option("--backends", reduce_backends, "Backends or devices (default: all available)");
  reduce_cmd->add_option("--plant-fault", replay_plant, "Developer aid")->group("");
  std::string reduce_seconds = "300";
  reduce_cmd->add_option("--seconds", reduce_seconds,
                         "Time budget (default 300); past it, the smallest program found so far is written");

  for (CLI::App* cmd : {backends_cmd, run_cmd, generate_cmd, replay_cmd, merge_cmd, reduce_cmd})
    cmd->footer(kExitStatusHelp);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return exit_for_parse_error(app, e);
  }

  try {
    load_plugins(plugin_paths);
    if (*backends_cmd) return backends_json ? cmd_backends_json() : cmd_backends();

    if (*merge_cmd) return cmd_merge(merge_dirs, merge_out, std::vector<std::string>(argv, argv + argc));

    if (*run_cmd) {
      CampaignConfig c = campaign_config(run_opts);
      c.command.assign(argv, argv + argc);
      if (c.devices.empty()) {
        std::fprintf(stderr, "crossfire: no device to run on\n");
        return kExitUsage;
      }
      if (std::string why = check_out_dir(c.out_dir); !why.empty()) {
        std::fprintf(stderr, "crossfire: --out: %s\n", why.c_str());
        return kExitUsage;
      }
      if (std::string why = check_out_dir(c.save_programs); !why.empty()) {
        std::fprintf(stderr, "crossfire: --save-programs: %s\n", why.c_str());
        return kExitUsage;
      }
      if (size_t n = remove_earlier_run(c.out_dir).size())
        std::fprintf(stderr, "crossfire: --out %s: removed %zu file%s of an earlier run (its reports and failures/)\n",
                     c.out_dir.c_str(), n, n == 1 ? "" : "s");
      return run_campaign(c);
    }

    if (*generate_cmd) {
      CampaignConfig c = campaign_config(gen_opts);
      const uint64_t count = parse_unsigned("--count", gen_count), first = parse_unsigned("--first", gen_first);
      if (count == 0) throw UsageError("--count: 0 programs would write nothing");
      if (count > (uint64_t(1) << 24)) throw UsageError("--count: at most 16777216 programs at a time");
      if (first > UINT64_MAX - count) throw UsageError("--first: the program numbers would wrap past 2^64");
      if (c.devices.empty()) throw UsageError("no device to generate programs for");
      if (std::string why = check_out_dir(gen_out); !why.empty()) throw UsageError("--out: " + why);
      for (uint64_t i = first; i < first + count; ++i)
        save_text_atomically(fmt::format("{}/program-{:06}.program", gen_out, i), program_file(c, i));
      std::printf("wrote %llu program%s (#%llu..#%llu of seed %llu) to %s\n", (unsigned long long)count,
                  count == 1 ? "" : "s", (unsigned long long)first, (unsigned long long)(first + count - 1),
                  (unsigned long long)c.seed, gen_out.c_str());
      return kExitClean;
    }

    if (*replay_cmd || *reduce_cmd) {
      Program p = load_program(*replay_cmd ? replay_file : reduce_file);
      CheckOptions o;
      o.devices = *replay_cmd ? select_devices(option_list("--backends", replay_backends_opt, replay_backends, "backend"))
                              : select_devices(option_list("--backends", reduce_backends_opt, reduce_backends, "backend"));
      if (*replay_cmd) o.enabled = select_oracles(option_list("--oracles", replay_oracles_opt, replay_oracles, "oracle"));
      o.keep_node_table = replay_cmd->parsed();
      o.fault = planted_fault(replay_plant);
      const double budget = parse_seconds("--seconds", *replay_cmd ? replay_seconds : reduce_seconds);
      o.deadline = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(
                       std::min(budget, 1e7)));  // (a budget past ~4 months is no budget; the cast must not overflow)
      ProgramReport r = check_program(p, o);
      if (*replay_cmd && !replay_values.empty()) save_text_atomically(replay_values, values_json(p, o));
      if (*replay_cmd) {
        print_table(r);
        std::printf("\n");
        print_counts(r);
        for (const Failure& f : r.failures)
          std::printf("\nFAIL [%s] %s\n  %s\n", std::string(oracle_name(f.oracle)).c_str(), f.what.c_str(),
                      f.detail.c_str());
        std::printf("\n%s\n", replay_verdict(r, recorded_signature(replay_file)).c_str());
        if (!r.failures.empty()) return kExitFailures;
        if (!checked_anything(r.counts, o.enabled)) {  // a replay that checked nothing is no evidence the failure is gone
          std::fprintf(stderr, "crossfire: %s: the enabled oracles checked nothing in this program: not a pass\n",
                       printable(replay_file, 256).c_str());
          return kExitUsage;
        }
        return kExitClean;
      }
      if (r.failures.empty()) {
        std::fprintf(stderr, "crossfire: %s does not fail; nothing to reduce\n", reduce_file.c_str());
        return kExitUsage;
      }
      const Failure& f = r.failures.front();
      ReduceStats st;
      Program red = reduce_program(p, o, f, &st);
      save_text_atomically(reduce_out, fmt::format("# {}\n# {}\n", f.signature(), f.what) + print_program(red));
      std::printf("reduced %d values (%d nodes) to %d values (%d nodes) in %d checks%s: %s\n", st.values_before,
                  p.num_nodes(), st.values_after, red.num_nodes(), st.checks,
                  st.out_of_time ? " (stopped at the --seconds budget: the smallest program found by then)" : "",
                  reduce_out.c_str());
      return kExitClean;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crossfire: %s\n", e.what());
    return exit_status_for(e);
  }
  return kExitClean;
}
