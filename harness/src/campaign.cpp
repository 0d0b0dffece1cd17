// SPDX-License-Identifier: Apache-2.0
// Campaigns: supervisor, worker, reports (see campaign.hpp).
#include "crossfire/harness/campaign.hpp"

#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/harness/exit_status.hpp"
#include "crossfire/harness/reduce.hpp"
#include "crossfire/harness/report.hpp"

namespace crossfire::harness {

using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

// The signals that stop a campaign: Ctrl-C, `kill`/`timeout`, and a closed terminal. Each makes the supervisor stop,
// print the summary, write the reports and exit kExitInterrupted.
constexpr std::array<int, 3> kStopSignals{SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_interrupted = 0;
void on_stop_signal(int) { g_interrupted = 1; }

// Handles kStopSignals for as long as it lives, then puts back the handlers there were.
class StopSignals {
 public:
  StopSignals() {
    g_interrupted = 0;
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kStopSignals.size(); ++i) ::sigaction(kStopSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < kStopSignals.size(); ++i) ::sigaction(kStopSignals[i], &old_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  std::array<struct sigaction, kStopSignals.size()> old_{};
};

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

std::string devices_str(const std::vector<Device>& ds) {
  std::string s;
  for (const Device& d : ds) s += (s.empty() ? "" : ",") + d.str();
  return s;
}

// The comment lines that open a generated program's file (program_file, save_generated).
std::string program_header(const CampaignConfig& c, uint64_t index) {
  std::vector<Device> devs = c.gen.devices.empty() ? c.devices : c.gen.devices;
  std::string devices;
  for (const Device& d : devs) devices += (devices.empty() ? "" : ",") + d.str();
  std::string ops;
  for (OpId id : c.gen.ops) ops += (ops.empty() ? ", ops " : ",") + std::string(op_def(id).name);
  return fmt::format("# campaign seed {}, program #{}\n# generated for {} (max {} nodes{}{}, large rate {})\n",
                     c.seed, index, devices, c.gen.max_nodes, c.gen.mismatches ? "" : ", no mismatches", ops,
                     c.gen.large_rate);
}

// `run --save-programs`: one file per kept program, written atomically but not synced: thousands a second would
// wait on the disk otherwise, and a program lost to a power cut is generated again from its seed. A failure to
// write is told once on stderr; the campaign goes on.
void save_generated(const CampaignConfig& c, uint64_t index, const Program& p) {
  static bool warned = false;
  try {
    save_text_atomically(c.save_programs + "/" + program_file_name(index), program_header(c, index) + print_program(p),
                         /*durable=*/false);
  } catch (const std::runtime_error& e) {
    if (!warned) std::fprintf(stderr, "crossfire: --save-programs: %s\n", e.what());
    warned = true;
  }
}

// Note [Worker messages]
// A worker tells its supervisor, per program, that it starts (`S i`) and what checking it found (`D ...`): two
// lines per program, thousands a second with several workers. So the common ones are plain text, not JSON, and a
// program's done line goes out in one write with the next program's start (it is sent before that program is
// generated, so a crash in it is still blamed on it). Only the rare messages are JSON objects: a program with
// failures or a harness error (its done message), a failure being reduced, a worker's last message (`F`).
//   S <i>
//   D <i> <nodes> (<checked> <failed> <skipped unsupported> <skipped other> <seconds> <checked backward rules> <r>
//                  (<skip reason> <count>) x r) x 4 oracles <n>
//     (<op id> <device position in c.devices> <checked> <unsupported>) x n      (coverage)
std::string done_line(uint64_t i, int nodes, const ProgramReport& r, const std::vector<Device>& devices) {
  std::string s = fmt::format("D {} {}", i, nodes);
  for (const OracleCounts& k : r.counts) {
    fmt::format_to(std::back_inserter(s), " {} {} {} {} {} {}", k.checked, k.failed, k.skipped_unsupported,
                   k.skipped_other, k.seconds, k.checked_backward_rules);
    const auto reasons = std::count_if(k.skipped_by.begin(), k.skipped_by.end(), [](uint64_t n) { return n > 0; });
    fmt::format_to(std::back_inserter(s), " {}", reasons);
    for (size_t why = 0; why < kNumSkipReasons; ++why)
      if (k.skipped_by[why] > 0) fmt::format_to(std::back_inserter(s), " {} {}", why, k.skipped_by[why]);
  }
  std::string cov;
  size_t n = 0;
  for (const ProgramReport::OpCoverage& c : r.coverage) {
    const auto d = std::find(devices.begin(), devices.end(), c.device);
    if (d == devices.end()) continue;
    fmt::format_to(std::back_inserter(cov), " {} {} {} {}", c.op, d - devices.begin(), c.counts[0], c.counts[1]);
    ++n;
  }
  return s + fmt::format(" {}", n) + cov + "\n";
}

// Note [A worker keeps its freed memory]
// A program's checks allocate and free the same large blocks again and again: each device's tensors read back into
// the f64 reference's vectors, the reference's own values, a large program's 2^17-element tensors (8 bytes an
// element in f64). glibc gives a block of 128 KB or more its own mmap (a threshold that it raises only after such a
// block is freed, up to 32 MB) and hands the top of its heap back to the kernel once 128 KB of it is free, so each
// program faulted its pages in anew and zeroed them again: 84,000 minor page faults in 8,000 programs on cpu:0,
// cpu:1 and vulkan:0, and ~20% of the run's time (docs/benchmarks.md). A worker therefore keeps what it frees: large
// blocks come from the heap (mmap threshold 32 MB, glibc's largest) and up to 64 MB of free heap stay mapped. That
// is memory a worker has used once already; a campaign's processes are the supervisor and its workers only.
void keep_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

[[noreturn]] void worker(const CampaignConfig& c, uint64_t start, int fd) {
  keep_freed_memory();
  const CheckOptions opts = check_options(c);
  std::string pending;  // the last program's done message, sent with the next start (Note [Worker messages])
  for (uint64_t i = start; c.programs == 0 || i < c.programs; i = c.next_index(i)) {
    if (!write_all(fd, pending + fmt::format("S {}\n", i))) ::_exit(0);
    pending.clear();
    Program p = campaign_program(c, i);
    if (!c.save_programs.empty() && i % c.save_every == 0) save_generated(c, i, p);
    if (int64_t(i) == c.crash_at) std::abort();
    if (int64_t(i) == c.hang_at)
      for (;;) ::pause();
    ProgramReport r;
    std::optional<std::string> harness_error;
    try {
      r = check_program(p, opts);
    } catch (const std::exception& e) {
      // The harness itself failed on this program (out of memory, a generated program past the program limits):
      // recorded as the harness's error, never as a finding about a backend or an op, and the campaign goes on.
      harness_error = printable(e.what(), 400);
    }
    pending = done_line(i, p.num_nodes(), r, c.devices);
    if (r.failures.empty() && !harness_error) continue;
    json msg{{"t", "done"}, {"line", pending}};
    pending.clear();
    if (harness_error) msg["harness_error"] = *harness_error, msg["program"] = print_program(p);
    json fails = json::array();
    std::set<std::string> seen;
    for (const Failure& f : r.failures) {
      if (!seen.insert(f.signature()).second) continue;
      json jf{{"oracle", oracle_name(f.oracle)}, {"node", f.node}, {"op", f.op}, {"device", f.device}, {"what", f.what},
              {"detail", f.detail}, {"signature", f.signature()}, {"program", print_program(p)}};
      // Tell the supervisor before reducing, so a crash while reducing still leaves the original failure.
      write_all(fd, json{{"t", "reducing"}, {"i", i}, {"failure", jf}}.dump() + "\n");
      ReduceStats st;
      Program red = p;
      ProgramReport rr;
      try {
        red = reduce_program(p, opts, f, &st, 200);
        rr = check_program(red, opts);
      } catch (const std::exception&) {
        red = p;  // the failure stands as found; only its reduction failed
      }
      for (const Failure& g : rr.failures)
        if (g.signature() == f.signature()) {
          jf["what"] = g.what, jf["detail"] = g.detail, jf["node"] = g.node, jf["device"] = g.device;
          break;
        }
      jf["reduced"] = print_program(red);
      jf["reduced_nodes"] = red.num_nodes();
      fails.push_back(jf);
    }
    msg["failures"] = fails;
    if (!write_all(fd, msg.dump(-1, ' ', false, json::error_handler_t::replace) + "\n")) ::_exit(0);
  }
  write_all(fd, pending + "F\n");
  ::_exit(0);
}

// ---- the supervisor's state ------------------------------------------------------------------------------------

// What the report says before anything ran: the configuration, where and when, and the backends.
CampaignReport initial_report(const CampaignConfig& c) {
  CampaignReport r;
  r.provenance = make_provenance(c.command);
  for (const Device& d : c.devices) r.config.devices.push_back(d.str());
  r.config.seed = c.seed;
  r.config.oracles = c.oracles;
  r.config.seconds_limit = c.seconds;
  r.config.programs_limit = c.programs;
  r.config.hang_seconds = c.hang_seconds;
  r.config.shard = c.shard;
  r.jobs = c.jobs;
  r.config.planted_fault = std::string(planted_fault_name(c.fault));
  r.config.expect = c.expect;
  std::vector<std::string> ops;
  for (OpId id : c.gen.ops) ops.emplace_back(op_def(id).name);
  r.config.generator = {{"max_nodes", c.gen.max_nodes},
                        {"mismatches", c.gen.mismatches},
                        {"ops", ops},
                        {"large_programs",
                         {{"rate", c.gen.large_rate},
                          {"extents", c.gen.extents.empty() ? kernel_extents_of(c.devices) : c.gen.extents},
                          {"max_elements", c.gen.large_elements}}}};
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    BackendStatus s{std::string(backend_name(k)), b.available(), b.available() ? "" : b.unavailable_reason(), {}};
    for (const Device& d : c.devices)
      if (d.backend == k) s.devices.push_back(d.str());
    r.backends.push_back(std::move(s));
  }
  return r;
}

// The reports while the campaign runs (`"complete": false`): at the start, after each new failure and every 10 s,
// so a campaign killed at any point (SIGKILL, a lost machine) leaves recent ones. A failure to write them is told
// once (`warned`), not every 10 s; the campaign goes on, since the final write may yet succeed.
void write_progress_reports(const CampaignConfig& c, const CampaignReport& t, bool& warned) {
  std::vector<std::string> errors = write_reports(c.out_dir, t);
  if (errors.empty() || warned) return;
  for (const std::string& e : errors) std::fprintf(stderr, "crossfire: %s (the campaign goes on)\n", e.c_str());
  warned = true;
}

// Records a failure the worker found or the supervisor saw; true when it is a new one (not seen before in this
// campaign), whose program is now saved. With several workers (Note [Parallel jobs]) programs finish out of order:
// a failure seen before, but now in an earlier program, takes that program's record (and file), so the report
// names the same first program whatever the order.
bool record_failure(const CampaignConfig& c, CampaignReport& t, json info, uint64_t index, double seconds) {
  const std::string sig = info.value("signature", "");
  const bool expected = t.apply_expectations(info);  // (--expect; every occurrence counts for its expectation)
  t.count_failing(info.value("op", ""), info.value("device", ""), expected);
  FailureRecord* seen = t.find(sig);
  if (seen && seen->program_index <= index) {
    seen->occurrences++;
    return false;
  }
  FailureRecord f;
  f.program_index = index;
  f.seconds = seconds;
  f.occurrences = seen ? seen->occurrences + 1 : 1;
  f.file = failure_file_name(index, info.value("oracle", ""), info.value("op", ""), sig);
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
  if (seen) {  // the later program's record and files give way
    if (!c.out_dir.empty())
      for (const char* suffix : {"", ".orig"}) ::unlink((c.out_dir + "/" + seen->file + suffix).c_str());
    *seen = std::move(f);
    t.sort_failures();
    return false;
  }
  t.add_failure(std::move(f));
  return true;
}

std::string progress_line(const CampaignReport& t, double secs) {
  std::string s = fmt::format("[{:6.1f}s] {} programs ({:.1f}/s) | failures {}", secs, t.programs,
                              secs > 0 ? double(t.programs) / secs : 0.0, t.total_failures());
  for (OracleKind k : kAllOracles)
    s += fmt::format(" | {} {}/{}", oracle_name(k), t.counts[size_t(k)].checked - t.counts[size_t(k)].failed,
                     t.counts[size_t(k)].checked);
  return s;
}

// ---- the supervisor ---------------------------------------------------------------------------------------------

// A worker process and what the supervisor knows of it.
struct Worker {
  pid_t pid = -1;
  int fd = -1;                    // the read end of its pipe
  std::string buf;                // the start of a message not yet complete
  bool in_flight = false;         // between a program's "start" and its "done"
  uint64_t in_flight_index = 0;
  double in_flight_since = 0;     // since its start, or since the reducer started (what a hang is timed from)
  double program_started = 0;
  std::optional<json> reducing;   // the failure it is reducing, while it is
  const std::atomic<uint32_t>* call_word = nullptr;  // the call it is making (Note [The call in flight])
};

// Forks a worker that checks programs from `start` on.
Worker start_worker(const CampaignConfig& c, uint64_t start, double now, std::atomic<uint32_t>* call_word) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  std::fflush(nullptr);
  call_word->store(0, std::memory_order_relaxed);
  const pid_t supervisor = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // The worker dies with its supervisor: one killed outright (SIGKILL, the OOM killer) while its worker hangs
    // would otherwise leave the worker spinning forever. The death signal only covers a death after the call, so
    // a supervisor that died since fork() is caught by comparing getppid().
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) ::_exit(0);
    // The supervisor decides when to stop; a terminal sends SIGINT and SIGHUP to the whole process group, and a
    // worker dying of them would read as a crash.
    for (int sig : kStopSignals) ::signal(sig, SIG_IGN);
    ::close(fds[0]);
    set_call_in_flight_word(call_word);
    worker(c, start, fds[1]);
  }
  ::close(fds[1]);
  Worker w;
  w.pid = pid;
  w.fd = fds[0];
  w.in_flight_since = now;
  w.call_word = call_word;
  return w;
}

