// SPDX-License-Identifier: Apache-2.0
// The harness's program IR (issue 4): a small op graph of inputs and op calls drawn from the op table, with a
// readable, versioned text format that round-trips exactly (docs/program-format.md). Programs are what the
// generators build, what the oracles run, what the reducer shrinks and what a failing campaign saves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::harness {

// Limits a program file must respect; a file that breaks one is rejected with the limit named (ParseError).
struct ProgramLimits {
  static constexpr size_t kMaxBytes = 16u << 20;      // size of a program file
  static constexpr int kMaxValues = 4096;             // inputs + nodes
  static constexpr int64_t kMaxTensorElements = 1 << 20;  // elements of one input
  static constexpr int64_t kMaxTotalElements = 1 << 22;   // elements of all inputs together
  static constexpr int kMaxListLength = 256;          // entries of one list (tensors, ints)
  static constexpr int kMaxRank = crossfire::kMaxRank;
  // Checked as a program runs (run_program, before each call; ProgramError names the node): node results are
  // held to the input limit, so that the reducer can always cut a node into an input, and the work of one run of
  // the program to kMaxWork element-steps (node_work() in model.cpp: every element read and written, and for
  // matmul and conv2d every product), so that a 500-byte file cannot ask for gigabytes or minutes.
  static constexpr int64_t kMaxNodeElements = kMaxTensorElements;
  static constexpr int64_t kMaxWork = int64_t(1) << 28;
};

// A reference to an earlier value, optionally moved to another device just before the call (the way a program
// places one argument on a deliberately different device: `%3@cpu:1`).
struct ValueRef {
  int id = -1;
  std::optional<Device> on;
  friend bool operator==(const ValueRef&, const ValueRef&) = default;
};

struct AbsentArg {
  friend bool operator==(const AbsentArg&, const AbsentArg&) = default;
};
struct ByteData {
  std::vector<uint8_t> bytes;
  friend bool operator==(const ByteData&, const ByteData&) = default;
};

// One argument of a node, mirroring ParamRole.
using NodeArg = std::variant<ValueRef,               // tensor, present optional_tensor
                             AbsentArg,              // absent optional_tensor / optional_int_attr
                             std::vector<ValueRef>,  // tensor_list
                             int64_t,                // int_attr, present optional_int_attr
                             double,                 // float_attr
                             bool,                   // bool_attr
                             std::vector<int64_t>,   // int_list_attr
                             DType,                  // dtype_attr
                             Device,                 // device_attr
                             ByteData>;              // bytes_attr

// A leaf tensor given by value. f32 values are held as their bits, so equality and the text format are exact.
struct InputDef {
  DType dtype = DType::f32;
  Shape shape;
  Device device;
  bool tracked = false;             // requires_grad (f32 only)
  std::vector<uint32_t> f32_bits;   // f32, f16, bf16: the values as f32 bits (every f16/bf16 value is an f32 value)
  std::vector<int64_t> ints;        // i32, i64, and bool as 0/1 (each within its dtype's range)
  friend bool operator==(const InputDef&, const InputDef&) = default;
};

struct NodeDef {
  OpId op = 0;
  std::vector<NodeArg> args;  // one per parameter, in signature order
  friend bool operator==(const NodeDef&, const NodeDef&) = default;
};

// Calls f on every value reference of a node, in signature order (a list's members in order). NodeDef may be const
// (f takes const ValueRef&) or not (f may change the references).
template <class Node, class F>
  requires std::is_same_v<std::remove_const_t<Node>, NodeDef>
void for_each_ref(Node& n, F&& f) {
  for (auto& a : n.args) {
    if (auto* r = std::get_if<ValueRef>(&a)) f(*r);
    if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
      for (auto& r : *l) f(r);
  }
}

struct Value {
  std::variant<InputDef, NodeDef> def;
  bool is_input() const { return def.index() == 0; }
  const InputDef& input() const { return std::get<0>(def); }
  const NodeDef& node() const { return std::get<1>(def); }
  InputDef& input() { return std::get<0>(def); }
  NodeDef& node() { return std::get<1>(def); }
  friend bool operator==(const Value&, const Value&) = default;
};

// A program's values move when its vector grows, rather than being copied with all their data.
static_assert(std::is_nothrow_move_constructible_v<Value>);

struct Program {
  // 2: dtypes f16 and bf16; 3: i64; 4: NaN payloads in input values (`nan(0x...)`). Files of every earlier
  // version are still read (with the dtypes and values they knew).
  static constexpr int kFormatVersion = 4;
  static constexpr int kNaNPayloadVersion = 4;
  std::vector<Value> values;        // value i is `%i`; arguments only refer to earlier values
  std::optional<int> backward_of;   // run reverse mode from this value (seed: ones), checking gradients
  friend bool operator==(const Program&, const Program&) = default;

  int num_nodes() const;
};

// The text format. print() then parse() gives back an equal Program; parse() raises ParseError with line and
// column on malformed, truncated or oversized text and checks references and parameter roles (not shapes: a
// hand-edited program with bad shapes parses and then fails at dispatch, which is what replaying it should show).
std::string print_program(const Program& p);
Program parse_program(std::string_view text);
Program load_program(const std::string& path);  // ParseError names the file
// Writes atomically (temp file + rename); raises std::runtime_error on I/O failure. `durable`: fsync before the
// rename (reports, saved failures); false for files that can be made again and are written thousands of times a
// second (`run --save-programs`).
void save_text_atomically(const std::string& path, std::string_view text, bool durable = true);

// Helpers.
std::string format_float(double v);  // hex float, or inf/-inf/nan
float bits_to_f32(uint32_t b);
uint32_t f32_to_bits(float f);
int64_t input_numel(const InputDef& in);

}  // namespace crossfire::harness
