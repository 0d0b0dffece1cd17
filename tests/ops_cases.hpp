// SPDX-License-Identifier: Apache-2.0
// Argument sets for the per-op forward tests: a few valid calls per op, built from the op table's families, dtypes
// and domains on the device under test, and a runner that checks a dispatch result against the f64 reference.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crossfire/crossfire.hpp"
#include "reference/reference.hpp"

namespace crossfire::testing::ops {

// One call: owns every tensor, list and attribute its ArgPack views (deques keep addresses stable as it grows).
class CallBuilder {
 public:
  CallBuilder(OpId op, std::string label) : op_(op), label_(std::move(label)) {}
  CallBuilder(const CallBuilder&) = delete;
  CallBuilder& operator=(const CallBuilder&) = delete;

  CallBuilder& tensor(Tensor t);
  CallBuilder& optional(std::optional<Tensor> t);
  CallBuilder& list(std::vector<Tensor> ts);
  CallBuilder& integer(int64_t v);
  CallBuilder& optional_integer(std::optional<int64_t> v);
  CallBuilder& scalar(double v);
  CallBuilder& flag(bool v);
  CallBuilder& ints(std::vector<int64_t> v);
  CallBuilder& dtype(DType d);
  CallBuilder& device(Device d);
  CallBuilder& bytes(std::vector<uint8_t> b);

  OpId op() const { return op_; }
  const std::string& label() const { return label_; }
  const ArgPack& args() const { return pack_; }

 private:
  OpId op_;
  std::string label_;
  std::deque<Tensor> tensors_;
  std::deque<std::vector<Tensor>> lists_;
  std::deque<std::vector<int64_t>> ints_;
  std::deque<std::vector<uint8_t>> bytes_;
  ArgPack pack_;
};
using Calls = std::vector<std::unique_ptr<CallBuilder>>;

// Host values -> a tensor on `d` (through from_data, which needs no kernel).
Tensor make_f32(const std::vector<float>& v, const std::vector<int64_t>& shape, Device d);
Tensor make_i32(const std::vector<int32_t>& v, const std::vector<int64_t>& shape, Device d);
Tensor make_i64(const std::vector<int64_t>& v, const std::vector<int64_t>& shape, Device d);
Tensor make_bool(const std::vector<uint8_t>& v, const std::vector<int64_t>& shape, Device d);
// f16/bf16: each value rounded to the dtype (reference::round_to), then stored as its bits.
Tensor make_half(const std::vector<float>& v, const std::vector<int64_t>& shape, Device d, DType dt);

// Deterministic pseudo-random values of `dt` inside `domain` (index: in [0, index_bound)).
class ValueSource {
 public:
  explicit ValueSource(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  Tensor tensor(Device d, DType dt, const std::vector<int64_t>& shape, Domain domain = Domain::any,
                int64_t index_bound = 1);
  double uniform();  // [0, 1)

 private:
  uint64_t state_;
};

// A few valid calls of `op` on `d` (an empty list means the op's family has no cases: a test failure).
Calls cases_for(OpId op, Device d, Device second);

// What checking one call found.
struct Outcome {
  bool unsupported = false;
  std::string message;  // Unsupported's reason, or the failure, or empty when it agreed
};
// Runs `call` through dispatch and checks its device, dtype, shape and every element against the reference
// (reference::first_mismatch: the op's bound for f32, exact otherwise).
Outcome run_and_compare(const CallBuilder& call, Device expected_device);

}  // namespace crossfire::testing::ops
