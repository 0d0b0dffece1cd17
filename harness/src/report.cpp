// SPDX-License-Identifier: Apache-2.0
// Reports: render a CampaignReport as report.json, junit.xml and report.html, read report.json back, and merge
// shards' reports (see report.hpp; the schema is docs/report-format.md).
#include "crossfire/harness/report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "crossfire/harness/program.hpp"
#include "crossfire/plugin.hpp"
#include "crossfire/version.hpp"

namespace crossfire::harness {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Text for XML and HTML, attribute or content: the five special characters escaped, and the control characters
// XML 1.0 does not allow (any but tab, newline and carriage return) replaced, so a hostile program's bytes cannot
// make junit.xml unreadable.
std::string escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t' && ch != '\r')
          o += '?';
        else
          o += ch;
    }
  }
  return o;
}

// A shell word: as is when it is plain, else in single quotes.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./:,=@%+", c) != nullptr;
  });
  if (plain) return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const std::string& a : argv) words.push_back(shell_word(a));
  return join(words, " ");
}

std::string path_in(const std::string& dir, const std::string& file) {
  return dir.empty() || dir == "." ? file : dir + "/" + file;
}

std::vector<std::string> enabled_oracles(const ReportConfig& c) {
  std::vector<std::string> on;
  for (OracleKind k : kAllOracles)
    if (c.oracles[size_t(k)]) on.emplace_back(oracle_name(k));
  return on;
}

json expect_json(const std::vector<Expectation>& es, bool with_matches) {
  json a = json::array();
  for (const Expectation& e : es) {
    json j{{"where", e.where}, {"op", e.op}, {"oracle", e.oracle}, {"pattern", e.pattern}, {"reason", e.reason}};
    if (with_matches) j["source"] = e.source, j["matched"] = e.matched;
    a.push_back(j);
  }
  return a;
}

json config_json(const ReportConfig& c) {
  json oracles = json::object();
  for (OracleKind k : kAllOracles) oracles[std::string(oracle_name(k))] = c.oracles[size_t(k)];
  return {{"seed", c.seed},
          {"devices", c.devices},
          {"oracles", oracles},
          {"limits", {{"seconds", c.seconds_limit}, {"programs", c.programs_limit}, {"hang_seconds", c.hang_seconds}}},
          {"shard", {{"index", c.shard.index}, {"count", c.shard.count}}},
          {"planted_fault", c.planted_fault},
          {"generator", c.generator},
          {"expect", expect_json(c.expect, /*with_matches=*/false)}};
}

// Failures of one oracle: occurrences and distinct signatures.
std::array<uint64_t, 2> failures_of(const CampaignReport& r, std::string_view oracle) {
  std::array<uint64_t, 2> n{0, 0};
  for (const FailureRecord& f : r.failures)
    if (f.oracle() == oracle) n[0] += f.occurrences, n[1]++;
  return n;
}

std::vector<uint64_t> missing_shards(const CampaignReport& r) {
  std::vector<uint64_t> missing;
  if (r.shards.empty()) return missing;
  std::set<uint64_t> have;
  for (const ShardRun& s : r.shards) have.insert(s.shard.index);
  for (uint64_t i = 0; i < r.shards.front().shard.count; ++i)
    if (!have.count(i)) missing.push_back(i);
  return missing;
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

Provenance make_provenance(std::vector<std::string> command) {
  Provenance p;
  p.version = std::string(kVersion);
  p.commit = std::string(build_commit());
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  p.started = buf;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) p.host = host;
  for (const LoadedPlugin& plugin : loaded_plugins()) p.plugins.push_back(plugin.path);
  p.command = std::move(command);
  return p;
}

uint64_t CampaignReport::total_failures() const {
  uint64_t n = 0;
  for (const FailureRecord& f : failures) n += f.occurrences;
  return n;
}

uint64_t CampaignReport::unexpected_failures() const {
  uint64_t n = 0;
  for (const FailureRecord& f : failures)
    if (!f.expected()) n += f.occurrences;
  return n;
}

FailureRecord* CampaignReport::find(const std::string& signature) {
  for (FailureRecord& f : failures)
    if (f.signature() == signature) return &f;
  return nullptr;
}

namespace {
bool first_program_order(const FailureRecord& a, const FailureRecord& b) {
  return a.program_index != b.program_index ? a.program_index < b.program_index : a.signature() < b.signature();
}
}  // namespace

namespace {
// The devices a failure names: "cpu:0"; both of "cpu:0 vs vulkan:0" (two devices disagree); every one of
// "cpu:0,cpu:1,vulkan:0" (a crash or hang: the campaign's devices).
std::vector<std::string> devices_of(std::string_view device) {
  std::vector<std::string> out;
  while (!device.empty()) {
    const size_t vs = device.find(" vs "), comma = device.find(',');
    const size_t end = std::min(vs, comma);
    out.emplace_back(device.substr(0, end));
    if (end == std::string_view::npos) break;
    device.remove_prefix(end + (end == vs ? 4 : 1));
  }
  return out;
}

// `*` matches any run of characters, `?` one.
bool glob_matches(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1, t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}
}  // namespace

void CampaignReport::count_failing(const std::string& op, const std::string& device, bool expected) {
  if (op.empty()) return;  // a whole program's failure (a crash, a hang) is no op's
  for (const std::string& d : devices_of(device)) {
    failing[op][d]++;
    if (expected) expected_failing[op][d]++;
  }
}

bool expectation_matches(const Expectation& e, const json& info) {
  if (e.op != "*" && e.op != info.value("op", "")) return false;
  if (e.oracle != "*" && e.oracle != info.value("oracle", "")) return false;
  if (!glob_matches(e.pattern, info.value("signature", ""))) return false;
  if (e.where == "*") return true;
  for (const std::string& d : devices_of(info.value("device", "")))
    if (d == e.where || d.substr(0, d.find(':')) == e.where) return true;
  return false;
}

bool CampaignReport::apply_expectations(json& info) {
  for (Expectation& e : config.expect)
    if (expectation_matches(e, info)) {
      e.matched++;
      info["expected"] = e.reason;
      return true;
    }
  info.erase("expected");
  return false;
}