// The coverage the workers send, added up per (op, device) in a plain array; written into the report's Coverage
// (by op and device name) when a report is written.
class CoverageTally {
 public:
  explicit CoverageTally(const CampaignConfig& c) : devices_(c.devices), cells_(size_t(kNumOps) * c.devices.size()) {}
  void add(const std::vector<uint64_t>& flat) {
    for (size_t k = 0; k + 3 < flat.size(); k += 4) {
      const uint64_t op = flat[k], dev = flat[k + 1];
      if (op >= uint64_t(kNumOps) || dev >= devices_.size()) continue;
      auto& cell = cells_[op * devices_.size() + dev];
      cell[0] += flat[k + 2];
      cell[1] += flat[k + 3];
    }
  }
  void write_to(Coverage& out) const {
    out.clear();
    for (size_t op = 0; op < size_t(kNumOps); ++op)
      for (size_t d = 0; d < devices_.size(); ++d)
        if (const auto& cell = cells_[op * devices_.size() + d]; cell[0] || cell[1])
          out[std::string(op_def(OpId(op)).name)][devices_[d].str()] = cell;
  }

 private:
  std::vector<Device> devices_;
  std::vector<std::array<uint64_t, 2>> cells_;
};

// A done line (Note [Worker messages]), read: the program, its node count, the oracles' counts and the flat
// coverage; nullopt when it is malformed.
struct ProgramDone {
  uint64_t i = 0, nodes = 0;
  std::array<OracleCounts, kNumOracles> counts{};
  std::vector<uint64_t> coverage;
};
std::optional<ProgramDone> parse_done_line(const std::string& line) {
  const char* p = line.c_str();
  if (*p++ != 'D') return std::nullopt;
  bool ok = true;
  auto whole = [&] {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(p, &end, 10);
    ok &= end != p && errno == 0;
    p = end;
    return uint64_t(v);
  };
  ProgramDone d;
  d.i = whole(), d.nodes = whole();
  for (OracleCounts& k : d.counts) {
    k.checked = whole(), k.failed = whole(), k.skipped_unsupported = whole(), k.skipped_other = whole();
    char* end = nullptr;
    k.seconds = std::strtod(p, &end);
    ok &= end != p;
    p = end;
    k.checked_backward_rules = whole();
    ok &= k.checked_backward_rules <= k.checked;
    const uint64_t reasons = whole();
    uint64_t sum = 0;
    for (uint64_t j = 0; ok && j < reasons; ++j) {
      const uint64_t why = whole(), n = whole();
      ok &= why < kNumSkipReasons;
      if (ok) k.skipped_by[why] += n, sum += n;
    }
    ok &= sum == k.skipped_other;
  }
  const uint64_t n = whole();
  for (uint64_t k = 0; ok && k < 4 * n; ++k) d.coverage.push_back(whole());
  return ok ? std::optional<ProgramDone>(std::move(d)) : std::nullopt;
}

