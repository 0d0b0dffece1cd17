// The `crossfire` command: backends, run (a campaign), replay, reduce. See docs/program-format.md for programs.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "crossfire/harness/campaign.hpp"
#include "crossfire/harness/reduce.hpp"

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
    if (f.signature() == *recorded) return fmt::format("the recorded failure reproduces ({})", *recorded);
  return fmt::format("the recorded failure ({}) does not reproduce; {} other failure{} above", *recorded,
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

// Devices of the named backends (or devices: "cpu:1"); every available device when the list is empty.
std::vector<Device> select_devices(const std::string& list) {
  std::vector<Device> all = available_devices();
  if (list.empty() || list == "all") return all;
  std::vector<Device> out;
  for (const std::string& item : split(list)) {
    if (item.find(':') != std::string::npos) {
      Device d = Device::parse(item);
      backend_for(d);  // raises when it does not exist
      out.push_back(d);
      continue;
    }
    bool known = false;
    for (BackendKind k : kAllBackendKinds)
      if (backend_name(k) == item) {
        known = true;
        Backend& b = backend(k);
        if (!b.available()) throw BackendUnavailable(k, b.unavailable_reason());
        for (const Device& d : all)
          if (d.backend == k) out.push_back(d);
      }
    if (!known) throw InvalidArgument("--backends", "", fmt::format("unknown backend `{}` (cpu, vulkan, cuda)", item));
  }
  return out;
}

std::array<bool, kNumOracles> select_oracles(const std::string& list) {
  std::array<bool, kNumOracles> on{};
  if (list.empty() || list == "all") return {true, true, true, true};
  for (const std::string& item : split(list)) {
    auto k = parse_oracle(item);
    if (!k)
      throw InvalidArgument("--oracles", "",
                            fmt::format("unknown oracle `{}` (contract, agreement, gradients, bad_input)", item));
    on[size_t(*k)] = true;
  }
  return on;
}

int cmd_backends() {
  std::printf("%-10s %-8s %-11s %-10s %s\n", "device", "backend", "available", "type", "name / reason");
  for (BackendKind k : kAllBackendKinds) {
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"crossfire: checks a multi-backend tensor dispatch core with random op-graph programs"};
  app.require_subcommand(1);

  auto* backends_cmd = app.add_subcommand("backends", "List every backend and device, with the reason when unavailable");

  auto* run_cmd = app.add_subcommand("run", "Run a campaign of generated programs");
  double seconds = 0;
  uint64_t programs = 0, seed = 1;
  std::string backends_list, oracles_list, out_dir, plant;
  double hang = 60;
  bool no_mismatch = false;
  int max_nodes = 30;
  auto* secs_opt = run_cmd->add_option("--seconds", seconds, "Stop after this many seconds");
  auto* progs_opt = run_cmd->add_option("--programs", programs, "Stop after this many programs");
  secs_opt->excludes(progs_opt);
  run_cmd->add_option("--seed", seed, "Seed of the campaign (the same seed gives the same programs)");
  run_cmd->add_option("--backends", backends_list, "Backends or devices to check: cpu,vulkan,cuda or cpu:1 (default: all available)");
  run_cmd->add_option("--oracles", oracles_list, "Oracles: contract,agreement,gradients,bad_input (default: all)");
  run_cmd->add_option("--out", out_dir, "Directory for reports and failing programs");
  run_cmd->add_option("--hang-seconds", hang, "A program running longer than this is a hang");
  run_cmd->add_option("--max-nodes", max_nodes, "Largest program (1..30 nodes)")->check(CLI::Range(1, 30));
  run_cmd->add_flag("--no-mismatch", no_mismatch, "Only programs whose devices all agree");
  run_cmd->add_option("--plant-fault", plant, "Developer aid: plant a fault in the oracles' observations")->group("");
  int64_t crash_at = -1, hang_at = -1;
  run_cmd->add_option("--crash-at", crash_at, "Test aid: the worker crashes on this program")->group("");
  run_cmd->add_option("--hang-at", hang_at, "Test aid: the worker hangs on this program")->group("");

  auto* replay_cmd = app.add_subcommand("replay", "Rerun one program and print the per-node comparison table");
  std::string replay_file, replay_backends, replay_oracles;
  replay_cmd->add_option("FILE", replay_file, "Program file")->required();
  replay_cmd->add_option("--backends", replay_backends, "Backends or devices (default: all available)");
  replay_cmd->add_option("--oracles", replay_oracles, "Oracles (default: all)");
  std::string replay_plant;
  replay_cmd->add_option("--plant-fault", replay_plant, "Developer aid")->group("");

  auto* reduce_cmd = app.add_subcommand("reduce", "Shrink a failing program while its failure persists");
  std::string reduce_file, reduce_out, reduce_backends;
  reduce_cmd->add_option("FILE", reduce_file, "Program file")->required();
  reduce_cmd->add_option("-o,--output", reduce_out, "Where to write the reduced program")->required();
  reduce_cmd->add_option("--backends", reduce_backends, "Backends or devices (default: all available)");
  reduce_cmd->add_option("--plant-fault", replay_plant, "Developer aid")->group("");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*backends_cmd) return cmd_backends();

    if (*run_cmd) {
      if (seconds <= 0 && programs == 0) seconds = 10;
      CampaignConfig c;
      c.seconds = seconds;
      c.programs = programs;
      c.seed = seed;
      c.devices = select_devices(backends_list);
      c.oracles = select_oracles(oracles_list);
      c.out_dir = out_dir;
      c.hang_seconds = hang;
      c.fault = parse_planted_fault(plant);
      c.crash_at = crash_at;
      c.hang_at = hang_at;
      c.gen.max_nodes = max_nodes;
      c.gen.mismatches = !no_mismatch;
      if (c.devices.empty()) {
        std::fprintf(stderr, "crossfire: no device to run on\n");
        return 2;
      }
      if (std::string why = check_out_dir(out_dir); !why.empty()) {
        std::fprintf(stderr, "crossfire: --out: %s\n", why.c_str());
        return 2;
      }
      return run_campaign(c);
    }

    if (*replay_cmd || *reduce_cmd) {
      Program p = load_program(*replay_cmd ? replay_file : reduce_file);
      CheckOptions o;
      o.devices = select_devices(*replay_cmd ? replay_backends : reduce_backends);
      if (*replay_cmd) o.enabled = select_oracles(replay_oracles);
      o.keep_node_table = replay_cmd->parsed();
      o.fault = parse_planted_fault(replay_plant);
      ProgramReport r = check_program(p, o);
      if (*replay_cmd) {
        print_table(r);
        std::printf("\n");
        print_counts(r);
        for (const Failure& f : r.failures)
          std::printf("\nFAIL [%s] %s\n  %s\n", std::string(oracle_name(f.oracle)).c_str(), f.what.c_str(),
                      f.detail.c_str());
        std::printf("\n%s\n", replay_verdict(r, recorded_signature(replay_file)).c_str());
        return r.failures.empty() ? 0 : 1;
      }
      if (r.failures.empty()) {
        std::fprintf(stderr, "crossfire: %s does not fail; nothing to reduce\n", reduce_file.c_str());
        return 2;
      }
      const Failure& f = r.failures.front();
      ReduceStats st;
      Program red = reduce_program(p, o, f, &st);
      save_text_atomically(reduce_out, fmt::format("# {}\n# {}\n", f.signature(), f.what) + print_program(red));
      std::printf("reduced %d values (%d nodes) to %d values (%d nodes) in %d checks: %s\n", st.values_before,
                  p.num_nodes(), st.values_after, red.num_nodes(), st.checks, reduce_out.c_str());
      return 0;
    }
  } catch (const ParseError& e) {
    std::fprintf(stderr, "crossfire: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crossfire: %s\n", e.what());
    return 2;
  }
  return 0;
}
