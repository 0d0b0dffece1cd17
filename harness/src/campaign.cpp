// Campaigns: supervisor, worker, reports (see campaign.hpp).
#include "crossfire/harness/campaign.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/harness/reduce.hpp"

namespace crossfire::harness {

using json = nlohmann::json;

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

uint64_t mix(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

CheckOptions check_options(const CampaignConfig& c) {
  CheckOptions o;
  o.devices = c.devices;
  o.enabled = c.oracles;
  o.fault = c.fault;
  return o;
}

// ---- the worker ------------------------------------------------------------------------------------------------

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += size_t(n);
  }
  return true;
}

[[noreturn]] void worker(const CampaignConfig& c, uint64_t start, int fd) {
  ::signal(SIGINT, SIG_IGN);  // the supervisor decides when to stop
  const CheckOptions opts = check_options(c);
  for (uint64_t i = start; c.programs == 0 || i < c.programs; ++i) {
    if (!write_all(fd, json{{"t", "start"}, {"i", i}}.dump() + "\n")) ::_exit(0);
    Program p = campaign_program(c, i);
    if (int64_t(i) == c.crash_at) std::abort();
    if (int64_t(i) == c.hang_at)
      for (;;) ::pause();
    ProgramReport r = check_program(p, opts);
    json msg{{"t", "done"}, {"i", i}, {"nodes", p.num_nodes()}};
    json counts = json::array();
    for (const OracleCounts& k : r.counts)
      counts.push_back({k.checked, k.failed, k.skipped_unsupported, k.skipped_other});
    msg["counts"] = counts;
    json cov = json::object();
    for (const auto& [op, per] : r.coverage)
      for (const auto& [dev, n] : per) cov[op][dev] = {n[0], n[1]};
    msg["coverage"] = cov;
    json fails = json::array();
    std::set<std::string> seen;
    for (const Failure& f : r.failures) {
      if (!seen.insert(f.signature()).second) continue;
      json jf{{"oracle", oracle_name(f.oracle)}, {"node", f.node}, {"op", f.op}, {"what", f.what},
              {"detail", f.detail}, {"signature", f.signature()}, {"program", print_program(p)}};
      // Tell the supervisor before reducing, so a crash while reducing still leaves the original failure.
      write_all(fd, json{{"t", "reducing"}, {"i", i}, {"failure", jf}}.dump() + "\n");
      ReduceStats st;
      Program red = reduce_program(p, opts, f, &st, 200);
      ProgramReport rr = check_program(red, opts);
      for (const Failure& g : rr.failures)
        if (g.signature() == f.signature()) {
          jf["what"] = g.what, jf["detail"] = g.detail, jf["node"] = g.node;
          break;
        }
      jf["reduced"] = print_program(red);
      jf["reduced_nodes"] = red.num_nodes();
      fails.push_back(jf);
    }
    msg["failures"] = fails;
    if (!write_all(fd, msg.dump() + "\n")) ::_exit(0);
  }
  write_all(fd, json{{"t", "finished"}}.dump() + "\n");
  ::_exit(0);
}

// ---- the supervisor's state ------------------------------------------------------------------------------------

struct SavedFailure {
  json info;          // oracle, op, what, detail, signature, program, reduced
  uint64_t program_index = 0;
  uint64_t occurrences = 1;
  std::string file;   // reduced program file, relative to out_dir
};

struct Totals {
  uint64_t programs = 0, nodes = 0, crashes = 0, hangs = 0;
  std::array<OracleCounts, kNumOracles> counts{};
  std::map<std::string, std::map<std::string, std::array<uint64_t, 2>>> coverage;
  std::vector<SavedFailure> failures;
  std::map<std::string, size_t> by_signature;
  uint64_t failed_programs = 0;
  double seconds = 0;
  bool interrupted = false;
};

std::string html_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string devices_str(const std::vector<Device>& ds) {
  std::string s;
  for (const Device& d : ds) s += (s.empty() ? "" : ",") + d.str();
  return s;
}

uint64_t total_failures(const Totals& t) {
  uint64_t n = 0;
  for (const SavedFailure& f : t.failures) n += f.occurrences;
  return n;
}