// What one message from the worker changed.
struct MessageEffect {
  bool new_failure = false;  // a failure not seen before in this campaign was recorded
  bool finished = false;     // the worker checked its last program
};

// Applies one message (a line) from the worker; `next` becomes the program a fresh worker would start at.
MessageEffect handle_message(const CampaignConfig& c, CampaignReport& t, CoverageTally& coverage, Worker& w,
                             const std::string& line, double now, uint64_t& next) {
  MessageEffect effect;
  if (line.starts_with("S ")) {
    w.in_flight = true;
    w.in_flight_index = std::strtoull(line.c_str() + 2, nullptr, 10);
    w.in_flight_since = w.program_started = now;
    w.reducing.reset();
    return effect;
  }
  if (line == "F") {
    effect.finished = true;
    return effect;
  }
  json m;  // a JSON message: a done with failures or a harness error, or a failure being reduced
  if (!line.starts_with("D ")) {
    m = json::parse(line, nullptr, false);
    if (m.is_discarded()) return effect;
    if (m.value("t", "") == "reducing") {
      w.reducing = m["failure"];
      w.in_flight_since = now;
      return effect;
    }
    if (m.value("t", "") != "done") return effect;
  }
  const std::optional<ProgramDone> done = parse_done_line(m.is_null() ? line : m.value("line", ""));
  if (!done) return effect;
  const uint64_t i = done->i;
  t.programs++;
  t.nodes += done->nodes;
  for (size_t k = 0; k < kNumOracles; ++k) t.counts[k].add(done->counts[k]);
  coverage.add(done->coverage);
  if (!m.is_null()) {
    for (const json& f : m["failures"]) effect.new_failure |= record_failure(c, t, f, i, now - w.program_started);
    if (m.contains("harness_error")) {
      t.harness_errors++;
      const std::string what = m["harness_error"].get<std::string>();
      json info{{"oracle", kHarnessFinding}, {"op", ""}, {"device", ""}, {"node", -1}, {"what", "harness error: " + what},
                {"detail", fmt::format("program #{} of seed {}", i, c.seed)},
                {"signature", fmt::format("harness||{}", what.substr(0, what.find(':')))},
                {"program", m.value("program", "")}};
      effect.new_failure |= record_failure(c, t, info, i, now - w.program_started);
    }
  }
  w.in_flight = false;
  w.reducing.reset();
  next = c.next_index(i);
  return effect;
}

