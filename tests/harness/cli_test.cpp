// SPDX-License-Identifier: Apache-2.0
// The `crossfire` command end to end: backends, a campaign's reports, crash and hang supervision, Ctrl-C, an
// unwritable --out, replay and reduce.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/harness/campaign.hpp"
#include "crossfire/harness/program.hpp"
#include "crossfire/version.hpp"

namespace crossfire::harness {
namespace {

namespace fs = std::filesystem;

struct Result {
  int status;
  std::string out;
};

// The output (stdout and stderr) and exit status of a shell command line.
Result run_shell(const std::string& command) {
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int st = ::pclose(f);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

// Runs the command under a time limit (killed after `limit_s`: status 137), so an option that wrongly starts an
// endless campaign fails the test instead of hanging it.
Result run(const std::string& args, int limit_s = 120) {
  return run_shell(fmt::format("timeout -s KILL {} {} {}", limit_s, CROSSFIRE_CLI, args));
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("crossfire-cli-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// `crossfire ARGS...` running in the background, its output in `log`. A test that ends early still kills it.
class Background {
 public:
  Background(const std::vector<std::string>& args, fs::path log) : log_(std::move(log)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::FILE* f = std::fopen(log_.c_str(), "w");
      if (f) ::dup2(::fileno(f), 1), ::dup2(::fileno(f), 2);
      std::vector<char*> argv{const_cast<char*>(CROSSFIRE_CLI)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(CROSSFIRE_CLI, argv.data());
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) ::kill(pid_, SIGKILL), wait();
    fs::remove(log_);
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  std::string output() const { return read(log_); }
  // Waits for it to end: its exit status, or 128 + the signal that killed it.
  int wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

// Polls `ready` every 50 ms for up to `seconds`; whether it came true.
template <class F>
bool eventually(double seconds, F ready) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// report.json as it is now; an empty object while there is none.
nlohmann::json report_now(const fs::path& dir) {
  auto j = nlohmann::json::parse(read(dir / "report.json"), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

size_t count_lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// A valid program, for replay and reduce.
const char* const kSmallProgram =
    "crossfire-program 1\n"
    "input %0 f32 [2] cpu:0 = 0x1p+0 -0x1p+1\n"
    "input %1 f32 [2] cpu:0 = 0x1p-1 0x1p+0\n"
    "node %2 add lhs=%0 rhs=%1\n";

TEST(Cli, BackendsListsEveryBackend) {
  Result r = run("backends");
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* s : {"cpu:0", "cpu:1", "vulkan", "cuda"}) EXPECT_NE(r.out.find(s), std::string::npos) << r.out;
}

TEST(Cli, CampaignWritesReportsAndExitsZeroWhenNothingFails) {
  fs::path d = temp_dir("ok");
  Result r = run("run --programs 25 --seed 7 --backends cpu --oracles contract,bad_input --out " + d.string());
  EXPECT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["schema"], "crossfire-report/1");
  EXPECT_EQ(j["config"]["seed"], 7);
  EXPECT_EQ(j["programs"], 25);
  EXPECT_EQ(j["failures"], 0);
  EXPECT_TRUE(j.contains("seconds"));
  EXPECT_TRUE(j["backends"].is_array());
  EXPECT_GT(j["oracles"]["contract"]["checked"].get<int>(), 0);
  EXPECT_EQ(j["oracles"]["contract"]["failed"], 0);
  EXPECT_NE(read(d / "junit.xml").find("<testsuite name=\"crossfire campaign (seed 7)\""), std::string::npos);
  std::string html = read(d / "report.html");
  EXPECT_NE(html.find("<html"), std::string::npos);
  EXPECT_NE(html.find("Coverage"), std::string::npos);
  EXPECT_NE(r.out.find("oracle"), std::string::npos) << "summary table";
  fs::remove_all(d);
}

TEST(Cli, ACrashIsARecordedFailureAndTheCampaignGoesOn) {
  fs::path d = temp_dir("crash");
  Result r = run("run --programs 6 --seed 1 --backends cpu --oracles contract --crash-at 2 --out " + d.string());
  EXPECT_EQ(r.status, 1) << r.out;
  auto j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["crashes"], 1);
  EXPECT_EQ(j["programs"], 6) << "programs after the crash still ran";
  ASSERT_EQ(j["failure_list"].size(), 1u);
  fs::path saved = d / j["failure_list"][0]["file"].get<std::string>();
  EXPECT_NO_THROW(load_program(saved.string())) << "the crashing program is saved and replayable";
  fs::remove_all(d);
}

// A program that crashes the worker is reduced like any failing program (Note [Reducing crashes and hangs]): the
// planted fault aborts the process that runs a softmax node, so the reduced program is that one node.
TEST(Cli, ACrashingProgramIsReducedToWhatCrashes) {
  fs::path d = temp_dir("crash-reduced");
  Result r = run("run --programs 30 --seed 1 --backends cpu --plant-fault crash_in_softmax --out " + d.string());
  EXPECT_EQ(r.status, 1) << r.out;
  auto j = nlohmann::json::parse(read(d / "report.json"));
  ASSERT_EQ(j["failure_list"].size(), 1u) << j.dump(2);
  const auto& f = j["failure_list"][0];
  EXPECT_EQ(f["signature"], "supervisor||crash");
  ASSERT_TRUE(f.contains("reduced")) << f.dump(2);
  EXPECT_EQ(f["reduced_nodes"], 1);
  const Program reduced = load_program((d / f["file"].get<std::string>()).string());
  ASSERT_EQ(reduced.num_nodes(), 1);
  EXPECT_EQ(op_def(reduced.values.back().node().op).name, "softmax");
  EXPECT_GT(load_program((d / (f["file"].get<std::string>() + ".orig")).string()).num_nodes(), 1)
      << "the program as found is kept beside it";
  // The saved program still crashes a process that runs it: replay aborts.
  Result replay = run("replay " + (d / f["file"].get<std::string>()).string() + " --plant-fault crash_in_softmax");
  EXPECT_EQ(replay.status, 128 + SIGABRT) << replay.out;
  fs::remove_all(d);
}

TEST(Cli, AHangIsARecordedFailure) {
  fs::path d = temp_dir("hang");
  Result r = run("run --programs 3 --backends cpu --oracles contract --hang-at 1 --hang-seconds 1 --out " + d.string());
  EXPECT_EQ(r.status, 1) << r.out;
  auto j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["hangs"], 1);
  EXPECT_EQ(j["programs"], 3);
  fs::remove_all(d);
}

TEST(Cli, CtrlCStillWritesTheReports) {
  fs::path d = temp_dir("sigint");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(CROSSFIRE_CLI, CROSSFIRE_CLI, "run", "--seconds", "60", "--backends", "cpu", "--oracles", "contract",
            "--out", d.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ::kill(pid, SIGINT);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  auto j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_GT(j["programs"].get<int>(), 0);
  EXPECT_LT(j["seconds"].get<double>(), 30);
  fs::remove_all(d);
}

// SIGINT, SIGTERM and SIGHUP (a closed terminal, which used to kill the campaign without reports) each stop a
// campaign with exit status 3, even with no failure found, so a CI job sees it was cut short; the reports are
// complete and say it was interrupted.
TEST(Cli, AnInterruptedCampaignExitsThree) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    fs::path d = temp_dir(fmt::format("signal-{}", sig));
    Background run({"run", "--seconds", "60", "--backends", "cpu", "--oracles", "contract", "--out", d}, d.string() + ".log");
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    run.signal(sig);
    EXPECT_EQ(run.wait(), 3) << strsignal(sig) << "\n" << run.output();
    auto j = report_now(d);
    EXPECT_EQ(j.value("interrupted", false), true) << strsignal(sig) << j;
    EXPECT_EQ(j.value("complete", false), true) << strsignal(sig) << j;
    EXPECT_NE(run.output().find("(interrupted)"), std::string::npos) << "the summary is printed\n" << run.output();
    fs::remove_all(d);
  }
}

// The reports exist from the start of a campaign (a run killed in its first seconds used to leave an empty --out),
// say they are not complete, and are complete at the end.
TEST(Cli, ReportsAreWrittenFromTheStart) {
  fs::path d = temp_dir("early");
  Background run({"run", "--seconds", "60", "--backends", "cpu", "--oracles", "contract", "--out", d}, d.string() + ".log");
  EXPECT_TRUE(eventually(3, [&] { return report_now(d).contains("config"); })) << "report.json within 3 s";
  EXPECT_EQ(report_now(d).value("complete", true), false) << report_now(d);
  // report.json is written last of the three, so once it is there the others are too (not "eventually").
  EXPECT_TRUE(fs::exists(d / "junit.xml"));
  EXPECT_TRUE(fs::exists(d / "report.html"));
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(), 3) << run.output();
  EXPECT_EQ(report_now(d).value("complete", false), true) << report_now(d);
  fs::remove_all(d);
}

// A new failure is in the reports (and its program saved) as soon as it is recorded, not at the next periodic write.
TEST(Cli, ANewFailureIsReportedAtOnce) {
  fs::path d = temp_dir("failure-now");
  Background run({"run", "--seconds", "60", "--backends", "cpu", "--oracles", "contract", "--crash-at", "0",
                  "--out", d}, d.string() + ".log");
  EXPECT_TRUE(eventually(4, [&] { return report_now(d).value("failures", 0) == 1; })) << report_now(d);
  auto j = report_now(d);
  ASSERT_EQ(j.value("failure_list", nlohmann::json::array()).size(), 1u) << j;
  EXPECT_TRUE(fs::exists(d / j["failure_list"][0]["file"].get<std::string>()));
  EXPECT_EQ(j.value("complete", true), false);
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(), 3) << "interrupted wins over failures found\n" << run.output();
  fs::remove_all(d);
}

// The children of `pid` (from /proc, which every Linux has).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = read(e.path() / "stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == pid) out.push_back(std::stoi(name));
  }
  return out;
}

