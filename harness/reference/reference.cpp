// SPDX-License-Identifier: Apache-2.0
// The f64 reference evaluator (see reference.hpp, Note [What the reference computes]). Plain loops, one small
// evaluation function per op, found through a name -> function table that is checked against kOpTable at compile
// time. Nothing here is shared with kernels/ or with dispatch/src/rules.cpp.
#include "reference/reference.hpp"
#include "reference/indexing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace crossfire::reference {

// ---------------------------------------------------------------------------------------------------------------
// Reading device tensors and dispatch arguments
// ---------------------------------------------------------------------------------------------------------------

RefTensor RefTensor::from(const Tensor& t) {
  RefTensor r{t.dtype(), t.shape(), {}};
  const size_t n = size_t(t.numel());
  const size_t size = dtype_size(t.dtype());  // 1 to 8 bytes: never more than the 8 of a double
  r.values.resize(n);
  if (t.dtype() == DType::i64) {
    r.ints.resize(n);
    t.read_host_bytes({reinterpret_cast<uint8_t*>(r.ints.data()), n * size});
    for (size_t i = 0; i < n; ++i) r.values[i] = double(r.ints[i]);
    return r;
  }
  // The device's bytes are read into the front of `values` itself and widened in place from the last element
  // back: element i's bytes lie at i * size <= 8 * i, so each is read before its double overwrites it (no
  // buffer of bytes is allocated per tensor read).
  auto* bytes = reinterpret_cast<uint8_t*>(r.values.data());
  t.read_host_bytes({bytes, n * size});
  for (size_t i = n; i-- > 0;) {
    const uint8_t* at = bytes + size * i;
    double v;
    if (t.dtype() == DType::f32) {
      float f;
      std::memcpy(&f, at, 4);
      v = f;
    } else if (is_half(t.dtype())) {
      v = half_value(uint16_t(at[0] | at[1] << 8), t.dtype());
    } else if (t.dtype() == DType::i32) {
      int32_t x;
      std::memcpy(&x, at, 4);
      v = x;
    } else {
      v = at[0];
    }
    r.values[i] = v;
  }
  return r;
}

RefTensor RefTensor::of_i64(const Shape& shape, std::vector<int64_t> ints) {
  RefTensor r{DType::i64, shape, {}, std::move(ints)};
  if (int64_t(r.ints.size()) != shape.numel())
    throw InvalidArgument("reference", "ints", fmt::format("{} values for shape {}", r.ints.size(), shape.str()));
  r.values.reserve(r.ints.size());
  for (int64_t v : r.ints) r.values.push_back(double(v));
  return r;
}

RefCall RefCall::from(OpId op, const ArgPack& args) {
  RefCall c{op, {}};
  c.args.reserve(size_t(args.count));
  for (int i = 0; i < args.count; ++i) {
    const Arg& a = args[i];
    switch (a.role) {
      case ParamRole::tensor: c.args.emplace_back(RefTensor::from(*a.tensor)); break;
      case ParamRole::optional_tensor:
        if (a.present)
          c.args.emplace_back(RefTensor::from(*a.tensor));
        else
          c.args.emplace_back(RefAbsent{});
        break;
      case ParamRole::tensor_list: {
        std::vector<RefTensor> list;
        for (const Tensor& t : a.list) list.push_back(RefTensor::from(t));
        c.args.emplace_back(std::move(list));
        break;
      }
      case ParamRole::int_attr: c.args.emplace_back(a.i); break;
      case ParamRole::optional_int_attr:
        if (a.present)
          c.args.emplace_back(a.i);
        else
          c.args.emplace_back(RefAbsent{});
        break;
      case ParamRole::float_attr: c.args.emplace_back(a.f); break;
      case ParamRole::bool_attr: c.args.emplace_back(a.b); break;
      case ParamRole::int_list_attr: c.args.emplace_back(std::vector<int64_t>(a.ints.begin(), a.ints.end())); break;
      case ParamRole::dtype_attr: c.args.emplace_back(a.dtype); break;
      case ParamRole::device_attr: c.args.emplace_back(a.device); break;
      case ParamRole::bytes_attr: c.args.emplace_back(std::vector<uint8_t>(a.bytes.begin(), a.bytes.end())); break;
    }
  }
  return c;
}

FloatFormat float_format(DType dt) {
  switch (dt) {
    case DType::f16: return {0x1p-10, 65520.0, 0x1p-14, 11, -14};
    case DType::bf16: return {0x1p-7, 0x1p128 - 0x1p119, 0x1p-126, 8, -126};
    default: return {0x1p-23, 0x1p128 - 0x1p103, 0x1p-126, 24, -126};
  }
}

double round_to(double v, DType dt) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  const FloatFormat f = float_format(dt);
  const double a = std::fabs(v);
  if (a >= f.overflow) return std::copysign(std::numeric_limits<double>::infinity(), v);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const double quantum = std::ldexp(1.0, std::max(e - 1, f.min_exponent) - (f.precision - 1));
  return std::copysign(std::nearbyint(a / quantum) * quantum, v);  // to nearest, ties to even (the default mode)
}

// Note [Half NaNs keep their payload]
// Data movement copies bits (contract section 6), a NaN's payload and sign included, and the agreement oracle checks
// it by comparing the f64 values the reference holds bit for bit. So the decoder puts a half NaN's sign and payload
// where an f32 NaN's would be (f16's 10 fraction bits at the top of f32's 23, bf16's 7 likewise), and widens that
// f32 to f64, which keeps them; half_bits() takes them back. Decoding every NaN to one default NaN, as this once
// did, let a backend's unfold that narrowed an f32 copy (and so dropped f16 payloads) pass every oracle.
double half_value(uint16_t bits, DType dt) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  if (dt == DType::bf16) {  // the top half of an f32
    const uint32_t w = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
  }
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  if (exponent == 0x1f) {
    if (fraction == 0) return sign * std::numeric_limits<double>::infinity();
    const uint32_t w = (uint32_t(bits & 0x8000u) << 16) | 0x7f800000u | (uint32_t(fraction) << 13);
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;  // a NaN with the f16's sign and payload
  }
  if (exponent == 0) return sign * std::ldexp(double(fraction), -24);  // subnormal (and zero, signed)
  return sign * std::ldexp(double(1024 + fraction), exponent - 25);
}

namespace {
// The f16/bf16 NaN with this sign and the top of an f32's 23 fraction bits (the quiet NaN where those are all 0).
uint16_t half_nan(bool negative, uint32_t f32_fraction, DType dt) {
  const uint16_t sign = negative ? 0x8000u : 0u;
  if (dt == DType::bf16) {
    const uint32_t payload = f32_fraction >> 16;
    return uint16_t(sign | 0x7f80u | (payload ? payload : 0x40u));
  }
  const uint32_t payload = f32_fraction >> 13;
  return uint16_t(sign | 0x7c00u | (payload ? payload : 0x200u));
}
}  // namespace

uint16_t half_bits(double v, DType dt) {
  const uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  const double a = std::fabs(v);
  if (a != a) {  // the top of the payload, where half_value() put it (an f32's fraction is the top of an f64's)
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return half_nan(sign != 0, uint32_t(b >> 29) & 0x7fffffu, dt);
  }
  if (dt == DType::bf16) {
    const float f = float(a);  // exact: v is a bf16 value
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return uint16_t(sign | (b >> 16));
  }
  if (std::isinf(a)) return sign | 0x7c00u;
  if (a < 0x1p-14) return uint16_t(sign | uint16_t(a * 0x1p24));  // subnormal or zero: a multiple of 2^-24
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const auto fraction = uint16_t((a / std::ldexp(1.0, e - 1) - 1.0) * 1024);
  return uint16_t(sign | uint16_t((e - 1 + 15) << 10) | fraction);
}

uint16_t half_bits_of_f32(uint32_t f32_bits, DType dt) {
  if ((f32_bits & 0x7f800000u) == 0x7f800000u && (f32_bits & 0x7fffffu) != 0)
    return half_nan((f32_bits >> 31) != 0, f32_bits & 0x7fffffu, dt);
  float f;
  std::memcpy(&f, &f32_bits, sizeof f);
  return half_bits(f, dt);
}

