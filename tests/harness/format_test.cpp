// SPDX-License-Identifier: Apache-2.0
// The program text format: exact round trips, and parse errors with line and column for malformed, truncated and
// oversized programs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/program.hpp"

namespace crossfire::harness {
namespace {

TEST(ProgramFormat, GeneratedProgramsRoundTripExactly) {
  GenConfig cfg;
  cfg.devices = {Device::cpu(0), Device::cpu(1), Device::vulkan(0)};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    PrngChoices c(seed);
    Program p = generate_program(c, cfg);
    std::string text = print_program(p);
    Program q = parse_program(text);
    ASSERT_EQ(q, p) << text;
    ASSERT_EQ(print_program(q), text);
  }
}

TEST(ProgramFormat, FloatsAreExactIncludingSpecialValues) {
  const float vals[] = {0.0f, -0.0f, 0.1f, -3.5f, 1e-45f, 3.4028235e38f, INFINITY, -INFINITY, NAN};
  Program p;
  InputDef in;
  in.dtype = DType::f32;
  in.shape = Shape{int64_t(std::size(vals))};
  in.device = Device::cpu(1);
  in.tracked = true;
  for (float f : vals) in.f32_bits.push_back(f32_to_bits(f));
  p.values.push_back(Value{in});
  std::string text = print_program(p);
  Program q = parse_program(text);
  ASSERT_EQ(q.values.size(), 1u);
  for (size_t i = 0; i < std::size(vals); ++i) {
    float got = bits_to_f32(q.values[0].input().f32_bits[i]);
    if (std::isnan(vals[i])) EXPECT_TRUE(std::isnan(got));
    else EXPECT_EQ(f32_to_bits(got), f32_to_bits(vals[i])) << text;
  }
  EXPECT_NE(text.find("-0x0p+0"), std::string::npos) << "negative zero keeps its sign";
}

// The format's floats are C's %a (docs/program-format.md); the printer writes them with std::to_chars, so it must
// give printf's text to the byte: every f32 value class (zeros, subnormals, normals, the largest) and random f64s.
TEST(FormatFloat, IsPrintfsHexFloat) {
  auto printf_a = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return std::string(buf);
  };
  std::vector<double> vals = {0.0, -0.0, 1.0, -1.0, 0.1, 3.0, 1e-310, -1e-310, 0x1p-1074, 0x1p-149, 0x1.fffffep127,
                              0x1.fffffffffffffp1023, 0x1p-1022, -0x1.8p-140};
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    double d;
    if (i % 2) {
      d = double(bits_to_f32(uint32_t(x)));
    } else {
      std::memcpy(&d, &x, sizeof d);
    }
    if (std::isfinite(d)) vals.push_back(d);
  }
  for (double v : vals) ASSERT_EQ(format_float(v), printf_a(v));
  EXPECT_EQ(format_float(NAN), "nan");
  EXPECT_EQ(format_float(-INFINITY), "-inf");
  // And the parser reads every f32 of them back to the bit (its from_chars path, and strtod for the rest).
  InputDef in;
  in.device = Device::cpu(0);
  for (double v : vals)
    if (double(float(v)) == v && in.f32_bits.size() < 4096) in.f32_bits.push_back(f32_to_bits(float(v)));
  in.shape = Shape{int64_t(in.f32_bits.size())};
  Program p;
  p.values.push_back(Value{in});
  EXPECT_EQ(parse_program(print_program(p)), p);
}

void expect_parse_error(const std::string& text, int line, int column, const std::string& contains) {
  try {
    parse_program(text);
    ADD_FAILURE() << "parsed:\n" << text;
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line, line) << e.what();
    if (column > 0) {
      EXPECT_EQ(e.column, column) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find(contains), std::string::npos) << e.what();
  }
}

TEST(ProgramFormat, HalfPrecisionInputsRoundTripAndOldFilesStillRead) {
  const std::string text =
      "crossfire-program 2\ninput %0 f16 [4] cpu:0 = 65504 -0x1p-24 inf -0x0p+0\n"
      "input %1 bf16 [2] cpu:0 = 0x1.fep+127 0x1p-133\nnode %2 cast x=%0 dtype=bf16\n";
  const Program p = parse_program(text);
  EXPECT_EQ(parse_program(print_program(p)), p);
  EXPECT_EQ(p.values[0].input().dtype, DType::f16);
  const Program v1 = parse_program("crossfire-program 1\ninput %0 f32 [1] cpu:0 = 1.5\nnode %1 neg x=%0\n");
  EXPECT_EQ(v1.num_nodes(), 1) << "version 1 files are still read";
}

