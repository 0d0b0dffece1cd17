// SPDX-License-Identifier: Apache-2.0
// The program text format: printer and parser (docs/program-format.md).
#include "crossfire/harness/program.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "reference/reference.hpp"

namespace crossfire::harness {

float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t f32_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

int64_t input_numel(const InputDef& in) { return in.shape.numel(); }

int Program::num_nodes() const {
  int n = 0;
  for (const Value& v : values) n += v.is_input() ? 0 : 1;
  return n;
}

namespace {
// Appends format_float(v) to `out`: the printer writes every value of every input this way, without a string each.
// The printer writes into one buffer (fmt::memory_buffer: bulk appends, no string per token).
using Out = fmt::memory_buffer;
void put(Out& out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }

// Appends format_float(v): the printer writes every value of every input this way, without a string each.
void append_float(Out& out, double v) {
  if (std::isnan(v)) {
    put(out, std::signbit(v) ? "-nan" : "nan");
  } else if (std::isinf(v)) {
    put(out, v < 0 ? "-inf" : "inf");
  } else {
    // printf's %a, written by std::to_chars (a twentieth of snprintf's cost): the same digits, after a "0x" that
    // to_chars leaves out (FormatFloat.IsPrintfsHexFloat holds the two to each other).
    char buf[64];
    char* p = buf;
    if (std::signbit(v)) *p++ = '-';
    *p++ = '0';
    *p++ = 'x';
    const std::to_chars_result r = std::to_chars(p, buf + sizeof buf, std::fabs(v), std::chars_format::hex);
    put(out, {buf, size_t(r.ptr - buf)});
  }
}

// An input's value from its f32 bits (f16 and bf16 values are f32 values too): as append_float does, except a NaN
// other than the default quiet one (fraction 0x400000), whose sign and fraction bits are written (f32 bits
// 0x7fe30000 as `nan(0x630000)`), so that its payload survives the text (Note [NaN payloads in the text]).
void append_f32_bits(Out& out, uint32_t b) {
  const uint32_t fraction = b & 0x7fffffu;
  if ((b & 0x7f800000u) == 0x7f800000u && fraction != 0 && fraction != 0x400000u) {
    fmt::format_to(fmt::appender(out), "{}nan(0x{:x})", (b >> 31) != 0 ? "-" : "", fraction);
    return;
  }
  append_float(out, bits_to_f32(b));
}
}  // namespace

std::string format_float(double v) {
  Out out;
  append_float(out, v);
  return fmt::to_string(out);
}

// ---- printing --------------------------------------------------------------------------------------------------

namespace {

void print_ref(Out& out, const ValueRef& r) {
  fmt::format_to(fmt::appender(out), "%{}", r.id);
  if (r.on) fmt::format_to(fmt::appender(out), "@{}", r.on->str());
}

void print_arg(Out& out, const NodeArg& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ValueRef>) {
          print_ref(out, v);
        } else if constexpr (std::is_same_v<T, AbsentArg>) {
          put(out, "none");
        } else if constexpr (std::is_same_v<T, std::vector<ValueRef>>) {
          put(out, "[");
          for (size_t i = 0; i < v.size(); ++i) {
            if (i) put(out, ", ");
            print_ref(out, v[i]);
          }
          put(out, "]");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          fmt::format_to(fmt::appender(out), "{}", v);
        } else if constexpr (std::is_same_v<T, double>) {
          append_float(out, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          put(out, v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          fmt::format_to(fmt::appender(out), "[{}]", fmt::join(v, ", "));
        } else if constexpr (std::is_same_v<T, DType>) {
          put(out, dtype_name(v));
        } else if constexpr (std::is_same_v<T, Device>) {
          put(out, v.str());
        } else if constexpr (std::is_same_v<T, ByteData>) {
          put(out, "x\"");
          for (uint8_t b : v.bytes) fmt::format_to(fmt::appender(out), "{:02x}", b);
          put(out, "\"");
        }
      },
      a);
}

}  // namespace