// Note [Reducing crashes and hangs]
// A program that crashes or hangs the worker is reduced like any failing program, but not in the worker, which
// is gone. The supervisor forks a reducer process that runs reduce_while() (reduce.hpp) with each candidate checked
// by all the campaign's oracles in a child of its own: the candidate still fails when that child dies of a signal
// (a crash) or is still running after --hang-seconds (a hang). The reducer writes the reduced program to a pipe.
// The supervisor waits for it at most 60 s for a crash, 3 x --hang-seconds (at most 300 s) for a hang; past that,
// or if the reducer itself dies or the campaign is interrupted, the program is kept as it was found.

// Whether checking `p` crashes (or, with `hang`, hangs) a process: a child runs the check.
bool crashes_or_hangs(const CheckOptions& opts, const Program& p, bool hang, double hang_seconds) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    try {
      check_program(p, opts);
    } catch (...) {
    }
    ::_exit(0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return !hang && WIFSIGNALED(status);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > hang_seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return hang;
    }
    ::usleep(2000);
  }
}

// The reduced form of a program that crashed or hung the worker (Note [Reducing crashes and hangs]); nullopt, with
// why in `why_not`, when it could not be reduced.
std::optional<std::string> reduce_dead_program(const CampaignConfig& c, const Program& p, bool hang,
                                               std::string& why_not) {
  const double budget = hang ? std::min(300.0, 3 * c.hang_seconds) : 60.0;
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(fds[0]);
    const CheckOptions opts = check_options(c);
    const auto t0 = std::chrono::steady_clock::now();
    ReduceGoal goal;
    goal.fails = [&](const Program& candidate) -> std::optional<int> {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > budget)
        throw ProgramError(ProgramError::Reason::over_budget, -1, "the reduction ran past its time budget");
      if (crashes_or_hangs(opts, candidate, hang, c.hang_seconds)) return -1;
      return std::nullopt;
    };
    std::string text;
    try {
      if (!goal.fails(p)) ::_exit(2);  // it does not crash (hang) again in a fresh process
      text = print_program(reduce_while(p, opts, goal, nullptr, 200));
    } catch (...) {
      ::_exit(1);
    }
    write_all(fds[1], text);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  const auto t0 = std::chrono::steady_clock::now();
  bool done = false;
  while (!done && !g_interrupted &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < budget + 5) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) done = true;
    else text.append(buf, size_t(n));
  }
  ::close(fds[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0 && !text.empty()) return text;
  why_not = done && WIFEXITED(status) && WEXITSTATUS(status) == 2
                ? fmt::format("it did not {} again in a fresh process", hang ? "hang" : "crash")
                : "its reduction did not finish";
  return std::nullopt;
}