std::vector<Expectation> read_expect_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ReportError(fmt::format("{}: cannot be read: {}", path, std::strerror(errno)));
  std::vector<Expectation> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = fmt::format("{}:{}", path, n);
    if (line.size() > 4096) throw ReportError(where + ": a line of over 4096 characters");
    size_t i = line.find_first_not_of(" \t\r");
    if (i == std::string::npos || line[i] == '#') continue;
    // Fields: WHERE OP ORACLE PATTERN REASON...; PATTERN may be "quoted" to hold spaces.
    std::vector<std::string> f;
    while (f.size() < 4) {
      i = line.find_first_not_of(" \t", i);
      if (i == std::string::npos) break;
      if (f.size() == 3 && line[i] == '"') {
        const size_t close = line.find('"', i + 1);
        if (close == std::string::npos) throw ReportError(where + ": the pattern's quote is not closed");
        f.push_back(line.substr(i + 1, close - i - 1));
        i = close + 1;
      } else {
        const size_t end = line.find_first_of(" \t", i);
        f.push_back(line.substr(i, end == std::string::npos ? std::string::npos : end - i));
        i = end == std::string::npos ? line.size() : end;
      }
    }
    std::string reason = i < line.size() ? line.substr(i) : "";
    reason.erase(0, reason.find_first_not_of(" \t"));
    while (!reason.empty() && (reason.back() == ' ' || reason.back() == '\t' || reason.back() == '\r')) reason.pop_back();
    if (f.size() < 4 || reason.empty())
      throw ReportError(where + ": want WHERE OP ORACLE PATTERN REASON (a backend or device, an op, an oracle, a "
                                "pattern over the signature, and why), each given (`*` for any)");
    Expectation e{f[0], f[1], f[2], f[3], reason, where, 0};
    if (e.op != "*" && find_op(e.op) < 0) throw ReportError(fmt::format("{}: no op is named `{}`", where, e.op));
    if (e.oracle != "*" && !parse_oracle(e.oracle) && e.oracle != kSupervisorFinding && e.oracle != kHarnessFinding)
      throw ReportError(fmt::format("{}: no oracle is named `{}`", where, e.oracle));
    if (e.where != "*") {
      const std::string backend = e.where.substr(0, e.where.find(':'));
      if (!backend_kind_named(backend)) throw ReportError(fmt::format("{}: `{}` names no backend or device", where, e.where));
    }
    out.push_back(std::move(e));
  }
  return out;
}

FailureRecord& CampaignReport::add_failure(FailureRecord f) {
  auto at = std::upper_bound(failures.begin(), failures.end(), f, first_program_order);
  return *failures.insert(at, std::move(f));
}

void CampaignReport::sort_failures() { std::stable_sort(failures.begin(), failures.end(), first_program_order); }

std::string failure_file_name(uint64_t program_index, const std::string& oracle, const std::string& op,
                              const std::string& signature) {
  uint32_t h = 2166136261u;  // FNV-1a: stable across builds and machines, unlike std::hash
  for (unsigned char ch : signature) h = (h ^ ch) * 16777619u;
  return fmt::format("failures/failure-{:06}-{}-{}-{:08x}.program", program_index, oracle, op.empty() ? "program" : op,
                     h);
}

std::string replay_command(const CampaignReport& r, const FailureRecord& f, const std::string& dir) {
  // A crash, a hang or a harness error is no one oracle's: replay checks with every oracle the campaign ran.
  const std::optional<OracleKind> oracle = parse_oracle(f.oracle());
  std::vector<std::string> argv{"crossfire", "replay", path_in(dir, f.file), "--backends", join(r.config.devices, ","),
                                "--oracles", oracle ? f.oracle() : join(enabled_oracles(r.config), ",")};
  if (r.config.planted_fault != "none") argv.insert(argv.end(), {"--plant-fault", r.config.planted_fault});
  for (const std::string& plugin : r.provenance.plugins) argv.insert(argv.end(), {"--plugin", plugin});
  return command_line(argv);
}

// ---- report.json ---------------------------------------------------------------------------------------------

json report_json(const CampaignReport& r, const std::string& dir) {
  json j;
  j["schema"] = kReportSchema;
  j["crossfire"] = {{"version", r.provenance.version}, {"commit", r.provenance.commit}};
  j["started"] = r.provenance.started;
  j["host"] = r.provenance.host;
  j["command"] = r.provenance.command;
  j["plugins"] = r.provenance.plugins;
  j["config"] = config_json(r.config);
  j["jobs"] = r.jobs;
  j["complete"] = r.complete;
  j["interrupted"] = r.interrupted;
  j["seconds"] = r.seconds;
  j["programs"] = r.programs;
  j["nodes"] = r.nodes;
  j["programs_per_second"] = r.seconds > 0 ? double(r.programs) / r.seconds : 0.0;
  j["failures"] = r.total_failures();
  j["unexpected_failures"] = r.unexpected_failures();
  j["distinct_failures"] = r.failures.size();
  j["crashes"] = r.crashes;
  j["hangs"] = r.hangs;
  j["harness_errors"] = r.harness_errors;
  json backends = json::array();
  for (const BackendStatus& b : r.backends) {
    json jb{{"name", b.name}, {"available", b.available}, {"devices", b.devices}};
    if (!b.available) jb["reason"] = b.reason;
    backends.push_back(jb);
  }
  j["backends"] = backends;
  json oracles = json::object();
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = r.counts[size_t(k)];
    const auto [occurrences, distinct] = failures_of(r, oracle_name(k));
    oracles[std::string(oracle_name(k))] = {{"enabled", r.config.oracles[size_t(k)]},
                                            {"checked", n.checked},
                                            {"failed", n.failed},
                                            {"skipped_unsupported", n.skipped_unsupported},
                                            {"skipped_other", n.skipped_other},
                                            {"seconds", n.seconds},
                                            {"failures", occurrences},
                                            {"distinct_failures", distinct}};
    json reasons = json::object();
    for (size_t why = 0; why < kNumSkipReasons; ++why)
      if (n.skipped_by[why] > 0) reasons[std::string(skip_reason_name(SkipReason(why)))] = n.skipped_by[why];
    oracles[std::string(oracle_name(k))]["skipped_by_reason"] = reasons;
    if (k == OracleKind::gradients) oracles["gradients"]["checked_backward_rules"] = n.checked_backward_rules;
  }
  j["oracles"] = oracles;
  json fails = json::array();
  for (const FailureRecord& f : r.failures) {
    json jf = f.info;
    jf["occurrences"] = f.occurrences;
    jf["program_index"] = f.program_index;
    jf["file"] = f.file;
    jf["seconds"] = f.seconds;
    jf["replay"] = replay_command(r, f, dir);
    fails.push_back(jf);
  }
  j["failure_list"] = fails;
  j["expectations"] = expect_json(r.config.expect, /*with_matches=*/true);
  json cov = json::object();
  for (const auto& [op, per] : r.coverage)
    for (const auto& [dev, n] : per)
      cov[op][dev] = {{"checked", n[0]}, {"unsupported", n[1]}, {"failed", 0}, {"expected", 0}};
  for (const auto& [op, per] : r.failing)
    for (const auto& [dev, n] : per) {
      json& cell = cov[op][dev];
      if (!cell.contains("checked")) cell = {{"checked", 0}, {"unsupported", 0}, {"expected", 0}};
      cell["failed"] = n;
    }
  for (const auto& [op, per] : r.expected_failing)
    for (const auto& [dev, n] : per) cov[op][dev]["expected"] = n;
  j["coverage"] = cov;
  json shards = json::array();
  for (const ShardRun& s : r.shards)
    shards.push_back({{"index", s.shard.index}, {"count", s.shard.count}, {"source", s.source}, {"host", s.host},
                      {"started", s.started}, {"seconds", s.seconds}, {"programs", s.programs},
                      {"complete", s.complete}, {"interrupted", s.interrupted}});
  j["shards"] = shards;
  j["missing_shards"] = missing_shards(r);
  return j;
}

