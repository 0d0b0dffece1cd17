// SPDX-License-Identifier: Apache-2.0
// fuzz_program_run: arbitrary bytes as a hand-written program, run the way `crossfire replay` and `reduce` run a
// file. Whatever parses is checked by every oracle on the CPU devices under a time budget, and a failing program is
// reduced a little. The check may report findings (a hand-written program may be invalid, and replay shows that)
// or raise ProgramError (it cannot run here, is past the program limits, or ran out of time), but nothing else:
// no crash, UB, hang, unbounded allocation or untyped exception (contract section 7). The reducer's result must be
// a program the parser reads back. This is the path of a stand-in built for a failed node, of inputs that cannot
// be made and of node results past the limits, which no generated program reaches.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "crossfire/harness/oracles.hpp"
#include "crossfire/harness/reduce.hpp"

namespace {

using namespace crossfire;
using namespace crossfire::harness;

// Programs that name a device of another backend are left to replay: fuzzing stays on the host's CPU devices.
bool cpu_only(const Program& p) {
  auto cpu = [](Device d) { return d.backend == BackendKind::cpu; };
  for (const Value& v : p.values) {
    if (v.is_input()) {
      if (!cpu(v.input().device)) return false;
      continue;
    }
    for (const NodeArg& a : v.node().args) {
      if (const auto* d = std::get_if<Device>(&a); d && !cpu(*d)) return false;
      if (const auto* r = std::get_if<ValueRef>(&a); r && r->on && !cpu(*r->on)) return false;
      if (const auto* l = std::get_if<std::vector<ValueRef>>(&a))
        for (const ValueRef& r : *l)
          if (r.on && !cpu(*r.on)) return false;
    }
  }
  return true;
}

[[noreturn]] void fail(const char* what, const std::string& detail, const Program& p) {
  std::fprintf(stderr, "fuzz_program_run: %s: %s\n%s\n", what, detail.c_str(), print_program(p).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Program p;
  try {
    p = parse_program(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const ParseError&) {
    return 0;  // fuzz_program_parse covers the parser's errors
  }
  if (!cpu_only(p)) return 0;

  CheckOptions o;
  o.devices = {Device::cpu(0), Device::cpu(1)};
  o.keep_node_table = true;  // replay's path
  o.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  ProgramReport r;
  try {
    r = check_program(p, o);
  } catch (const ProgramError&) {
    return 0;
  } catch (const std::exception& e) {
    fail("check_program raised an untyped error", e.what(), p);
  }
  if (r.failures.empty()) return 0;
  try {
    const Program red = reduce_program(p, o, r.failures.front(), nullptr, 12);
    if (!(parse_program(print_program(red)) == red)) fail("the reduced program does not round-trip", "", red);
  } catch (const ProgramError&) {
  } catch (const ParseError& e) {
    fail("the reducer returned a program its parser refuses", e.what(), p);
  } catch (const std::exception& e) {
    fail("reduce_program raised an untyped error", e.what(), p);
  }
  return 0;
}