// The worker died or hung in the middle of a program: a failure, with the program saved. True when it is new.
bool record_worker_death(const CampaignConfig& c, CampaignReport& t, const Worker& w, int status, bool hang,
                         double now) {
  uint64_t i = w.in_flight_index;
  (hang ? t.hangs : t.crashes)++;
  json info;
  if (w.reducing) {
    info = *w.reducing;  // the failure was found; the reducer is what crashed or hung
    info["what"] = info.value("what", "") + fmt::format(" (the reducer {})", hang ? "hung" : "crashed");
  } else {
    std::string why = hang ? fmt::format("hang: program ran longer than {} s", c.hang_seconds)
                           : WIFSIGNALED(status) ? fmt::format("crash: worker killed by signal {} ({})",
                                                               WTERMSIG(status), strsignal(WTERMSIG(status)))
                                                 : fmt::format("crash: worker exited with status {}",
                                                               WEXITSTATUS(status));
    const Program p = campaign_program(c, i);
    // The op it was calling, when it was in one (Note [The call in flight]): the finding is that op's, on that device.
    const std::optional<CallInFlight> call = decode_call_in_flight(w.call_word->load(std::memory_order_relaxed));
    const std::string op = call ? std::string(op_def(call->op).name) : "";
    if (call) why = fmt::format("{} in `{}` on {}", why, op, call->device.str());
    info = json{{"oracle", kSupervisorFinding}, {"op", op}, {"device", call ? call->device.str() : devices_str(c.devices)},
                {"node", -1}, {"what", why}, {"detail", fmt::format("program #{} of seed {}", i, c.seed)},
                {"signature", fmt::format("supervisor|{}|{}", op, hang ? "hang" : "crash")},
                {"program", print_program(p)}};
    // Only a failure whose record this program becomes is worth the time a reduction takes: one not seen before, or
    // seen only in later programs (with several workers, Note [Parallel jobs]).
    const FailureRecord* seen = t.find(info["signature"].get<std::string>());
    if (!seen || i < seen->program_index) {
      std::string why_not;
      if (std::optional<std::string> reduced = reduce_dead_program(c, p, hang, why_not)) {
        info["reduced"] = *reduced;
        info["reduced_nodes"] = parse_program(*reduced).num_nodes();
      } else {
        info["detail"] = info["detail"].get<std::string>() + "; not reduced: " + why_not;
      }
    }
  }
  t.programs++;
  return record_failure(c, t, info, i, now - w.program_started);
}