json report_json(const CampaignConfig& c, const Totals& t) {
  json j;
  j["seed"] = c.seed;
  j["seconds"] = t.seconds;
  j["programs"] = t.programs;
  j["nodes"] = t.nodes;
  j["programs_per_second"] = t.seconds > 0 ? double(t.programs) / t.seconds : 0.0;
  j["failures"] = total_failures(t);
  j["distinct_failures"] = t.failures.size();
  j["crashes"] = t.crashes;
  j["hangs"] = t.hangs;
  j["interrupted"] = t.interrupted;
  json backends = json::array();
  for (BackendKind k : kAllBackendKinds) {
    Backend& b = backend(k);
    json jb{{"name", backend_name(k)}, {"available", b.available()}, {"devices", json::array()}};
    if (!b.available()) jb["reason"] = b.unavailable_reason();
    for (const Device& d : c.devices)
      if (d.backend == k) jb["devices"].push_back(d.str());
    backends.push_back(jb);
  }
  j["backends"] = backends;
  json oracles = json::object();
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = t.counts[size_t(k)];
    oracles[std::string(oracle_name(k))] = {{"enabled", c.oracles[size_t(k)]},
                                            {"checked", n.checked},
                                            {"failed", n.failed},
                                            {"skipped_unsupported", n.skipped_unsupported},
                                            {"skipped_other", n.skipped_other}};
  }
  j["oracles"] = oracles;
  json fails = json::array();
  for (const SavedFailure& f : t.failures) {
    json jf = f.info;
    jf["occurrences"] = f.occurrences;
    jf["program_index"] = f.program_index;
    jf["file"] = f.file;
    fails.push_back(jf);
  }
  j["failure_list"] = fails;
  json cov = json::object();
  for (const auto& [op, per] : t.coverage)
    for (const auto& [dev, n] : per) cov[op][dev] = {{"checked", n[0]}, {"unsupported", n[1]}};
  j["coverage"] = cov;
  return j;
}

std::string junit_xml(const CampaignConfig& c, const Totals& t) {
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  uint64_t tests = 0, failures = 0;
  std::string cases;
  for (OracleKind k : kAllOracles) {
    if (!c.oracles[size_t(k)]) continue;
    ++tests;
    std::string body;
    for (const SavedFailure& f : t.failures)
      if (f.info.value("oracle", "") == oracle_name(k)) {
        body += fmt::format("    <failure message=\"{}\" type=\"{}\">{}\n{}</failure>\n",
                            html_escape(f.info.value("what", "")), html_escape(f.info.value("signature", "")),
                            html_escape(f.info.value("detail", "")), html_escape(f.info.value("reduced", "")));
      }
    if (!body.empty()) ++failures;
    cases += fmt::format("  <testcase classname=\"crossfire.{}\" name=\"{}\" time=\"{:.3f}\">\n{}  </testcase>\n",
                         oracle_name(k), oracle_name(k), t.seconds, body);
  }
  ++tests;
  std::string sup;
  for (const SavedFailure& f : t.failures)
    if (f.info.value("oracle", "") == "supervisor")
      sup += fmt::format("    <failure message=\"{}\">{}</failure>\n", html_escape(f.info.value("what", "")),
                         html_escape(f.info.value("program", "")));
  if (!sup.empty()) ++failures;
  cases += fmt::format("  <testcase classname=\"crossfire.supervisor\" name=\"no crash or hang\" time=\"{:.3f}\">\n{}"
                       "  </testcase>\n", t.seconds, sup);
  x += fmt::format("<testsuites tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n", tests, failures, t.seconds);
  x += fmt::format("<testsuite name=\"crossfire\" tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n", tests, failures,
                   t.seconds);
  x += fmt::format("  <properties><property name=\"seed\" value=\"{}\"/><property name=\"programs\" value=\"{}\"/>"
                   "<property name=\"devices\" value=\"{}\"/></properties>\n",
                   c.seed, t.programs, devices_str(c.devices));
  x += cases + "</testsuite>\n</testsuites>\n";
  return x;
}