namespace {

constexpr double kEps = 0x1p-23;
// The smallest |x| whose round-to-nearest f32 is infinite: 2^128 - 2^103 (half an ulp above FLT_MAX).
constexpr double kF32Overflow = 0x1p128 - 0x1p103;

// ---------------------------------------------------------------------------------------------------------------
// Value conversions (Note [What the reference computes])
// ---------------------------------------------------------------------------------------------------------------

// Round to nearest f32, without the undefined behaviour of converting an out-of-range double.
double round_f32(double v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  if (std::fabs(v) >= kF32Overflow) return std::copysign(std::numeric_limits<double>::infinity(), v);
  if (std::fabs(v) > double(std::numeric_limits<float>::max()))
    return std::copysign(double(std::numeric_limits<float>::max()), v);
  return double(static_cast<float>(v));
}

// f64 -> i32 as cast does: truncate toward zero, saturate, NaN -> 0.
double to_i32(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= -2147483648.0) return -2147483648.0;
  if (t >= 2147483647.0) return 2147483647.0;
  return t;
}

// f64 -> i64 as cast does: truncate toward zero, saturate, NaN -> 0. (2^63 is an f64; INT64_MAX is not.)
int64_t to_i64(double v) {
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  if (t <= -0x1p63) return std::numeric_limits<int64_t>::min();
  if (t >= 0x1p63) return std::numeric_limits<int64_t>::max();
  return int64_t(t);
}

// f64 -> any dtype but i64 (whose values are written with put_int).
double convert(double v, DType to) {
  switch (to) {
    case DType::f32: return round_f32(v);
    case DType::f16:
    case DType::bf16: return round_to(v, to);
    case DType::i32: return to_i32(v);
    case DType::boolean: return v != 0 ? 1.0 : 0.0;
    case DType::i64: return double(to_i64(v));
  }
  return v;
}

// An exact integer rounded once to float dtype `to`. Up to 2^53 the integer is an f64 and one rounding does it.
// Past that it is first cut to 53 significant bits rounded to odd (the bits dropped OR-ed into the last one kept),
// which is exact enough that the second rounding, to at most 24 bits, gives the once-rounded result (53 >= 24 + 2).
double round_integer(int64_t v, DType to) {
  const uint64_t mag = v < 0 ? 0 - uint64_t(v) : uint64_t(v);
  double d;
  if (mag <= (uint64_t(1) << 53)) {
    d = double(mag);
  } else {
    const int shift = 64 - std::countl_zero(mag) - 53;
    const uint64_t kept = (mag >> shift) | ((mag & ((uint64_t(1) << shift) - 1)) != 0 ? 1u : 0u);
    d = std::ldexp(double(kept), shift);
  }
  return convert(v < 0 ? -d : d, to);
}

// Two's complement wrap of an integer result computed modulo 2^64 into dtype dt (i32: the low 32 bits).
int64_t narrow(uint64_t w, DType dt) { return dt == DType::i64 ? int64_t(w) : int64_t(int32_t(uint32_t(w))); }

// Writes an exact integer into element i of an i32, i64 or bool tensor.
void put_int(RefTensor& t, size_t i, int64_t v) {
  if (t.dtype == DType::i64) t.ints[i] = v;
  t.values[i] = double(v);
}
// Element i of t set to v converted to t's dtype (cast, full, arange).
void put_converted(RefTensor& t, size_t i, double v) {
  if (t.dtype == DType::i64)
    put_int(t, i, to_i64(v));
  else
    t.values[i] = convert(v, t.dtype);
}
// Element j of src copied into element i of dst (the same dtype): data movement.
void copy_element(RefTensor& dst, size_t i, const RefTensor& src, size_t j) {
  dst.values[i] = src.values[j];
  if (dst.dtype == DType::i64) dst.ints[i] = src.ints[j];
}

// Shapes and indexing: indexing.hpp (shared with vjp.cpp).
using namespace detail;


// ---------------------------------------------------------------------------------------------------------------
// The evaluation context: typed, checked access to one call's arguments by the op table's parameter names
// ---------------------------------------------------------------------------------------------------------------

class Ctx {
 public:
  Ctx(const OpDef& op, const RefCall& call) : op(op), call(call) {}
  const OpDef& op;
  const RefCall& call;

  [[noreturn]] void fail(std::string_view param, std::string msg) const {
    throw InvalidArgument(std::string(op.name), std::string(param), std::move(msg));
  }

  int index(std::string_view name) const {
    int i = op.param_index(name);
    if (i < 0 || size_t(i) >= call.args.size()) fail(name, "the reference evaluator expected this parameter");
    return i;
  }
  template <class T>
  const T& get(std::string_view name) const {
    const T* v = std::get_if<T>(&call.args[size_t(index(name))]);
    if (v == nullptr) fail(name, "has the wrong kind of value for its parameter role");
    return *v;
  }
  const RefTensor& tensor(std::string_view n) const { return get<RefTensor>(n); }
  const RefTensor* optional_tensor(std::string_view n) const {
    if (std::holds_alternative<RefAbsent>(call.args[size_t(index(n))])) return nullptr;
    return &get<RefTensor>(n);
  }
  const std::vector<RefTensor>& list(std::string_view n) const { return get<std::vector<RefTensor>>(n); }
  int64_t integer(std::string_view n) const { return get<int64_t>(n); }
  std::optional<int64_t> optional_integer(std::string_view n) const {
    if (std::holds_alternative<RefAbsent>(call.args[size_t(index(n))])) return std::nullopt;
    return get<int64_t>(n);
  }
  double scalar(std::string_view n) const { return get<double>(n); }
  bool flag(std::string_view n) const { return get<bool>(n); }
  const std::vector<int64_t>& ints(std::string_view n) const { return get<std::vector<int64_t>>(n); }
  DType dtype(std::string_view n) const { return get<DType>(n); }
  const std::vector<uint8_t>& bytes(std::string_view n) const { return get<std::vector<uint8_t>>(n); }

  // A shape from caller data: rank <= kMaxRank, dims >= 0, at most kMaxElements elements.
  Shape shape_from(std::string_view param, std::span<const int64_t> dims) const {
    if (dims.size() > size_t(kMaxRank)) fail(param, fmt::format("rank {} is above {}", dims.size(), kMaxRank));
    Shape s;
    int64_t n = 1;
    bool zero = false;
    for (int64_t d : dims) {
      if (d < 0) fail(param, fmt::format("negative dimension {}", d));
      if (d == 0)
        zero = true;
      else if (n > kMaxElements / d)
        fail(param, "too many elements");
      else
        n *= d;
      s.push_back(d);
    }
    if (!zero && n > kMaxElements) fail(param, "too many elements");
    return s;
  }

  // An axis of a rank-r tensor; negative counts from the end.
  int axis(std::string_view param, int64_t a, int rank) const {
    if (a < -rank || a >= rank || rank == 0) fail(param, fmt::format("axis {} is out of range for rank {}", a, rank));
    return int(a < 0 ? a + rank : a);
  }

  Shape broadcast(std::string_view param, const Shape& a, const Shape& b) const {
    int r = std::max(a.rank(), b.rank());
    Shape out;
    for (int i = 0; i < r; ++i) {
      int ia = i - (r - a.rank()), ib = i - (r - b.rank());
      int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
      if (da != db && da != 1 && db != 1)
        fail(param, fmt::format("shapes {} and {} do not broadcast", a.str(), b.str()));
      out.push_back(da == 1 ? db : da);
    }
    return out;
  }

  // Two non-negative (or >= min) integers: stride, padding, kernel, output_size.
  std::array<int64_t, 2> pair(std::string_view param, int64_t min) const {
    const std::vector<int64_t>& v = ints(param);
    if (v.size() != 2) fail(param, fmt::format("needs 2 values, got {}", v.size()));
    for (int64_t x : v)
      if (x < min || x > (int64_t(1) << 24)) fail(param, fmt::format("value {} is out of range", x));
    return {v[0], v[1]};
  }
};

