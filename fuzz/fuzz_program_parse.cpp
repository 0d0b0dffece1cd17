// SPDX-License-Identifier: Apache-2.0
// fuzz_program_parse: any byte string given to the program parser either parses or raises ParseError (with a line
// and column), never crashes, hangs or allocates without bound; and whatever parses prints back to text that
// parses to the same program and prints identically (the format round-trips exactly).
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "crossfire/harness/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossfire;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  harness::Program p;
  try {
    p = harness::parse_program(text);
  } catch (const ParseError& e) {
    if (e.line < 0 || e.column < 0) std::abort();
    return 0;
  }
  std::string printed = harness::print_program(p);
  harness::Program q = harness::parse_program(printed);  // must not throw
  if (!(q == p) || harness::print_program(q) != printed) {
    std::fprintf(stderr, "round trip changed the program:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