// Note [Parallel jobs]
// `--jobs N` runs N workers side by side, each a supervised process of its own, over disjoint programs of the seed:
// worker j checks the programs the shard's stride-N interleaving gives it (programs i = shard.index +
// shard.count * (j + N * k), k = 0, 1, ...; CampaignConfig::lane_start and next_index). So with --programs P the
// workers together check exactly the programs one worker would, and the report is the same apart from timings:
// counts add up the same, and a failure's record is that of the first program that showed it, whichever worker
// saw it first (record_failure). Each worker is isolated as one is: a crash or a hang is recorded, that worker is
// restarted after the program it died on, and the others go on. The built-in backends are safe to drive from
// several processes at once (each worker has its own CPU devices, Vulkan instance and CUDA context).

// Runs workers until the campaign is over (its time or programs are done, or a stop signal came), restarting each
// after a crash or hang; the totals, with `interrupted` set when a signal stopped it.
CampaignReport supervise(const CampaignConfig& c) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const bool live = c.progress < 0 ? ::isatty(2) != 0 : c.progress == 1;
  CampaignReport t = initial_report(c);
  CoverageTally coverage(c);
  StopSignals stop_signals;
  ::signal(SIGPIPE, SIG_IGN);
  double last_print = 0, last_report = 0;
  bool warned = false;
  auto progress_reports = [&] {
    t.seconds = elapsed();
    coverage.write_to(t.coverage);
    write_progress_reports(c, t, warned);
    last_report = t.seconds;
  };
  progress_reports();  // a campaign killed in its first seconds still leaves reports

  // One lane per job: its worker, and the program a fresh worker of the lane starts at.
  struct Lane {
    Worker w;
    uint64_t next = 0;
    bool running = false, finished = false;
  };
  std::vector<Lane> lanes(c.jobs);
  // Each lane's word of Note [The call in flight], in memory its workers share with the supervisor: one mapping for
  // the campaign, unmapped when supervise() returns (every worker has been waited for by then).
  const size_t words_bytes = sizeof(std::atomic<uint32_t>) * c.jobs;
  void* words = ::mmap(nullptr, words_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (words == MAP_FAILED) throw std::runtime_error(fmt::format("mmap: {}", std::strerror(errno)));
  const std::unique_ptr<void, std::function<void(void*)>> unmap(words, [=](void* p) { ::munmap(p, words_bytes); });
  auto* call_words = static_cast<std::atomic<uint32_t>*>(words);
  for (uint64_t j = 0; j < c.jobs; ++j) new (&call_words[j]) std::atomic<uint32_t>(0);
  auto has_programs = [&](uint64_t i) { return c.programs == 0 || i < c.programs; };
  for (uint64_t j = 0; j < c.jobs; ++j) {
    lanes[j].next = c.lane_start(j);
    lanes[j].finished = !has_programs(lanes[j].next);
  }
  auto stopping = [&] {
    return g_interrupted || (c.seconds > 0 && elapsed() >= c.seconds) ||
           (c.programs > 0 && t.programs >= c.programs_in_shard());
  };
  // Ends a lane's worker: one that died in the middle of a program is a failure, and the lane starts again after it.
  auto end_worker = [&](Lane& lane, bool killed_for_hang) {
    ::close(lane.w.fd);
    int status = 0;
    if (stopping()) {  // a worker that ended because the campaign is stopping is no failure, whatever it died of
      ::kill(lane.w.pid, SIGKILL);
      ::waitpid(lane.w.pid, &status, 0);
      lane.running = false;
      return;
    }
    ::waitpid(lane.w.pid, &status, 0);
    lane.running = false;
    if (!lane.w.in_flight) {  // exited between programs (cannot happen unless killed from outside)
      lane.finished = true;
      return;
    }
    if (record_worker_death(c, t, lane.w, status, killed_for_hang, elapsed())) progress_reports();
    lane.next = c.next_index(lane.w.in_flight_index);
    if (!has_programs(lane.next)) lane.finished = true;
  };

  while (!stopping()) {
    std::vector<pollfd> fds;
    std::vector<size_t> of;  // the lane of each entry of fds
    for (size_t j = 0; j < lanes.size(); ++j) {
      Lane& lane = lanes[j];
      if (!lane.running && !lane.finished) {
        lane.w = start_worker(c, lane.next, elapsed(), &call_words[j]);
        lane.running = true;
      }
      if (lane.running) fds.push_back({lane.w.fd, POLLIN, 0}), of.push_back(j);
    }
    if (fds.empty()) break;  // every lane checked its last program
    // Messages are read in batches: after a poll that found some, the supervisor lets 1 ms of them gather before
    // the next. Woken for every message (two per program, thousands of programs a second with several workers),
    // it spent a third of a core in the kernel and took that core from the workers (docs/benchmarks.md, Parallel
    // campaigns); a hang is still seen within --hang-seconds plus 1 ms.
    if (::poll(fds.data(), fds.size(), 100) > 0) {
      ::usleep(1000);
      for (size_t k = 0; k < fds.size(); ++k) {
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Lane& lane = lanes[of[k]];
        char tmp[65536];
        ssize_t n = ::read(lane.w.fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          end_worker(lane, /*killed_for_hang=*/false);
          continue;
        }
        lane.w.buf.append(tmp, size_t(n));
        size_t nl;
        size_t at = 0;
        while ((nl = lane.w.buf.find('\n', at)) != std::string::npos) {
          const std::string line = lane.w.buf.substr(at, nl - at);
          at = nl + 1;
          MessageEffect e = handle_message(c, t, coverage, lane.w, line, elapsed(), lane.next);
          lane.finished |= e.finished;
          if (e.new_failure) progress_reports();  // its program is saved; the reports say so at once
        }
        lane.w.buf.erase(0, at);
      }
    }
    for (Lane& lane : lanes)
      if (lane.running && lane.w.in_flight && elapsed() - lane.w.in_flight_since > c.hang_seconds) {
        ::kill(lane.w.pid, SIGKILL);
        end_worker(lane, /*killed_for_hang=*/true);
      }
    double now = elapsed();
    if (live && now - last_print >= 0.25) {
      std::fprintf(stderr, "\r%s\x1b[K", progress_line(t, now).c_str());
      last_print = now;
    } else if (!live && now - last_print >= 5) {
      std::fprintf(stderr, "%s\n", progress_line(t, now).c_str());
      last_print = now;
    }
    if (now - last_report >= 10) progress_reports();
  }
  for (Lane& lane : lanes)
    if (lane.running) {
      ::kill(lane.w.pid, SIGKILL);
      ::close(lane.w.fd);
      int status = 0;
      ::waitpid(lane.w.pid, &status, 0);
    }
  t.seconds = elapsed();
  coverage.write_to(t.coverage);
  t.interrupted = g_interrupted != 0;
  if (live) std::fprintf(stderr, "\r%s\x1b[K\n", progress_line(t, t.seconds).c_str());
  return t;
}