// A result of `dt` and `shape`; magnitude and terms sized to match.
RefResult make_result(DType dt, const Shape& shape) {
  RefResult r;
  r.value.dtype = dt;
  r.value.shape = shape;
  size_t n = size_t(shape.numel());
  r.value.values.assign(n, 0.0);
  if (dt == DType::i64) r.value.ints.assign(n, 0);
  r.magnitude.assign(n, 0.0);
  r.terms.assign(n, 0);
  return r;
}

// Sets magnitude = |value|, terms = 0 on every element: the convention for bitwise results. Takes the result by
// value (`return exact_result(std::move(r))` moves it through; returning a reference made every caller copy it).
RefResult exact_result(RefResult r) {
  for (size_t i = 0; i < r.value.values.size(); ++i) {
    r.magnitude[i] = std::fabs(r.value.values[i]);
    r.terms[i] = 0;
  }
  return r;
}

using EvalFn = RefResult (*)(const Ctx&);

// ---------------------------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------------------------

RefResult filled(const Ctx& c, double v) {
  DType dt = c.dtype("dtype");
  RefResult r = make_result(dt, c.shape_from("shape", c.ints("shape")));
  for (size_t i = 0; i < r.value.values.size(); ++i) put_converted(r.value, i, v);
  return exact_result(std::move(r));
}

// The dtype attribute, which must be one the op table lets it name (rand and randn: the float dtypes; arange: the
// numeric ones).
DType dtype_attr(const Ctx& c) {
  const DType dt = c.dtype("dtype");
  const DTypeSet allowed = c.op.params[size_t(c.index("dtype"))].dtypes;
  if (!allowed.contains(dt))
    c.fail("dtype", fmt::format("{} makes {} tensors, not {}", c.op.name, allowed.str(), dtype_name(dt)));
  return dt;
}

RefResult ev_zeros(const Ctx& c) { return filled(c, 0.0); }
RefResult ev_ones(const Ctx& c) { return filled(c, 1.0); }
RefResult ev_full(const Ctx& c) { return filled(c, c.scalar("value")); }

RefResult ev_arange(const Ctx& c) {
  double start = c.scalar("start"), stop = c.scalar("stop"), step = c.scalar("step");
  const DType dt = dtype_attr(c);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    c.fail("start", "start, stop and step must be finite");
  if (step == 0) c.fail("step", "must not be 0");
  double count = std::ceil((stop - start) / step);
  if (count > double(kMaxElements)) c.fail("stop", "too many elements");
  int64_t n = count > 0 ? int64_t(count) : 0;
  RefResult r = make_result(dt, Shape{n});
  for (int64_t i = 0; i < n; ++i) put_converted(r.value, size_t(i), start + double(i) * step);
  return exact_result(std::move(r));
}

RefResult ev_from_data(const Ctx& c) {
  DType dt = c.dtype("dtype");
  Shape s = c.shape_from("shape", c.ints("shape"));
  const std::vector<uint8_t>& b = c.bytes("data");
  size_t width = dtype_size(dt);
  if (b.size() != size_t(s.numel()) * width)
    c.fail("data", fmt::format("has {} bytes; {} elements of {} need {}", b.size(), s.numel(), dtype_name(dt),
                               size_t(s.numel()) * width));
  RefResult r = make_result(dt, s);
  for (size_t i = 0; i < r.value.values.size(); ++i) {
    // Little-endian, assembled byte by byte so the host's byte order does not matter.
    uint64_t w = 0;
    for (size_t k = 0; k < width; ++k) w |= uint64_t(b[i * width + k]) << (8 * k);
    if (dt == DType::f32) {
      const uint32_t w32 = uint32_t(w);
      float f;
      std::memcpy(&f, &w32, 4);
      r.value.values[i] = f;
    } else if (dt == DType::i64) {
      put_int(r.value, i, int64_t(w));
    } else if (is_half(dt)) {
      r.value.values[i] = half_value(uint16_t(w), dt);
    } else if (dt == DType::i32) {
      r.value.values[i] = double(int32_t(uint32_t(w)));
    } else {
      if (w > 1) c.fail("data", fmt::format("bool values must be 0 or 1, got {}", w));
      r.value.values[i] = double(w);
    }
  }
  return exact_result(std::move(r));
}

double uniform_24(uint32_t w) { return double(w >> 8) * 0x1p-24; }

// The top p bits of the word, p = the dtype's precision: (w >> (32 - p)) * 2^-p.
RefResult ev_rand(const Ctx& c) {
  int64_t seed = c.integer("seed");
  const DType dt = dtype_attr(c);
  const int p = float_format(dt).precision;
  RefResult r = make_result(dt, c.shape_from("shape", c.ints("shape")));
  for (size_t i = 0; i < r.value.values.size(); ++i)
    r.value.values[i] = std::ldexp(double(philox_word(seed, int64_t(i)) >> (32 - p)), -p);
  return exact_result(std::move(r));
}