// Version 3 added i64: every 64-bit value round-trips in decimal, the extremes included; a version 2 file naming
// i64 is refused, naming the dtype and the version; a value past 64 bits is refused, naming it.
TEST(ProgramFormat, I64InputsRoundTripAndNeedVersion3) {
  const std::string text =
      "crossfire-program 3\ninput %0 i64 [5] cpu:0 = -9223372036854775808 9223372036854775807 9007199254740993 0 -1\n"
      "node %1 cast x=%0 dtype=f32\nnode %2 full shape=[1] value=0x1p+62 dtype=i64 device=cpu:0\n";
  const Program p = parse_program(text);
  ASSERT_EQ(p.values[0].input().dtype, DType::i64);
  EXPECT_EQ(p.values[0].input().ints,
            (std::vector<int64_t>{INT64_MIN, INT64_MAX, (int64_t(1) << 53) + 1, 0, -1}));
  const std::string printed = print_program(p);
  EXPECT_NE(printed.find(fmt::format("crossfire-program {}\n", Program::kFormatVersion)), std::string::npos) << printed;
  EXPECT_NE(printed.find("= -9223372036854775808 9223372036854775807 9007199254740993 0 -1"), std::string::npos)
      << printed;
  EXPECT_EQ(parse_program(printed), p);
  expect_parse_error("crossfire-program 2\ninput %0 i64 [1] cpu:0 = 1\n", 2, 10,
                     "dtype `i64` needs format version 3 (this file says version 2, whose dtypes are f32, i32, bool, "
                     "f16, bf16)");
  expect_parse_error("crossfire-program 2\nnode %0 zeros shape=[1] dtype=i64 device=cpu:0\n", 2, 0,
                     "dtype `i64` needs format version 3");
  expect_parse_error("crossfire-program 3\ninput %0 i64 [1] cpu:0 = 9223372036854775808\n", 2, 26,
                     "integer `9223372036854775808` is out of range (64-bit)");
  expect_parse_error("crossfire-program 3\ninput %0 i32 [1] cpu:0 = 2147483648\n", 2, 26, "i32 value 2147483648 is out of range");
  expect_parse_error("crossfire-program 3\ninput %0 i65 [1] cpu:0 = 1\n", 2, 10,
                     "unknown dtype `i65` (f32, i32, bool, f16, bf16, i64)");
}