std::string report_html(const CampaignConfig& c, const Totals& t) {
  std::string h = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>crossfire campaign</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f0f0f0}td.l,th.l{text-align:left}.bad{color:#b00;font-weight:bold}.good{color:#070;font-weight:bold}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow:auto}.skip{color:#888}
</style></head><body>
)";
  uint64_t nf = total_failures(t);
  h += fmt::format("<h1>crossfire campaign: <span class=\"{}\">{}</span></h1>\n", nf ? "bad" : "good",
                   nf ? fmt::format("{} failure{}", nf, nf == 1 ? "" : "s") : std::string("no failures"));
  h += fmt::format("<p>seed {} &middot; {:.1f} s &middot; {} programs ({} nodes) &middot; {:.1f} programs/s &middot; "
                   "devices {}{}</p>\n",
                   c.seed, t.seconds, t.programs, t.nodes, t.seconds > 0 ? double(t.programs) / t.seconds : 0.0,
                   html_escape(devices_str(c.devices)), t.interrupted ? " &middot; <b>interrupted</b>" : "");
  h += "<h2>Oracles</h2>\n<table><tr><th class=l>oracle</th><th>checked</th><th>failed</th><th>skipped "
       "(unsupported)</th><th>skipped (other)</th></tr>\n";
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = t.counts[size_t(k)];
    h += fmt::format("<tr><td class=l>{}{}</td><td>{}</td><td class=\"{}\">{}</td><td class=skip>{}</td><td "
                     "class=skip>{}</td></tr>\n",
                     oracle_name(k), c.oracles[size_t(k)] ? "" : " (off)", n.checked, n.failed ? "bad" : "", n.failed,
                     n.skipped_unsupported, n.skipped_other);
  }
  h += fmt::format("<tr><td class=l>supervisor</td><td>{}</td><td class=\"{}\">{}</td><td></td><td></td></tr>\n",
                   t.programs, t.crashes + t.hangs ? "bad" : "", t.crashes + t.hangs);
  h += "</table>\n<h2>Failures</h2>\n";
  if (t.failures.empty()) h += "<p>None.</p>\n";
  for (const SavedFailure& f : t.failures) {
    h += fmt::format("<h3>{} &middot; {}</h3>\n<p>{}</p>\n<p>{}</p>\n<p>seen {} time{}; first in program #{}; saved as "
                     "<code>{}</code></p>\n<pre>{}</pre>\n",
                     html_escape(f.info.value("oracle", "")), html_escape(f.info.value("op", "")),
                     html_escape(f.info.value("what", "")), html_escape(f.info.value("detail", "")), f.occurrences,
                     f.occurrences == 1 ? "" : "s", f.program_index, html_escape(f.file),
                     html_escape(f.info.value("reduced", f.info.value("program", ""))));
  }
  // Coverage: per op and device, checked and unsupported node runs.
  std::vector<std::string> devs;
  for (const Device& d : c.devices) devs.push_back(d.str());
  h += "<h2>Coverage</h2>\n<p>Node runs per op and device in the agreement oracle: checked / unsupported.</p>\n"
       "<table><tr><th class=l>op</th>";
  for (const std::string& d : devs) h += "<th>" + html_escape(d) + "</th>";
  h += "</tr>\n";
  for (int i = 0; i < kNumOps; ++i) {
    std::string op(kOpTable[size_t(i)].name);
    h += "<tr><td class=l>" + op + "</td>";
    auto it = t.coverage.find(op);
    for (const std::string& d : devs) {
      std::array<uint64_t, 2> n{0, 0};
      if (it != t.coverage.end())
        if (auto jt = it->second.find(d); jt != it->second.end()) n = jt->second;
      h += fmt::format("<td>{} / <span class=skip>{}</span></td>", n[0], n[1]);
    }
    h += "</tr>\n";
  }
  h += "</table>\n</body></html>\n";
  return h;
}

void write_reports(const CampaignConfig& c, const Totals& t) {
  if (c.out_dir.empty()) return;
  save_text_atomically(c.out_dir + "/report.json", report_json(c, t).dump(2) + "\n");
  save_text_atomically(c.out_dir + "/junit.xml", junit_xml(c, t));
  save_text_atomically(c.out_dir + "/report.html", report_html(c, t));
}

void record_failure(const CampaignConfig& c, Totals& t, json info, uint64_t index) {
  std::string sig = info.value("signature", "");
  t.failed_programs++;
  if (auto it = t.by_signature.find(sig); it != t.by_signature.end()) {
    t.failures[it->second].occurrences++;
    return;
  }
  SavedFailure f;
  f.program_index = index;
  f.file = fmt::format("failures/failure-{:03}-{}-{}.program", t.failures.size() + 1, info.value("oracle", ""),
                       info.value("op", "").empty() ? "program" : info.value("op", ""));
  if (!c.out_dir.empty()) {
    ::mkdir((c.out_dir + "/failures").c_str(), 0777);
    std::string header = fmt::format("# {}\n# {}\n# {}\n# campaign seed {}, program #{}\n", info.value("signature", ""),
                                     info.value("what", ""), info.value("detail", ""), c.seed, index);
    for (char& ch : header)
      if (ch == '\r') ch = ' ';
    std::string text = info.contains("reduced") ? info["reduced"].get<std::string>() : info.value("program", "");
    try {
      save_text_atomically(c.out_dir + "/" + f.file, header + text);
      if (info.contains("reduced"))
        save_text_atomically(c.out_dir + "/" + f.file + ".orig", header + info.value("program", ""));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crossfire: %s\n", e.what());
    }
  }
  f.info = std::move(info);
  t.by_signature[sig] = t.failures.size();
  t.failures.push_back(std::move(f));
}