// The same values in every dtype (exact f64, left unrounded like every transcendental result).
RefResult ev_randn(const Ctx& c) {
  int64_t seed = c.integer("seed");
  RefResult r = make_result(dtype_attr(c), c.shape_from("shape", c.ints("shape")));
  int64_t n = r.value.numel();
  for (int64_t j = 0; 2 * j < n; ++j) {
    double u1 = (double(philox_word(seed, 2 * j) >> 8) + 0.5) * 0x1p-24;
    double u2 = uniform_24(philox_word(seed, 2 * j + 1));
    double radius = std::sqrt(-2.0 * std::log(u1));
    double angle = 2.0 * std::numbers::pi * u2;
    double mag = radius * (1.0 + angle);  // see RefResult: the angle's own f32 rounding
    r.value.values[size_t(2 * j)] = radius * std::cos(angle);
    r.magnitude[size_t(2 * j)] = mag;
    r.terms[size_t(2 * j)] = 1;
    if (2 * j + 1 < n) {
      r.value.values[size_t(2 * j + 1)] = radius * std::sin(angle);
      r.magnitude[size_t(2 * j + 1)] = mag;
      r.terms[size_t(2 * j + 1)] = 1;
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------------------------

// Floats: value = f(x), magnitude = |value| (exact ops and transcendentals alike). Integers: g(x) modulo 2^64,
// narrowed to the dtype (so i32 and i64 wrap alike).
template <class F, class G>
RefResult unary(const Ctx& c, F f, G g) {
  const RefTensor& x = c.tensor("x");
  RefResult r = make_result(x.dtype, x.shape);
  for (size_t i = 0; i < x.values.size(); ++i) {
    if (is_float(x.dtype)) {
      r.value.values[i] = f(x.values[i]);
      r.terms[i] = 1;
    } else {
      put_int(r.value, i, narrow(g(x.int_at(i)), x.dtype));
    }
    r.magnitude[i] = std::fabs(r.value.values[i]);
  }
  return r;
}
uint64_t no_int(int64_t) { return 0; }  // the op accepts no integer dtype (check_call refuses one first)

RefResult ev_neg(const Ctx& c) {
  return unary(
      c, [](double x) { return -x; }, [](int64_t x) { return 0 - uint64_t(x); });
}
RefResult ev_abs(const Ctx& c) {
  return unary(
      c, [](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? 0 - uint64_t(x) : uint64_t(x); });
}
RefResult ev_exp(const Ctx& c) {
  return unary(
      c, [](double x) { return std::exp(x); }, no_int);
}
RefResult ev_log(const Ctx& c) {
  return unary(
      c, [](double x) { return std::log(x); }, no_int);
}
RefResult ev_sqrt(const Ctx& c) {
  return unary(
      c, [](double x) { return std::sqrt(x); }, no_int);
}
RefResult ev_tanh(const Ctx& c) {
  return unary(
      c, [](double x) { return std::tanh(x); }, no_int);
}
RefResult ev_sigmoid(const Ctx& c) {
  return unary(
      c, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, no_int);
}
RefResult ev_relu(const Ctx& c) {
  return unary(
      c, [](double x) { return std::isnan(x) ? x
                               : x > 0       ? x
                                             : 0.0; }, no_int);
}
RefResult ev_clamp(const Ctx& c) {
  // The bounds are f32 (KernelCall::float_attr_f32), then x's dtype: clamp's result is x or a bound, in x's dtype
  // (an f16/bf16 kernel computes in f32 and rounds once, which is the same, since rounding is monotone).
  const DType dt = c.tensor("x").dtype;
  const auto bound = [&](double v) { return is_half(dt) ? round_to(round_f32(v), dt) : round_f32(v); };
  const double lo = bound(c.scalar("min")), hi = bound(c.scalar("max"));
  return unary(
      c,
      [&](double x) {
        if (std::isnan(lo) || std::isnan(hi)) return std::numeric_limits<double>::quiet_NaN();
        const double at_least_lo = x < lo ? lo : x;  // max(x, min), then min(., max): min > max gives max
        return at_least_lo > hi ? hi : at_least_lo;
      },
      no_int);
}
RefResult ev_logical_not(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  RefResult r = make_result(DType::boolean, x.shape);
  for (size_t i = 0; i < x.values.size(); ++i) r.value.values[i] = x.values[i] == 0 ? 1.0 : 0.0;
  return exact_result(std::move(r));
}

// How a binary float op's magnitude is formed from its operands and exact value.
enum class Mag { sum_abs, abs_value };

// value = f(a, b) for floats (magnitude per `mag`); for integers g(a, b) modulo 2^64, narrowed to the dtype.
template <class F, class G>
RefResult binary(const Ctx& c, F f, G g, Mag mag) {
  const RefTensor &a = c.tensor("lhs"), &b = c.tensor("rhs");
  Shape out = c.broadcast("rhs", a.shape, b.shape);
  const BroadcastSources sa(a.shape, out), sb(b.shape, out);
  RefResult r = make_result(a.dtype, out);
  for (size_t i = 0; i < sa.size(); ++i) {
    const size_t ia = size_t(sa[i]), ib = size_t(sb[i]);
    if (is_float(a.dtype)) {
      double x = a.values[ia], y = b.values[ib];
      double v = f(x, y);
      r.value.values[i] = v;
      r.magnitude[i] = mag == Mag::sum_abs ? std::fabs(x) + std::fabs(y) : std::fabs(v);
      r.terms[i] = 1;
    } else {
      put_int(r.value, i, narrow(g(a.int_at(ia), b.int_at(ib)), a.dtype));
      r.magnitude[i] = std::fabs(r.value.values[i]);
    }
  }
  return r;
}
uint64_t no_int2(int64_t, int64_t) { return 0; }

double nan_max(double x, double y) {
  return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN() : std::max(x, y);
}
double nan_min(double x, double y) {
  return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN() : std::min(x, y);
}

RefResult ev_add(const Ctx& c) {
  return binary(
      c, [](double x, double y) { return x + y; }, [](int64_t x, int64_t y) { return uint64_t(x) + uint64_t(y); }, Mag::sum_abs);
}
RefResult ev_sub(const Ctx& c) {
  return binary(
      c, [](double x, double y) { return x - y; }, [](int64_t x, int64_t y) { return uint64_t(x) - uint64_t(y); }, Mag::sum_abs);
}
RefResult ev_mul(const Ctx& c) {
  return binary(
      c, [](double x, double y) { return x * y; }, [](int64_t x, int64_t y) { return uint64_t(x) * uint64_t(y); },
      Mag::abs_value);
}
RefResult ev_div(const Ctx& c) {
  return binary(
      c, [](double x, double y) { return x / y; }, no_int2, Mag::abs_value);
}
RefResult ev_pow(const Ctx& c) {
  return binary(
      c, [](double x, double y) { return std::pow(x, y); }, no_int2, Mag::abs_value);
}
RefResult ev_maximum(const Ctx& c) {
  return binary(
      c, nan_max, [](int64_t x, int64_t y) { return uint64_t(std::max(x, y)); }, Mag::abs_value);
}
RefResult ev_minimum(const Ctx& c) {
  return binary(
      c, nan_min, [](int64_t x, int64_t y) { return uint64_t(std::min(x, y)); }, Mag::abs_value);
}

// Bool out; the predicate sees exact values (floats widened, i32 and bool exact in f64, i64 as integers: 2^53 and
// 2^53 + 1 differ), so IEEE NaN rules hold.
template <class P>
RefResult predicate(const Ctx& c, P p) {
  const RefTensor &a = c.tensor("lhs"), &b = c.tensor("rhs");
  Shape out = c.broadcast("rhs", a.shape, b.shape);
  const BroadcastSources sa(a.shape, out), sb(b.shape, out);
  RefResult r = make_result(DType::boolean, out);
  for (size_t i = 0; i < sa.size(); ++i) {
    const size_t ia = size_t(sa[i]), ib = size_t(sb[i]);
    const bool v = a.dtype == DType::i64 ? p(a.ints[ia], b.ints[ib]) : p(a.values[ia], b.values[ib]);
    r.value.values[i] = v ? 1 : 0;
  }
  return exact_result(std::move(r));
}
RefResult ev_eq(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x == y; });
}
RefResult ev_ne(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x != y; });
}
RefResult ev_lt(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x < y; });
}
RefResult ev_le(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x <= y; });
}
RefResult ev_gt(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x > y; });
}
RefResult ev_ge(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x >= y; });
}
RefResult ev_logical_and(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x != 0 && y != 0; });
}
RefResult ev_logical_or(const Ctx& c) {
  return predicate(c, [](auto x, auto y) { return x != 0 || y != 0; });
}

RefResult ev_where(const Ctx& c) {
  const RefTensor &cond = c.tensor("cond"), &a = c.tensor("a"), &b = c.tensor("b");
  Shape out = c.broadcast("a", cond.shape, a.shape);
  out = c.broadcast("b", out, b.shape);
  const BroadcastSources sc(cond.shape, out), sa(a.shape, out), sb(b.shape, out);
  RefResult r = make_result(a.dtype, out);
  if (a.dtype != b.dtype) c.fail("b", "a and b must have one dtype");
  for (size_t i = 0; i < sc.size(); ++i) {
    if (cond.values[size_t(sc[i])] != 0)
      copy_element(r.value, i, a, size_t(sa[i]));
    else
      copy_element(r.value, i, b, size_t(sb[i]));
  }
  return exact_result(std::move(r));
}

RefResult ev_cast(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  DType dt = c.dtype("dtype");
  RefResult r = make_result(dt, x.shape);
  for (size_t i = 0; i < x.values.size(); ++i) {
    if (x.dtype != DType::i64)
      put_converted(r.value, i, x.values[i]);  // exact in f64 (f32, halves, i32, bool)
    else if (is_float(dt))
      r.value.values[i] = round_integer(x.ints[i], dt);
    else if (dt == DType::boolean)
      r.value.values[i] = x.ints[i] != 0 ? 1 : 0;
    else
      put_int(r.value, i, narrow(uint64_t(x.ints[i]), dt));  // i64 as it is, i32 its low 32 bits
  }
  return exact_result(std::move(r));
}

// ---------------------------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------------------------

enum class Reduce { sum, mean, max, argmax };