// Whether `pid` is still running (a zombie waiting for its new parent to reap it is not).
bool running(pid_t pid) {
  std::string stat = read(fs::path("/proc") / std::to_string(pid) / "stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

// A supervisor killed outright (SIGKILL: nothing of it runs) takes its worker with it; a hanging worker used to
// stay, spinning, forever.
TEST(Cli, AKilledSupervisorTakesItsWorkerWithIt) {
  fs::path d = temp_dir("orphan");
  Background run({"run", "--seconds", "60", "--backends", "cpu", "--oracles", "contract", "--hang-at", "0",
                  "--hang-seconds", "1000"}, d.string() + ".log");
  std::vector<pid_t> workers;
  EXPECT_TRUE(eventually(5, [&] { return !(workers = children_of(run.pid())).empty(); })) << "the worker started";
  run.signal(SIGKILL);
  EXPECT_EQ(run.wait(), 128 + SIGKILL);
  for (pid_t w : workers) {
    EXPECT_TRUE(eventually(5, [&] { return !running(w); })) << "worker " << w << " outlived its supervisor";
    ::kill(w, SIGKILL);  // no leftover, should it have outlived
  }
}

// Reusing --out removes the earlier run's reports and saved failures (so no stale failure reads as this run's) and
// says so; files crossfire did not write stay.
TEST(Cli, AReusedOutDirHoldsOnlyThisRunsFailures) {
  fs::path d = temp_dir("reuse");
  Result first = run("run --programs 3 --backends cpu --oracles contract --crash-at 1 --out " + d.string());
  ASSERT_EQ(first.status, 1) << first.out;
  auto j = report_now(d);
  ASSERT_EQ(j.value("failure_list", nlohmann::json::array()).size(), 1u) << j;
  fs::path stale = d / j["failure_list"][0]["file"].get<std::string>();
  ASSERT_TRUE(fs::exists(stale));
  save_text_atomically((d / "notes.txt").string(), "mine\n");
  save_text_atomically((d / "failures" / "notes.txt").string(), "mine\n");
  Result second = run("run --programs 3 --backends cpu --oracles contract --out " + d.string());
  EXPECT_EQ(second.status, 0) << second.out;
  EXPECT_FALSE(fs::exists(stale)) << "the earlier run's failure is gone";
  EXPECT_TRUE(fs::exists(d / "notes.txt"));
  EXPECT_TRUE(fs::exists(d / "failures" / "notes.txt"));
  EXPECT_NE(second.out.find("earlier run"), std::string::npos) << "it says so\n" << second.out;
  EXPECT_EQ(report_now(d).value("failures", -1), 0);
  fs::remove_all(d);
}

// --out creates every missing parent; a path that cannot be a directory is a clear usage error.
TEST(Cli, OutCreatesItsParents) {
  fs::path d = temp_dir("parents");
  Result r = run("run --programs 2 --backends cpu --oracles contract --out " + (d / "a" / "b" / "c").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(d / "a" / "b" / "c" / "report.json"));
  save_text_atomically((d / "file").string(), "not a directory\n");
  Result bad = run("run --programs 2 --backends cpu --oracles contract --out " + (d / "file" / "x").string());
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--out"), std::string::npos) << bad.out;
  EXPECT_EQ(count_lines(bad.out), 1u) << bad.out;
  fs::remove_all(d);
}

// A report that cannot be written (a full disk; here a file size limit, RLIMIT_FSIZE via `ulimit -f`, which fails
// the same write() with EFBIG and needs no root or mount) leaves no torn temp file, does not keep the other reports
// from being written, is named on stderr, and makes the run exit 4: a run that lost its reports must not read as
// clean.
TEST(Cli, AReportThatCannotBeWrittenLeavesNoTempFileAndExitsFour) {
  const std::string args = "run --programs 20 --seed 3 --backends cpu --oracles contract --out ";
  fs::path ref = temp_dir("full-ref");
  ASSERT_EQ(run(args + ref.string()).status, 0);
  const auto junit = fs::file_size(ref / "junit.xml"), json = fs::file_size(ref / "report.json"),
             html = fs::file_size(ref / "report.html");
  // A limit (in 512-byte blocks) that lets junit.xml through, with room for its times to differ, and not the others.
  const auto blocks = (junit + 256 + 511) / 512;
  ASSERT_LT(blocks * 512, std::min(json, html)) << "junit.xml " << junit << ", report.json " << json
                                                << ", report.html " << html << " bytes";
  fs::path d = temp_dir("full");
  // The limit goes on the command alone (its output is a pipe, which no file size limit touches); SIGXFSZ is
  // ignored, as a full disk sends no signal, so write() fails instead of the process being killed.
  Result r = run_shell(fmt::format("ulimit -f {}; trap '' XFSZ; exec timeout -s KILL 120 {} {}{}", blocks,
                                   CROSSFIRE_CLI, args, d.string()));
  EXPECT_EQ(r.status, 4) << r.out;
  for (const char* name : {"report.json", "report.html"})
    EXPECT_NE(r.out.find(fmt::format("cannot write {}/{}", d.string(), name)), std::string::npos) << name << "\n" << r.out;
  EXPECT_NE(read(d / "junit.xml").find("name=\"complete\" value=\"true\""), std::string::npos)
      << "junit.xml, after report.json failed, is the final one";
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "torn temp file " << e.path();
  fs::remove_all(ref);
  fs::remove_all(d);
}

TEST(Cli, AnUnwritableOutDirIsReportedBeforeStarting) {
  Result r = run("run --seconds 30 --out /proc/crossfire-cannot-write-here");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("programs/s"), std::string::npos) << "the campaign did not start";
}

// Every option value that would check nothing (no oracle, no backend, an unknown planted fault that silently
// plants none), run forever (nan, inf) or wrap around (-1 into an unsigned count or seed) is refused before
// anything runs: one line on stderr naming the option, exit status 2. So are CLI11's own parse errors.
TEST(Cli, BadOptionsAreRefusedWithExitStatusTwo) {
  fs::path d = temp_dir("bad-options");
  fs::create_directories(d);
  const std::string prog = (d / "p.program").string();
  save_text_atomically(prog, kSmallProgram);
  const std::string run1 = "run --programs 1 --backends cpu ";  // cheap, should a bad option slip through
  const std::vector<std::pair<std::string, std::string>> cases = {
      {run1 + "--oracles ,", "--oracles"},
      {run1 + "--oracles ''", "--oracles"},
      {run1 + "--oracles no_such_oracle", "--oracles"},
      {run1 + "--oracles \"$(printf 'contract\\nfake line')\"", "--oracles"},  // caller data cannot break the one line
      {"run --programs 1 --oracles contract --backends ,", "--backends"},
      {"run --programs 1 --oracles contract --backends ''", "--backends"},
      {run1 + "--oracles contract --hang-seconds nan", "--hang-seconds"},
      {run1 + "--oracles contract --hang-seconds 0", "--hang-seconds"},
      {run1 + "--oracles contract --hang-seconds -1", "--hang-seconds"},
      {run1 + "--oracles contract --hang-seconds inf", "--hang-seconds"},
      {"run --backends cpu --oracles contract --seconds nan", "--seconds"},
      {"run --backends cpu --oracles contract --seconds -1", "--seconds"},
      {"run --backends cpu --oracles contract --seconds inf", "--seconds"},
      {"run --backends cpu --oracles contract --seconds 0", "--seconds"},
      {"run --backends cpu --oracles contract --programs -1", "--programs"},
      {"run --backends cpu --oracles contract --programs 0", "--programs"},
      {run1 + "--oracles contract --seed -1", "--seed"},
      {run1 + "--oracles contract --seed +1", "--seed"},
      {run1 + "--oracles contract --seed 18446744073709551616", "--seed"},
      {run1 + "--oracles contract --plant-fault no_such_fault", "--plant-fault"},
      {run1 + "--oracles contract --max-nodes 0", "--max-nodes"},
      {run1 + "--oracles contract --max-nodes 31", "--max-nodes"},
      {run1 + "--oracles contract --no-such-option", "--no-such-option"},
      {run1 + "--oracles contract --seconds", "--seconds"},
      {"run --backends cpu --oracles contract --programs many", "--programs"},
      {"run --backends cpu --oracles contract --programs 5 --seconds 5", "--seconds"},
      {"no-such-command", "subcommand"},
      {"", "subcommand"},
      {"replay " + prog + " --backends cpu --oracles ,", "--oracles"},
      {"replay " + prog + " --backends , --oracles contract", "--backends"},
      {"replay " + prog + " --backends cpu --plant-fault no_such_fault", "--plant-fault"},
      {"reduce " + prog + " -o " + (d / "r.program").string() + " --backends cpu --plant-fault no_such_fault",
       "--plant-fault"},
      {"reduce " + prog + " --backends cpu", "--output"},
      {run1 + "--oracles contract --save-programs " + (d / "s").string() + " --save-every 0", "--save-every"},
      {run1 + "--oracles contract --save-programs " + prog, "--save-programs"},  // a file, not a directory
      {"generate --count 0 --backends cpu --out " + (d / "g").string(), "--count"},
      {"generate --count -1 --backends cpu --out " + (d / "g").string(), "--count"},
      {"generate --count 1 --backends cpu", "--out"},
      {"generate --backends cpu --out " + (d / "g").string(), "--count"},
      {"generate --count 2 --first 18446744073709551615 --backends cpu --out " + (d / "g").string(), "--first"},
      {"generate --count 1 --backends , --out " + (d / "g").string(), "--backends"},
      {run1 + "--oracles contract --ops no_such_op", "--ops"},
      {run1 + "--oracles contract --ops ,", "--ops"},
      {run1 + "--oracles contract --large-rate 2", "--large-rate"},
      {run1 + "--oracles contract --large-rate nan", "--large-rate"},
      {run1 + "--oracles contract --large-rate -0.5", "--large-rate"},
  };
  for (const auto& [args, option] : cases) {
    Result r = run(args, 10);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_EQ(count_lines(r.out), 1u) << args << ": one line\n" << r.out;
    EXPECT_NE(r.out.find(option), std::string::npos) << args << ": names " << option << "\n" << r.out;
  }
  // The largest seed and a plain planted fault are fine.
  Result ok = run(run1 + "--oracles contract --seed 18446744073709551615 --plant-fault none", 60);
  EXPECT_EQ(ok.status, 0) << ok.out;
  fs::remove_all(d);
}

// `generate` writes exactly the programs a campaign with the same seed and options checks, and `run
// --save-programs` keeps them as it checks them (issue 16, item 4): both are the campaign's own program_file(), so
// an external oracle can re-check a campaign from the files alone.
TEST(Cli, GenerateWritesTheProgramsACampaignChecks) {
  fs::path d = temp_dir("generate");
  Result g = run("generate --seed 77 --count 6 --backends cpu --max-nodes 12 --out " + (d / "gen").string(), 60);
  ASSERT_EQ(g.status, 0) << g.out;
  Result r = run("run --programs 6 --seed 77 --backends cpu --max-nodes 12 --oracles contract --save-programs " +
                     (d / "saved").string() + " --out " + (d / "out").string(),
                 120);
  ASSERT_EQ(r.status, 0) << r.out;
  CampaignConfig c;
  c.seed = 77;
  c.devices = {Device::cpu(0), Device::cpu(1)};
  c.gen.max_nodes = 12;
  for (uint64_t i = 0; i < 6; ++i) {
    const std::string name = program_file_name(i);
    const std::string gen = read(d / "gen" / name), saved = read(d / "saved" / name);
    EXPECT_EQ(gen, program_file(c, i)) << name;
    EXPECT_EQ(saved, gen) << name;
    EXPECT_EQ(parse_program(gen), campaign_program(c, i)) << name;
  }
  EXPECT_FALSE(fs::exists(d / "gen" / program_file_name(6)));
  // --first and --save-every pick the same numbers.
  ASSERT_EQ(run("generate --seed 77 --count 2 --first 4 --backends cpu --max-nodes 12 --out " + (d / "two").string())
                .status,
            0);
  EXPECT_EQ(read(d / "two" / program_file_name(4)), read(d / "gen" / program_file_name(4)));
  EXPECT_FALSE(fs::exists(d / "two" / program_file_name(3)));
  ASSERT_EQ(run("run --programs 6 --seed 77 --backends cpu --max-nodes 12 --oracles contract --save-every 3 "
                "--save-programs " + (d / "every3").string()).status,
            0);
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(d / "every3")) kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{program_file_name(0), program_file_name(3)}));
  // --ops restricts every node to the ops named (issue 18, item 8), in run and generate alike.
  ASSERT_EQ(run("generate --seed 5 --count 20 --backends cpu --ops matmul,softmax --out " + (d / "ops").string())
                .status,
            0);
  int nodes = 0;
  for (const auto& e : fs::directory_iterator(d / "ops")) {
    std::istringstream in(read(e.path()));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("node ", 0) == 0) {
        nodes++;
        EXPECT_TRUE(line.find(" matmul ") != std::string::npos || line.find(" softmax ") != std::string::npos)
            << line;
      }
  }
  EXPECT_GT(nodes, 20);
  fs::remove_all(d);
}

