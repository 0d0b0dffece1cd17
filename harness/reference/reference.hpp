// The f64 reference evaluator: every op of the op table computed with plain loops in double precision on host
// values. It shares no code with any backend's kernels (it is what they are checked against); it uses only the op
// table's metadata (names, parameters) and the output rules' shapes. Tests use it for expected values; the
// harness's agreement and gradient oracles use it as their exact model (contract section 6).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "crossfire/crossfire.hpp"

namespace crossfire::reference {

// A host tensor in f64. i32 and bool values are held exactly (bool as 0.0 / 1.0).
struct RefTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> values;  // row-major, shape.numel() entries

  static RefTensor from(const Tensor& t);  // reads a device tensor (f32 widened exactly)
  int64_t numel() const { return shape.numel(); }
};

// One argument of a reference call, mirroring ParamRole.
struct RefAbsent {};
using RefArg = std::variant<RefTensor,               // tensor, present optional_tensor
                            RefAbsent,               // absent optional_tensor / optional_int_attr
                            std::vector<RefTensor>,  // tensor_list
                            int64_t,                 // int_attr, present optional_int_attr
                            double,                  // float_attr
                            bool,                    // bool_attr
                            std::vector<int64_t>,    // int_list_attr
                            DType,                   // dtype_attr
                            Device,                  // device_attr
                            std::vector<uint8_t>>;   // bytes_attr

struct RefCall {
  OpId op;
  std::vector<RefArg> args;  // in signature order

  // Mirrors a dispatch call: reads every tensor argument to the host.
  static RefCall from(OpId op, const ArgPack& args);
};

// The exact result and, per element, the magnitude and term count that contract section 6's bound needs:
// |got - value| <= (k_const + k_per_term * terms) * eps_f32 * magnitude + tiny.
struct RefResult {
  RefTensor value;
  std::vector<double> magnitude;  // sum of |terms| that formed each element (|a|+|b| for add, sum|a_i*b_i| ...)
  std::vector<int64_t> terms;     // number of terms summed into each element (1 for elementwise ops)
};

// Evaluates one op. Shapes are worked out here, independently of the op table's output rules. A call the
// evaluator cannot evaluate (an invalid shape or attribute) raises InvalidArgument; oracles feed it valid calls.
RefResult evaluate(const RefCall& call);

// Whether a float result element is within contract section 6's bound; NaN must match NaN, infinities must
// match in sign. `tiny` absorbs underflow (default: the smallest normal f32).
bool within_bound(const ErrorBound& bound, double got, double exact, double magnitude, int64_t terms,
                  double tiny = 1.1754943508222875e-38);
double allowed_error(const ErrorBound& bound, double magnitude, int64_t terms, double tiny = 1.1754943508222875e-38);

}  // namespace crossfire::reference
