// SPDX-License-Identifier: Apache-2.0
#include "op_cases.hpp"

#include <cstring>
#include <stdexcept>

#include <Eigen/Core>
#include <fmt/format.h>

namespace crossfire::bench {

std::string_view size_name(SizeClass s) {
  switch (s) {
    case SizeClass::small: return "small";
    case SizeClass::medium: return "medium";
    case SizeClass::large: return "large";
  }
  return "?";
}

// Elementwise and layout ops work on [rows, 256]: 1 Ki elements (L1), 64 Ki (L2), 4 Mi (16 MB of f32: past the
// last-level cache, so large measures memory bandwidth).
namespace {
constexpr int64_t kCols = 256;
int64_t elements(SizeClass s) { return s == SizeClass::small ? 1 << 10 : s == SizeClass::medium ? 1 << 16 : 1 << 22; }
// Convolution-shaped ops: [1, C, H, W] with a 3x3 window, stride 1, padding 1.
struct ConvDims {
  int64_t c, hw;
};
ConvDims conv_dims(SizeClass s) {
  return s == SizeClass::small ? ConvDims{4, 16} : s == SizeClass::medium ? ConvDims{16, 32} : ConvDims{32, 64};
}
constexpr int64_t kWindow = 3;

// Deterministic values inside a parameter's domain (contract section 6: generators respect each op's domain).
class Values {
 public:
  std::vector<uint8_t> make(DType dt, Domain dom, int64_t n, int64_t index_bound) {
    std::vector<uint8_t> out(size_t(n) * dtype_size(dt));
    for (int64_t i = 0; i < n; ++i) {
      const double u = next();  // [0, 1)
      switch (dt) {
        case DType::f32: {
          float v = dom == Domain::positive       ? float(0.5 + 2 * u)
                    : dom == Domain::non_negative ? float(2 * u)
                    : dom == Domain::non_zero     ? float((i % 2 ? -1 : 1) * (0.5 + 2 * u))
                                                  : float(4 * u - 2);
          std::memcpy(out.data() + 4 * i, &v, 4);
          break;
        }
        case DType::i32:
        case DType::i64: {
          int64_t v = dom == Domain::index ? index_bound - 1 - i % index_bound : int64_t(u * 200) - 100;
          if (dom == Domain::positive) v = 1 + int64_t(u * 100);
          if (dom == Domain::non_negative) v = int64_t(u * 100);
          if (dom == Domain::non_zero && v == 0) v = 1;
          if (dt == DType::i32) {
            const int32_t v32 = int32_t(v);
            std::memcpy(out.data() + 4 * i, &v32, 4);
          } else {
            std::memcpy(out.data() + 8 * i, &v, 8);
          }
          break;
        }
        case DType::boolean: out[size_t(i)] = uint8_t(u < 0.5); break;
        case DType::f16:
        case DType::bf16: {
          const float v = dom == Domain::positive || dom == Domain::non_negative ? float(0.5 + 2 * u)
                          : dom == Domain::non_zero ? float((i % 2 ? -1 : 1) * (0.5 + 2 * u))
                                                    : float(4 * u - 2);
          const uint16_t bits = dt == DType::f16 ? Eigen::numext::bit_cast<uint16_t>(Eigen::half(v))
                                                 : Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(v));
          std::memcpy(out.data() + 2 * i, &bits, 2);
          break;
        }
      }
    }
    return out;
  }