// `replay --values` writes every value on every device with the reference on that device's own inputs, the
// magnitude, terms and allowed error per element and the verdict: enough for an external oracle to re-check the
// run from the file alone, which this test does (its own comparison, not first_mismatch()).
TEST(Cli, ReplayValuesAreEnoughToRecheckARun) {
  fs::path d = temp_dir("values");
  fs::create_directories(d);
  save_text_atomically((d / "add.program").string(), kSmallProgram);  // [1, -2] + [0.5, 1]
  Result r = run("replay " + (d / "add.program").string() + " --backends cpu:0 --values " + (d / "v.json").string());
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read(d / "v.json"));
  EXPECT_EQ(j["schema"], "crossfire-values/1");
  EXPECT_EQ(j["devices"], nlohmann::json::array({"cpu:0"}));
  ASSERT_EQ(j["values"].size(), 3u) << j;
  const auto& add = j["values"][2];
  EXPECT_EQ(add["op"], "add");
  EXPECT_EQ(add["output"]["values"], nlohmann::json::array({1.5, -1.0}));      // 1 + 0.5, -2 + 1
  EXPECT_EQ(add["reference"]["values"], nlohmann::json::array({1.5, -1.0}));
  EXPECT_EQ(add["magnitude"], nlohmann::json::array({1.5, 3.0}));               // |a| + |b|
  EXPECT_EQ(add["terms"], nlohmann::json::array({1, 1}));
  EXPECT_EQ(add["verdict"]["ok"], true);

  // Generated programs: re-check every judged element from the file, and agree with each verdict.
  ASSERT_EQ(run("generate --seed 11 --count 8 --backends cpu --out " + (d / "gen").string()).status, 0);
  auto num = [](const nlohmann::json& x) {
    if (x.is_string()) return x == "nan" ? std::nan("") : x == "inf" ? HUGE_VAL : -HUGE_VAL;
    return x.get<double>();
  };
  int judged = 0;
  for (uint64_t i = 0; i < 8; ++i) {
    const std::string file = (d / "gen" / program_file_name(i)).string();
    Result rr = run("replay " + file + " --backends cpu --values " + (d / "g.json").string());
    ASSERT_TRUE(rr.status == 0 || rr.status == 1) << rr.out;
    const auto values = nlohmann::json::parse(read(d / "g.json"));
    for (const auto& e : values["values"]) {
      if (!e.contains("verdict") || !e["verdict"]["ok"].is_boolean()) continue;
      bool ok = true;
      const auto &got = e["output"]["values"], &want = e["reference"]["values"], &allowed = e["allowed"];
      ASSERT_EQ(got.size(), want.size()) << e;
      // The rules of docs/program-format.md's "Values file", in order.
      const bool bitwise = e["bound"]["bitwise"].get<bool>();
      // The smallest |x| that rounds to an infinite f32, or to an infinity of the output's dtype where the backend
      // declares that the op accumulates in it.
      const double kOverflow =
          e["bound"]["accumulates_in_dtype"].get<bool>() ? e["overflow"].get<double>() : 0x1p128 - 0x1p103;
      for (size_t k = 0; k < got.size(); ++k) {
        const double g = num(got[k]), w = num(want[k]), m = num(e["magnitude"][k]), a = num(allowed[k]);
        const int64_t terms = e["terms"][k].get<int64_t>();
        if (std::isnan(w)) ok = ok && std::isnan(g);
        else if (!bitwise && terms > 1 && !(m < kOverflow)) continue;  // partial sums past f32: any value
        else if (std::isnan(g)) ok = false;
        else if (bitwise || std::isinf(w))
          ok = ok && g == w && (!e["bound"]["same_bits"].get<bool>() || std::signbit(g) == std::signbit(w));
        else if (std::isinf(g))
          ok = ok && std::signbit(g) == std::signbit(w) && std::fabs(w) + a >= e["overflow"].get<double>();
        else ok = ok && std::fabs(g - w) <= a;
      }
      EXPECT_EQ(ok, e["verdict"]["ok"].get<bool>()) << e;
      judged++;
    }
  }
  EXPECT_GT(judged, 20);
  fs::remove_all(d);
}