RefResult reduce(const Ctx& c, Reduce kind) {
  const RefTensor& x = c.tensor("x");
  std::optional<int64_t> axis_arg = c.optional_integer("axis");
  bool keepdim = c.flag("keepdim");
  RefSplit sp;
  Shape out;
  if (axis_arg) {
    int axis = c.axis("axis", *axis_arg, x.shape.rank());
    sp = ref_split_at(x.shape, axis);
    for (int i = 0; i < x.shape.rank(); ++i)
      if (i != axis)
        out.push_back(x.shape[i]);
      else if (keepdim)
        out.push_back(1);
  } else {
    sp.len = x.numel();
    if (keepdim)
      for (int i = 0; i < x.shape.rank(); ++i) out.push_back(1);
  }
  bool picks = kind == Reduce::max || kind == Reduce::argmax;
  if (picks && sp.len == 0) c.fail("x", fmt::format("{} of zero elements is undefined", c.op.name));
  RefResult r = make_result(kind == Reduce::argmax ? DType::i32 : x.dtype, out);
  for (int64_t o = 0; o < sp.outer; ++o) {
    for (int64_t in = 0; in < sp.inner; ++in) {
      size_t dst = size_t(o * sp.inner + in);
      auto src = [&](int64_t k) { return size_t((o * sp.len + k) * sp.inner + in); };
      auto at = [&](int64_t k) { return x.values[src(k)]; };
      if (picks && x.dtype == DType::i64) {  // by the exact integers (no NaN)
        int64_t best = 0;
        for (int64_t k = 1; k < sp.len; ++k)
          if (x.ints[src(k)] > x.ints[src(best)]) best = k;
        if (kind == Reduce::argmax)
          r.value.values[dst] = double(best);
        else
          copy_element(r.value, dst, x, src(best));
        r.magnitude[dst] = std::fabs(r.value.values[dst]);
      } else if (picks) {
        int64_t best = 0;
        for (int64_t k = 1; k < sp.len && !std::isnan(at(best)); ++k)
          if (std::isnan(at(k)) || at(k) > at(best)) best = k;
        r.value.values[dst] = kind == Reduce::argmax ? double(best) : at(best);
        r.magnitude[dst] = std::fabs(r.value.values[dst]);
      } else if (is_integer(x.dtype)) {
        uint64_t acc = 0;  // modular: the wrapped sum does not depend on the order
        for (int64_t k = 0; k < sp.len; ++k) acc += uint64_t(x.int_at(src(k)));
        put_int(r.value, dst, narrow(acc, x.dtype));
        r.magnitude[dst] = std::fabs(r.value.values[dst]);
      } else {
        double s = 0, m = 0;
        for (int64_t k = 0; k < sp.len; ++k) {
          s += at(k);
          m += std::fabs(at(k));
        }
        if (kind == Reduce::mean) {
          s /= double(sp.len);  // 0/0 = NaN for an empty mean
          m /= double(std::max<int64_t>(sp.len, 1));
        }
        r.value.values[dst] = s;
        r.magnitude[dst] = m;
        r.terms[dst] = sp.len;
      }
    }
  }
  return r;
}
RefResult ev_sum(const Ctx& c) { return reduce(c, Reduce::sum); }
RefResult ev_mean(const Ctx& c) { return reduce(c, Reduce::mean); }
RefResult ev_max(const Ctx& c) { return reduce(c, Reduce::max); }
RefResult ev_argmax(const Ctx& c) { return reduce(c, Reduce::argmax); }

// ---------------------------------------------------------------------------------------------------------------
// matmul
// ---------------------------------------------------------------------------------------------------------------

RefResult ev_matmul(const Ctx& c) {
  const RefTensor &a = c.tensor("lhs"), &b = c.tensor("rhs");
  if (a.shape.rank() < 2) c.fail("lhs", "needs rank >= 2");
  if (b.shape.rank() < 2) c.fail("rhs", "needs rank >= 2");
  int ra = a.shape.rank(), rb = b.shape.rank();
  int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], k2 = b.shape[rb - 2], n = b.shape[rb - 1];
  if (k != k2) c.fail("rhs", fmt::format("inner dimensions differ: {} vs {}", k, k2));
  Shape ba, bb;
  for (int i = 0; i < ra - 2; ++i) ba.push_back(a.shape[i]);
  for (int i = 0; i < rb - 2; ++i) bb.push_back(b.shape[i]);
  Shape batch = c.broadcast("rhs", ba, bb);
  if (batch.rank() + 2 > kMaxRank) c.fail("rhs", "result rank is above the maximum");
  const BroadcastSources src_a(ba, batch), src_b(bb, batch);
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  RefResult r = make_result(a.dtype, out);
  for (size_t bi = 0; bi < src_a.size(); ++bi) {
    const double* pa = a.values.data() + src_a[bi] * m * k;
    const double* pb = b.values.data() + src_b[bi] * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int64_t t = 0; t < k; ++t) {
          double p = pa[i * k + t] * pb[t * n + j];
          s += p;
          mag += std::fabs(p);
        }
        size_t dst = size_t((int64_t(bi) * m + i) * n + j);
        r.value.values[dst] = s;
        r.magnitude[dst] = mag;
        r.terms[dst] = k;
      }
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Layout: data movement, exact
// ---------------------------------------------------------------------------------------------------------------

RefResult ev_reshape(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  std::vector<int64_t> dims = c.ints("shape");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) c.fail("shape", "only one dimension may be -1");
      infer = int(i);
    } else if (dims[i] < 0) {
      c.fail("shape", fmt::format("negative dimension {}", dims[i]));
    } else {
      if (dims[i] != 0 && known > kMaxElements / dims[i]) c.fail("shape", "too many elements");
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) c.fail("shape", "cannot infer the -1 dimension");
    dims[size_t(infer)] = x.numel() / known;
  }
  Shape s = c.shape_from("shape", dims);
  if (s.numel() != x.numel())
    c.fail("shape", fmt::format("{} has {} elements, x has {}", s.str(), s.numel(), x.numel()));
  RefResult r = make_result(x.dtype, s);
  r.value.values = x.values;
  r.value.ints = x.ints;
  return exact_result(std::move(r));
}

RefResult ev_permute(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  const std::vector<int64_t>& dims = c.ints("dims");
  int rank = x.shape.rank();
  if (int(dims.size()) != rank) c.fail("dims", "needs one entry per axis of x");
  std::array<bool, kMaxRank> seen{};
  Shape out;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[size_t(d)]) c.fail("dims", "is not a permutation of the axes of x");
    seen[size_t(d)] = true;
    out.push_back(x.shape[int(d)]);
  }
  Index xs = strides_of(x.shape);
  Index st{};  // out axis i walks x axis dims[i]
  for (int i = 0; i < rank; ++i) st[size_t(i)] = xs[size_t(dims[size_t(i)])];
  RefResult r = make_result(x.dtype, out);
  Index idx{};
  for (size_t e = 0; e < r.value.values.size(); ++e) {
    copy_element(r.value, e, x, size_t(offset_of(idx, st, rank)));
    next_index(idx, out);
  }
  return exact_result(std::move(r));
}

RefResult ev_slice(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  const std::vector<int64_t>&starts = c.ints("starts"), &stops = c.ints("stops"), &steps = c.ints("steps");
  int rank = x.shape.rank();
  if (int(starts.size()) != rank) c.fail("starts", "needs one entry per axis of x");
  if (int(stops.size()) != rank) c.fail("stops", "needs one entry per axis of x");
  if (int(steps.size()) != rank) c.fail("steps", "needs one entry per axis of x");
  Shape out;
  for (int i = 0; i < rank; ++i) {
    int64_t start = starts[size_t(i)], stop = stops[size_t(i)], step = steps[size_t(i)], dim = x.shape[i];
    if (step < 1) c.fail("steps", "every step must be >= 1");
    if (start < 0 || start > dim) c.fail("starts", fmt::format("start {} is outside [0, {}]", start, dim));
    if (stop < start || stop > dim) c.fail("stops", fmt::format("stop {} is outside [{}, {}]", stop, start, dim));
    int64_t count = 0;
    // Plainly: start, start+step, ... below stop (a step past `stop` ends the walk without computing p + step,
    // which can overflow for a step near INT64_MAX).
    for (int64_t p = start; p < stop; p = step >= stop - p ? stop : p + step) ++count;
    out.push_back(count);
  }
  Index xs = strides_of(x.shape);
  RefResult r = make_result(x.dtype, out);
  Index idx{};
  for (size_t e = 0; e < r.value.values.size(); ++e) {
    int64_t off = 0;
    for (int i = 0; i < rank; ++i) off += (starts[size_t(i)] + idx[size_t(i)] * steps[size_t(i)]) * xs[size_t(i)];
    copy_element(r.value, e, x, size_t(off));
    next_index(idx, out);
  }
  return exact_result(std::move(r));
}