// ---- junit.xml -----------------------------------------------------------------------------------------------

// One test case per enabled oracle that found nothing, per distinct failure (its one <failure>, or <error> for the
// harness's own), per disabled oracle and unavailable backend (<skipped>, with why), and one that says whether the
// campaign ran to its end. Each case's time is its own: an oracle's time in the campaign, a failure's time on the
// program that first showed it.
std::string junit_xml(const CampaignReport& r, const std::string& dir) {
  // Names are stable from run to run (an oracle's name, a failure's signature), so a CI tool's history of a test
  // case follows it; the counts go in the case's output.
  struct Case {
    std::string classname, name;
    double seconds = 0;
    std::string body;  // "" (passed), or one <failure>, <error> or <skipped>
    std::string out = "";  // <system-out>
  };
  std::vector<Case> cases;
  uint64_t failures = 0, errors = 0, skipped = 0;
  for (OracleKind k : kAllOracles) {
    const std::string name(oracle_name(k));
    const OracleCounts& n = r.counts[size_t(k)];
    if (!r.config.oracles[size_t(k)]) {
      cases.push_back({"crossfire.oracle", name, 0, "<skipped message=\"oracle not enabled (--oracles)\"/>"});
      ++skipped;
    } else if (failures_of(r, name)[1] == 0) {
      Case c{"crossfire.oracle", name, n.seconds, "",
             fmt::format("no failure in {}", plural(n.checked, "check", "checks"))};
      if (n.checked == 0) {
        c.body = "<skipped message=\"the oracle checked nothing in these programs\"/>";
        ++skipped;
      }
      cases.push_back(std::move(c));
    }
  }
  const std::array<uint64_t, 2> supervisor = failures_of(r, kSupervisorFinding);
  if (supervisor[1] == 0)
    cases.push_back({"crossfire.supervisor", "no crash or hang", 0, "",
                     fmt::format("no crash or hang in {}", plural(r.programs, "program", "programs"))});
  for (const FailureRecord& f : r.failures) {
    const bool harness = f.oracle() == kHarnessFinding;
    // An expected failure (--expect) is reported, as skipped with its reason: it does not fail the run.
    const std::string element = f.expected() ? "skipped" : harness ? "error" : "failure";
    std::string text = fmt::format(
        "{}\n\ndevice: {}\nseen {} (first in program #{} of seed {})\nsaved: {}\nreplay: {}\n\nreduced program:\n{}",
        f.info.value("detail", ""), f.info.value("device", ""), plural(f.occurrences, "time", "times"),
        f.program_index, r.config.seed, path_in(dir, f.file), replay_command(r, f, dir),
        f.info.value("reduced", f.info.value("program", "")));
    cases.push_back({fmt::format("crossfire.{}.{}", f.oracle(), f.info.value("op", "").empty() ? "program"
                                                                                              : f.info.value("op", "")),
                     f.signature(), f.seconds,
                     fmt::format("<{} message=\"{}\" type=\"{}\">{}</{}>", element,
                                 escape(f.expected() ? "expected (" + f.info.value("expected", "") + "): " +
                                                           f.info.value("what", "")
                                                     : f.info.value("what", "")),
                                 escape(f.signature()), escape(text), element)});
    ++(f.expected() ? skipped : harness ? errors : failures);
  }
  // Expectations that matched nothing: reported, so the list stays honest (a campaign may also just not have
  // reached the program that shows one).
  for (const Expectation& e : r.config.expect)
    if (e.matched == 0)
      cases.push_back({"crossfire.expect", fmt::format("{} {} {} {}", e.where, e.op, e.oracle, e.pattern), 0, "",
                       fmt::format("expected ({}; {}) but did not occur in this run", e.reason, e.source)});
  for (const BackendStatus& b : r.backends)
    if (!b.available) {
      cases.push_back({"crossfire.backend", b.name, 0,
                       fmt::format("<skipped message=\"{}\"/>", escape("unavailable: " + b.reason))});
      ++skipped;
    }
  for (uint64_t i : missing_shards(r)) {
    cases.push_back({"crossfire.shard", fmt::format("shard {}/{}", i, r.shards.front().shard.count), 0,
                     "<error message=\"this shard's report was not among those merged\"/>"});
    ++errors;
  }
  // Whether the campaign ran to its end: an interrupted one is an error (its record is partial), one still
  // running is skipped (this file is rewritten as it runs).
  Case end{"crossfire.campaign", "ran to its end", r.seconds, ""};
  if (r.interrupted) {
    end.body = fmt::format("<error message=\"interrupted by a signal after {:.1f} s, {}\"/>", r.seconds,
                           plural(r.programs, "program", "programs"));
    ++errors;
  } else if (!r.complete) {
    end.body = "<skipped message=\"in progress: this report is rewritten as the campaign runs\"/>";
    ++skipped;
  }
  cases.push_back(std::move(end));

  const std::string timestamp = r.provenance.started.empty() ? "" : r.provenance.started.substr(0, 19);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"crossfire\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                   cases.size(), failures, errors, r.seconds);
  x += fmt::format("<testsuite name=\"crossfire campaign (seed {})\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                   "skipped=\"{}\" time=\"{:.3f}\" timestamp=\"{}\" hostname=\"{}\">\n",
                   r.config.seed, cases.size(), failures, errors, skipped, r.seconds, escape(timestamp),
                   escape(r.provenance.host.empty() ? "localhost" : r.provenance.host));
  x += "  <properties>\n";
  auto property = [&](std::string_view name, const std::string& value) {
    x += fmt::format("    <property name=\"{}\" value=\"{}\"/>\n", name, escape(value));
  };
  property("crossfire.version", r.provenance.version);
  property("crossfire.commit", r.provenance.commit);
  property("command", command_line(r.provenance.command));
  property("seed", std::to_string(r.config.seed));
  property("devices", join(r.config.devices, ","));
  property("oracles", join(enabled_oracles(r.config), ","));
  property("shard", r.config.shard.str());
  property("jobs", std::to_string(r.jobs));
  property("programs", std::to_string(r.programs));
  property("complete", r.complete ? "true" : "false");
  property("interrupted", r.interrupted ? "true" : "false");
  x += "  </properties>\n";
  for (const Case& c : cases) {
    x += fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", escape(c.classname), escape(c.name),
                     c.seconds);
    if (c.body.empty() && c.out.empty()) {
      x += "/>\n";
      continue;
    }
    x += ">\n";
    if (!c.body.empty()) x += "    " + c.body + "\n";
    if (!c.out.empty()) x += "    <system-out>" + escape(c.out) + "</system-out>\n";
    x += "  </testcase>\n";
  }
  x += "</testsuite>\n</testsuites>\n";
  return x;
}