// --help prints and exits 0, and its footer lists the exit statuses a CI job reads.
TEST(Cli, HelpListsTheExitStatuses) {
  for (const char* args : {"--help", "run --help", "generate --help"}) {
    Result r = run(args, 10);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
    for (const char* s : {"Exit status", "0 ", "1 ", "2 ", "3 ", "4 ", "docs/cli.md"})
      EXPECT_NE(r.out.find(s), std::string::npos) << args << ": " << s << "\n" << r.out;
  }
}

TEST(Cli, ReplayAndReduce) {
  fs::path d = temp_dir("replay");
  fs::create_directories(d);
  save_text_atomically((d / "ok.program").string(),
                       std::string(kSmallProgram) +
                       "node %3 neg x=%2\n"
                       "node %4 mul lhs=%3 rhs=%2\n");
  Result ok = run("replay " + (d / "ok.program").string() + " --backends cpu");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("%2"), std::string::npos) << "per-node table";
  Result bad = run("replay " + (d / "ok.program").string() + " --backends cpu --plant-fault perturb_float_output");
  if (bad.out.find("agrees with the f64 reference") == std::string::npos &&
      bad.out.find("disagrees") == std::string::npos)
    GTEST_SKIP() << "no CPU kernels or reference yet";
  EXPECT_EQ(bad.status, 1) << bad.out;
  Result red = run("reduce " + (d / "ok.program").string() + " -o " + (d / "small.program").string() +
                   " --backends cpu --plant-fault perturb_float_output");
  EXPECT_EQ(red.status, 0) << red.out;
  Program small = load_program((d / "small.program").string());
  EXPECT_EQ(small.num_nodes(), 1) << read(d / "small.program");
  // Replay says whether the failure the file was saved for (its `# signature` line) is still there, not just
  // whether anything fails: after a fix, an unrelated failure must not read as "the failure reproduces".
  const std::string small_cmd = "replay " + (d / "small.program").string() + " --backends cpu";
  Result again = run(small_cmd + " --plant-fault perturb_float_output");
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("the recorded failure reproduces (agreement|"), std::string::npos) << again.out;
  Result fixed = run(small_cmd);
  EXPECT_EQ(fixed.status, 0) << fixed.out;
  EXPECT_NE(fixed.out.find("no failure reproduces"), std::string::npos) << fixed.out;
  save_text_atomically((d / "other.program").string(),
                       "# gradients|matmul|devices disagree on a gradient\n" + read(d / "small.program"));
  Result other = run("replay " + (d / "other.program").string() + " --backends cpu --plant-fault perturb_float_output");
  EXPECT_EQ(other.status, 1) << other.out;
  EXPECT_NE(other.out.find("the recorded failure (gradients|matmul|devices disagree on a gradient) does not "
                           "reproduce; 1 other failure above"),
            std::string::npos)
      << other.out;
  save_text_atomically((d / "broken.program").string(), "crossfire-program 1\ninput %0 f32 [2] cpu:0 = 1\n");
  Result broken = run("replay " + (d / "broken.program").string());
  EXPECT_EQ(broken.status, 2);
  EXPECT_NE(broken.out.find("broken.program:2:"), std::string::npos) << broken.out;
  fs::remove_all(d);
}