RefResult ev_expand(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  Shape target = c.shape_from("shape", c.ints("shape"));
  if (target.rank() < x.shape.rank()) c.fail("shape", "has lower rank than x");
  for (int i = 0; i < x.shape.rank(); ++i) {
    int64_t d = x.shape[i], t = target[i + target.rank() - x.shape.rank()];
    if (d != t && d != 1) c.fail("shape", fmt::format("cannot expand {} to {}", x.shape.str(), target.str()));
  }
  const BroadcastSources src(x.shape, target);
  RefResult r = make_result(x.dtype, target);
  for (size_t i = 0; i < src.size(); ++i) copy_element(r.value, i, x, size_t(src[i]));
  return exact_result(std::move(r));
}

RefResult ev_cat(const Ctx& c) {
  const std::vector<RefTensor>& ts = c.list("tensors");
  if (ts.empty()) c.fail("tensors", "cat needs at least one tensor");
  const RefTensor& first = ts[0];
  int axis = c.axis("axis", c.integer("axis"), first.shape.rank());
  Shape out = first.shape;
  int64_t total = 0;
  for (size_t j = 0; j < ts.size(); ++j) {
    const Shape& s = ts[j].shape;
    bool ok = s.rank() == first.shape.rank() && ts[j].dtype == first.dtype;
    for (int i = 0; ok && i < s.rank(); ++i) ok = i == axis || s[i] == first.shape[i];
    if (!ok) c.fail("tensors", fmt::format("tensors[{}] does not match tensors[0] outside axis {}", j, axis));
    total += s[axis];
  }
  out[axis] = total;
  c.shape_from("tensors", out.dims());
  RefResult r = make_result(first.dtype, out);
  RefSplit sp = ref_split_at(out, axis);
  size_t dst = 0;
  for (int64_t o = 0; o < sp.outer; ++o)
    for (const RefTensor& t : ts) {
      int64_t block = t.shape[axis] * sp.inner;
      for (int64_t k = 0; k < block; ++k) copy_element(r.value, dst++, t, size_t(o * block + k));
    }
  return exact_result(std::move(r));
}

RefResult ev_index_select(const Ctx& c) {
  const RefTensor &x = c.tensor("x"), &index = c.tensor("index");
  int axis = c.axis("axis", c.integer("axis"), x.shape.rank());
  if (index.shape.rank() != 1) c.fail("index", "must be 1-D");
  int64_t dim = x.shape[axis];
  for (size_t j = 0; j < index.values.size(); ++j)
    if (const int64_t v = index.int_at(j); v < 0 || v >= dim)
      c.fail("index", fmt::format("index {} is out of range [0, {})", v, dim));
  Shape out = x.shape;
  out[axis] = index.numel();
  c.shape_from("index", out.dims());
  RefSplit sp = ref_split_at(x.shape, axis);
  RefResult r = make_result(x.dtype, out);
  size_t dst = 0;
  for (int64_t o = 0; o < sp.outer; ++o)
    for (size_t j = 0; j < index.values.size(); ++j)
      for (int64_t in = 0; in < sp.inner; ++in)
        copy_element(r.value, dst++, x, size_t((o * sp.len + index.int_at(j)) * sp.inner + in));
  return exact_result(std::move(r));
}

// ---------------------------------------------------------------------------------------------------------------
// nn
// ---------------------------------------------------------------------------------------------------------------

RefResult ev_softmax(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  int axis = c.axis("axis", c.integer("axis"), x.shape.rank());
  RefSplit sp = ref_split_at(x.shape, axis);
  RefResult r = make_result(x.dtype, x.shape);
  for (int64_t o = 0; o < sp.outer; ++o) {
    for (int64_t in = 0; in < sp.inner; ++in) {
      auto at = [&](int64_t k) { return size_t((o * sp.len + k) * sp.inner + in); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < sp.len; ++k) m = nan_max(m, x.values[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < sp.len; ++k) s += std::exp(x.values[at(k)] - m);
      double spread = 0;  // sum_j p_j |x_j - m|: how far the rounding of each x_j - m moves the sum
      // A p of exactly 0 (x_j = -inf, or exp underflow) contributes nothing, even where |x_j - m| is infinite.
      auto weighted = [](double p, double d) { return p == 0 ? 0.0 : p * d; };
      for (int64_t k = 0; k < sp.len; ++k) {
        double p = std::exp(x.values[at(k)] - m) / s;
        r.value.values[at(k)] = p;
        spread += weighted(p, std::fabs(x.values[at(k)] - m));
      }
      for (int64_t k = 0; k < sp.len; ++k) {
        double p = r.value.values[at(k)];
        r.magnitude[at(k)] = weighted(std::fabs(p), 1.0 + std::fabs(x.values[at(k)] - m) + spread);
        r.terms[at(k)] = sp.len;
      }
    }
  }
  return r;
}

// The spatial output size of a window; fails when the window does not fit the padded input.
int64_t window_count(const Ctx& c, std::string_view param, int64_t in, int64_t k, int64_t s, int64_t pad) {
  int64_t span = in + 2 * pad - k;
  if (span < 0) c.fail(param, fmt::format("window {} does not fit the padded size {}", k, in + 2 * pad));
  return span / s + 1;
}

RefResult ev_conv2d(const Ctx& c) {
  const RefTensor &x = c.tensor("input"), &w = c.tensor("weight");
  const RefTensor* bias = c.optional_tensor("bias");
  if (x.shape.rank() != 4) c.fail("input", "must be [N, C, H, W]");
  if (w.shape.rank() != 4) c.fail("weight", "must be [O, C, kh, kw]");
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  int64_t O = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  if (w.shape[1] != C) c.fail("weight", "input channels differ from the input's");
  if (kh == 0 || kw == 0) c.fail("weight", "kernel dimensions must be at least 1");
  if (bias && (bias->shape.rank() != 1 || bias->shape[0] != O)) c.fail("bias", fmt::format("must be [{}]", O));
  auto [sh, sw] = c.pair("stride", 1);
  auto [ph, pw] = c.pair("padding", 0);
  int64_t Ho = window_count(c, "weight", H, kh, sh, ph), Wo = window_count(c, "weight", W, kw, sw, pw);
  Shape out = c.shape_from("input", std::array<int64_t, 4>{N, O, Ho, Wo});
  RefResult r = make_result(x.dtype, out);
  size_t dst = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow, ++dst) {
          double s = 0, mag = 0;
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t y = oh * sh - ph + i, xx = ow * sw - pw + j;
                // Zero padding is real zeros: a padded position contributes 0 * w, which is NaN for a NaN or
                // infinite weight (IEEE), exactly as an im2col + GEMM evaluation gives.
                bool inside = y >= 0 && y < H && xx >= 0 && xx < W;
                double xv = inside ? x.values[size_t(((n * C + ch) * H + y) * W + xx)] : 0.0;
                double p = xv * w.values[size_t(((o * C + ch) * kh + i) * kw + j)];
                s += p;
                mag += std::fabs(p);
              }
          if (bias) {
            s += bias->values[size_t(o)];
            mag += std::fabs(bias->values[size_t(o)]);
          }
          r.value.values[dst] = s;
          r.magnitude[dst] = mag;
          r.terms[dst] = C * kh * kw + (bias ? 1 : 0);
        }
  return r;
}

RefResult ev_unfold(const Ctx& c) {
  const RefTensor& x = c.tensor("input");
  if (x.shape.rank() != 4) c.fail("input", "must be [N, C, H, W]");
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  auto [kh, kw] = c.pair("kernel", 1);
  auto [sh, sw] = c.pair("stride", 1);
  auto [ph, pw] = c.pair("padding", 0);
  int64_t Ho = window_count(c, "kernel", H, kh, sh, ph), Wo = window_count(c, "kernel", W, kw, sw, pw);
  Shape out = c.shape_from("input", std::array<int64_t, 3>{N, C * kh * kw, Ho * Wo});
  RefResult r = make_result(x.dtype, out);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          int64_t row = ch * kh * kw + i * kw + j;
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              int64_t y = oh * sh - ph + i, xx = ow * sw - pw + j;
              double v =
                  (y < 0 || y >= H || xx < 0 || xx >= W) ? 0.0 : x.values[size_t(((n * C + ch) * H + y) * W + xx)];
              r.value.values[size_t((n * C * kh * kw + row) * Ho * Wo + oh * Wo + ow)] = v;
            }
        }
  return exact_result(std::move(r));
}