// Version 4 added NaN payloads in input values (Note [NaN payloads in the text]): `nan(0x<fraction>)` with a sign,
// signalling NaNs included, round-trips to the bit; the default quiet NaN still prints as `nan`; a half's NaN must
// be one of its dtype; a version 3 file with a payload is refused, naming the version.
TEST(ProgramFormat, NaNPayloadsRoundTripAndNeedVersion4) {
  const std::string text =
      "crossfire-program 4\ninput %0 f32 [4] cpu:0 = nan(0x630000) -nan(0x1) nan -nan\n"
      "input %1 f16 [2] cpu:0 = nan(0x2a0000) -NaN(0x7FE000)\ninput %2 bf16 [1] cpu:0 = -nan(0x550000)\n"
      "node %3 cat tensors=[%0, %0] axis=0\n";
  const Program p = parse_program(text);
  // 0x7fe30000 is quiet with a payload; 0xff800001 signalling; then the default quiet NaN and its negation.
  EXPECT_EQ(p.values[0].input().f32_bits, (std::vector<uint32_t>{0x7fe30000u, 0xff800001u, 0x7fc00000u, 0xffc00000u}));
  EXPECT_EQ(p.values[1].input().f32_bits, (std::vector<uint32_t>{0x7faa0000u, 0xffffe000u}));  // f16 0x7d50, 0xffff
  EXPECT_EQ(p.values[2].input().f32_bits, (std::vector<uint32_t>{0xffd50000u}));               // bf16 0xffd5
  const std::string printed = print_program(p);
  EXPECT_NE(printed.find("crossfire-program 4\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("= nan(0x630000) -nan(0x1) nan -nan\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("= nan(0x2a0000) -nan(0x7fe000)\n"), std::string::npos) << printed;
  EXPECT_EQ(parse_program(printed), p);
  expect_parse_error("crossfire-program 3\ninput %0 f32 [1] cpu:0 = nan(0x1)\n", 2, 26,
                     "a NaN payload (`nan(0x...)`) needs format version 4 (this file says version 3)");
  for (const char* bad : {"nan(0x0)", "nan(0x800000)", "nan(12)", "nan(0x1", "nan()", "nan(0x1g)"})
    expect_parse_error(fmt::format("crossfire-program 4\ninput %0 f32 [1] cpu:0 = {}\n", bad), 2, 26,
                       "is not a NaN payload");
  // f16 keeps the top 10 of the 23 fraction bits, bf16 the top 7: a payload below them is not a NaN of the dtype.
  expect_parse_error("crossfire-program 4\ninput %0 f16 [1] cpu:0 = nan(0x1000)\n", 2, 26, "is not a NaN of f16");
  expect_parse_error("crossfire-program 4\ninput %0 bf16 [1] cpu:0 = nan(0x2a8000)\n", 2, 27, "is not a NaN of bf16");
  // Only float inputs hold NaNs (fuzz_program_parse found a bool input taking one, which then printed no value).
  expect_parse_error("crossfire-program 4\ninput %0 bool [1] cpu:0 = nan(0x7c7)\n", 2, 27, "expected an integer");
  expect_parse_error("crossfire-program 4\ninput %0 i64 [1] cpu:0 = -nan(0x400000)\n", 2, 26, "expected an integer");
}

// rand and randn took no dtype before 2026-12-03: such a file reads as f32, and prints with the dtype written.
TEST(ProgramFormat, RandomOpsWithoutADtypeReadAsF32) {
  const Program old = parse_program(
      "crossfire-program 1\nnode %0 rand shape=[2] seed=7 device=cpu:0\nnode %1 randn shape=[3] seed=-1 device=cpu:0\n");
  ASSERT_EQ(old.num_nodes(), 2);
  EXPECT_EQ(std::get<DType>(old.values[0].node().args[2]), DType::f32);
  EXPECT_EQ(std::get<DType>(old.values[1].node().args[2]), DType::f32);
  const std::string printed = print_program(old);
  EXPECT_NE(printed.find("rand shape=[2] seed=7 dtype=f32 device=cpu:0"), std::string::npos) << printed;
  EXPECT_EQ(parse_program(printed), old);
  const Program half = parse_program("crossfire-program 2\nnode %0 rand shape=[2] seed=7 dtype=bf16 device=cpu:0\n");
  EXPECT_EQ(std::get<DType>(half.values[0].node().args[2]), DType::bf16);
}

TEST(ProgramFormat, MalformedProgramsGiveLineAndColumn) {
  expect_parse_error("", 1, 1, "empty program");
  expect_parse_error("crossfire-program 5\n", 1, 0, "unsupported format version 5");
  // Version 2 added f16 and bf16: a version 1 file naming them is refused, naming the dtype; their values must be
  // values of the dtype.
  expect_parse_error("crossfire-program 1\ninput %0 f16 [1] cpu:0 = 1\n", 2, 10, "dtype `f16` needs format version 2");
  expect_parse_error("crossfire-program 2\ninput %0 f16 [2] cpu:0 = 1 0x1.001p+0\n", 2, 28, "is not a value of f16");
  expect_parse_error("crossfire-program 2\ninput %0 bf16 [1] cpu:0 = 0x1.01p+0\n", 2, 27, "is not a value of bf16");
  expect_parse_error("hello\n", 1, 1, "expected the header");
  const std::string h = "crossfire-program 1\n";
  expect_parse_error(h + "input %0 f32 [2] cpu:0 = 0x1p+0\n", 2, 0, "expected 2 values");
  expect_parse_error(h + "input %0 f32 [1] cpu:0 = 0x1p+0 2\n", 2, 0, "more values");
  expect_parse_error(h + "input %0 f32 [1] gpu:0 = 1\n", 2, 18, "unknown backend `gpu`");
  expect_parse_error(h + "input %0 i32 [1] cpu:0 tracked = 1\n", 2, 24, "only float inputs (f32, f16, bf16) can be tracked");
  expect_parse_error(h + "input %1 f32 [] cpu:0 = 1\n", 2, 7, "expected %0");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nnode %1 frobnicate x=%0\n", 3, 9, "unknown op `frobnicate`");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nnode %1 add rhs=%0 lhs=%0\n", 3, 13, "expected parameter `lhs`");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nnode %1 add lhs=%0 rhs=%2\n", 3, 24, "%2 does not exist");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nnode %1 add lhs=%0\n", 3, 0, "needs parameter `rhs`");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nnode %1 sum x=%0 axis=none keepdim=maybe\n", 3, 0,
                     "expected true or false");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = zero\n", 2, 25, "is not a number");
  expect_parse_error(h + "input %0 bool [1] cpu:0 = 2\n", 2, 27, "bool values are 0 or 1");
  expect_parse_error(h + "input %0 f32 [] cpu:0 = 1\nbackward %0\ninput %1 f32 [] cpu:0 = 1\n", 4, 1,
                     "`backward` must be the last line");
  expect_parse_error(h + "input %0 i32 [1] cpu:0 = 99999999999\n", 2, 0, "out of range");
}