 private:
  double next() {  // 64-bit LCG, top 53 bits
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return double(state_ >> 11) * 0x1p-53;
  }
  uint64_t state_ = 0x9e3779b97f4a7c15ull;
};

// The dtype a tensor parameter gets: `preferred` when it accepts it, else f32, else i32, else bool; parameters of
// one dtype group share the first choice made in the group.
DType pick_dtype(const ParamDef& p, std::array<int, 8>& group_dtype, DType preferred) {
  if (p.same_dtype_group && group_dtype[p.same_dtype_group] >= 0) return DType(group_dtype[p.same_dtype_group]);
  DType d = p.dtypes.contains(preferred)    ? preferred
            : p.dtypes.contains(DType::f32) ? DType::f32
            : p.dtypes.contains(DType::i32) ? DType::i32
                                            : DType::boolean;
  if (p.same_dtype_group) group_dtype[p.same_dtype_group] = int(d);
  return d;
}

[[noreturn]] void unknown(const OpDef& op, std::string_view what) {
  throw std::logic_error(fmt::format("bench generator: op `{}` (family {}): no rule for {}; teach bench/op_cases.cpp",
                                     op.name, int(op.family), what));
}

// The shape of tensor parameter `p` of `op` at size `s` (tensor-list elements: `list_len` of them).
Shape tensor_shape(const OpDef& op, const ParamDef& p, SizeClass s, int list_len) {
  const int64_t n = elements(s), rows = n / kCols;
  const ConvDims cd = conv_dims(s);
  switch (op.family) {
    case OpFamily::unary: case OpFamily::binary: case OpFamily::where: case OpFamily::cast: case OpFamily::reduce:
    case OpFamily::reshape: case OpFamily::permute: case OpFamily::slice: case OpFamily::softmax:
    case OpFamily::transfer:
      return {rows, kCols};
    case OpFamily::expand: return {1, kCols};
    case OpFamily::cat: return {rows / list_len, kCols};
    case OpFamily::index_select:
      if (p.name == "index") return {rows};
      return {rows, kCols};
    case OpFamily::matmul: return {matmul_dim(s), matmul_dim(s)};
    case OpFamily::conv2d:
      if (p.name == "input") return {1, cd.c, cd.hw, cd.hw};
      if (p.name == "weight") return {cd.c, cd.c, kWindow, kWindow};
      if (p.name == "bias") return {cd.c};
      break;
    case OpFamily::unfold: return {1, cd.c, cd.hw, cd.hw};
    case OpFamily::fold: return {1, cd.c * kWindow * kWindow, cd.hw * cd.hw};
    case OpFamily::creation: break;
  }
  unknown(op, fmt::format("tensor parameter `{}`", p.name));
}

std::vector<int64_t> int_list_attr(const OpDef& op, const ParamDef& p, SizeClass s) {
  const int64_t n = elements(s), rows = n / kCols;
  const ConvDims cd = conv_dims(s);
  const std::string_view name = p.name;
  switch (op.family) {
    case OpFamily::creation:
      if (name == "shape") return {rows, kCols};
      break;
    case OpFamily::reshape:
      if (name == "shape") return {kCols, -1};
      break;
    case OpFamily::permute:
      if (name == "dims") return {1, 0};
      break;
    case OpFamily::slice:  // every other column: a strided read
      if (name == "starts") return {0, 0};
      if (name == "stops") return {rows, kCols};
      if (name == "steps") return {1, 2};
      break;
    case OpFamily::expand:
      if (name == "shape") return {rows, kCols};
      break;
    case OpFamily::conv2d: case OpFamily::unfold: case OpFamily::fold:
      if (name == "stride") return {1, 1};
      if (name == "padding") return {1, 1};
      if (name == "kernel") return {kWindow, kWindow};
      if (name == "output_size") return {cd.hw, cd.hw};
      break;
    default: break;
  }
  unknown(op, fmt::format("integer-list attribute `{}`", name));
}

int64_t int_attr(const OpDef& op, const ParamDef& p) {
  if (p.name == "seed") return 20240229;
  if (p.name == "axis") return op.family == OpFamily::softmax ? -1 : 0;  // softmax over rows; cat/index_select: 0
  unknown(op, fmt::format("integer attribute `{}`", p.name));
}

double float_attr(const OpDef& op, const ParamDef& p, SizeClass s) {
  if (p.name == "value") return 1.5;
  if (p.name == "start") return 0;
  if (p.name == "stop") return double(elements(s));
  if (p.name == "step") return 1;
  if (p.name == "min") return -0.5;  // clamp: half the values on each side of each bound
  if (p.name == "max") return 0.5;
  unknown(op, fmt::format("float attribute `{}`", p.name));
}

DType dtype_attr(const OpDef& op) { return op.family == OpFamily::cast ? DType::i32 : DType::f32; }

}  // namespace

int64_t matmul_dim(SizeClass s) { return s == SizeClass::small ? 32 : s == SizeClass::medium ? 128 : 512; }

bool takes_dtype(OpId id, DType dt) {
  const OpDef& op = op_def(id);
  for (int i = 0; i < op.num_params; ++i)
    if (is_tensor_role(op.params[size_t(i)].role) && op.params[size_t(i)].dtypes.contains(dt)) return true;
  return false;
}