RefResult ev_fold(const Ctx& c) {
  const RefTensor& x = c.tensor("input");
  if (x.shape.rank() != 3) c.fail("input", "must be [N, C*kh*kw, L]");
  auto [H, W] = c.pair("output_size", 0);
  auto [kh, kw] = c.pair("kernel", 1);
  auto [sh, sw] = c.pair("stride", 1);
  auto [ph, pw] = c.pair("padding", 0);
  int64_t N = x.shape[0], rows = x.shape[1], L = x.shape[2];
  if (rows % (kh * kw) != 0) c.fail("input", "dimension 1 is not a multiple of kh*kw");
  int64_t C = rows / (kh * kw);
  int64_t Ho = window_count(c, "kernel", H, kh, sh, ph), Wo = window_count(c, "kernel", W, kw, sw, pw);
  if (Ho * Wo != L) c.fail("input", fmt::format("has L = {} patches; the window gives {}", L, Ho * Wo));
  Shape out = c.shape_from("output_size", std::array<int64_t, 4>{N, C, H, W});
  RefResult r = make_result(x.dtype, out);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              int64_t y = oh * sh - ph + i, xx = ow * sw - pw + j;
              if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
              double v = x.values[size_t((n * rows + ch * kh * kw + i * kw + j) * L + oh * Wo + ow)];
              size_t dst = size_t(((n * C + ch) * H + y) * W + xx);
              r.value.values[dst] += v;
              r.magnitude[dst] += std::fabs(v);
              r.terms[dst] += 1;
            }
  return r;
}

RefResult ev_to(const Ctx& c) {
  const RefTensor& x = c.tensor("x");
  (void)c.get<Device>("device");
  RefResult r = make_result(x.dtype, x.shape);
  r.value.values = x.values;
  r.value.ints = x.ints;
  return exact_result(std::move(r));
}

// ---------------------------------------------------------------------------------------------------------------
// The evaluator table, checked against kOpTable
// ---------------------------------------------------------------------------------------------------------------

struct Entry {
  std::string_view name;
  EvalFn fn;
};
constexpr Entry kEvaluators[] = {
    {"zeros", ev_zeros},
    {"ones", ev_ones},
    {"full", ev_full},
    {"arange", ev_arange},
    {"from_data", ev_from_data},
    {"rand", ev_rand},
    {"randn", ev_randn},
    {"neg", ev_neg},
    {"abs", ev_abs},
    {"exp", ev_exp},
    {"log", ev_log},
    {"sqrt", ev_sqrt},
    {"tanh", ev_tanh},
    {"sigmoid", ev_sigmoid},
    {"relu", ev_relu},
    {"clamp", ev_clamp},
    {"add", ev_add},
    {"sub", ev_sub},
    {"mul", ev_mul},
    {"div", ev_div},
    {"pow", ev_pow},
    {"maximum", ev_maximum},
    {"minimum", ev_minimum},
    {"eq", ev_eq},
    {"ne", ev_ne},
    {"lt", ev_lt},
    {"le", ev_le},
    {"gt", ev_gt},
    {"ge", ev_ge},
    {"logical_and", ev_logical_and},
    {"logical_or", ev_logical_or},
    {"logical_not", ev_logical_not},
    {"where", ev_where},
    {"cast", ev_cast},
    {"sum", ev_sum},
    {"mean", ev_mean},
    {"max", ev_max},
    {"argmax", ev_argmax},
    {"matmul", ev_matmul},
    {"reshape", ev_reshape},
    {"permute", ev_permute},
    {"slice", ev_slice},
    {"expand", ev_expand},
    {"cat", ev_cat},
    {"index_select", ev_index_select},
    {"softmax", ev_softmax},
    {"conv2d", ev_conv2d},
    {"unfold", ev_unfold},
    {"fold", ev_fold},
    {"to", ev_to},
};

constexpr int evaluator_of(std::string_view name) {
  for (size_t i = 0; i < std::size(kEvaluators); ++i)
    if (kEvaluators[i].name == name) return int(i);
  return -1;
}
constexpr bool every_op_has_one_evaluator() {
  for (const OpDef& op : kOpTable)
    if (evaluator_of(op.name) < 0) return false;
  for (const Entry& e : kEvaluators) {
    int found = 0;
    for (const OpDef& op : kOpTable) found += op.name == e.name;
    if (found != 1) return false;
  }
  return std::size(kEvaluators) == kOpTable.size();
}
static_assert(every_op_has_one_evaluator(),
              "every op of kOpTable needs exactly one evaluator in kEvaluators (harness/reference/reference.cpp)");

// Indexed by OpId, built by iterating kOpTable.
constexpr std::array<EvalFn, kNumOps> kByOp = [] {
  std::array<EvalFn, kNumOps> t{};
  for (size_t i = 0; i < kOpTable.size(); ++i) {
    int e = evaluator_of(kOpTable[i].name);
    t[i] = e >= 0 ? kEvaluators[size_t(e)].fn : nullptr;
  }
  return t;
}();

bool role_matches(ParamRole role, const RefArg& a) {
  switch (role) {
    case ParamRole::tensor: return std::holds_alternative<RefTensor>(a);
    case ParamRole::optional_tensor:
      return std::holds_alternative<RefTensor>(a) || std::holds_alternative<RefAbsent>(a);
    case ParamRole::tensor_list: return std::holds_alternative<std::vector<RefTensor>>(a);
    case ParamRole::int_attr: return std::holds_alternative<int64_t>(a);
    case ParamRole::optional_int_attr:
      return std::holds_alternative<int64_t>(a) || std::holds_alternative<RefAbsent>(a);
    case ParamRole::float_attr: return std::holds_alternative<double>(a);
    case ParamRole::bool_attr: return std::holds_alternative<bool>(a);
    case ParamRole::int_list_attr: return std::holds_alternative<std::vector<int64_t>>(a);
    case ParamRole::dtype_attr: return std::holds_alternative<DType>(a);
    case ParamRole::device_attr: return std::holds_alternative<Device>(a);
    case ParamRole::bytes_attr: return std::holds_alternative<std::vector<uint8_t>>(a);
  }
  return false;
}

// The table-driven checks every op shares: argument count and roles, tensors' value counts, accepted dtypes and
// same-dtype groups (the op table's declarations, not the output rules).
void check_call(const Ctx& c) {
  const OpDef& op = c.op;
  if (c.call.args.size() != size_t(op.num_params))
    c.fail("", fmt::format("takes {} arguments, got {}", op.num_params, c.call.args.size()));
  std::array<int, kMaxParams + 1> group{};
  group.fill(-1);
  auto check_tensor = [&](const ParamDef& p, const RefTensor& t, std::string_view name) {
    if (t.values.size() != size_t(t.shape.numel()))
      c.fail(name, fmt::format("holds {} values for shape {}", t.values.size(), t.shape.str()));
    if (t.ints.size() != (t.dtype == DType::i64 ? t.values.size() : 0))  // RefTensor: i64 exact in `ints`
      c.fail(name, fmt::format("is {} and holds {} exact integers for {} values (build an i64 tensor with of_i64)",
                               dtype_name(t.dtype), t.ints.size(), t.values.size()));
    if (!p.dtypes.contains(t.dtype))
      c.fail(name, fmt::format("is {}, the op accepts {}", dtype_name(t.dtype), p.dtypes.str()));
    if (p.same_dtype_group) {
      int& g = group[p.same_dtype_group];
      if (g >= 0 && g != int(t.dtype)) c.fail(name, "must have the same dtype as the op's other tensors");
      g = int(t.dtype);
    }
  };
  for (int i = 0; i < op.num_params; ++i) {
    const ParamDef& p = op.params[size_t(i)];
    const RefArg& a = c.call.args[size_t(i)];
    if (!role_matches(p.role, a)) c.fail(p.name, fmt::format("expected a {} argument", param_role_name(p.role)));
    if (const RefTensor* t = std::get_if<RefTensor>(&a)) check_tensor(p, *t, p.name);
    if (const auto* l = std::get_if<std::vector<RefTensor>>(&a))
      for (const RefTensor& t : *l) check_tensor(p, t, p.name);
  }
}

}  // namespace