// Issue 17, items 1, 4 and 5 through the command: a hostile or unrunnable file is an error with its own exit status,
// never a crash or "no failure reproduces"; a budget bounds replay and reduce.
TEST(Cli, ReplayOfAProgramThatCannotRunIsAnError) {
  fs::path d = temp_dir("unrunnable");
  fs::create_directories(d);
  auto replay = [&](const std::string& name, const std::string& text, const std::string& extra = "") {
    save_text_atomically((d / name).string(), "crossfire-program 1\n" + text);
    return run("replay " + (d / name).string() + " --backends cpu " + extra);
  };
  Result cat = replay("cat.program", "input %0 f32 [1] cpu:0 = 0x1p+0\nnode %1 cat tensors=[] axis=0\n");
  EXPECT_EQ(cat.status, 0) << cat.out;  // NoTensorInput, as predicted: checked, no crash
  Result missing = replay("missing.program", "input %0 f32 [1] cpu:99 = 0x1p+0\nnode %1 neg x=%0\n");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("cpu:99"), std::string::npos) << missing.out;
  EXPECT_EQ(missing.out.find("no failure reproduces"), std::string::npos) << missing.out;
  Result huge = replay("huge.program", "input %0 f32 [1] cpu:0 = 0x1p+0\nnode %1 expand x=%0 shape=[4096, 4096]\n");
  EXPECT_EQ(huge.status, 2) << huge.out;
  EXPECT_NE(huge.out.find("kMaxNodeElements"), std::string::npos) << huge.out;
  Result nothing = replay("inputs.program", "input %0 f32 [1] cpu:0 = 0x1p+0\n");
  EXPECT_EQ(nothing.status, 2) << nothing.out;
  EXPECT_NE(nothing.out.find("checked nothing"), std::string::npos) << nothing.out;
  const std::string slow = "input %0 f32 [2] cpu:0 = 0x1p+0 0x1p+1\nnode %1 neg x=%0\n";
  Result budget = replay("budget.program", slow, "--seconds 0.000001");
  EXPECT_EQ(budget.status, 4) << budget.out;
  EXPECT_NE(budget.out.find("time budget"), std::string::npos) << budget.out;
  EXPECT_EQ(replay("bad-budget.program", slow, "--seconds nan").status, 2);
  fs::remove_all(d);
}