TEST(ProgramFormat, OversizedProgramsNameTheLimit) {
  const std::string h = "crossfire-program 1\n";
  expect_parse_error(h + "input %0 f32 [4096, 4096] cpu:0 = 0\n", 2, 0, "ProgramLimits::kMaxTensorElements");
  expect_parse_error(h + "input %0 f32 [1, 2, 3, 4, 5, 6, 7] cpu:0 = 0\n", 2, 0, "rank 7 is above the maximum 6");
  std::string many = h;
  for (int i = 0; i <= ProgramLimits::kMaxValues; ++i) many += "input %" + std::to_string(i) + " f32 [] cpu:0 = 0\n";
  expect_parse_error(many, ProgramLimits::kMaxValues + 2, 0, "ProgramLimits::kMaxValues");
  std::string huge(ProgramLimits::kMaxBytes + 1, '#');
  expect_parse_error(huge, 0, 0, "ProgramLimits::kMaxBytes");
  std::string list = h + "input %0 f32 [] cpu:0 = 0\nnode %1 cat tensors=[";
  for (int i = 0; i <= ProgramLimits::kMaxListLength; ++i) list += "%0, ";
  expect_parse_error(list + "%0] axis=0\n", 3, 0, "ProgramLimits::kMaxListLength");
}

// Where a line ends is where the scanner stops (Note [A NUL at the end of every line]): "\n", "\r\n" and the end of
// the text read alike, a token that runs to the end of any of them is whole, and a NUL or a lone CR inside a line
// is a character there, not its end: an error at its column.
TEST(ProgramFormat, EveryLineEndReadsAlike) {
  GenConfig cfg;
  cfg.devices = {Device::cpu(0), Device::cpu(1)};
  auto crlf = [](const std::string& t) {
    std::string out;
    for (char ch : t) out += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    return out;
  };
  for (uint64_t seed = 0; seed < 100; ++seed) {
    PrngChoices c(seed);
    const Program p = generate_program(c, cfg);
    const std::string text = print_program(p);
    ASSERT_EQ(text.back(), '\n');
    const std::string bare = text.substr(0, text.size() - 1);  // no newline after the last line
    ASSERT_EQ(parse_program(bare), p) << bare;
    ASSERT_EQ(parse_program(crlf(text)), p) << text;
    ASSERT_EQ(parse_program(crlf(bare)), p) << text;
  }
  const std::string h = "crossfire-program 4\n";
  // A token that runs to the end of the text, or to a CR there, is whole.
  EXPECT_EQ(parse_program(h + "input %0 i32 [2] cpu:0 = 12 345").values[0].input().ints,
            (std::vector<int64_t>{12, 345}));
  EXPECT_EQ(parse_program(h + "input %0 i32 [2] cpu:0 = 12 345\r").values[0].input().ints,
            (std::vector<int64_t>{12, 345}));
  // Column 30 is the NUL or the CR: the values end at column 29, and the line does not.
  expect_parse_error(h + "input %0 i32 [2] cpu:0 = 12 3" + std::string(1, '\0') + "45\n", 2, 30, "more values");
  expect_parse_error(h + "input %0 i32 [2] cpu:0 = 12 3\r45\n", 2, 30, "more values");
  expect_parse_error(h + "input %0 f32 [1] cpu:0 = 1\nnode %1 neg x=%0\r\r\n", 3, 17, "unexpected");
  expect_parse_error(h + "input %0 f32 [1] cpu:0 = 1\nnode %1 frob", 3, 9, "unknown op `frob`");
}

TEST(ProgramFormat, TruncatedProgramsNeverCrash) {
  GenConfig cfg;
  PrngChoices c(5);
  std::string text = print_program(generate_program(c, cfg));
  for (size_t n = 0; n < text.size(); n += 7) {
    try {
      parse_program(text.substr(0, n));
    } catch (const ParseError& e) {
      EXPECT_GE(e.line, 0);
    }
  }
}

}  // namespace
}  // namespace crossfire::harness
