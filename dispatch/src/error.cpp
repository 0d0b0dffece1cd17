// SPDX-License-Identifier: Apache-2.0
#include "crossfire/error.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace crossfire {

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::backend_unavailable: return "BackendUnavailable";
    case ErrorKind::no_tensor_input: return "NoTensorInput";
    case ErrorKind::device_mismatch: return "DeviceMismatch";
    case ErrorKind::dtype_mismatch: return "DTypeMismatch";
    case ErrorKind::autodiff: return "AutodiffError";
    case ErrorKind::shape: return "ShapeError";
    case ErrorKind::invalid_argument: return "InvalidArgument";
    case ErrorKind::unsupported: return "Unsupported";
    case ErrorKind::out_of_memory: return "OutOfMemory";
    case ErrorKind::backend_failure: return "BackendFailure";
    case ErrorKind::parse: return "ParseError";
    case ErrorKind::program: return "ProgramError";
    case ErrorKind::plugin: return "PluginError";
  }
  return "Error";
}

PluginError::PluginError(std::string p, std::string problem)
    : Error(ErrorKind::plugin, "", fmt::format("plugin {}: {}", printable(p, 256), problem)),
      path(std::move(p)),
      problem(std::move(problem)) {}

BackendUnavailable::BackendUnavailable(BackendKind b, std::string r)
    : Error(ErrorKind::backend_unavailable, "", fmt::format("{}: unavailable: {}", backend_name(b), r)),
      backend(b),
      reason(std::move(r)) {}

NoTensorInput::NoTensorInput(std::string op)
    : Error(ErrorKind::no_tensor_input, op,
            fmt::format("{}: no tensor input: the op takes tensors but none was given, so it has no device to run on",
                        op)) {}

namespace {
std::string device_mismatch_message(const std::string& op, Device target, const std::string& from,
                                    const OffenderList& offenders) {
  auto what = [](const DeviceOffender& o) { return o.wrong_backend ? "wrong backend" : "wrong device index"; };
  if (offenders.size() == 1) {
    const DeviceOffender& o = offenders[0];
    // The common case, raised on a hot error path: a compiled format string, into a buffer on the stack.
    fmt::memory_buffer m;
    // (Each device as Device::str() writes it, "cpu:0", written straight into the buffer.)
    fmt::format_to(fmt::appender(m),
                   FMT_COMPILE("{}: input tensor `{}` is on the {}: expected {}:{} (from `{}`), got {}:{}"), op, o.param,
                   o.wrong_backend ? "wrong backend" : "wrong device", backend_name(target.backend), target.index,
                   from, backend_name(o.device.backend), o.device.index);
    return fmt::to_string(m);
  }
  std::string m = fmt::format("{}: {} input tensors are on the wrong device (expected {}, from `{}`):", op,
                              offenders.size(), target.str(), from);
  for (const auto& o : offenders) m += fmt::format("\n  `{}` is on {} ({})", o.param, o.device.str(), what(o));
  return m;
}
}  // namespace

DeviceMismatch::DeviceMismatch(std::string op, Device t, std::string from, OffenderList offs)
    : Error(ErrorKind::device_mismatch, op, device_mismatch_message(op, t, from, offs)),
      target(t),
      target_from(std::move(from)),
      offenders(std::move(offs)) {}

DTypeMismatch::DTypeMismatch(std::string op, std::string p, DType g, DTypeSet acc, std::string detail)
    : Error(ErrorKind::dtype_mismatch, op,
            detail.empty() ? fmt::format("{}: input tensor `{}` has dtype {}, expected {}", op, p, dtype_name(g),
                                         acc.str())
                           : fmt::format("{}: input tensor `{}` has dtype {}, {}", op, p, dtype_name(g), detail)),
      param(std::move(p)),
      got(g),
      accepted(acc) {}

ShapeError::ShapeError(std::string op, std::string p, std::string message)
    : Error(ErrorKind::shape, op,
            p.empty() ? fmt::format("{}: {}", op, message) : fmt::format("{}: `{}`: {}", op, p, message)),
      param(std::move(p)) {}

InvalidArgument::InvalidArgument(std::string op, std::string p, std::string message)
    : Error(ErrorKind::invalid_argument, op,
            p.empty() ? fmt::format("{}: {}", op, message) : fmt::format("{}: `{}`: {}", op, p, message)),
      param(std::move(p)) {}

Unsupported::Unsupported(std::string op, BackendKind b, std::string reason)
    : Error(ErrorKind::unsupported, op, fmt::format("{}: unsupported on {}: {}", op, backend_name(b), reason)),
      backend(b) {}

OutOfMemory::OutOfMemory(std::string op, Device d, size_t n, std::string detail)
    : Error(ErrorKind::out_of_memory, op,
            fmt::format("{}: out of memory on {} allocating {} bytes{}{}", op, d.str(), n, detail.empty() ? "" : ": ",
                        detail)),
      device(d),
      bytes(n) {}

BackendFailure::BackendFailure(std::string op, Device d, std::string message)
    : Error(ErrorKind::backend_failure, op, fmt::format("{}: {} failed: {}", op, d.str(), message)), device(d) {}

namespace {
std::string parse_location(const std::string& where, int line, int column) {
  const std::string w = printable(where, 256);
  if (line <= 0) return w;
  return column <= 0 ? fmt::format("{}:{}", w, line) : fmt::format("{}:{}:{}", w, line, column);
}
}  // namespace

ParseError::ParseError(std::string where, int l, int c, std::string message)
    : Error(ErrorKind::parse, "", fmt::format("{}: {}", parse_location(where, l, c), message)), line(l), column(c) {}

ProgramError::ProgramError(Reason r, int v, std::string message)
    : Error(ErrorKind::program, "", v >= 0 ? fmt::format("program: %{}: {}", v, message) : "program: " + message),
      reason(r),
      value(v) {}

// Note [Messages quote caller data bounded]
// An error message is one line a person reads and a CI log keeps. Whatever it quotes from a caller (a token of a
// program file, an option's value, a path) goes through printable(): a 15 MiB token becomes 64 bytes and its
// length, and bytes that a terminal or a log would act on (NUL cuts a C string, CR rewrites the line, invalid
// UTF-8 breaks a JSON report) are written as \xNN. Only printable ASCII passes as itself.
std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(text.size(), max_bytes);
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') out += char(ch);
    else fmt::format_to(std::back_inserter(out), "\\x{:02x}", unsigned(ch));
  }
  if (text.size() > max_bytes) fmt::format_to(std::back_inserter(out), "...({} bytes)", text.size());
  return out;
}

}  // namespace crossfire