TEST(Cli, TheHarnessRunningOutOfMemoryIsItsOwnErrorNotAFinding) {
  fs::path d = temp_dir("harness-oom");
  Result r = run("run --programs 3 --backends cpu --out " + d.string() + " --plant-fault harness_out_of_memory");
  EXPECT_EQ(r.status, 4) << r.out;
  nlohmann::json j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["harness_errors"], 3) << j.dump(2);
  for (const auto& f : j["failure_list"]) EXPECT_EQ(f["oracle"], "harness") << f.dump();
  for (const char* k : {"contract", "agreement", "gradients", "bad_input"}) EXPECT_EQ(j["oracles"][k]["failed"], 0);
  EXPECT_NE(read(d / "junit.xml").find("errors=\"1\""), std::string::npos) << read(d / "junit.xml");
  fs::remove_all(d);
  Result nothing = run("run --programs 2 --backends cpu --oracles contract --no-mismatch");
  // Programs whose devices all agree can still be checked by the contract oracle (every call must succeed), so
  // this one checks something; the test of "checked nothing" is the replay above.
  EXPECT_EQ(nothing.status, 0) << nothing.out;
}

// The names of the program files in a directory, with their text.
std::map<std::string, std::string> programs_in(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = read(e.path());
  return out;
}

TEST(Cli, ShardsTogetherCheckExactlyTheWholeCampaign) {
  fs::path d = temp_dir("shards");
  const std::string common = "--programs 23 --seed 11 --backends cpu --oracles contract,agreement,bad_input ";
  Result whole = run("run " + common + "--out " + (d / "whole").string() + " --save-programs " +
                     (d / "whole-programs").string());
  ASSERT_EQ(whole.status, 0) << whole.out;
  std::map<std::string, std::string> union_of_shards;
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    const fs::path out = d / fmt::format("shard{}", i), progs = d / fmt::format("shard{}-programs", i);
    Result r = run(fmt::format("run {} --shard {}/3 --out {} --save-programs {}", common, i, out.string(),
                               progs.string()));
    ASSERT_EQ(r.status, 0) << r.out;
    auto j = nlohmann::json::parse(read(out / "report.json"));
    EXPECT_EQ(j["programs"], (23 - i + 2) / 3) << "shard " << i << " checks its share of the 23 programs";
    for (auto& [name, text] : programs_in(progs)) {
      EXPECT_TRUE(union_of_shards.emplace(name, text).second) << name << " is in two shards";
      EXPECT_EQ(std::stoul(name.substr(8, 6)) % 3, unsigned(i)) << name << " in shard " << i;
    }
    dirs.push_back(out.string());
  }
  EXPECT_EQ(union_of_shards, programs_in(d / "whole-programs")) << "the shards' programs are the whole campaign's";

  Result merged = run("merge " + dirs[2] + " " + dirs[0] + " " + dirs[1] + " --out " + (d / "merged").string());
  ASSERT_EQ(merged.status, 0) << merged.out;
  auto w = nlohmann::json::parse(read(d / "whole" / "report.json"));
  auto m = nlohmann::json::parse(read(d / "merged" / "report.json"));
  for (const char* k : {"programs", "nodes", "failures", "coverage"}) EXPECT_EQ(m[k], w[k]) << k;
  for (const char* o : {"contract", "agreement", "gradients", "bad_input"})
    for (const char* k : {"checked", "failed", "skipped_unsupported", "skipped_other"})
      EXPECT_EQ(m["oracles"][o][k], w["oracles"][o][k]) << o << "." << k;
  EXPECT_EQ(m["oracles"]["gradients"]["skipped_by_reason"], w["oracles"]["gradients"]["skipped_by_reason"]);
  EXPECT_EQ(m["shards"].size(), 3u);
  EXPECT_EQ(m["shards"][0]["index"], 0) << "listed by shard number";
  fs::remove_all(d);
}

TEST(Cli, MergeKeepsEachDistinctFailureOnceWithItsProgram) {
  fs::path d = temp_dir("merge-failures");
  std::vector<nlohmann::json> shards;
  for (int i = 0; i < 2; ++i) {
    Result r = run(fmt::format("run --programs 16 --seed 2 --backends cpu --oracles agreement --plant-fault "
                               "perturb_float_output --shard {}/2 --out {}",
                               i, (d / std::to_string(i)).string()));
    ASSERT_EQ(r.status, 1) << r.out;
    shards.push_back(nlohmann::json::parse(read(d / std::to_string(i) / "report.json")));
  }
  Result r = run("merge " + (d / "0").string() + " " + (d / "1").string() + " --out " + (d / "m").string());
  ASSERT_EQ(r.status, 1) << r.out;
  auto m = nlohmann::json::parse(read(d / "m" / "report.json"));
  std::map<std::string, uint64_t> occurrences;
  for (const auto& s : shards)
    for (const auto& f : s["failure_list"]) occurrences[f["signature"]] += f["occurrences"].get<uint64_t>();
  ASSERT_EQ(m["failure_list"].size(), occurrences.size()) << "one entry per distinct signature";
  for (const auto& f : m["failure_list"]) {
    EXPECT_EQ(f["occurrences"], occurrences[f["signature"]]) << f["signature"];
    fs::path saved = d / "m" / f["file"].get<std::string>();
    ASSERT_TRUE(fs::exists(saved)) << saved;
    EXPECT_NO_THROW(load_program(saved.string()));
    EXPECT_NE(f["replay"].get<std::string>().find(saved.string()), std::string::npos) << f["replay"];
  }
  EXPECT_EQ(m["failures"], m["oracles"]["agreement"]["failures"]);
  // The per-op scores add up too: each (op, device)'s failing programs are the shards' summed.
  for (const auto& [op, per] : m["coverage"].items())
    for (const auto& [dev, cell] : per.items()) {
      uint64_t sum = 0;
      for (const auto& s : shards)
        if (s["coverage"].contains(op) && s["coverage"][op].contains(dev))
          sum += s["coverage"][op][dev]["failed"].get<uint64_t>();
      EXPECT_EQ(cell["failed"], sum) << op << " on " << dev;
    }
  uint64_t failing_programs = 0;
  for (const auto& [op, per] : m["coverage"].items())
    for (const auto& [dev, cell] : per.items()) failing_programs += cell["failed"].get<uint64_t>();
  EXPECT_EQ(failing_programs, m["failures"]) << "each agreement failure here is one op on one device";
  fs::remove_all(d);
}