// ---- report.html ---------------------------------------------------------------------------------------------

namespace {
// What a backend's author reads first: per op and device, the agreement oracle's checked and unsupported node
// runs and the programs in which a check of the op failed there. Ops with a failure come first.
std::string per_op_scores_html(const CampaignReport& r) {
  auto lookup = [](const std::map<std::string, std::map<std::string, uint64_t>>& m, const std::string& op,
                   const std::string& dev) -> uint64_t {
    auto it = m.find(op);
    if (it == m.end()) return 0;
    auto jt = it->second.find(dev);
    return jt == it->second.end() ? 0 : jt->second;
  };
  std::vector<std::string> ops;
  for (const OpDef& op : kOpTable) ops.emplace_back(op.name);
  std::stable_partition(ops.begin(), ops.end(), [&](const std::string& op) { return r.failing.count(op) > 0; });
  std::string h = "<h2>Per-op scores</h2>\n<p>Per op and device: checked (node runs the agreement oracle checked), "
                  "<span class=bad>failed</span> (programs in which a check of the op failed there, any oracle; known "
                  "differences (--expect) apart), "
                  "<span class=skip>unsupported</span> (the backend has no kernel).</p>\n"
                  "<table id=\"scores\"><tr><th class=l>op</th>";
  for (const std::string& d : r.config.devices) h += "<th>" + escape(d) + "</th>";
  h += "</tr>\n";
  for (const std::string& op : ops) {
    h += "<tr><td class=l>" + escape(op) + "</td>";
    auto it = r.coverage.find(op);
    for (const std::string& d : r.config.devices) {
      std::array<uint64_t, 2> n{0, 0};
      if (it != r.coverage.end())
        if (auto jt = it->second.find(d); jt != it->second.end()) n = jt->second;
      const uint64_t expected = lookup(r.expected_failing, op, d), f = lookup(r.failing, op, d) - expected;
      h += fmt::format("<td>{} / <span class=\"{}\">{}</span>{} / <span class=skip>{}</span></td>", n[0],
                       f ? "bad" : "skip", f,
                       expected ? fmt::format(" <span class=skip>(+{} expected)</span>", expected) : "", n[1]);
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}
}  // namespace

std::string report_html(const CampaignReport& r, const std::string& dir) {
  std::string h = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>crossfire campaign</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f0f0f0}td.l,th.l{text-align:left}.bad{color:#b00;font-weight:bold}.good{color:#070;font-weight:bold}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow:auto}.skip{color:#888}
</style></head><body>
)";
  // "Failures" means one thing on this page: a failing check as the campaign counts it (report.json's `failures`),
  // each occurrence once; distinct failures are those with different signatures (oracle, op, kind).
  const uint64_t nf = r.total_failures(), expected = nf - r.unexpected_failures();
  const std::string verdict =
      nf ? fmt::format("{} ({}{})", plural(r.failures.size(), "distinct failure", "distinct failures"),
                       plural(nf, "occurrence", "occurrences"),
                       expected ? fmt::format(", {} expected", expected) : std::string())
         : "no failures";
  h += fmt::format("<h1>crossfire campaign: <span id=\"verdict\" class=\"{}\">{}</span>{}{}</h1>\n",
                   r.unexpected_failures() ? "bad" : "good", verdict, r.interrupted ? " <small class=bad>(interrupted)</small>" : "",
                   r.complete ? "" : " <small>(in progress: this page is rewritten as the campaign runs)</small>");
  h += fmt::format("<p>{} ({} nodes) in {:.1f} s, {:.1f} programs/s</p>\n", plural(r.programs, "program", "programs"),
                   r.nodes, r.seconds, r.seconds > 0 ? double(r.programs) / r.seconds : 0.0);

  h += "<h2>Provenance</h2>\n<table id=\"provenance\">\n";
  auto row = [&](std::string_view k, const std::string& v) {
    h += fmt::format("<tr><th class=l>{}</th><td class=l><code>{}</code></td></tr>\n", k, escape(v));
  };
  row("crossfire", r.provenance.version + (r.provenance.commit.empty() ? "" : " (" + r.provenance.commit + ")"));
  row("command", command_line(r.provenance.command));
  if (!r.provenance.plugins.empty()) row("plug-ins", join(r.provenance.plugins, ", "));
  row("started", r.provenance.started);
  row("host", r.provenance.host);
  row("seed", std::to_string(r.config.seed));
  row("devices", join(r.config.devices, ", "));
  row("oracles", join(enabled_oracles(r.config), ", "));
  row("shard", r.config.shard.str());
  row("jobs", std::to_string(r.jobs));
  row("generator", r.config.generator.dump());
  if (r.config.planted_fault != "none") row("planted fault", r.config.planted_fault);
  h += "</table>\n";

  h += "<h2>Failures</h2>\n";
  if (r.failures.empty()) {
    h += "<p>None.</p>\n";
  } else {
    h += "<table id=\"failure-index\"><tr><th>#</th><th class=l>oracle</th><th class=l>op</th><th class=l>device</th>"
         "<th>occurrences</th><th>first program</th><th class=l>what</th><th class=l>expected</th></tr>\n";
    for (size_t i = 0; i < r.failures.size(); ++i) {
      const FailureRecord& f = r.failures[i];
      h += fmt::format("<tr><td><a href=\"#failure-{0}\">{0}</a></td><td class=l>{1}</td><td class=l>{2}</td><td "
                       "class=l>{3}</td><td>{4}</td><td>#{5}</td><td class=l>{6}</td><td class=\"l skip\">{7}</td></tr>\n",
                       i + 1, escape(f.oracle()), escape(f.info.value("op", "")), escape(f.info.value("device", "")),
                       f.occurrences, f.program_index, escape(f.info.value("what", "").substr(0, 120)),
                       escape(f.info.value("expected", "")));
    }
    h += "</table>\n";
  }

  h += "<h2>Oracles</h2>\n<table id=\"oracles\"><tr><th class=l>oracle</th><th>checks</th><th>failures</th>"
       "<th>distinct</th><th>skipped (unsupported)</th><th>skipped (other)</th><th>seconds</th></tr>\n";
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = r.counts[size_t(k)];
    const auto [occurrences, distinct] = failures_of(r, oracle_name(k));
    h += fmt::format("<tr><td class=l>{}{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td class=skip>{}</td>"
                     "<td class=skip>{}</td><td>{:.1f}</td></tr>\n",
                     oracle_name(k), r.config.oracles[size_t(k)] ? "" : " (off)", n.checked, occurrences ? "bad" : "",
                     occurrences, distinct, n.skipped_unsupported, n.skipped_other, n.seconds);
  }
  std::string by_reason;  // the "other" skips, by reason, under the table
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = r.counts[size_t(k)];
    std::string reasons;
    for (size_t why = 0; why < kNumSkipReasons; ++why)
      if (n.skipped_by[why] > 0)
        reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", skip_reason_name(SkipReason(why)), n.skipped_by[why]);
    if (!reasons.empty()) by_reason += fmt::format("{}<b>{}</b>: {}", by_reason.empty() ? "" : "; ", oracle_name(k), reasons);
  }
  const auto [sup, sup_distinct] = failures_of(r, kSupervisorFinding);
  const auto [harn, harn_distinct] = failures_of(r, kHarnessFinding);
  h += fmt::format("<tr><td class=l>supervisor (crashes {}, hangs {})</td><td>{}</td><td class=\"{}\">{}</td>"
                   "<td>{}</td><td></td><td></td><td></td></tr>\n",
                   r.crashes, r.hangs, r.programs, sup ? "bad" : "", sup, sup_distinct);
  if (harn)
    h += fmt::format("<tr><td class=l>harness errors</td><td></td><td class=bad>{}</td><td>{}</td><td></td><td></td>"
                     "<td></td></tr>\n", harn, harn_distinct);
  h += "</table>\n";
  if (!by_reason.empty()) h += fmt::format("<p id=\"skip-reasons\" class=skip>Skipped (other), by reason: {}.</p>\n", by_reason);

  if (!r.config.expect.empty()) {
    h += "<h2>Known differences (--expect)</h2>\n<table id=\"expectations\"><tr><th class=l>where</th><th class=l>op"
         "</th><th class=l>oracle</th><th class=l>pattern</th><th class=l>reason</th><th>matched</th></tr>\n";
    for (const Expectation& e : r.config.expect)
      h += fmt::format("<tr><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td><td class=l><code>{}</code></td>"
                       "<td class=l>{}</td><td class=\"{}\">{}</td></tr>\n",
                       escape(e.where), escape(e.op), escape(e.oracle), escape(e.pattern), escape(e.reason),
                       e.matched ? "" : "skip", e.matched ? std::to_string(e.matched) : "not seen in this run");
    h += "</table>\n";
  }
  h += per_op_scores_html(r);

  for (size_t i = 0; i < r.failures.size(); ++i) {
    const FailureRecord& f = r.failures[i];
    h += fmt::format("<h3 id=\"failure-{}\">{}. {} &middot; {} &middot; {}</h3>\n", i + 1, i + 1, escape(f.oracle()),
                     escape(f.info.value("op", "")), escape(f.info.value("device", "")));
    h += fmt::format("<p>{}</p>\n<p>{}</p>\n", escape(f.info.value("what", "")), escape(f.info.value("detail", "")));
    h += fmt::format("<p>Seen {}; first in program #{} ({:.2f} s on it). Saved as <a href=\"{}\">{}</a>{}.</p>\n",
                     plural(f.occurrences, "time", "times"), f.program_index, f.seconds, escape(f.file),
                     escape(f.file),
                     f.info.contains("reduced") ? fmt::format(" (before reducing: <a href=\"{0}.orig\">{0}.orig</a>)",
                                                              escape(f.file))
                                                : "");
    h += fmt::format("<p>Replay:</p>\n<pre class=replay>{}</pre>\n", escape(replay_command(r, f, dir)));
    h += fmt::format("<pre>{}</pre>\n", escape(f.info.value("reduced", f.info.value("program", ""))));
  }

  if (!r.shards.empty()) {
    h += "<h2>Shards</h2>\n<table id=\"shards\"><tr><th>shard</th><th class=l>from</th><th class=l>host</th>"
         "<th>programs</th><th>seconds</th><th class=l>state</th></tr>\n";
    for (const ShardRun& s : r.shards)
      h += fmt::format("<tr><td>{}</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{:.1f}</td><td class=l>"
                       "{}</td></tr>\n",
                       s.shard.str(), escape(s.source), escape(s.host), s.programs, s.seconds,
                       s.interrupted ? "interrupted" : s.complete ? "complete" : "in progress");
    for (uint64_t i : missing_shards(r))
      h += fmt::format("<tr><td>{}/{}</td><td class=\"l bad\" colspan=5>missing: not among the merged reports</td>"
                       "</tr>\n", i, r.shards.front().shard.count);
    h += "</table>\n";
  }

  h += "<h2>Backends</h2>\n<table id=\"backends\"><tr><th class=l>backend</th><th class=l>devices checked</th>"
       "<th class=l>state</th></tr>\n";
  for (const BackendStatus& b : r.backends)
    h += fmt::format("<tr><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td></tr>\n", escape(b.name),
                     escape(join(b.devices, ", ")), b.available ? "available" : escape("unavailable: " + b.reason));
  h += "</table>\n";

  h += "<h2>Coverage</h2>\n<p>Node runs per op and device in the agreement oracle: checked / unsupported.</p>\n"
       "<table id=\"coverage\"><tr><th class=l>op</th>";
  for (const std::string& d : r.config.devices) h += "<th>" + escape(d) + "</th>";
  h += "</tr>\n";
  for (const OpDef& op : kOpTable) {
    const std::string name(op.name);
    h += "<tr><td class=l>" + name + "</td>";
    auto it = r.coverage.find(name);
    for (const std::string& d : r.config.devices) {
      std::array<uint64_t, 2> n{0, 0};
      if (it != r.coverage.end())
        if (auto jt = it->second.find(d); jt != it->second.end()) n = jt->second;
      h += fmt::format("<td>{} / <span class=skip>{}</span></td>", n[0], n[1]);
    }
    h += "</tr>\n";
  }
  h += "</table>\n</body></html>\n";
  return h;
}