std::string print_program(const Program& p) {
  Out out;
  fmt::format_to(fmt::appender(out), "crossfire-program {}\n", Program::kFormatVersion);
  for (size_t i = 0; i < p.values.size(); ++i) {
    const Value& v = p.values[i];
    if (v.is_input()) {
      const InputDef& in = v.input();
      fmt::format_to(fmt::appender(out), "input %{} {} [{}] {}{} =", i, dtype_name(in.dtype),
                     fmt::join(in.shape.dims(), ", "), in.device.str(), in.tracked ? " tracked" : "");
      if (is_float(in.dtype)) {  // f16/bf16 values are f32 values (Note [Half precision] in device.hpp)
        for (uint32_t b : in.f32_bits) {
          out.push_back(' ');
          append_f32_bits(out, b);
        }
      } else {
        for (int64_t x : in.ints) fmt::format_to(fmt::appender(out), " {}", x);
      }
      put(out, "\n");
    } else {
      const NodeDef& n = v.node();
      const OpDef& op = op_def(n.op);
      fmt::format_to(fmt::appender(out), "node %{} {}", i, op.name);
      for (int k = 0; k < op.num_params && size_t(k) < n.args.size(); ++k) {
        fmt::format_to(fmt::appender(out), " {}=", op.params[size_t(k)].name);
        print_arg(out, n.args[size_t(k)]);
      }
      put(out, "\n");
    }
  }
  if (p.backward_of) fmt::format_to(fmt::appender(out), "backward %{}\n", *p.backward_of);
  return fmt::to_string(out);
}