TEST(Cli, MergeRefusesWhatWouldMakeAWrongTotal) {
  fs::path d = temp_dir("merge-bad");
  auto campaign = [&](const std::string& name, const std::string& args) {
    Result r = run("run --programs 6 --backends cpu --oracles contract " + args + " --out " + (d / name).string());
    ASSERT_EQ(r.status, 0) << r.out;
  };
  campaign("a0", "--seed 1 --shard 0/2");
  campaign("a1", "--seed 1 --shard 1/2");
  campaign("b1", "--seed 2 --shard 1/2");
  campaign("c1", "--seed 1 --shard 1/3");
  auto merge = [&](const std::string& dirs) { return run("merge " + dirs + " --out " + (d / "out").string()); };
  auto refused = [&](const std::string& dirs, const std::string& file, const std::string& why) {
    Result r = merge(dirs);
    EXPECT_EQ(r.status, 2) << dirs << ": " << r.out;
    EXPECT_NE(r.out.find(file), std::string::npos) << "names the file: " << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    EXPECT_EQ(count_lines(r.out), 1u) << r.out;
  };
  const std::string a0 = (d / "a0").string(), a1 = (d / "a1").string();
  refused(a0 + " " + (d / "b1").string(), "b1/report.json", "`seed` is 1 vs 2");
  refused(a0 + " " + a0, "a0/report.json", "both shard 0/2");
  refused(a0 + " " + (d / "c1").string(), "c1/report.json", "split two ways");
  refused(a0 + " " + (d / "nowhere").string(), "nowhere/report.json", "cannot be read");
  EXPECT_EQ(run("merge --out " + (d / "out").string()).status, 2) << "an empty list";

  // The first `from` in `t` becomes `to`.
  auto swap = [](std::string& t, const std::string& from, const std::string& to) {
    ASSERT_NE(t.find(from), std::string::npos) << from;
    t.replace(t.find(from), from.size(), to);
  };
  auto edited = [&](const std::string& name, const std::function<void(std::string&)>& edit) {
    fs::copy(d / "a1", d / name, fs::copy_options::recursive);
    std::string text = read(d / name / "report.json");
    edit(text);
    std::ofstream(d / name / "report.json") << text;
    return (d / name).string();
  };
  refused(a0 + " " + edited("cut", [](std::string& t) { t.resize(t.size() / 2); }), "cut/report.json",
          "not valid JSON");
  refused(a0 + " " + edited("hand", [&](std::string& t) {
            swap(t, "\"failures\": 0", "\"failures\": 5");
          }),
          "hand/report.json", "`failures` is 5");
  refused(a0 + " " + edited("version", [&](std::string& t) {
            swap(t, "\"version\": \"", "\"version\": \"9");
          }),
          "version/report.json", "made by crossfire 9");
  refused(a0 + " " + edited("schema", [&](std::string& t) {
            swap(t, "crossfire-report/1", "crossfire-report/0");
          }),
          "schema/report.json", "schema `crossfire-report/0`");
  refused(a0 + " " + edited("type", [&](std::string& t) {
            swap(t, "\"programs\": 3,", "\"programs\": \"3\",");
          }),
          "type/report.json", "`programs` is not a count");
  refused(a0 + " " + edited("escape", [&](std::string& t) {
            // A saved program's path that leaves failures/ would make the merge copy any file it names.
            swap(t, "\"failure_list\": []", "\"failure_list\": [{\"oracle\": \"contract\", \"op\": \"add\", "
                 "\"what\": \"x\", \"signature\": \"contract|add|x\", \"occurrences\": 1, \"program_index\": 1, "
                 "\"seconds\": 0, \"file\": \"failures/../../../etc/passwd\"}]");
            swap(t, "\"failures\": 0", "\"failures\": 1");
            swap(t, "\"distinct_failures\": 0", "\"distinct_failures\": 1");
          }),
          "escape/report.json", "is not a file in failures/");
  refused(a0 + " " + edited("reasons", [&](std::string& t) {
            swap(t, "\"skipped_by_reason\": {}", "\"skipped_by_reason\": {\"on_kink\": 3}");
          }),
          "reasons/report.json", "adds up to 3, not to `skipped_other` (0)");
  refused(a0 + " " + edited("reason", [&](std::string& t) {
            swap(t, "\"skipped_by_reason\": {}", "\"skipped_by_reason\": {\"bad_luck\": 0}");
          }),
          "reason/report.json", "unknown reason `bad_luck`");
  refused(a0 + " " + edited("shards", [&](std::string& t) {
            swap(t, "\"count\": 2", "\"count\": 18446744073709551615");
          }),
          "shards/report.json", "is not a shard");
  // Both shards: the merge goes through, and equals what they add up to.
  Result ok = merge(a0 + " " + a1);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(nlohmann::json::parse(read(d / "out" / "report.json"))["programs"], 6);
  fs::remove_all(d);
}

// report.json without what differs from run to run: timings, the command line, the directory in replay commands and
// the number of workers.
nlohmann::json without_timings(nlohmann::json j) {
  for (const char* k : {"seconds", "programs_per_second", "started", "command", "jobs"}) j.erase(k);
  for (auto& [name, o] : j["oracles"].items()) o.erase("seconds");
  for (auto& f : j["failure_list"]) f.erase("seconds"), f.erase("replay");
  return j;
}

// Note [Parallel jobs]: N workers check exactly the programs one does, and the report is the same but for timings,
// with failures named and ordered by the first program that showed them whatever order the workers finished in.
TEST(Cli, JobsCheckTheSameProgramsAndReportTheSame) {
  fs::path d = temp_dir("jobs");
  const std::string common = "--programs 60 --seed 4 --backends cpu --oracles contract,agreement,bad_input "
                             "--plant-fault perturb_float_output --crash-at 7 ";
  for (int jobs : {1, 3}) {
    Result r = run(fmt::format("run {} --jobs {} --out {} --save-programs {}", common, jobs,
                               (d / fmt::format("out{}", jobs)).string(), (d / fmt::format("programs{}", jobs)).string()));
    ASSERT_EQ(r.status, 1) << r.out;
  }
  auto one = nlohmann::json::parse(read(d / "out1" / "report.json"));
  auto three = nlohmann::json::parse(read(d / "out3" / "report.json"));
  EXPECT_EQ(one["jobs"], 1);
  EXPECT_EQ(three["jobs"], 3);
  EXPECT_EQ(three["crashes"], 1) << "the crash was recorded and the other workers went on";
  EXPECT_EQ(three["programs"], 60);
  EXPECT_EQ(without_timings(one), without_timings(three));
  EXPECT_EQ(programs_in(d / "programs1"), programs_in(d / "programs3"));
  EXPECT_EQ(programs_in(d / "out1" / "failures"), programs_in(d / "out3" / "failures"))
      << "the same failure files, by name and content";
  fs::remove_all(d);
}