void print_summary(const CampaignConfig& c, const CampaignReport& t) {
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
  for (const Expectation& e : t.config.expect)
    if (e.matched == 0)
      std::printf("expected but not seen in this run: %s %s %s %s (%s)\n", e.where.c_str(), e.op.c_str(),
                  e.oracle.c_str(), e.pattern.c_str(), e.source.c_str());
  if (t.failures.empty()) {
    std::printf("no failures\n");
    return;
  }
  std::printf("\n%zu distinct failure(s):\n", t.failures.size());
  for (const FailureRecord& f : t.failures)
    std::printf("  [%s] %s: %s (x%llu)%s%s%s\n", f.info.value("oracle", "").c_str(), f.info.value("op", "").c_str(),
                f.info.value("what", "").c_str(), (unsigned long long)f.occurrences,
                f.expected() ? (" expected: " + f.info.value("expected", "")).c_str() : "",
                c.out_dir.empty() ? "" : "\n      saved: ", c.out_dir.empty() ? "" : (c.out_dir + "/" + f.file).c_str());
}

// The highest status that applies wins (docs/cli.md): a run whose final reports are lost, or that was cut short,
// must read as such even when it found failures, so a CI job takes neither for a complete record (and a run that
// lost its reports is never read as clean).
int campaign_exit_status(const CampaignConfig& c, const CampaignReport& t, bool reports_written) {
  if (!reports_written || t.harness_errors > 0) return kExitInternal;
  if (t.interrupted) return kExitInterrupted;
  if (t.unexpected_failures() > 0) return kExitFailures;  // (failures --expect names do not fail a run)
  return checked_anything(t.counts, c.oracles) ? kExitClean : kExitUsage;
}

}  // namespace