// ---- parsing ---------------------------------------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {}

  Program run() {
    if (text_.size() > ProgramLimits::kMaxBytes)
      fail_at(0, 0, fmt::format("program is {} bytes; the limit is {} bytes (ProgramLimits::kMaxBytes)",
                                text_.size(), ProgramLimits::kMaxBytes));
    // Note [A NUL at the end of every line]
    // The scanner reads a program character by character, and in the fuzz build every comparison is a call into
    // libFuzzer's hooks, which were half of the parse's time there (docs/fuzzing.md, Speed). So the parser reads its own
    // copy of the text, in which next_line() turns the character that ends each line ('\n', or the '\r' of "\r\n")
    // into a NUL; the last line ends at std::string's own NUL. peek() then reads line_text_.data()[col_] unchecked:
    // col_ never passes the line's end (it only moves past a character that a test accepted, and no test accepts
    // NUL), and at the end it reads that NUL. A loop whose test rejects NUL (spaces, word, digit and number
    // characters) needs no at_end_of_line() beside it. A NUL inside a line reads as NUL, as it always did, but
    // at_end_of_line() still tells it from the line's end.
    buf_.assign(text_);
    text_ = buf_;
    Program p;
    // One value per line at most, and never more than the limit allows: the vector does not regrow as lines come.
    p.values.reserve(std::min<size_t>(size_t(std::count(text_.begin(), text_.end(), '\n')) + 1,
                                      size_t(ProgramLimits::kMaxValues)));
    bool header = false;
    while (next_line()) {
      skip_spaces();
      if (at_end_of_line() || peek() == '#') continue;
      if (!header) {
        expect_word("crossfire-program", "the header `crossfire-program 1`");
        int64_t version = integer();
        if (version < 1 || version > Program::kFormatVersion)
          fail(fmt::format("unsupported format version {} (this build reads versions 1 to {})", version,
                           Program::kFormatVersion));
        version_ = int(version);
        end_line();
        header = true;
        continue;
      }
      size_t c = col_;
      std::string_view w = word();
      if (w == "input" || w == "node") {
        if (p.values.size() >= size_t(ProgramLimits::kMaxValues))
          fail_at(line_, int(c) + 1, fmt::format("program has more than {} values; the limit is {} (ProgramLimits::kMaxValues)",
                                             ProgramLimits::kMaxValues, ProgramLimits::kMaxValues));
        if (p.backward_of) fail_at(line_, int(c) + 1, "`backward` must be the last line");
        expect_id(int(p.values.size()));
        p.values.push_back(w == "input" ? Value{input()} : Value{node(int(p.values.size()))});
      } else if (w == "backward") {
        if (p.backward_of) fail_at(line_, int(c) + 1, "a second `backward` line (a program has at most one)");
        p.backward_of = ref_id(int(p.values.size()));
      } else {
        fail_at(line_, int(c) + 1, fmt::format("expected `input`, `node` or `backward`, got `{}`", printable(w)));
      }
      end_line();
    }
    if (!header) fail_at(line_ ? line_ : 1, 1, "empty program: expected the header `crossfire-program 1`");
    return p;
  }

 private:
  // Lines -------------------------------------------------------------------------------------------------------
  bool next_line() {
    if (pos_ >= text_.size()) return false;
    size_t nl = text_.find('\n', pos_);
    line_text_ = text_.substr(pos_, nl == std::string_view::npos ? std::string_view::npos : nl - pos_);
    if (!line_text_.empty() && line_text_.back() == '\r') line_text_.remove_suffix(1);
    if (pos_ + line_text_.size() < buf_.size()) buf_[pos_ + line_text_.size()] = '\0';  // Note [A NUL at the end...]
    pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
    ++line_;
    col_ = 0;
    return true;
  }
  bool at_end_of_line() const { return col_ >= line_text_.size(); }
  char peek() const { return line_text_.data()[col_]; }  // NUL at the end (Note [A NUL at the end of every line])
  std::string peeked() const {  // the next character, as a message may quote it
    const char c = peek();
    return printable({&c, 1});
  }
  void skip_spaces() {
    while (peek() == ' ' || peek() == '\t') ++col_;
  }
  void end_line() {
    skip_spaces();
    if (!at_end_of_line() && peek() != '#') fail(fmt::format("unexpected `{}` at the end of the line", peeked()));
  }

  [[noreturn]] void fail_at(int line, int column, std::string msg) const {
    throw ParseError(where_, line, column, std::move(msg));
  }
  [[noreturn]] void fail(std::string msg) const { fail_at(line_, int(col_) + 1, std::move(msg)); }

  // Tokens ------------------------------------------------------------------------------------------------------
  // The format's character classes, a table lookup per character: the scanner runs over every value of a program,
  // and in the fuzz build every comparison of a chain of them is a call into libFuzzer's hooks.
  static constexpr uint8_t kWordChar = 1, kNumberChar = 2;
  static constexpr std::array<uint8_t, 256> kCharClass = [] {
    std::array<uint8_t, 256> t{};
    for (int c = 0; c < 256; ++c) {
      const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-';
      t[size_t(c)] = uint8_t((word ? kWordChar : 0) | (word || c == '.' || c == '+' ? kNumberChar : 0));
    }
    return t;
  }();
  static bool word_char(char c) { return (kCharClass[uint8_t(c)] & kWordChar) != 0; }
  // What a number token may hold: [-]0x1.8p+3, 1e-5, inf, nan (the parts' order is from_chars's or strtod's to check).
  static bool number_char(char c) { return (kCharClass[uint8_t(c)] & kNumberChar) != 0; }
  // A view into the text, which outlives the parser: no copy per token.
  std::string_view word() {
    skip_spaces();
    size_t s = col_;
    while (word_char(peek())) ++col_;
    if (s == col_) fail(at_end_of_line() ? "unexpected end of line" : fmt::format("unexpected `{}`", peeked()));
    return line_text_.substr(s, col_ - s);
  }
  void expect_word(std::string_view w, std::string_view what) {
    skip_spaces();
    size_t s = col_;
    while (word_char(peek())) ++col_;
    if (line_text_.substr(s, col_ - s) != w) {
      col_ = s;
      fail(fmt::format("expected {}", what));
    }
  }
  void expect(char ch) {
    skip_spaces();
    if (peek() != ch) fail(at_end_of_line() ? fmt::format("expected `{}`, got the end of the line", ch)
                                           : fmt::format("expected `{}`, got `{}`", ch, peeked()));
    ++col_;
  }
  bool accept(char ch) {
    skip_spaces();
    if (peek() == ch) {
      ++col_;
      return true;
    }
    return false;
  }
  bool accept_word(std::string_view w) {
    skip_spaces();
    size_t s = col_, e = col_;
    while (word_char(line_text_.data()[e])) ++e;
    if (line_text_.substr(s, e - s) == w) {
      col_ = e;
      return true;
    }
    return false;
  }
  int64_t integer() {
    skip_spaces();
    size_t s = col_;
    if (peek() == '-' || peek() == '+') ++col_;
    while (peek() >= '0' && peek() <= '9') ++col_;
    std::string_view tok = line_text_.substr(s, col_ - s);
    int64_t v = 0;
    const char* b = tok.data() + (!tok.empty() && tok[0] == '+' ? 1 : 0);
    auto [p, ec] = std::from_chars(b, tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size()) {
      col_ = s;
      fail(ec == std::errc::result_out_of_range ? fmt::format("integer `{}` is out of range (64-bit)", printable(tok))
                                                : "expected an integer");
    }
    return v;
  }
  // Note [NaN payloads in the text]
  // Data movement must copy a NaN's payload (contract section 6), so a program must be able to hold one: from
  // version 4 an input value may be `[-]nan(0x<hex>)`, the NaN whose f32 fraction bits are <hex> (1 to 0x7fffff;
  // 0x400000 alone is the default `nan`), signalling ones included. An f16 or bf16 input's NaN must be one of its
  // dtype: the fraction's bits below its 10 (7) are 0 and those kept are not all 0. Earlier versions know no
  // payload, and `nan(` in them is refused, naming the version. (Float attributes hold no NaN payload.)
  std::optional<uint32_t> nan_with_payload(DType dt) {
    skip_spaces();
    const size_t s = col_;
    const std::string_view rest = line_text_.substr(col_);
    const bool negative = !rest.empty() && rest[0] == '-';
    const std::string_view body = rest.substr(negative ? 1 : 0);
    if (body.size() < 4 || (body[0] | 0x20) != 'n' || (body[1] | 0x20) != 'a' || (body[2] | 0x20) != 'n' ||
        body[3] != '(')
      return std::nullopt;
    if (version_ < Program::kNaNPayloadVersion)
      fail(fmt::format("a NaN payload (`nan(0x...)`) needs format version {} (this file says version {})",
                       Program::kNaNPayloadVersion, version_));
    const size_t close = body.find(')');
    const std::string_view inside = body.substr(4, close == std::string_view::npos ? 0 : close - 4);
    uint32_t fraction = 0;
    const bool hex = inside.size() > 2 && inside[0] == '0' && (inside[1] | 0x20) == 'x';
    const auto [end, ec] = hex ? std::from_chars(inside.data() + 2, inside.data() + inside.size(), fraction, 16)
                               : std::from_chars_result{inside.data(), std::errc::invalid_argument};
    if (close == std::string_view::npos || ec != std::errc() || end != inside.data() + inside.size() ||
        fraction == 0 || fraction > 0x7fffffu)
      fail(fmt::format("`{}` is not a NaN payload: write nan(0x<hex>), the f32 fraction bits 0x1 to 0x7fffff",
                       printable(body.substr(0, close == std::string_view::npos ? body.size() : close + 1))));
    if (is_half(dt)) {
      const int dropped = dt == DType::f16 ? 13 : 16;  // f32's 23 fraction bits less the dtype's 10 or 7
      if ((fraction & ((1u << dropped) - 1)) != 0 || (fraction >> dropped) == 0)
        fail(fmt::format("nan(0x{:x}) is not a NaN of {} (its payload is the top {} of the 23 fraction bits)",
                         fraction, dtype_name(dt), 23 - dropped));
    }
    col_ = s + (negative ? 1 : 0) + close + 1;
    return (negative ? 0x80000000u : 0u) | 0x7f800000u | fraction;
  }

  double number() {
    skip_spaces();
    size_t s = col_;
    while (number_char(peek())) ++col_;
    const std::string_view tok = line_text_.substr(s, col_ - s);
    if (tok.empty()) fail("expected a number");
    // What the printer writes, [-]0x<hex digit>..., read by std::from_chars (exact, like strtod, at a fraction of
    // its cost); anything else, or anything from_chars does not take whole (out of range, trailing text), is
    // strtod's to accept or refuse, as it always was. With a C++ library that has no from_chars for double (libc++
    // 14, which scripts/cflite-local.sh builds against as OSS-Fuzz does: __cpp_lib_to_chars unset), strtod reads all.
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    {
      const bool negative = tok[0] == '-';
      const std::string_view hex = tok.substr(negative ? 1 : 0);
      if (hex.size() > 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X') && std::isxdigit(uint8_t(hex[2]))) {
        double v = 0;
        const auto [end, ec] = std::from_chars(hex.data() + 2, hex.data() + hex.size(), v, std::chars_format::hex);
        if (ec == std::errc() && end == hex.data() + hex.size()) return negative ? -v : v;
      }
    }
#endif
    // strtod wants a terminated string: a copy on the stack (every number this format writes fits), else on the heap.
    std::array<char, 64> small;
    std::string large;
    const char* str = small.data();
    if (tok.size() < small.size()) {
      std::copy(tok.begin(), tok.end(), small.begin());
      small[tok.size()] = '\0';
    } else {
      large.assign(tok);
      str = large.c_str();
    }
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(str, &end);
    if (end != str + tok.size()) {
      col_ = s;
      fail(fmt::format("`{}` is not a number (use hex floats like 0x1.8p+1, or inf, -inf, nan)", printable(tok)));
    }
    return v;
  }
  Device device() {
    skip_spaces();
    size_t s = col_;
    std::string_view name = word();
    Device d;
    if (std::optional<BackendKind> k = backend_kind_named(name)) {
      d.backend = *k;
    } else {
      col_ = s;
      fail(fmt::format("unknown backend `{}` (known: {})", printable(name), backend_names()));
    }
    expect(':');
    size_t c = col_;
    int64_t idx = integer();
    if (idx < 0 || idx > 255) {
      col_ = c;
      fail(fmt::format("device index {} is out of range (0..255)", idx));
    }
    d.index = uint8_t(idx);
    return d;
  }
  DType dtype() {
    skip_spaces();
    size_t s = col_;
    std::string_view w = word();
    for (DType d : kAllDTypes)
      if (dtype_name(d) == w) {
        if (const int since = dtype_since_version(d); version_ < since) {
          col_ = s;
          fail(fmt::format("dtype `{}` needs format version {} (this file says version {}, whose dtypes are {})", w,
                           since, version_, dtypes_of_version(version_)));
        }
        return d;
      }
    col_ = s;
    fail(fmt::format("unknown dtype `{}` ({})", printable(w), dtypes_of_version(version_)));
  }
  // The format version that first named each dtype.
  static int dtype_since_version(DType d) { return is_half(d) ? 2 : d == DType::i64 ? 3 : 1; }
  static std::string dtypes_of_version(int version) {
    std::string s;
    for (DType d : kAllDTypes)
      if (dtype_since_version(d) <= version) s += fmt::format("{}{}", s.empty() ? "" : ", ", dtype_name(d));
    return s;
  }
  void expect_id(int want) {
    skip_spaces();
    size_t s = col_;
    expect('%');
    int64_t id = integer();
    if (id != want) {
      col_ = s;
      fail(fmt::format("expected %{} (values are numbered in order), got %{}", want, id));
    }
  }
  int ref_id(int defined) {
    skip_spaces();
    size_t s = col_;
    expect('%');
    int64_t id = integer();
    if (id < 0 || id >= defined) {
      col_ = s;
      fail(defined == 0 ? fmt::format("%{} does not exist (no value is defined yet)", id)
                        : fmt::format("%{} does not exist here (defined so far: %0..%{})", id, defined - 1));
    }
    return int(id);
  }
  ValueRef ref(int defined) {
    ValueRef r;
    r.id = ref_id(defined);
    if (peek() == '@') {
      ++col_;
      r.on = device();
    }
    return r;
  }
  template <class F>
  void list(F&& item) {
    expect('[');
    if (accept(']')) return;
    int n = 0;
    do {
      if (++n > ProgramLimits::kMaxListLength)
        fail(fmt::format("list has more than {} entries; the limit is {} (ProgramLimits::kMaxListLength)",
                         ProgramLimits::kMaxListLength, ProgramLimits::kMaxListLength));
      item();
    } while (accept(','));
    expect(']');
  }

  // Lines' contents ---------------------------------------------------------------------------------------------
  InputDef input() {
    InputDef in;
    in.dtype = dtype();
    skip_spaces();
    size_t shape_col = col_;
    std::vector<int64_t> dims;
    list([&] { dims.push_back(integer()); });
    if (dims.size() > size_t(kMaxRank))
      fail_at(line_, int(shape_col) + 1, fmt::format("rank {} is above the maximum {}", dims.size(), kMaxRank));
    // The limit holds the product of the non-zero dims, as dispatch's element bound does (Note [The element bound]
    // in dispatch.cpp): a 0 dim empties the input but lifts no other dim's size, so [90009, 900000000808080, 0]
    // is refused here instead of overflowing numel() later (and a sum over its empty axis cannot ask for 8e19
    // elements).
    int64_t extent = 1;  // product of the non-zero dims, saturated just past the limit
    bool empty = false;
    for (int64_t d : dims) {
      if (d < 0) fail_at(line_, int(shape_col) + 1, fmt::format("negative dimension {}", d));
      if (d == 0) empty = true;
      else if (extent > ProgramLimits::kMaxTensorElements / d) extent = ProgramLimits::kMaxTensorElements + 1;
      else extent *= d;
      in.shape.push_back(d);
    }
    if (extent > ProgramLimits::kMaxTensorElements)
      fail_at(line_, int(shape_col) + 1,
              fmt::format("input's non-zero dimensions multiply to more than {}, the limit "
                          "(ProgramLimits::kMaxTensorElements)",
                          ProgramLimits::kMaxTensorElements));
    const int64_t numel = empty ? 0 : extent;
    total_elements_ += numel;
    if (total_elements_ > ProgramLimits::kMaxTotalElements)
      fail_at(line_, int(shape_col) + 1,
              fmt::format("inputs hold more than {} elements in all; the limit is {} "
                          "(ProgramLimits::kMaxTotalElements)",
                          ProgramLimits::kMaxTotalElements, ProgramLimits::kMaxTotalElements));
    in.device = device();
    skip_spaces();
    size_t tc = col_;
    if (accept_word("tracked")) {
      if (!is_float(in.dtype))
        fail_at(line_, int(tc) + 1,
                fmt::format("only float inputs (f32, f16, bf16) can be tracked, this one is {}", dtype_name(in.dtype)));
      in.tracked = true;
    }
    expect('=');
    // Each value takes two characters at least ("0 "), so the rest of the line bounds what a hostile shape can
    // make this reserve.
    const size_t room = std::min(size_t(numel), (line_text_.size() - col_) / 2 + 1);
    if (is_float(in.dtype)) in.f32_bits.reserve(room);
    else in.ints.reserve(room);
    for (int64_t i = 0; i < numel; ++i) {
      skip_spaces();
      if (at_end_of_line() || peek() == '#')
        fail(fmt::format("expected {} values for shape [{}], got {}", numel, fmt::join(dims, ", "), i));
      if (const std::optional<uint32_t> nan = is_float(in.dtype) ? nan_with_payload(in.dtype) : std::nullopt) {
        in.f32_bits.push_back(*nan);
      } else if (in.dtype == DType::f32) {
        in.f32_bits.push_back(f32_to_bits(float(number())));
      } else if (is_half(in.dtype)) {
        size_t c = col_;
        const double v = number();
        if (!std::isnan(v) && reference::round_to(v, in.dtype) != v) {
          col_ = c;
          fail(fmt::format("{} is not a value of {} (the nearest is {})", format_float(v), dtype_name(in.dtype),
                           format_float(reference::round_to(v, in.dtype))));
        }
        in.f32_bits.push_back(f32_to_bits(float(v)));
      } else {
        size_t c = col_;
        int64_t v = integer();
        if (in.dtype == DType::boolean && v != 0 && v != 1) {
          col_ = c;
          fail(fmt::format("bool values are 0 or 1, got {}", v));
        }
        if (in.dtype == DType::i32 && (v < INT32_MIN || v > INT32_MAX)) {
          col_ = c;
          fail(fmt::format("i32 value {} is out of range", v));
        }
        in.ints.push_back(v);  // i64: integer() reads the whole 64-bit range and refuses past it
      }
    }
    skip_spaces();
    if (!at_end_of_line() && peek() != '#') fail(fmt::format("more values than the {} that shape [{}] holds", numel,
                                                             fmt::join(dims, ", ")));
    return in;
  }

  NodeDef node(int defined) {
    NodeDef n;
    skip_spaces();
    size_t c = col_;
    std::string_view name = word();
    int id = find_op(name);
    if (id < 0) fail_at(line_, int(c) + 1, fmt::format("unknown op `{}`", printable(name)));
    n.op = OpId(id);
    const OpDef& op = op_def(n.op);
    n.args.reserve(size_t(op.num_params));
    for (int k = 0; k < op.num_params; ++k) {
      const ParamDef& p = op.params[size_t(k)];
      skip_spaces();
      size_t pc = col_;
      if (at_end_of_line()) fail(fmt::format("{} needs parameter `{}` (parameter {} of {})", op.name, p.name, k + 1,
                                             op.num_params));
      std::string_view pn = word();
      // rand and randn took no dtype before 2026-12-03 (they drew f32 only): a file written then reads as f32.
      if (pn != p.name && p.role == ParamRole::dtype_attr && op.output == rules::random) {
        col_ = pc;
        n.args.push_back(DType::f32);
        continue;
      }
      if (pn != p.name) {
        col_ = pc;
        fail(fmt::format("expected parameter `{}` (parameter {} of {}), got `{}`", p.name, k + 1, op.name, printable(pn)));
      }
      expect('=');
      n.args.push_back(arg(p, defined));
    }
    return n;
  }

  NodeArg arg(const ParamDef& p, int defined) {
    switch (p.role) {
      case ParamRole::tensor: return ref(defined);
      case ParamRole::optional_tensor:
        if (accept_word("none")) return AbsentArg{};
        return ref(defined);
      case ParamRole::tensor_list: {
        std::vector<ValueRef> v;
        list([&] { v.push_back(ref(defined)); });
        return v;
      }
      case ParamRole::int_attr: return integer();
      case ParamRole::optional_int_attr:
        if (accept_word("none")) return AbsentArg{};
        return integer();
      case ParamRole::float_attr: return number();
      case ParamRole::bool_attr:
        if (accept_word("true")) return true;
        if (accept_word("false")) return false;
        fail("expected true or false");
      case ParamRole::int_list_attr: {
        std::vector<int64_t> v;
        list([&] { v.push_back(integer()); });
        return v;
      }
      case ParamRole::dtype_attr: return dtype();
      case ParamRole::device_attr: return device();
      case ParamRole::bytes_attr: {
        skip_spaces();
        if (peek() != 'x') fail("expected bytes as x\"0a1b...\"");
        ++col_;
        expect('"');
        ByteData b;
        while (!at_end_of_line() && peek() != '"') {
          auto hex = [&](char ch) -> int {
            if (ch >= '0' && ch <= '9') return ch - '0';
            if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
            if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
            fail(fmt::format("`{}` is not a hex digit", printable({&ch, 1})));
          };
          int hi = hex(peek());
          ++col_;
          if (at_end_of_line()) fail("odd number of hex digits");
          int lo = hex(peek());
          ++col_;
          b.bytes.push_back(uint8_t(hi * 16 + lo));
          if (b.bytes.size() > size_t(ProgramLimits::kMaxTensorElements) * 4)
            fail("bytes attribute is larger than the input limit (ProgramLimits::kMaxTensorElements * 4)");
        }
        expect('"');
        return b;
      }
    }
    fail("unknown parameter role");
  }

  std::string_view text_;  // buf_, once run() has copied it
  std::string buf_;        // the text, each line ended by a NUL (Note [A NUL at the end of every line])
  std::string where_;
  size_t pos_ = 0;
  std::string_view line_text_;
  int line_ = 0;
  size_t col_ = 0;
  int64_t total_elements_ = 0;
  int version_ = 1;  // the header's (Program::kFormatVersion says what each added)
};

}  // namespace