std::vector<std::string> write_reports(const std::string& dir, const CampaignReport& r) {
  std::vector<std::string> errors;
  if (dir.empty()) return errors;
  auto save = [&](const char* name, const auto& render) {
    try {
      save_text_atomically(dir + "/" + name, render());
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  };
  save("junit.xml", [&] { return junit_xml(r, dir); });
  save("report.html", [&] { return report_html(r, dir); });
  // (A program's text is the harness's own printing, but an error message quoted in `what` may hold any bytes:
  // invalid UTF-8 is replaced rather than thrown on.)
  save("report.json", [&] { return report_json(r, dir).dump(2, ' ', false, json::error_handler_t::replace) + "\n"; });
  return errors;
}

// ---- reading report.json back ------------------------------------------------------------------------------------

namespace {

// Reads one report.json, every key it needs checked for presence and type: ReportError naming the file and key.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& why) const { throw ReportError(fmt::format("{}: {}", file_, why)); }

  const json& at(const json& j, std::string_view key) const {
    if (!j.is_object()) fail(fmt::format("expected an object holding `{}`", key));
    auto it = j.find(key);
    if (it == j.end()) fail(fmt::format("`{}` is missing", key));
    return *it;
  }
  uint64_t count(const json& j, std::string_view key) const {
    const json& v = at(j, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(fmt::format("`{}` is not a count: {}", key, v.dump()));
    return v.get<uint64_t>();
  }
  double seconds(const json& j, std::string_view key) const {
    const json& v = at(j, key);
    if (!v.is_number() || !(v.get<double>() >= 0)) fail(fmt::format("`{}` is not a number of seconds: {}", key, v.dump()));
    return v.get<double>();
  }
  bool flag(const json& j, std::string_view key) const {
    const json& v = at(j, key);
    if (!v.is_boolean()) fail(fmt::format("`{}` is not true or false: {}", key, v.dump()));
    return v.get<bool>();
  }
  std::string text(const json& j, std::string_view key) const {
    const json& v = at(j, key);
    if (!v.is_string()) fail(fmt::format("`{}` is not a string: {}", key, v.dump()));
    return v.get<std::string>();
  }
  std::vector<std::string> texts(const json& j, std::string_view key) const {
    const json& v = at(j, key);
    std::vector<std::string> out;
    if (!v.is_array()) fail(fmt::format("`{}` is not a list", key));
    for (const json& x : v) {
      if (!x.is_string()) fail(fmt::format("`{}` holds a non-string: {}", key, x.dump()));
      out.push_back(x.get<std::string>());
    }
    return out;
  }

  CampaignReport read(const json& j) const {
    CampaignReport r;
    if (!j.is_object()) fail("not a JSON object");
    if (!j.contains("schema")) fail(fmt::format("no `schema` key: not a crossfire report of schema {}", kReportSchema));
    if (const std::string s = text(j, "schema"); s != kReportSchema)
      fail(fmt::format("schema `{}`, but this crossfire reads `{}`", s, kReportSchema));
    r.provenance.version = text(at(j, "crossfire"), "version");
    r.provenance.commit = text(at(j, "crossfire"), "commit");
    r.provenance.started = text(j, "started");
    r.provenance.host = text(j, "host");
    r.provenance.command = texts(j, "command");
    if (j.contains("plugins")) r.provenance.plugins = texts(j, "plugins");  // (absent from reports before 0.2.0's)
    const json& c = at(j, "config");
    r.config.seed = count(c, "seed");
    r.config.devices = texts(c, "devices");
    for (OracleKind k : kAllOracles) r.config.oracles[size_t(k)] = flag(at(c, "oracles"), oracle_name(k));
    r.config.seconds_limit = seconds(at(c, "limits"), "seconds");
    r.config.programs_limit = count(at(c, "limits"), "programs");
    r.config.hang_seconds = seconds(at(c, "limits"), "hang_seconds");
    r.config.shard = {count(at(c, "shard"), "index"), count(at(c, "shard"), "count")};
    if (r.config.shard.count == 0 || r.config.shard.index >= r.config.shard.count ||
        r.config.shard.count > kMaxShards)
      fail(fmt::format("`config.shard` {} is not a shard (at most {} shards)", r.config.shard.str(), kMaxShards));
    r.config.planted_fault = text(c, "planted_fault");
    r.config.generator = at(c, "generator");
    const json& expect = at(c, "expect"), &expectations = at(j, "expectations");
    if (!expect.is_array() || !expectations.is_array() || expect.size() != expectations.size())
      fail("`config.expect` and `expectations` are not lists of the same length");
    for (size_t k = 0; k < expect.size(); ++k) {
      Expectation e{text(expect[k], "where"), text(expect[k], "op"), text(expect[k], "oracle"),
                    text(expect[k], "pattern"), text(expect[k], "reason"), text(expectations[k], "source"),
                    count(expectations[k], "matched")};
      r.config.expect.push_back(std::move(e));
    }
    r.jobs = count(j, "jobs");
    r.complete = flag(j, "complete");
    r.interrupted = flag(j, "interrupted");
    r.seconds = seconds(j, "seconds");
    r.programs = count(j, "programs");
    r.nodes = count(j, "nodes");
    r.crashes = count(j, "crashes");
    r.hangs = count(j, "hangs");
    r.harness_errors = count(j, "harness_errors");
    for (const json& b : at(j, "backends")) {
      BackendStatus s{text(b, "name"), flag(b, "available"), "", texts(b, "devices")};
      if (!s.available) s.reason = text(b, "reason");
      r.backends.push_back(std::move(s));
    }
    for (OracleKind k : kAllOracles) {
      const json& o = at(at(j, "oracles"), oracle_name(k));
      OracleCounts& n = r.counts[size_t(k)];
      n = {count(o, "checked"), count(o, "failed"), count(o, "skipped_unsupported"), count(o, "skipped_other"),
           seconds(o, "seconds")};
      if (o.contains("skipped_by_reason")) {  // absent in reports written before it existed: all zero then
        const json& reasons = at(o, "skipped_by_reason");
        if (!reasons.is_object()) fail(fmt::format("`oracles.{}.skipped_by_reason` is not an object", oracle_name(k)));
        uint64_t sum = 0;
        for (const auto& [name, value] : reasons.items()) {
          const std::optional<SkipReason> why = parse_skip_reason(name);
          if (!why) fail(fmt::format("`oracles.{}.skipped_by_reason` has an unknown reason `{}`", oracle_name(k), name));
          n.skipped_by[size_t(*why)] = count(reasons, name);
          if (__builtin_add_overflow(sum, n.skipped_by[size_t(*why)], &sum)) sum = ~uint64_t(0);
        }
        if (sum != n.skipped_other)
          fail(fmt::format("`oracles.{}.skipped_by_reason` adds up to {}, not to `skipped_other` ({})", oracle_name(k),
                           sum, n.skipped_other));
      }
      if (o.contains("checked_backward_rules")) {  // absent in reports written before it existed
        n.checked_backward_rules = count(o, "checked_backward_rules");
        if (n.checked_backward_rules > n.checked)
          fail(fmt::format("`oracles.{}.checked_backward_rules` ({}) is more than `checked` ({})", oracle_name(k),
                           n.checked_backward_rules, n.checked));
      }
    }
    const json& list = at(j, "failure_list");
    if (!list.is_array()) fail("`failure_list` is not a list");
    uint64_t occurrences = 0;
    for (const json& jf : list) {
      FailureRecord f;
      f.occurrences = count(jf, "occurrences");
      f.program_index = count(jf, "program_index");
      f.file = text(jf, "file");
      // A saved program lies in the report's failures/ folder and nowhere else: a path that leaves it (`..`, an
      // absolute path) would make a merge copy any file it names.
      if (!f.file.empty() && (!f.file.starts_with("failures/") || f.file.find("..") != std::string::npos ||
                              f.file.find('/', 9) != std::string::npos || f.file.find('\\') != std::string::npos))
        fail(fmt::format("failure `{}`: `file` {} is not a file in failures/", text(jf, "signature"), f.file));
      f.seconds = seconds(jf, "seconds");
      for (const char* key : {"oracle", "op", "what", "signature"}) text(jf, key);
      if (f.occurrences == 0) fail(fmt::format("failure `{}` occurred 0 times", text(jf, "signature")));
      if (__builtin_add_overflow(occurrences, f.occurrences, &occurrences))
        fail("the failures' occurrences add up past 2^64");
      f.info = jf;
      for (const char* key : {"occurrences", "program_index", "file", "seconds", "replay"}) f.info.erase(key);
      if (r.find(f.signature())) fail(fmt::format("failure `{}` is listed twice", f.signature()));
      r.failures.push_back(std::move(f));
    }
    const json& cov = at(j, "coverage");
    if (!cov.is_object()) fail("`coverage` is not an object");
    for (const auto& [op, per] : cov.items()) {
      if (!per.is_object()) fail(fmt::format("`coverage.{}` is not an object", op));
      for (const auto& [dev, n] : per.items()) {
        r.coverage[op][dev] = {count(n, "checked"), count(n, "unsupported")};
        if (const uint64_t f = count(n, "failed")) r.failing[op][dev] = f;
        if (const uint64_t e = count(n, "expected")) r.expected_failing[op][dev] = e;
      }
    }
    // The totals must be the sums of their parts: a report edited by hand (or cut short and patched) would
    // otherwise add a wrong number into a merged total without a word.
    if (count(j, "unexpected_failures") != r.unexpected_failures())
      fail(fmt::format("`unexpected_failures` is {} but the failure list has {} not expected",
                       count(j, "unexpected_failures"), r.unexpected_failures()));
    if (count(j, "failures") != r.total_failures())
      fail(fmt::format("`failures` is {} but the failure list adds up to {}", count(j, "failures"), r.total_failures()));
    if (count(j, "distinct_failures") != r.failures.size())
      fail(fmt::format("`distinct_failures` is {} but the failure list has {}", count(j, "distinct_failures"),
                       r.failures.size()));
    for (OracleKind k : kAllOracles) {
      const uint64_t listed = failures_of(r, oracle_name(k))[0];
      if (count(at(at(j, "oracles"), oracle_name(k)), "failures") != listed)
        fail(fmt::format("`oracles.{}.failures` does not match the failure list ({})", oracle_name(k), listed));
    }
    if (r.crashes + r.hangs > r.programs) fail("more crashes and hangs than programs");
    if (!at(j, "shards").empty()) fail("this is a merged report; merge the shards' own reports instead");
    return r;
  }

 private:
  std::string file_;
};

}  // namespace

CampaignReport read_report(const std::string& dir) {
  const std::string file = path_in(dir, "report.json");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ReportError(fmt::format("{}: cannot be read: {}", file, std::strerror(errno)));
  // Reports are kilobytes to a few megabytes; a file far past that is not one, and is not read into memory.
  constexpr uintmax_t kMaxReportBytes = uintmax_t(256) << 20;
  std::error_code size_error;
  if (const uintmax_t size = fs::file_size(file, size_error); !size_error && size > kMaxReportBytes)
    throw ReportError(fmt::format("{}: {} bytes, more than a report's {} MiB", file, size, kMaxReportBytes >> 20));
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ReportError(fmt::format("{}: not valid JSON (cut short, or not a report.json)", file));
  Reader reader(file);
  try {
    CampaignReport r = reader.read(j);
    for (const FailureRecord& f : r.failures)
      if (!f.file.empty() && !fs::is_regular_file(path_in(dir, f.file)))
        reader.fail(fmt::format("the saved program of failure `{}`, {}, is missing", f.signature(), f.file));
    return r;
  } catch (const json::exception& e) {  // a value of the wrong type deep inside (e.g. a list of numbers)
    throw ReportError(fmt::format("{}: {}", file, e.what()));
  }
}

// ---- merge -------------------------------------------------------------------------------------------------------

namespace {

json config_without_shard(const ReportConfig& c) {
  json j = config_json(c);
  j.erase("shard");
  return j;
}

// The first key where two configurations differ, as "key: A vs B".
std::string first_difference(const json& a, const json& b, const std::string& prefix = "") {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      const std::string key = prefix.empty() ? k : prefix + "." + k;
      if (!b.contains(k)) return fmt::format("`{}` is {} vs absent", key, v.dump());
      if (std::string d = first_difference(v, b[k], key); !d.empty()) return d;
    }
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) return fmt::format("`{}` is absent vs {}", prefix.empty() ? k : prefix + "." + k, v.dump());
    return "";
  }
  return a == b ? "" : fmt::format("`{}` is {} vs {}", prefix, a.dump(), b.dump());
}

}  // namespace