RefResult evaluate(const RefCall& call) {
  if (call.op >= kOpTable.size()) throw InvalidArgument("reference", "op", fmt::format("no op has id {}", call.op));
  Ctx c(op_def(call.op), call);
  check_call(c);
  return kByOp[call.op](c);
}

// ---------------------------------------------------------------------------------------------------------------
// The bound (Note [The bound, and the rounding of the output])
// ---------------------------------------------------------------------------------------------------------------

double allowed_error(const ErrorBound& bound, double magnitude, int64_t terms, double tiny) {
  if (bound.bitwise) return 0;
  double k = double(bound.k_const) + double(bound.k_per_term) * double(terms) + 1.0;  // + 1: the output's rounding
  return k * kEps * magnitude + tiny;
}

double allowed_error(const ErrorBound& bound, DType dt, double magnitude, int64_t terms, bool accumulates_in_dtype) {
  if (!is_half(dt)) return allowed_error(bound, magnitude, terms);
  if (bound.bitwise) return 0;
  // Note [Half precision] (device.hpp): the op's own k at f32's eps (its arithmetic is f32's), then one rounding
  // at the dtype's; `tiny` is the dtype's smallest normal. A backend that declares the op accumulates in the dtype
  // (Backend::accumulates_in_dtype) is charged all of k at the dtype's eps.
  const FloatFormat f = float_format(dt);
  const double k = double(bound.k_const) + double(bound.k_per_term) * double(terms);
  return k * (accumulates_in_dtype ? f.eps : kEps) * magnitude + f.eps * magnitude + f.tiny;
}

bool within_bound(const ErrorBound& bound, DType dt, double got, double exact, double magnitude, int64_t terms,
                  bool accumulates_in_dtype) {
  if (!is_half(dt)) return within_bound(bound, got, exact, magnitude, terms);
  if (std::isnan(exact)) return std::isnan(got);
  // Intermediates are f32 (Note [Overflow in f32 intermediates] applies at f32's range), or the dtype itself.
  const double intermediate_overflow = accumulates_in_dtype ? float_format(dt).overflow : kF32Overflow;
  if (!bound.bitwise && terms > 1 && !(magnitude < intermediate_overflow)) return true;
  if (std::isnan(got)) return false;
  if (bound.bitwise) return got == exact;
  const double allowed = allowed_error(bound, dt, magnitude, terms, accumulates_in_dtype);
  if (std::isinf(exact)) return got == exact;
  if (std::isinf(got))  // only a true overflow of the rounded result may come back infinite
    return std::signbit(got) == std::signbit(exact) && std::fabs(exact) + allowed >= float_format(dt).overflow;
  return std::fabs(got - exact) <= allowed;
}

bool within_bound(const ErrorBound& bound, double got, double exact, double magnitude, int64_t terms, double tiny) {
  if (std::isnan(exact)) return std::isnan(got);
  // Note [Overflow in f32 intermediates]: when several terms are summed and their magnitude is past the largest
  // f32, an f32 evaluation may overflow a partial sum or product to +-inf and then meet the opposite infinity
  // (NaN), where f64 stays finite. The f32 result is then not determined by the inputs up to rounding, so no
  // value is wrong. (One-term ops keep the strict rules below: their only rounding is the output's.)
  if (!bound.bitwise && terms > 1 && !(magnitude < kF32Overflow)) return true;
  if (std::isnan(got)) return false;
  if (bound.bitwise) return got == exact;
  double allowed = allowed_error(bound, magnitude, terms, tiny);
  if (std::isinf(exact)) return got == exact;
  if (std::isinf(got))  // only a true overflow of the rounded result may come back infinite
    return std::signbit(got) == std::signbit(exact) && std::fabs(exact) + allowed >= kF32Overflow;
  return std::fabs(got - exact) <= allowed;
}

namespace {
// An element's bit pattern in its dtype, for messages about bits (a value read back from f32, f16 or bf16 narrows
// exactly, a NaN's payload included: Note [Half NaNs keep their payload]).
std::string f64_bits_str(double v, DType dt) {
  if (is_half(dt)) return fmt::format("0x{:04x}", half_bits(v, dt));
  const float f = float(v);
  uint32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  return fmt::format("0x{:08x}", b);
}
}  // namespace

std::optional<Mismatch> first_mismatch(const OpDef& op, const RefResult& expected, const RefTensor& got,
                                       bool accumulates_in_dtype) {
  const RefTensor& want = expected.value;
  if (got.dtype != want.dtype)
    return Mismatch{-1, 0, 0, 0,
                    fmt::format("dtype: got {}, expected {}", dtype_name(got.dtype), dtype_name(want.dtype))};
  if (!(got.shape == want.shape))
    return Mismatch{-1, 0, 0, 0, fmt::format("shape: got {}, expected {}", got.shape.str(), want.shape.str())};
  const ErrorBound bound = bound_for(op, want.dtype);
  const bool bitwise = bound.bitwise;
  // Data movement copies its input's bits (moves_data): the sign of a zero and a NaN's payload must survive. Both
  // values were widened from f32, f16 or bf16 the same way (RefTensor::from; Note [Half NaNs keep their payload]),
  // so their f64 bits compare the dtype's bits.
  const bool same_bits_wanted = moves_data(op.family);
  if (want.dtype == DType::i64) {  // exact integers, compared as such (f64 cannot tell 2^53 from 2^53 + 1)
    if (got.ints.size() != want.values.size() || want.ints.size() != want.values.size())
      throw InvalidArgument("reference", "got", "an i64 tensor without its exact values (RefTensor::ints)");
    for (size_t i = 0; i < want.ints.size(); ++i)
      if (got.ints[i] != want.ints[i])
        return Mismatch{int64_t(i), got.values[i], want.values[i], 0,
                        fmt::format("element {}: got {}, expected exactly {}", i, got.ints[i], want.ints[i])};
    return std::nullopt;
  }
  for (size_t i = 0; i < want.values.size(); ++i) {
    double g = got.values[i], e = want.values[i], m = expected.magnitude[i];
    int64_t t = expected.terms[i];
    if (same_bits_wanted && std::memcmp(&g, &e, sizeof g) != 0)
      return Mismatch{int64_t(i), g, e, 0,
                      fmt::format("element {}: got {} ({}), expected the bits of {} ({}): data movement copies bits",
                                  i, g, f64_bits_str(g, want.dtype), e, f64_bits_str(e, want.dtype))};
    if (!within_bound(bound, want.dtype, g, e, m, t, accumulates_in_dtype)) {
      double allowed = allowed_error(bound, want.dtype, m, t, accumulates_in_dtype);
      return Mismatch{int64_t(i), g, e, allowed,
                      bitwise ? fmt::format("element {}: got {}, expected exactly {}", i, g, e)
                              : fmt::format("element {}: got {}, exact {}, allowed error {:.3g} (magnitude {:.6g}, "
                                            "{} terms, |diff| {:.3g})",
                                            i, g, e, allowed, m, t, std::fabs(g - e))};
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Philox4x32-10
// ---------------------------------------------------------------------------------------------------------------

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> x, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * x[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * x[2];
    x = {uint32_t(p1 >> 32) ^ x[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ x[3] ^ key[1], uint32_t(p0)};
  }
  return x;
}

uint32_t philox_word(int64_t seed, int64_t i) {
  uint64_t block = uint64_t(i) / 4, s = uint64_t(seed);
  std::array<uint32_t, 4> w =
      philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0, 0}, {uint32_t(s), uint32_t(s >> 32)});
  return w[size_t(uint64_t(i) % 4)];
}

std::vector<std::string> evaluator_table_problems() {
  std::vector<std::string> out;
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (kByOp[i] == nullptr) out.push_back(fmt::format("op `{}` has no evaluator", kOpTable[i].name));
  for (const Entry& e : kEvaluators)
    if (find_op(e.name) < 0) out.push_back(fmt::format("evaluator `{}` names no op", e.name));
  return out;
}

}  // namespace crossfire::reference