Program parse_program(std::string_view text) { return Parser(text, "program").run(); }

Program load_program(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ParseError(path, 0, 0, fmt::format("cannot open: {}", std::strerror(errno)));
  std::string text;
  char buf[65536];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    text.append(buf, size_t(f.gcount()));
    if (text.size() > ProgramLimits::kMaxBytes)
      throw ParseError(path, 0, 0,
                       fmt::format("file is larger than {} bytes (ProgramLimits::kMaxBytes)", ProgramLimits::kMaxBytes));
  }
  return Parser(text, path).run();
}

void save_text_atomically(const std::string& path, std::string_view text, bool durable) {
  // The text goes to a temp file in the same directory, then rename() puts it in place, so a reader finds the old
  // file or the new one, never half of one. When anything fails (a full disk fails write(), fflush() or even
  // fclose() with ENOSPC; a file size limit with EFBIG) the temp file is removed: a torn `PATH.tmp.PID` would be
  // left in the output directory for good.
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  auto fail = [&](const char* step, int err) {
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}: {}", path, step, std::strerror(err)));
  };
  bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  int err = written ? 0 : errno;
  // fsync before the rename, so that after a crash the name never points at a file whose data never reached the
  // disk. Reports and programs are small and written a few times a minute, so it is cheap. EINVAL: a file system
  // that cannot sync (nothing to wait for).
  if (durable && written && ::fsync(::fileno(f)) != 0 && errno != EINVAL) written = false, err = errno;
  if (std::fclose(f) != 0 && written) written = false, err = errno;
  if (!written) fail("write", err ? err : EIO);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename", errno);
}

}  // namespace crossfire::harness
