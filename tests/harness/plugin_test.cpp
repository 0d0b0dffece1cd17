// SPDX-License-Identifier: Apache-2.0
// `crossfire --plugin` end to end (issue 15, docs/your-backend.md), on the test plug-ins of tests/plugins/: a
// working plug-in's backend gets every oracle and the reports name its devices; every broken plug-in is refused in
// one line that names it and the problem, never a crash; a plug-in kernel that throws, crashes or computes a wrong
// value is that op's failure, with its program saved, and the campaign goes on.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/plugin.hpp"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status;
  std::string out;
};

// `crossfire ARGS` (stdout and stderr) under a time limit, with `env` before it (VAR=value ...).
Result run(const std::string& args, const std::string& env = "", int limit_s = 120) {
  const std::string command =
      fmt::format("env -u CROSSFIRE_PLUGINS {} timeout -s KILL {} {} {} 2>&1", env, limit_s, CROSSFIRE_CLI, args);
  FILE* f = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int st = ::pclose(f);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

std::string plugin(const std::string& mode) { return std::string(CROSSFIRE_TEST_PLUGINS) + "/plugin_" + mode + ".so"; }

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("crossfire-plugin-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

nlohmann::json report(const fs::path& dir) {
  std::ifstream f(dir / "report.json");
  return nlohmann::json::parse(f);
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// Each way a plug-in can be wrong: exit 2 and one line, "crossfire: plugin PATH: <problem>".
TEST(Plugins, EveryBrokenPluginIsRefusedInOneLineNamingItAndTheProblem) {
  fs::path d = temp_dir("broken");
  fs::create_directories(d);
  std::ofstream(d / "not-a-library.so") << "this is text, not an ELF shared object\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(d / "missing.so").string(), "no such file"},
      {d.string(), "is a directory"},
      {(d / "not-a-library.so").string(), "cannot load:"},
      {plugin("unresolved"), "cannot load:"},
      {plugin("no_entry"), "exports no `crossfire_plugin` entry point"},
      {plugin("bad_abi"), fmt::format("built for plug-in ABI version {}, but this crossfire", crossfire::kPluginAbiVersion + 1)},
      {plugin("bad_layout"), "rebuild the plug-in against this crossfire"},
      {plugin("throws"), "registration failed: no licence for the accelerator"},
      {plugin("clash"), "a backend called `cpu` is already registered"},
      {plugin("bad_name"), "the name `My-Backend` is not a-z"},
      {plugin("none"), "registration added no backend"},
  };
  for (const auto& [path, problem] : cases) {
    for (const std::string& args : {"--plugin " + path + " backends", "run --programs 3 --plugin " + path}) {
      Result r = run(args);
      EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
      EXPECT_EQ(lines(r.out), 1) << args << "\n" << r.out;
      EXPECT_EQ(r.out.rfind("crossfire: plugin " + path + ": ", 0), 0u) << r.out;
      EXPECT_NE(r.out.find(problem), std::string::npos) << problem << "\n" << r.out;
    }
    // The same through the environment.
    Result e = run("backends", "CROSSFIRE_PLUGINS=" + path);
    EXPECT_EQ(e.status, 2) << e.out;
    EXPECT_NE(e.out.find(problem), std::string::npos) << e.out;
  }
  // A plug-in whose registration threw registered nothing, not even the backend it added before throwing.
  EXPECT_EQ(run("--plugin " + plugin("throws") + " backends").out.find("early"), std::string::npos);
  fs::remove_all(d);
}

// A backend with no devices loads; asking for it is the usual one-line unavailable reason.
TEST(Plugins, ABackendWithNoDevicesIsUnavailableWithItsReason) {
  Result list = run("--plugin " + plugin("no_devices") + " backends");
  EXPECT_EQ(list.status, 0) << list.out;
  EXPECT_NE(list.out.find("ghost"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("no accelerator found (test plug-in)"), std::string::npos) << list.out;
  Result r = run("run --programs 3 --backends ghost --plugin " + plugin("no_devices"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out, "crossfire: ghost: unavailable: no accelerator found (test plug-in)\n");
}

// A backend that is not loaded is unknown everywhere a backend is named, never silently skipped.
TEST(Plugins, ABackendThatIsNotLoadedIsAnError) {
  Result b = run("run --programs 3 --backends cpu,plug");
  EXPECT_EQ(b.status, 2) << b.out;
  EXPECT_NE(b.out.find("unknown backend `plug` (known: cpu, vulkan, cuda)"), std::string::npos) << b.out;
  fs::path d = temp_dir("unloaded");
  fs::create_directories(d);
  std::ofstream(d / "p.program") << "crossfire-program 1\ninput %0 f32 [2] plug:0 tracked = 0x1p+0 0x1p+1\n"
                                    "node %1 neg x=%0\nbackward %1\n";
  Result r = run("replay " + (d / "p.program").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("unknown backend `plug`"), std::string::npos) << r.out;
  // With the plug-in loaded the same file runs on its device.
  Result ok = run("replay --plugin " + plugin("good") + " " + (d / "p.program").string());
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("plug:0"), std::string::npos) << ok.out;
  fs::remove_all(d);
}

// A working plug-in's backend gets the whole campaign: every oracle, mismatches against the built-in backends blamed
// with its device names, per-op scores in the reports.
TEST(Plugins, APluginsBackendGetsEveryOracleAndItsDevicesInTheReports) {
  Result list = run("backends --json", "CROSSFIRE_PLUGINS=" + plugin("good"));
  ASSERT_EQ(list.status, 0) << list.out;
  auto j = nlohmann::json::parse(list.out);
  auto plug = std::find_if(j.begin(), j.end(), [](const auto& b) { return b["name"] == "plug"; });
  ASSERT_NE(plug, j.end()) << list.out;
  EXPECT_EQ((*plug)["devices"].size(), 2u);

  fs::path d = temp_dir("good");
  // --plugin after the subcommand, and the same plug-in twice (environment and option): loaded once.
  Result r = run("run --programs 300 --seed 11 --jobs 2 --backends cpu:0,plug --out " + d.string() + " --plugin " +
                     plugin("good"),
                 "CROSSFIRE_PLUGINS=" + plugin("good"));
  ASSERT_EQ(r.status, 0) << r.out;
  auto rep = report(d);
  EXPECT_EQ(rep["programs"], 300);
  EXPECT_EQ(rep["config"]["devices"], nlohmann::json({"cpu:0", "plug:0", "plug:1"}));
  for (const char* oracle : {"contract", "agreement", "gradients", "bad_input"})
    EXPECT_GT(rep["oracles"][oracle]["checked"].get<long>(), 0) << oracle;
  int ops_on_plug = 0;
  for (const auto& [op, per_device] : rep["coverage"].items())
    if (per_device.contains("plug:0") && per_device["plug:0"]["checked"].get<long>() > 0) ++ops_on_plug;
  EXPECT_GT(ops_on_plug, 20) << rep["coverage"].dump();
  EXPECT_EQ(rep["plugins"], nlohmann::json({plugin("good")})) << "loaded once";
  fs::remove_all(d);
}

// Faults in a plug-in's kernels (tests/plugins/test_plugin.cpp, mode faulty): neg throws a non-crossfire exception,
// exp crashes the process, relu is off by one, sum is left out. Each is its op's finding (or, for sum, Unsupported,
// never a failure), with a program saved, and the campaign runs every program it was asked for.
TEST(Plugins, APluginKernelThatThrowsCrashesOrIsWrongIsThatOpsFailure) {
  fs::path d = temp_dir("faulty");
  Result r = run("run --programs 200 --seed 5 --jobs 1 --ops neg,exp,relu,sum,add --backends cpu:0,faulty --out " +
                     d.string() + " --plugin " + plugin("faulty"),
                 "", 240);
  EXPECT_EQ(r.status, 1) << r.out;
  auto rep = report(d);
  EXPECT_EQ(rep["programs"], 200);
  EXPECT_TRUE(rep["complete"].get<bool>());
  std::set<std::string> failed_ops;
  for (const auto& f : rep["failure_list"]) {
    failed_ops.insert(f["op"].get<std::string>());
    EXPECT_TRUE(fs::exists(d / f["file"].get<std::string>())) << f.dump();
    // The crash is blamed on the op that was running and its device (Note [The call in flight]), and its replay
    // command loads the plug-in again.
    // A kernel's exception is a BackendFailure, and the kind of error is part of the signature, so that reducing it
    // cannot turn it into another error of the same op (Failure::signature()).
    if (f["op"] == "neg") {
      EXPECT_NE(f["signature"].get<std::string>().find("BackendFailure"), std::string::npos) << f.dump();
    }
    if (f["oracle"] == "supervisor") {
      EXPECT_EQ(f["signature"], "supervisor|exp|crash") << f.dump();
      EXPECT_EQ(f["device"].get<std::string>().rfind("faulty:", 0), 0u) << f.dump();
      EXPECT_NE(f["replay"].get<std::string>().find("--plugin " + plugin("faulty")), std::string::npos) << f.dump();
    }
  }
  for (const char* op : {"neg", "exp", "relu"}) EXPECT_TRUE(failed_ops.count(op)) << op << "\n" << rep["failure_list"].dump(1);
  EXPECT_FALSE(failed_ops.count("sum")) << rep["failure_list"].dump(1);
  EXPECT_FALSE(failed_ops.count("add")) << rep["failure_list"].dump(1);
  EXPECT_GT(rep["coverage"]["sum"]["faulty:0"]["unsupported"].get<long>(), 0) << rep["coverage"]["sum"].dump();
  EXPECT_EQ(rep["coverage"]["sum"]["faulty:0"]["failed"].get<long>(), 0) << rep["coverage"]["sum"].dump();
  EXPECT_GE(rep["crashes"].get<long>(), 1);
  fs::remove_all(d);
}

}  // namespace