CampaignReport merge_reports(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.empty()) throw ReportError("merge: no report directories given");
  std::vector<CampaignReport> parts;
  for (const std::string& d : dirs) parts.push_back(read_report(d));
  const CampaignReport& first = parts.front();
  const std::string first_file = path_in(dirs.front(), "report.json");
  std::map<uint64_t, std::string> seen_shards;
  for (size_t i = 0; i < parts.size(); ++i) {
    const CampaignReport& p = parts[i];
    const std::string file = path_in(dirs[i], "report.json");
    if (p.provenance.version != first.provenance.version || p.provenance.commit != first.provenance.commit)
      throw ReportError(fmt::format("{}: made by crossfire {} ({}), but {} by crossfire {} ({}): shards of one "
                                    "campaign come from one build",
                                    file, p.provenance.version, p.provenance.commit, first_file,
                                    first.provenance.version, first.provenance.commit));
    if (std::string d = first_difference(config_without_shard(first.config), config_without_shard(p.config));
        !d.empty())
      throw ReportError(fmt::format("{}: not a shard of the same campaign as {}: {}", file, first_file, d));
    if (p.config.shard.count != first.config.shard.count)
      throw ReportError(fmt::format("{}: shard {}, but {} is shard {}: the campaign was split two ways", file,
                                    p.config.shard.str(), first_file, first.config.shard.str()));
    if (auto [it, fresh] = seen_shards.emplace(p.config.shard.index, file); !fresh)
      throw ReportError(fmt::format("{} and {} are both shard {}: merging them would count its programs twice",
                                    it->second, file, p.config.shard.str()));
  }

  CampaignReport m;
  m.provenance.version = first.provenance.version;
  m.provenance.commit = first.provenance.commit;
  m.provenance.plugins = first.provenance.plugins;
  m.config = first.config;
  for (Expectation& e : m.config.expect) e.matched = 0;  // added up from every shard below
  m.config.shard = {};
  m.backends = first.backends;
  m.complete = true;
  m.jobs = 0;
  std::set<std::string> hosts;
  std::string started;
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return parts[a].config.shard.index < parts[b].config.shard.index; });
  std::error_code ec;
  if (!out_dir.empty()) fs::create_directories(fs::path(out_dir) / "failures", ec);
  for (size_t i : order) {
    const CampaignReport& p = parts[i];
    m.shards.push_back({p.config.shard, dirs[i], p.provenance.host, p.provenance.started, p.seconds, p.programs,
                        p.complete, p.interrupted});
    hosts.insert(p.provenance.host);
    if (started.empty() || (!p.provenance.started.empty() && p.provenance.started < started))
      started = p.provenance.started;
    m.complete &= p.complete;
    m.interrupted |= p.interrupted;
    m.seconds = std::max(m.seconds, p.seconds);  // the shards ran side by side
    // Counts of hand-edited reports could be made to wrap around 2^64 when added: a total that would is refused.
    const std::string file = path_in(dirs[i], "report.json");
    auto add = [&](uint64_t& total, uint64_t x) {
      if (__builtin_add_overflow(total, x, &total))
        throw ReportError(fmt::format("{}: its counts overflow the merged total", file));
    };
    add(m.programs, p.programs), add(m.nodes, p.nodes), add(m.crashes, p.crashes), add(m.hangs, p.hangs);
    add(m.harness_errors, p.harness_errors), add(m.jobs, p.jobs);
    for (size_t k = 0; k < kNumOracles; ++k) {
      add(m.counts[k].checked, p.counts[k].checked), add(m.counts[k].failed, p.counts[k].failed);
      add(m.counts[k].skipped_unsupported, p.counts[k].skipped_unsupported);
      add(m.counts[k].skipped_other, p.counts[k].skipped_other);
      add(m.counts[k].checked_backward_rules, p.counts[k].checked_backward_rules);
      for (size_t why = 0; why < kNumSkipReasons; ++why) add(m.counts[k].skipped_by[why], p.counts[k].skipped_by[why]);
      m.counts[k].seconds += p.counts[k].seconds;
    }
    for (const auto& [op, per] : p.coverage)
      for (const auto& [dev, n] : per) {
        auto& cell = m.coverage[op][dev];
        add(cell[0], n[0]), add(cell[1], n[1]);
      }
    for (const auto& [op, per] : p.failing)
      for (const auto& [dev, n] : per) add(m.failing[op][dev], n);
    for (const auto& [op, per] : p.expected_failing)
      for (const auto& [dev, n] : per) add(m.expected_failing[op][dev], n);
    for (size_t k = 0; k < m.config.expect.size(); ++k) add(m.config.expect[k].matched, p.config.expect[k].matched);
    for (const FailureRecord& f : p.failures) {
      FailureRecord* g = m.find(f.signature());
      if (g && g->program_index <= f.program_index) {
        add(g->occurrences, f.occurrences);
        continue;
      }
      // New, or first shown by an earlier program than the record's: this shard's record is kept.
      FailureRecord kept = f;
      if (g) {
        add(kept.occurrences, g->occurrences);
        for (const char* suffix : {"", ".orig"}) fs::remove(fs::path(out_dir) / (g->file + suffix), ec);
        m.failures.erase(m.failures.begin() + (g - m.failures.data()));
      }
      if (!f.file.empty()) {
        kept.file = failure_file_name(f.program_index, f.oracle(), f.info.value("op", ""), f.signature());
        if (!out_dir.empty()) {
          for (const char* suffix : {"", ".orig"}) {
            const fs::path from = path_in(dirs[i], f.file + suffix);
            if (!*suffix || fs::exists(from))
              fs::copy_file(from, fs::path(out_dir) / (kept.file + suffix), fs::copy_options::overwrite_existing);
          }
        }
      }
      m.add_failure(std::move(kept));
    }
  }
  m.provenance.started = started;
  m.provenance.host = join(std::vector<std::string>(hosts.begin(), hosts.end()), ",");
  return m;
}

}  // namespace crossfire::harness