std::string progress_line(const Totals& t, double secs) {
  std::string s = fmt::format("[{:6.1f}s] {} programs ({:.1f}/s) | failures {}", secs, t.programs,
                              secs > 0 ? double(t.programs) / secs : 0.0, total_failures(t));
  for (OracleKind k : kAllOracles)
    s += fmt::format(" | {} {}/{}", oracle_name(k), t.counts[size_t(k)].checked - t.counts[size_t(k)].failed,
                     t.counts[size_t(k)].checked);
  return s;
}

}  // namespace

Program campaign_program(const CampaignConfig& c, uint64_t index) {
  PrngChoices choices(mix(c.seed, index));
  GenConfig g = c.gen;
  if (g.devices.empty()) g.devices = c.devices;
  return generate_program(choices, g);
}

std::string check_out_dir(const std::string& dir) {
  if (dir.empty()) return "";
  // Create it (one level of parents is enough for the common `out/run1` case).
  std::string parent = dir.substr(0, dir.find_last_of('/'));
  if (!parent.empty() && parent != dir) ::mkdir(parent.c_str(), 0777);
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    return fmt::format("cannot create {}: {}", dir, std::strerror(errno));
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir);
  std::string probe = fmt::format("{}/.crossfire-probe-{}", dir, ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fmt::format("cannot write to {}: {}", dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

int run_campaign(const CampaignConfig& c) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const bool live = c.progress < 0 ? ::isatty(2) != 0 : c.progress == 1;
  Totals t;
  g_interrupted = 0;
  struct sigaction sa{}, old_int{}, old_term{};
  sa.sa_handler = on_sigint;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::signal(SIGPIPE, SIG_IGN);

  uint64_t next = 0;  // the next program a fresh worker starts at
  double last_print = 0, last_report = 0;
  bool finished = false;
  while (!finished && !g_interrupted) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      ::close(fds[0]);
      worker(c, next, fds[1]);
    }
    ::close(fds[1]);
    std::string buf;
    bool in_flight = false;
    uint64_t in_flight_index = 0;
    std::optional<json> reducing;
    double in_flight_since = elapsed();
    bool worker_done = false, killed_for_hang = false, stop = false;
    while (!worker_done) {
      if (g_interrupted) stop = true;
      if (c.seconds > 0 && elapsed() >= c.seconds) stop = true;
      if (c.programs > 0 && t.programs >= c.programs) stop = true;
      if (stop) break;
      pollfd pfd{fds[0], POLLIN, 0};
      int pr = ::poll(&pfd, 1, 100);
      if (pr > 0) {
        char tmp[65536];
        ssize_t n = ::read(fds[0], tmp, sizeof tmp);
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          worker_done = true;
        } else {
          buf.append(tmp, size_t(n));
          size_t nl;
          while ((nl = buf.find('\n')) != std::string::npos) {
            json m = json::parse(buf.substr(0, nl), nullptr, false);
            buf.erase(0, nl + 1);
            if (m.is_discarded()) continue;
            std::string type = m.value("t", "");
            if (type == "start") {
              in_flight = true;
              in_flight_index = m["i"].get<uint64_t>();
              in_flight_since = elapsed();
              reducing.reset();
            } else if (type == "reducing") {
              reducing = m["failure"];
              in_flight_since = elapsed();
            } else if (type == "done") {
              uint64_t i = m["i"].get<uint64_t>();
              t.programs++;
              t.nodes += m.value("nodes", 0);
              for (size_t k = 0; k < kNumOracles; ++k) {
                const json& a = m["counts"][k];
                t.counts[k].add({a[0].get<uint64_t>(), a[1].get<uint64_t>(), a[2].get<uint64_t>(), a[3].get<uint64_t>()});
              }
              for (auto& [op, per] : m["coverage"].items())
                for (auto& [dev, n2] : per.items()) {
                  auto& cell = t.coverage[op][dev];
                  cell[0] += n2[0].get<uint64_t>();
                  cell[1] += n2[1].get<uint64_t>();
                }
              for (const json& f : m["failures"]) record_failure(c, t, f, i);
              in_flight = false;
              reducing.reset();
              next = i + 1;
            } else if (type == "finished") {
              finished = true;
            }
          }
        }
      }
      if (in_flight && elapsed() - in_flight_since > c.hang_seconds) {
        ::kill(pid, SIGKILL);
        killed_for_hang = true;
        worker_done = true;
      }
      double now = elapsed();
      if (live && now - last_print >= 0.25) {
        std::fprintf(stderr, "\r%s\x1b[K", progress_line(t, now).c_str());
        last_print = now;
      } else if (!live && now - last_print >= 5) {
        std::fprintf(stderr, "%s\n", progress_line(t, now).c_str());
        last_print = now;
      }
      if (now - last_report >= 10) {  // reports along the way: a killed campaign still leaves recent ones
        t.seconds = now;
        try {
          write_reports(c, t);
        } catch (const std::exception&) {
        }
        last_report = now;
      }
    }
    ::close(fds[0]);
    int status = 0;
    if (stop || finished) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::waitpid(pid, &status, 0);
    if (in_flight) {
      // The worker died or hung in the middle of a program: a failure, with the program saved.
      uint64_t i = in_flight_index;
      bool hang = killed_for_hang;
      (hang ? t.hangs : t.crashes)++;
      json info;
      if (reducing) {
        info = *reducing;  // the failure was found; the reducer is what crashed or hung
        info["what"] = info.value("what", "") + fmt::format(" (the reducer {})", hang ? "hung" : "crashed");
      } else {
        std::string why = hang ? fmt::format("hang: program ran longer than {} s", c.hang_seconds)
                               : WIFSIGNALED(status) ? fmt::format("crash: worker killed by signal {} ({})",
                                                                   WTERMSIG(status), strsignal(WTERMSIG(status)))
                                                     : fmt::format("crash: worker exited with status {}",
                                                                   WEXITSTATUS(status));
        info = json{{"oracle", "supervisor"}, {"op", ""}, {"node", -1}, {"what", why},
                    {"detail", fmt::format("program #{} of seed {}", i, c.seed)},
                    {"signature", fmt::format("supervisor||{}", hang ? "hang" : "crash")},
                    {"program", print_program(campaign_program(c, i))}};
      }
      t.programs++;
      record_failure(c, t, info, i);
      next = i + 1;
      if (c.programs > 0 && next >= c.programs) break;
    } else if (!finished) {
      break;  // exited between programs (cannot happen unless killed from outside)
    }
  }
  t.seconds = elapsed();
  t.interrupted = g_interrupted != 0;
  if (live) std::fprintf(stderr, "\r%s\x1b[K\n", progress_line(t, t.seconds).c_str());
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);

  // Summary table.
  std::printf("\n%-10s %10s %8s %22s %16s\n", "oracle", "checked", "failed", "skipped (unsupported)",
              "skipped (other)");
  for (OracleKind k : kAllOracles) {
    const OracleCounts& n = t.counts[size_t(k)];
    std::printf("%-10s %10llu %8llu %22llu %16llu%s\n", std::string(oracle_name(k)).c_str(),
                (unsigned long long)n.checked, (unsigned long long)n.failed, (unsigned long long)n.skipped_unsupported,
                (unsigned long long)n.skipped_other, c.oracles[size_t(k)] ? "" : "  (off)");
  }
  std::printf("%-10s %10llu %8llu   (crashes %llu, hangs %llu)\n", "supervisor", (unsigned long long)t.programs,
              (unsigned long long)(t.crashes + t.hangs), (unsigned long long)t.crashes, (unsigned long long)t.hangs);
  std::printf("\n%llu programs, %llu nodes in %.1f s (%.1f programs/s) on %s; seed %llu%s\n",
              (unsigned long long)t.programs, (unsigned long long)t.nodes, t.seconds,
              t.seconds > 0 ? double(t.programs) / t.seconds : 0.0, devices_str(c.devices).c_str(),
              (unsigned long long)c.seed, t.interrupted ? " (interrupted)" : "");
  if (!t.failures.empty()) {
    std::printf("\n%zu distinct failure(s):\n", t.failures.size());
    for (const SavedFailure& f : t.failures)
      std::printf("  [%s] %s: %s (x%llu)%s%s\n", f.info.value("oracle", "").c_str(), f.info.value("op", "").c_str(),
                  f.info.value("what", "").c_str(), (unsigned long long)f.occurrences,
                  c.out_dir.empty() ? "" : "\n      saved: ", c.out_dir.empty() ? "" : (c.out_dir + "/" + f.file).c_str());
  } else {
    std::printf("no failures\n");
  }
  write_reports(c, t);
  if (!c.out_dir.empty()) std::printf("reports: %s/report.json, junit.xml, report.html\n", c.out_dir.c_str());
  return t.failures.empty() ? 0 : 1;
}

}  // namespace crossfire::harness