Program campaign_program(const CampaignConfig& c, uint64_t index) {
  PrngChoices choices(mix(c.seed, index));
  GenConfig g = c.gen;
  if (g.devices.empty()) g.devices = c.devices;
  if (g.extents.empty()) g.extents = kernel_extents_of(g.devices);
  return generate_program(choices, g);
}

std::vector<int64_t> kernel_extents_of(const std::vector<Device>& devices) {
  std::vector<int64_t> e;
  for (const Device& d : devices)
    for (int64_t x : backend_for(d).kernel_extents())
      if (std::find(e.begin(), e.end(), x) == e.end()) e.push_back(x);
  std::sort(e.begin(), e.end());
  return e;
}

std::string program_file_name(uint64_t index) { return fmt::format("program-{:06}.program", index); }

std::string program_file(const CampaignConfig& c, uint64_t index) {
  return program_header(c, index) + print_program(campaign_program(c, index));
}

std::string check_out_dir(const std::string& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  fs::create_directories(dir, ec);  // every missing parent too: `--out runs/2024/nightly`
  if (ec) return fmt::format("cannot create {}: {}", dir, ec.message());
  if (!fs::is_directory(dir, ec)) return fmt::format("{} is not a directory", dir);
  std::string probe = fmt::format("{}/.crossfire-probe-{}", dir, ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fmt::format("cannot write to {}: {}", dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

namespace {
// The names crossfire gives its own files in --out (written by hand rather than with std::regex, which g++ 12
// warns about inside libstdc++ under the sanitizers, and which would be slow to build here anyway).
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
// NAME, or NAME.tmp.PID (a temp file left by a run killed while writing NAME): NAME.
std::string_view without_tmp(std::string_view n) {
  const size_t p = n.rfind(".tmp.");
  return p != std::string_view::npos && all_digits(n.substr(p + 5)) ? n.substr(0, p) : n;
}
bool is_report_name(std::string_view n) {
  n = without_tmp(n);
  return n == "report.json" || n == "junit.xml" || n == "report.html";
}
// failure-NNN-<oracle>-<op>-<hash>.program (failure_file_name(); NNN, the first program, of three digits or more,
// which also covers the failure-NNN-<oracle>-<op>.program of earlier versions), and its .orig.
bool is_failure_name(std::string_view n) {
  n = without_tmp(n);
  if (n.ends_with(".orig")) n.remove_suffix(5);
  if (!n.starts_with("failure-") || !n.ends_with(".program") || n.size() < 16) return false;
  n = n.substr(8, n.size() - 16);  // between "failure-" and ".program"
  size_t d = 0;
  while (d < n.size() && n[d] >= '0' && n[d] <= '9') ++d;
  return d >= 3 && d + 1 < n.size() && n[d] == '-';
}
}  // namespace

std::vector<std::string> remove_earlier_run(const std::string& dir) {
  if (dir.empty()) return {};
  std::vector<std::string> removed;
  auto sweep = [&](const fs::path& d, bool (*is_ours)(std::string_view), const std::string& prefix) {
    std::error_code ec;
    std::vector<fs::path> matches;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file(ec) && is_ours(e.path().filename().string())) matches.push_back(e.path());
    for (const fs::path& p : matches)
      if (fs::remove(p, ec)) removed.push_back(prefix + p.filename().string());
  };
  sweep(dir, is_report_name, "");
  sweep(fs::path(dir) / "failures", is_failure_name, "failures/");
  std::error_code ec;
  if (fs::is_empty(fs::path(dir) / "failures", ec)) fs::remove(fs::path(dir) / "failures", ec);
  return removed;
}

int run_campaign(const CampaignConfig& c) {
  CampaignReport t = supervise(c);
  t.complete = true;
  print_summary(c, t);
  std::fflush(stdout);  // the summary before any error about the reports
  std::vector<std::string> errors = write_reports(c.out_dir, t);
  for (const std::string& e : errors) std::fprintf(stderr, "crossfire: %s\n", e.c_str());
  if (!c.out_dir.empty() && errors.empty())
    std::printf("reports: %s/report.json, junit.xml, report.html\n", c.out_dir.c_str());
  if (!checked_anything(t.counts, c.oracles) && t.failures.empty())
    std::fprintf(stderr, "crossfire: the run checked nothing (%llu programs, no check by an enabled oracle): not a "
                         "pass\n", (unsigned long long)t.programs);
  return campaign_exit_status(c, t, errors.empty());
}

}  // namespace crossfire::harness