// `run OPTION VALUE` is refused for every one of `values`: exit 2, with a message naming the option.
void expect_refused(const std::string& option, std::initializer_list<const char*> values) {
  for (const char* bad : values) {
    Result r = run(fmt::format("run --programs 4 --backends cpu {} '{}'", option, bad), 30);
    EXPECT_EQ(r.status, 2) << option << " " << bad << ": " << r.out;
    EXPECT_NE(r.out.find(option), std::string::npos) << r.out;
  }
}

TEST(Cli, JobsMustBeACountOfWorkers) {
  expect_refused("--jobs", {"0", "-1", "1025", "two", "1.5", ""});
  // More workers than programs: one per program (docs/cli.md).
  fs::path d = temp_dir("jobs-clamp");
  Result r = run("run --programs 3 --backends cpu --oracles contract --jobs 8 --out " + d.string());
  EXPECT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read(d / "report.json"));
  EXPECT_EQ(j["jobs"], 3);
  EXPECT_EQ(j["programs"], 3);
  fs::remove_all(d);
}

// --expect (docs/report-format.md, Known differences): failures an expect file lists are reported as expected and
// do not fail the run; one it does not list does; an expectation that matched nothing is reported; a malformed
// file is refused with its line.
TEST(Cli, ExpectedFailuresAreReportedButDoNotFailTheRun) {
  fs::path d = temp_dir("expect");
  fs::create_directories(d);
  const std::string common = "run --programs 30 --seed 4 --backends cpu --oracles agreement --plant-fault "
                             "perturb_float_output --jobs 1 ";
  // Which ops the planted fault shows up in depends on what the generator draws; the first run says, so the test
  // holds when the generator changes (a new dtype or op moves every draw after it).
  Result plain = run(common + "--out " + (d / "plain").string());
  ASSERT_EQ(plain.status, 1) << "the planted fault fails the run: " << plain.out;
  auto p = nlohmann::json::parse(read(d / "plain" / "report.json"));
  std::set<std::string> ops;
  for (const auto& f : p["failure_list"]) ops.insert(f["op"].get<std::string>());
  ASSERT_GE(ops.size(), 2u) << "the test needs failures of two ops at this seed: " << p["failure_list"].dump();
  const std::string op = p["failure_list"][0]["op"], dev = p["failure_list"][0]["device"];

  std::ofstream(d / "all.expect") << "# known differences\n"
                                  << dev << " " << op << " agreement \"agreement|" << op << "|*\"  " << op
                                  << "'s output is perturbed on purpose\n"
                                     "cpu   *   agreement *                    the planted fault, everywhere else\n"
                                     "vulkan add agreement *                   not seen on a CPU-only run\n";
  std::ofstream(d / "one-op.expect") << dev << " " << op << " agreement * " << op
                                     << "'s output is perturbed on purpose\n";
  Result all = run(common + "--expect " + (d / "all.expect").string() + " --out " + (d / "all").string());
  EXPECT_EQ(all.status, 0) << all.out;
  auto j = nlohmann::json::parse(read(d / "all" / "report.json"));
  EXPECT_EQ(j["failures"], p["failures"]);
  EXPECT_EQ(j["unexpected_failures"], 0);
  for (const auto& f : j["failure_list"]) EXPECT_TRUE(f.contains("expected")) << f.dump();
  ASSERT_EQ(j["expectations"].size(), 3u);
  EXPECT_GT(j["expectations"][0]["matched"].get<int>(), 0) << op << "'s failures match the first line";
  EXPECT_EQ(j["expectations"][2]["matched"], 0) << "the vulkan line matched nothing";
  EXPECT_NE(all.out.find("expected but not seen in this run: vulkan add agreement"), std::string::npos) << all.out;
  const std::string junit = read(d / "all" / "junit.xml");
  EXPECT_NE(junit.find("failures=\"0\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<skipped message=\"expected (" + op + "&#39;s output is perturbed on purpose)"),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("classname=\"crossfire.expect\""), std::string::npos) << "the stale line is reported";

  Result some = run(common + "--expect " + (d / "one-op.expect").string() + " --out " + (d / "some").string());
  EXPECT_EQ(some.status, 1) << "failures the file does not list fail the run: " << some.out;
  auto k = nlohmann::json::parse(read(d / "some" / "report.json"));
  EXPECT_GT(k["unexpected_failures"].get<int>(), 0);
  EXPECT_LT(k["unexpected_failures"].get<int>(), k["failures"].get<int>());

  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"cpu div agreement\n", ":1: want WHERE OP ORACLE PATTERN REASON"},
           {"# fine\ngpu div agreement * x\n", ":2: `gpu` names no backend"},
           {"cpu frobnicate agreement * x\n", ":1: no op is named `frobnicate`"},
           {"cpu div oracle9 * x\n", ":1: no oracle is named `oracle9`"},
           {"cpu div agreement \"open x\n", ":1: the pattern's quote is not closed"}}) {
    std::ofstream(d / "bad.expect") << text;
    Result r = run("run --programs 2 --backends cpu --expect " + (d / "bad.expect").string(), 30);
    EXPECT_EQ(r.status, 2) << text << r.out;
    EXPECT_NE(r.out.find("bad.expect" + why), std::string::npos) << r.out;
  }
  EXPECT_EQ(run("run --programs 2 --backends cpu --expect " + (d / "missing.expect").string(), 30).status, 2);
  fs::remove_all(d);
}

TEST(Cli, ShardMustBeOneOfN) {
  expect_refused("--shard", {"2/2", "0/0", "junk", "1/", "/3", "-1/2", "1/2/3", "0x1/2", "", "0/65537"});
}

TEST(Cli, VersionAndBackendsAsJson) {
  Result v = run("--version");
  EXPECT_EQ(v.status, 0) << v.out;
  EXPECT_EQ(v.out.rfind("crossfire " CROSSFIRE_VERSION_STRING, 0), 0u) << v.out;
  Result b = run("backends --json");
  ASSERT_EQ(b.status, 0) << b.out;
  auto j = nlohmann::json::parse(b.out);
  ASSERT_TRUE(j.is_array());
  std::set<std::string> names;
  for (const auto& x : j) {
    names.insert(x["name"].get<std::string>());
    if (!x["available"].get<bool>()) {
      EXPECT_FALSE(x["reason"].get<std::string>().empty()) << x.dump();
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"cpu", "vulkan", "cuda"}));
  EXPECT_EQ(j[0]["devices"].size(), 2u) << "cpu:0 and cpu:1";
}

}  // namespace
}  // namespace crossfire::harness