std::unique_ptr<OpCase> make_op_case(OpId id, Device device, SizeClass size, DType float_dtype) {
  const OpDef& op = op_def(id);
  auto c = std::make_unique<OpCase>();
  c->id = id;
  c->device = device;
  c->size = size;
  // Reserve first: args hold views into these vectors, which must not reallocate afterwards.
  constexpr int kListLen = 4;
  c->tensors.reserve(size_t(op.num_params) + kListLen);
  c->int_lists.reserve(size_t(op.num_params));

  Values values;
  std::array<int, 8> group_dtype;
  group_dtype.fill(-1);
  std::vector<std::string> labels;
  auto make_tensor = [&](const ParamDef& p, const Shape& shape) -> const Tensor& {
    const DType dt = pick_dtype(p, group_dtype, float_dtype);
    // An index parameter indexes the op's axis 0 of the first tensor (index_select); keep values in range.
    const int64_t bound = c->tensors.empty() ? 1 : std::max<int64_t>(1, c->tensors.front().shape()[0]);
    std::vector<uint8_t> data = values.make(dt, p.domain, shape.numel(), bound);
    c->tensors.push_back(from_bytes(data, shape.dims(), dt, device));
    c->bytes_moved += double(data.size());
    return c->tensors.back();
  };

  for (int i = 0; i < op.num_params; ++i) {
    const ParamDef& p = op.params[size_t(i)];
    switch (p.role) {
      case ParamRole::tensor: case ParamRole::optional_tensor: {
        const Tensor& t = make_tensor(p, tensor_shape(op, p, size, 1));
        labels.push_back(fmt::format("{}={} {}", p.name, t.shape().str(), dtype_name(t.dtype())));
        c->args.push(p.role == ParamRole::tensor ? Arg::of(t) : Arg::optional(&t));
        break;
      }
      case ParamRole::tensor_list: {
        const size_t first = c->tensors.size();
        for (int j = 0; j < kListLen; ++j) make_tensor(p, tensor_shape(op, p, size, kListLen));
        labels.push_back(fmt::format("{}={}x{} {}", p.name, kListLen, c->tensors[first].shape().str(),
                                     dtype_name(c->tensors[first].dtype())));
        c->args.push(Arg::of(std::span<const Tensor>(c->tensors.data() + first, kListLen)));
        break;
      }
      case ParamRole::int_attr: c->args.push(Arg::integer(int_attr(op, p))); break;
      case ParamRole::optional_int_attr:  // reductions: over the last axis (rows of 256)
        c->args.push(Arg::optional_integer(true, -1));
        break;
      case ParamRole::float_attr: c->args.push(Arg::scalar(float_attr(op, p, size))); break;
      case ParamRole::bool_attr: c->args.push(Arg::flag(false)); break;
      case ParamRole::int_list_attr: {
        c->int_lists.push_back(int_list_attr(op, p, size));
        c->args.push(Arg::of(IntList(c->int_lists.back())));
        break;
      }
      case ParamRole::dtype_attr: c->args.push(Arg::of(dtype_attr(op))); break;
      case ParamRole::device_attr: c->args.push(Arg::of(device)); break;
      case ParamRole::bytes_attr: {
        const int64_t n = elements(size);
        c->bytes = values.make(DType::f32, Domain::any, n, 1);
        c->args.push(Arg::of(std::span<const uint8_t>(c->bytes)));
        c->bytes_moved += double(c->bytes.size());
        break;
      }
    }
  }

  // The output's bytes and, for the ops that are compute-bound, the floating-point work.
  const OutputSpec spec = validate(id, c->args);
  c->bytes_moved += double(spec.shape.numel()) * double(dtype_size(spec.dtype));
  if (op.family == OpFamily::matmul) {
    const Shape& a = c->tensors[0].shape();
    c->flops = 2.0 * double(spec.shape.numel()) * double(a[a.rank() - 1]);
  } else if (op.family == OpFamily::conv2d) {
    const Shape& w = c->tensors[1].shape();
    c->flops = 2.0 * double(spec.shape.numel()) * double(w[1] * w[2] * w[3]);
  }
  c->label = fmt::format("{}", fmt::join(labels, " "));
  if (c->label.empty()) c->label = fmt::format("out={} {}", spec.shape.str(), dtype_name(spec.dtype));
  return c;
}

}  // namespace crossfire::bench
