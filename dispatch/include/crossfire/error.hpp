// SPDX-License-Identifier: Apache-2.0
// One exception hierarchy for everything crossfire raises. Each error carries its facts as fields, so tests and
// harnesses compare structure; the message (what()) is formatted once, when the error is raised, never on the
// success path.
#pragma once

#include <algorithm>
#include <array>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "crossfire/device.hpp"

namespace crossfire {

enum class ErrorKind : uint8_t {
  backend_unavailable,
  no_tensor_input,
  device_mismatch,
  dtype_mismatch,
  autodiff,
  shape,
  invalid_argument,
  unsupported,
  out_of_memory,
  backend_failure,
  parse,
  program,
  plugin,
};
std::string_view error_kind_name(ErrorKind k);  // "DeviceMismatch", ...

// Note [What raising an error allocates]
// An error keeps its message in a std::string of its own rather than in std::runtime_error's reference-counted copy
// (which would be a second heap block holding the same text), and a DeviceMismatch keeps up to four offenders in
// place (OffenderList). Raising the common DeviceMismatch therefore takes two heap blocks: the exception object
// (the C++ runtime's) and the message. bench_dispatch's device_mismatch/raise_catch counts the operator-new ones.
class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string op, std::string message)
      : message_(std::move(message)), kind_(kind), op_(std::move(op)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  ErrorKind kind() const { return kind_; }
  // The op being dispatched ("add"), or empty when the error is not about one op call.
  const std::string& op() const { return op_; }

 private:
  std::string message_;
  ErrorKind kind_;
  std::string op_;
};

// A backend that is compiled out or found no device; `reason` is its one-line explanation.
class BackendUnavailable : public Error {
 public:
  BackendUnavailable(BackendKind backend, std::string reason);
  BackendKind backend;
  std::string reason;
};

// An op with tensor parameters was called with no present tensor argument (e.g. cat of an empty list).
class NoTensorInput : public Error {
 public:
  explicit NoTensorInput(std::string op);
};

// One argument whose device differs from the target.
struct DeviceOffender {
  std::string param;  // as written in the op table, with an index for list elements: "rhs", "tensors[3]"
  int param_index = 0;  // position in the op's signature
  int list_index = -1;  // element of a TensorList, or -1
  Device device;
  bool wrong_backend = false;  // true: another backend; false: same backend, another index
  friend bool operator==(const DeviceOffender&, const DeviceOffender&) = default;
};

// A DeviceMismatch's offenders, in signature order: a sequence like std::vector (size, [], range-for, push_back,
// pop_back, ==), contiguous, that holds up to kInline offenders in place and moves to the heap past that (Note [What
// raising an error allocates]).
class OffenderList {
 public:
  static constexpr size_t kInline = 4;
  using value_type = DeviceOffender;
  using iterator = DeviceOffender*;
  using const_iterator = const DeviceOffender*;

  OffenderList() = default;
  OffenderList(std::initializer_list<DeviceOffender> offenders) {
    for (const DeviceOffender& o : offenders) push_back(o);
  }
  template <typename It>
  OffenderList(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  void push_back(DeviceOffender o) {
    if (size_ == kInline && heap_.empty()) heap_.assign(std::make_move_iterator(inline_.begin()),
                                                         std::make_move_iterator(inline_.end()));
    if (size_ < kInline) inline_[size_] = std::move(o);
    else heap_.push_back(std::move(o));
    ++size_;
  }
  void pop_back() {
    if (size_ > kInline) heap_.pop_back();
    --size_;
    if (size_ == kInline) {  // back in place
      std::move(heap_.begin(), heap_.end(), inline_.begin());
      heap_.clear();
    }
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  DeviceOffender* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const DeviceOffender* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  DeviceOffender& operator[](size_t i) { return data()[i]; }
  const DeviceOffender& operator[](size_t i) const { return data()[i]; }
  const DeviceOffender& front() const { return data()[0]; }
  const DeviceOffender& back() const { return data()[size_ - 1]; }

  friend bool operator==(const OffenderList& a, const OffenderList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const OffenderList& a, const std::vector<DeviceOffender>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::array<DeviceOffender, kInline> inline_{};
  std::vector<DeviceOffender> heap_;  // all of them, once there are more than kInline
  size_t size_ = 0;
};

// Contract section 4: every offender, in signature order, and where the target came from.
class DeviceMismatch : public Error {
 public:
  DeviceMismatch(std::string op, Device target, std::string target_from, OffenderList offenders);
  Device target;
  std::string target_from;  // the parameter the target was taken from: "lhs", "tensors[0]"
  OffenderList offenders;
};

class DTypeMismatch : public Error {
 public:
  DTypeMismatch(std::string op, std::string param, DType got, DTypeSet accepted, std::string detail = {});
  std::string param;
  DType got;
  DTypeSet accepted;
};

class AutodiffError : public Error {
 public:
  AutodiffError(std::string op, std::string message) : Error(ErrorKind::autodiff, std::move(op), std::move(message)) {}
};

class ShapeError : public Error {
 public:
  ShapeError(std::string op, std::string param, std::string message);
  std::string param;  // empty when no one argument is to blame (a result over the element bound)
};

class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string op, std::string param, std::string message);
  std::string param;
};

// The backend cannot run this op (its capability query said no). Tests report it as skipped, with the reason.
class Unsupported : public Error {
 public:
  Unsupported(std::string op, BackendKind backend, std::string reason);
  BackendKind backend;
};

class OutOfMemory : public Error {
 public:
  OutOfMemory(std::string op, Device device, size_t bytes, std::string detail = {});
  Device device;
  size_t bytes;
};

// A backend failed while running a kernel or moving data (a lost device, a failed pipeline). The process and the
// other backends keep working.
class BackendFailure : public Error {
 public:
  BackendFailure(std::string op, Device device, std::string message);
  Device device;
};

// A malformed program file or option; line/column are 1-based, 0 when not known (the message then names only
// `where`: "FILE: cannot open", not "FILE:0:0: ...").
class ParseError : public Error {
 public:
  ParseError(std::string where, int line, int column, std::string message);
  int line;
  int column;
};

// A harness program that parses but cannot be checked as asked: an input that cannot be made on its device (a
// device this machine lacks, an unavailable backend), a node whose result or work is past the program limits, or
// a check that ran past its time budget. Never a pass: `crossfire replay` and `reduce` exit non-zero on it.
class ProgramError : public Error {
 public:
  enum class Reason : uint8_t { not_runnable, over_limit, over_budget };
  ProgramError(Reason reason, int value, std::string message);
  Reason reason;
  int value;  // the value id to blame (`%3`), or -1 for the program as a whole
};

// A plug-in that could not be loaded or registered (plugin.hpp): the message is "plugin PATH: problem".
class PluginError : public Error {
 public:
  PluginError(std::string path, std::string problem);
  std::string path;
  std::string problem;
};

// Caller data as it may appear inside a one-line message (Note [Messages quote caller data bounded] in
// error.cpp): every byte outside printable ASCII as \xNN (a NUL, CR, newline or invalid UTF-8 can neither cut
// nor break the line), and at most `max_bytes` of the text, the rest replaced by "...(N bytes)".
std::string printable(std::string_view text, size_t max_bytes = 64);

}  // namespace crossfire
