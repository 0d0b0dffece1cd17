// SPDX-License-Identifier: Apache-2.0
#include "ops_cases.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace crossfire::testing::ops {

namespace ref = crossfire::reference;

// ---------------------------------------------------------------------------------------------------------------
// CallBuilder
// ---------------------------------------------------------------------------------------------------------------

CallBuilder& CallBuilder::tensor(Tensor t) {
  tensors_.push_back(std::move(t));
  pack_.push(Arg::of(tensors_.back()));
  return *this;
}
CallBuilder& CallBuilder::optional(std::optional<Tensor> t) {
  if (!t) {
    pack_.push(Arg::optional(nullptr));
    return *this;
  }
  tensors_.push_back(std::move(*t));
  pack_.push(Arg::optional(&tensors_.back()));
  return *this;
}
CallBuilder& CallBuilder::list(std::vector<Tensor> ts) {
  lists_.push_back(std::move(ts));
  pack_.push(Arg::of(std::span<const Tensor>(lists_.back())));
  return *this;
}
CallBuilder& CallBuilder::integer(int64_t v) {
  pack_.push(Arg::integer(v));
  return *this;
}
CallBuilder& CallBuilder::optional_integer(std::optional<int64_t> v) {
  pack_.push(Arg::optional_integer(v.has_value(), v.value_or(0)));
  return *this;
}
CallBuilder& CallBuilder::scalar(double v) {
  pack_.push(Arg::scalar(v));
  return *this;
}
CallBuilder& CallBuilder::flag(bool v) {
  pack_.push(Arg::flag(v));
  return *this;
}
CallBuilder& CallBuilder::ints(std::vector<int64_t> v) {
  ints_.push_back(std::move(v));
  pack_.push(Arg::of(IntList(ints_.back())));
  return *this;
}
CallBuilder& CallBuilder::dtype(DType d) {
  pack_.push(Arg::of(d));
  return *this;
}
CallBuilder& CallBuilder::device(Device d) {
  pack_.push(Arg::of(d));
  return *this;
}
CallBuilder& CallBuilder::bytes(std::vector<uint8_t> b) {
  bytes_.push_back(std::move(b));
  pack_.push(Arg::of(std::span<const uint8_t>(bytes_.back())));
  return *this;
}

// ---------------------------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------------------------

Tensor make_f32(const std::vector<float>& v, const std::vector<int64_t>& shape, Device d) {
  return from_data(std::span<const float>(v), IntList(shape), d);
}
Tensor make_i32(const std::vector<int32_t>& v, const std::vector<int64_t>& shape, Device d) {
  return from_data(std::span<const int32_t>(v), IntList(shape), d);
}
Tensor make_i64(const std::vector<int64_t>& v, const std::vector<int64_t>& shape, Device d) {
  return from_data(std::span<const int64_t>(v), IntList(shape), d);
}
Tensor make_bool(const std::vector<uint8_t>& v, const std::vector<int64_t>& shape, Device d) {
  return from_bool(std::span<const uint8_t>(v), IntList(shape), d);
}

Tensor make_half(const std::vector<float>& v, const std::vector<int64_t>& shape, Device d, DType dt) {
  std::vector<uint8_t> bytes;
  for (float x : v) {
    const uint16_t h = reference::half_bits(reference::round_to(x, dt), dt);
    bytes.push_back(uint8_t(h & 0xff));
    bytes.push_back(uint8_t(h >> 8));
  }
  return from_bytes(bytes, IntList(shape), dt, d);
}

double ValueSource::uniform() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return double((state_ * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}

Tensor ValueSource::tensor(Device d, DType dt, const std::vector<int64_t>& shape, Domain domain, int64_t index_bound) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (is_float(dt)) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      double u = uniform();
      switch (domain) {
        case Domain::positive: x = float(0.125 + 3.875 * u); break;
        case Domain::non_negative: x = u < 0.1 ? 0.0f : float(4 * u); break;
        case Domain::non_zero: x = float((u < 0.5 ? -1 : 1) * (0.5 + 5 * std::fabs(u - 0.5))); break;
        default: x = float(6 * u - 3); break;
      }
    }
    return dt == DType::f32 ? make_f32(v, shape, d) : make_half(v, shape, d, dt);
  }
  if (dt == DType::i32) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v)
      x = domain == Domain::index ? int32_t(uniform() * double(index_bound)) : int32_t(uniform() * 201) - 100;
    return make_i32(v, shape, d);
  }
  if (dt == DType::i64) {  // an index as for i32; otherwise small values and, one in four, any 64-bit value
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t& x : v) {
      if (domain == Domain::index) x = int64_t(uniform() * double(index_bound));
      else if (uniform() < 0.25) x = int64_t(uint64_t(uniform() * 0x1p32) << 32 | uint64_t(uniform() * 0x1p32));
      else x = int64_t(uniform() * 201) - 100;
    }
    return make_i64(v, shape, d);
  }
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& x : v) x = uniform() < 0.5 ? 1 : 0;
  return make_bool(v, shape, d);
}

namespace {

using Shp = std::vector<int64_t>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string shp(const Shp& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

// The dtypes a parameter accepts that device `dev`'s backend computes (Backend::dtypes(): f16 and bf16 are the CPU
// backend's only; a backend without them raises Unsupported, which contract_validation_test checks).
std::vector<DType> accepted(const ParamDef& p, Device dev) {
  std::vector<DType> out;
  for (DType d : kAllDTypes)
    if (p.dtypes.contains(d) && (find_backend(dev) == nullptr || find_backend(dev)->dtypes().contains(d)))
      out.push_back(d);  // (a device of no backend: every dtype, for the tests that it is refused)
  return out;
}
std::vector<DType> computed_on(Device dev) { return accepted(ParamDef{"", ParamRole::tensor, kAnyDType}, dev); }

// Special values of a dtype that lie inside `domain`, cycled to fill `n` elements.
Tensor specials(Device d, DType dt, Domain domain, const Shp& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (is_float(dt)) {
    std::vector<float> pool;
    switch (domain) {
      // NaN lies in no domain but `any`.
      case Domain::positive: pool = {1.0f, 1e-30f, 1e30f, float(kInf), 0.5f, 3.0f, 2e-38f}; break;
      case Domain::non_negative: pool = {0.0f, 1e-30f, 1e30f, float(kInf), 2.0f, 0.25f, 2e-38f}; break;
      case Domain::non_zero: pool = {1.0f, -1e-20f, 1e20f, -float(kInf), -3.0f, 0.75f, -2e-38f}; break;
      default:
        pool = {0.0f, -0.0f, float(kNaN), float(kInf), -float(kInf), 1e30f, -1e-30f, 2.5f, -2.5f, 88.0f, -100.0f};
        // NaNs with a sign and a payload that f16 and bf16 keep too (the top of the fraction): data movement must
        // copy them bit for bit (an unfold that narrowed an f32 copy of a half lost them).
        pool.push_back(std::bit_cast<float>(0xffd50000u));
        pool.push_back(std::bit_cast<float>(0x7fe30000u));
    }
    if (dt == DType::f16)  // past f16's range, its largest finite value, its subnormals
      for (float x : {65504.0f, 65520.0f, 6e-8f, -3e-5f}) pool.push_back(domain == Domain::any ? x : std::fabs(x));
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = pool[i % pool.size()];
    return dt == DType::f32 ? make_f32(v, shape, d) : make_half(v, shape, d, dt);
  }
  if (dt == DType::i32) {
    std::vector<int32_t> pool = {
        std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1, 0, 1, 65536, -46341, 7};
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = pool[i % pool.size()];
    return make_i32(v, shape, d);
  }
  if (dt == DType::i64) {  // the ends, where f64 stops being exact (2^53 + 1), past i32, squares that wrap
    std::vector<int64_t> pool = {std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(),
                                 -1,
                                 0,
                                 (int64_t(1) << 53) + 1,
                                 -(int64_t(1) << 53) - 1,
                                 int64_t(1) << 31,
                                 3037000500,  // its square is past 2^63
                                 (int64_t(1) << 60) + (int64_t(1) << 52) + 1,
                                 7};
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = pool[i % pool.size()];
    return make_i64(v, shape, d);
  }
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(i % 3 == 1);
  return make_bool(v, shape, d);
}

struct Gen {
  OpId id;
  const OpDef& op;
  Device d, second;
  ValueSource values;
  Calls calls;

  CallBuilder& add(std::string label) {
    calls.push_back(std::make_unique<CallBuilder>(id, std::move(label)));
    return *calls.back();
  }
  const ParamDef& param(int i) const { return op.params[size_t(i)]; }
  Tensor random(DType dt, const Shp& s, Domain dom = Domain::any) { return values.tensor(d, dt, s, dom); }
};

void creation(Gen& g) {
  std::string_view n = g.op.name;
  std::vector<Shp> shapes = {{}, {0}, {5}, {2, 3}, {2, 1, 3}};
  if (n == "zeros" || n == "ones") {
    for (DType dt : computed_on(g.d))
      for (const Shp& s : shapes) g.add(fmt::format("{} {}", dtype_name(dt), shp(s))).ints(s).dtype(dt).device(g.d);
  } else if (n == "full") {
    for (DType dt : computed_on(g.d))
      for (double v : {2.5, -1.75, 0.0, -0.0, 3e9, -3e9, 1e-3, kNaN, kInf})
        g.add(fmt::format("{} value {}", dtype_name(dt), v)).ints({2, 2}).scalar(v).dtype(dt).device(g.d);
    g.add("f32 rank 0").ints({}).scalar(7).dtype(DType::f32).device(g.d);
    g.add("f32 1/3 rounds").ints({3}).scalar(1.0 / 3.0).dtype(DType::f32).device(g.d);
  } else if (n == "arange") {
    struct R {
      double a, b, s;
    };
    for (R r : {R{0, 5, 1}, R{0, 1, 0.1}, R{5, 0, -1.5}, R{0, 0, 1}, R{-2.5, 2.5, 0.5}, R{3, 1, 1}, R{0.5, 3.7, 1}})
      for (DType dt : computed_on(g.d))
        if (dt == DType::f32 || is_integer(dt))
        g.add(fmt::format("{} ({}, {}, {})", dtype_name(dt), r.a, r.b, r.s))
            .scalar(r.a)
            .scalar(r.b)
            .scalar(r.s)
            .dtype(dt)
            .device(g.d);
  } else if (n == "from_data") {
    for (const Shp& s : shapes) {
      int64_t cnt = 1;
      for (int64_t x : s) cnt *= x;
      std::vector<uint8_t> f(static_cast<size_t>(cnt) * 4), b(static_cast<size_t>(cnt));
      for (size_t i = 0; i < f.size(); ++i) f[i] = uint8_t(i * 37 + 11);
      for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i % 2);
      g.add(fmt::format("f32 {}", shp(s))).bytes(f).ints(s).dtype(DType::f32).device(g.d);
      g.add(fmt::format("i32 {}", shp(s))).bytes(f).ints(s).dtype(DType::i32).device(g.d);
      g.add(fmt::format("bool {}", shp(s))).bytes(b).ints(s).dtype(DType::boolean).device(g.d);
      if (find_backend(g.d) != nullptr && find_backend(g.d)->dtypes().contains(DType::i64)) {
        std::vector<uint8_t> w(static_cast<size_t>(cnt) * 8);
        for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(i * 53 + 7);
        g.add(fmt::format("i64 {}", shp(s))).bytes(w).ints(s).dtype(DType::i64).device(g.d);
      }
    }
  } else {  // rand, randn: every float dtype the device computes
    for (DType dt : computed_on(g.d)) {
      if (!is_float(dt)) continue;
      for (int64_t seed : {int64_t(0), int64_t(42), int64_t(-1), int64_t(1) << 40})
        for (const Shp& s : std::vector<Shp>{{}, {1}, {7}, {3, 5}, {0}})
          g.add(fmt::format("{} seed {} {}", dtype_name(dt), seed, shp(s))).ints(s).integer(seed).dtype(dt).device(g.d);
    }
  }
}

void unary(Gen& g) {
  const ParamDef& x = g.param(0);
  // A unary op with float attributes (clamp's min and max) gets every pair of these: ordinary, reversed (min > max),
  // equal, signed zeros, infinite, NaN, past f32's range.
  int n_float = 0;
  for (int i = 1; i < g.op.num_params; ++i) n_float += g.param(i).role == ParamRole::float_attr;
  const std::vector<double> attr_values = {-0.5, 0.75, 0.0, -0.0, kInf, -kInf, kNaN, 1e39};
  std::vector<std::vector<double>> attrs{{}};
  if (n_float == 2) {
    attrs.clear();
    for (double a : attr_values)
      for (double b : attr_values) attrs.push_back({a, b});
  }
  auto with_attrs = [](CallBuilder& c, const std::vector<double>& as) -> CallBuilder& {
    for (double a : as) c.scalar(a);
    return c;
  };
  for (DType dt : accepted(x, g.d)) {
    for (const Shp& s : std::vector<Shp>{{}, {0}, {5}, {2, 3, 4}, {1, 0, 2}})
      with_attrs(g.add(fmt::format("{} {}", dtype_name(dt), shp(s))).tensor(g.random(dt, s, x.domain)), attrs[0]);
    for (const std::vector<double>& as : attrs)
      with_attrs(g.add(fmt::format("{} special values{}", dtype_name(dt), as.empty() ? "" : fmt::format(" attrs {}", fmt::join(as, " ")))).tensor(specials(g.d, dt, x.domain, {11})), as);
  }
}

void binary(Gen& g) {
  const ParamDef &l = g.param(0), &r = g.param(1);
  std::vector<std::pair<Shp, Shp>> shapes = {{{}, {}},      {{4}, {4}},    {{2, 1}, {3}},
                                             {{2, 3}, {}},  {{}, {2, 3}},  {{4, 1, 3}, {2, 1}},
                                             {{0, 3}, {3}}, {{2, 0}, {1}}, {{3, 1, 2}, {2, 1, 1, 1}}};
  for (DType dt : accepted(l, g.d)) {
    for (auto& [a, b] : shapes)
      g.add(fmt::format("{} {} {}", dtype_name(dt), shp(a), shp(b)))
          .tensor(g.random(dt, a, l.domain))
          .tensor(g.random(dt, b, r.domain));
    // Every special value against every other (outer product by broadcasting): NaN, infinities, signed zeros,
    // i32 extremes for the wrapping ops.
    g.add(fmt::format("{} special values", dtype_name(dt)))
        .tensor(specials(g.d, dt, l.domain, {11, 1}))
        .tensor(specials(g.d, dt, r.domain, {1, 11}));
  }
}

void where(Gen& g) {
  struct S {
    Shp c, a, b;
  };
  for (DType dt : accepted(g.param(1), g.d))
    for (const S& s :
         {S{{2, 3}, {3}, {2, 1}}, S{{}, {2}, {2}}, S{{4}, {}, {}}, S{{0}, {1}, {}}, S{{2, 1, 3}, {2, 3}, {1}}})
      g.add(fmt::format("{} {} {} {}", dtype_name(dt), shp(s.c), shp(s.a), shp(s.b)))
          .tensor(g.random(DType::boolean, s.c))
          .tensor(g.random(dt, s.a))
          .tensor(g.random(dt, s.b));
}

void cast(Gen& g) {
  for (DType from : accepted(g.param(0), g.d))
    for (DType to : computed_on(g.d)) {
      for (const Shp& s : std::vector<Shp>{{}, {0}, {6}})
        g.add(fmt::format("{} -> {} {}", dtype_name(from), dtype_name(to), shp(s))).tensor(g.random(from, s)).dtype(to);
      g.add(fmt::format("{} -> {} special values", dtype_name(from), dtype_name(to)))
          .tensor(specials(g.d, from, Domain::any, {11}))
          .dtype(to);
    }
  // Truncation toward zero, saturation and NaN -> 0, and i32 values that f32 must round.
  std::vector<float> f = {-1.75f,         1.75f,       2.5f,        -2.5f,         0.999f,
                          -0.999f,        3e9f,        -3e9f,       2147483520.0f, 2147483648.0f,
                          -2147483648.0f, float(kNaN), float(kInf), -float(kInf),  -0.0f};
  g.add("f32 -> i32 truncation and saturation").tensor(make_f32(f, {int64_t(f.size())}, g.d)).dtype(DType::i32);
  g.add("f32 -> bool").tensor(make_f32(f, {int64_t(f.size())}, g.d)).dtype(DType::boolean);
  std::vector<int32_t> i = {
      16777217, 16777219, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), -16777217, 0};
  g.add("i32 -> f32 rounding").tensor(make_i32(i, {int64_t(i.size())}, g.d)).dtype(DType::f32);
  if (find_backend(g.d) == nullptr || !find_backend(g.d)->dtypes().contains(DType::i64)) return;
  // Saturation at 2^63 (an f32 value; INT64_MAX is not), truncation, NaN -> 0; i64 -> i32 keeps the low bits.
  std::vector<float> big = {9.3e18f, -9.3e18f, 9223371487098961920.0f, -9223372036854775808.0f, 2147483648.0f,
                            -1.75f,  float(kNaN), float(kInf), -float(kInf), 3e9f};
  g.add("f32 -> i64 truncation and saturation").tensor(make_f32(big, {int64_t(big.size())}, g.d)).dtype(DType::i64);
  std::vector<int64_t> wide = {int64_t(1) << 32, (int64_t(1) << 32) + 5, -1, int64_t(3) << 31,
                               std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  g.add("i64 -> i32 low bits").tensor(make_i64(wide, {int64_t(wide.size())}, g.d)).dtype(DType::i32);
}

void reduce(Gen& g) {
  bool picks = g.op.name == "max" || g.op.name == "argmax";
  struct S {
    Shp s;
    std::optional<int64_t> axis;
  };
  std::vector<S> cases = {{{}, std::nullopt}, {{5}, std::nullopt}, {{5}, 0},        {{2, 3}, 0},
                          {{2, 3}, -1},       {{2, 3, 4}, 1},      {{2, 3, 4}, -3}, {{2, 3, 4}, std::nullopt},
                          {{1, 7}, 1},        {{0, 3}, 1},
                          // Rows long enough that a backend may split them (Vulkan: a workgroup per row, partial
                          // results combined by a tree), contiguous and strided.
                          {{2, 1100}, -1},    {{1100, 2}, 0}};
  if (!picks) {
    cases.push_back({{0, 3}, 0});
    cases.push_back({{0, 3}, std::nullopt});
    cases.push_back({{0}, std::nullopt});
  }
  for (DType dt : accepted(g.param(0), g.d)) {
    for (const S& c : cases)
      for (bool keep : {false, true})
        g.add(fmt::format("{} {} axis {} keepdim {}", dtype_name(dt), shp(c.s),
                          c.axis ? std::to_string(*c.axis) : "all", keep))
            .tensor(g.random(dt, c.s))
            .optional_integer(c.axis)
            .flag(keep);
    // NaN, infinities, ties, i32 extremes (wrapping sums).
    for (std::optional<int64_t> axis : {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(1)})
      g.add(fmt::format("{} special values axis {}", dtype_name(dt), axis ? std::to_string(*axis) : "all"))
          .tensor(specials(g.d, dt, Domain::any, {4, 3}))
          .optional_integer(axis)
          .flag(false);
    if (dt == DType::f32) {
      std::vector<float> ties = {1, 3, 3, 2, -0.0f, 0.0f, 5, float(kNaN), 5, float(kNaN), 1, 2};
      for (std::optional<int64_t> axis : {std::optional<int64_t>(), std::optional<int64_t>(1)})
        g.add(fmt::format("f32 ties and NaN axis {}", axis ? "1" : "all"))
            .tensor(make_f32(ties, {3, 4}, g.d))
            .optional_integer(axis)
            .flag(false);
    }
  }
}

void matmul(Gen& g) {
  std::vector<std::pair<Shp, Shp>> shapes = {{{2, 3}, {3, 4}},          {{1, 1}, {1, 1}},       {{3, 0}, {0, 2}},
                                             {{0, 3}, {3, 2}},          {{2, 2, 3}, {3, 4}},    {{2, 3}, {4, 3, 2}},
                                             {{2, 1, 2, 3}, {3, 3, 2}}, {{5, 2, 3}, {5, 3, 1}}, {{1, 17}, {17, 1}}};
  for (DType dt : accepted(g.param(0), g.d))
    for (auto& [a, b] : shapes)
      g.add(fmt::format("{} {} x {}", dtype_name(dt), shp(a), shp(b))).tensor(g.random(dt, a)).tensor(g.random(dt, b));
}

void layout(Gen& g) {
  std::string_view n = g.op.name;
  for (DType dt : accepted(g.param(0), g.d)) {
    auto add = [&](const Shp& s, std::string what) -> CallBuilder& {
      return g.add(fmt::format("{} {} {}", dtype_name(dt), shp(s), what)).tensor(g.random(dt, s));
    };
    if (n == "reshape") {
      std::vector<std::pair<Shp, Shp>> c = {{{2, 3}, {3, 2}}, {{6}, {-1}},      {{2, 3}, {3, -1}},      {{}, {1, 1}},
                                            {{1}, {}},        {{0, 3}, {3, 0}}, {{2, 3, 4}, {4, -1, 2}}};
      for (auto& [s, t] : c) add(s, "-> " + shp(t)).ints(t);
    } else if (n == "permute") {
      std::vector<std::pair<Shp, Shp>> c = {
          {{2, 3}, {1, 0}}, {{2, 3, 4}, {2, 0, 1}}, {{}, {}}, {{2, 0, 3}, {1, 0, 2}}, {{2, 3}, {0, 1}}};
      for (auto& [s, p] : c) add(s, "dims " + shp(p)).ints(p);
    } else if (n == "slice") {
      struct S {
        Shp s, a, b, st;
      };
      for (const S& c : {S{{5}, {1}, {5}, {2}}, S{{4, 6}, {0, 1}, {4, 6}, {3, 2}}, S{{3}, {3}, {3}, {1}},
                         S{{}, {}, {}, {}}, S{{2, 3, 4}, {1, 0, 1}, {2, 3, 4}, {1, 5, 1}}})
        add(c.s, fmt::format("{}:{}:{}", shp(c.a), shp(c.b), shp(c.st))).ints(c.a).ints(c.b).ints(c.st);
    } else if (n == "expand") {
      std::vector<std::pair<Shp, Shp>> c = {
          {{3, 1}, {2, 3, 4}}, {{}, {2, 2}}, {{1}, {0}}, {{2, 3}, {2, 3}}, {{1, 3}, {4, 3}}};
      for (auto& [s, t] : c) add(s, "-> " + shp(t)).ints(t);
    } else if (n == "cat") {
      struct S {
        std::vector<Shp> parts;
        int64_t axis;
      };
      for (const S& c :
           {S{{{3}}, 0}, S{{{2, 1}, {2, 2}}, 1}, S{{{1, 3}, {0, 3}, {2, 3}}, 0},
            S{{{2, 1, 2}, {2, 3, 2}, {2, 0, 2}, {2, 1, 2}}, -2}, S{{{2, 2}, {2, 1}, {2, 3}, {2, 1}}, -1}}) {
        std::vector<Tensor> ts;
        for (const Shp& p : c.parts) ts.push_back(g.random(dt, p));
        g.add(fmt::format("{} {} tensors axis {}", dtype_name(dt), c.parts.size(), c.axis)).list(ts).integer(c.axis);
      }
    } else if (n == "index_select") {
      struct S {
        Shp s;
        int64_t axis;
        std::vector<int32_t> idx;
      };
      for (const S& c : {S{{4, 3}, 0, {3, 0, 3}}, S{{4, 3}, -1, {2, 1}}, S{{4, 3}, 1, {}}, S{{5}, 0, {4, 4, 0, 1}},
                         S{{2, 3, 4}, 1, {2, 0}}})
        add(c.s, fmt::format("axis {} index [{}]", c.axis, fmt::join(c.idx, ",")))
            .integer(c.axis)
            .tensor(make_i32(c.idx, {int64_t(c.idx.size())}, g.d));
    }
    // Special values (signed zeros, infinities, denormals, NaNs with a sign and a payload, integer extremes): data
    // movement copies their bits, which the oracle compares bit for bit.
    const Tensor sp = specials(g.d, dt, Domain::any, {4, 4});
    auto special = [&](const Tensor& t, std::string what) -> CallBuilder& {
      return g.add(fmt::format("{} special values {}", dtype_name(dt), what)).tensor(t);
    };
    if (n == "reshape") special(sp, "-> [16]").ints({16});
    else if (n == "permute") special(sp, "dims [1,0]").ints({1, 0});
    else if (n == "slice") special(sp, "[1:4:2, 0:4:3]").ints({1, 0}).ints({4, 4}).ints({2, 3});
    else if (n == "expand") special(specials(g.d, dt, Domain::any, {4, 1}), "[4,1] -> [2,4,3]").ints({2, 4, 3});
    else if (n == "cat") g.add(fmt::format("{} special values 2 tensors axis 1", dtype_name(dt))).list({sp, sp}).integer(1);
    else if (n == "index_select") special(sp, "axis 1 index [3,0,2]").integer(1).tensor(make_i32({3, 0, 2}, {3}, g.d));
  }
}

void softmax(Gen& g) {
  struct S {
    Shp s;
    int64_t axis;
  };
  for (DType dt : accepted(g.param(0), g.d))
    for (const S& c : {S{{5}, 0}, S{{2, 3}, -1}, S{{2, 3}, 0}, S{{2, 3, 4}, 1}, S{{0, 3}, 1}, S{{3, 1}, 1}})
      g.add(fmt::format("{} {} axis {}", dtype_name(dt), shp(c.s), c.axis)).tensor(g.random(dt, c.s)).integer(c.axis);
  std::vector<float> wide = {100, -100, 80.5f, 0, 1e-3f, -87, 3, 3};
  g.add("wide range").tensor(make_f32(wide, {2, 4}, g.d)).integer(1);
  std::vector<float> nan = {1, float(kNaN), 2, 0.5f, 0.25f, 4};
  g.add("NaN poisons its row").tensor(make_f32(nan, {2, 3}, g.d)).integer(-1);
}

void conv2d(Gen& g) {
  struct S {
    Shp in, w;
    Shp stride, pad;
  };
  for (const S& c : {S{{1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1}, {0, 0}}, S{{2, 3, 5, 4}, {4, 3, 3, 2}, {2, 1}, {1, 0}},
                     S{{1, 2, 4, 4}, {3, 2, 1, 1}, {2, 2}, {1, 1}}, S{{0, 1, 3, 3}, {2, 1, 2, 2}, {1, 1}, {0, 0}},
                     S{{1, 2, 2, 2}, {2, 2, 3, 3}, {1, 1}, {1, 1}}})
    for (DType dt : accepted(g.param(0), g.d))
      for (bool bias : {false, true})
        g.add(fmt::format("{} {} * {} stride {} padding {} bias {}", dtype_name(dt), shp(c.in), shp(c.w),
                          shp(c.stride), shp(c.pad), bias))
            .tensor(g.random(dt, c.in))
            .tensor(g.random(dt, c.w))
            .optional(bias ? std::optional<Tensor>(g.random(dt, {c.w[0]})) : std::nullopt)
            .ints(c.stride)
            .ints(c.pad);
}

void unfold_fold(Gen& g) {
  struct S {
    Shp in;
    Shp k, s, p;
  };
  bool fold = g.op.name == "fold";
  for (const S& c : {S{{1, 1, 3, 3}, {2, 2}, {1, 1}, {0, 0}}, S{{2, 3, 5, 4}, {3, 2}, {2, 1}, {1, 0}},
                     S{{1, 2, 4, 4}, {1, 1}, {2, 2}, {1, 1}}, S{{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}},
                     S{{0, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}}}) {
    std::string label = fmt::format("{} kernel {} stride {} padding {}", shp(c.in), shp(c.k), shp(c.s), shp(c.p));
    if (!fold) {
      for (DType dt : accepted(g.param(0), g.d)) {
        g.add(fmt::format("{} {}", dtype_name(dt), label)).tensor(g.random(dt, c.in)).ints(c.k).ints(c.s).ints(c.p);
        // unfold moves bits: special values (NaNs with a payload among them) too
        g.add(fmt::format("{} special values {}", dtype_name(dt), label))
            .tensor(specials(g.d, dt, Domain::any, c.in))
            .ints(c.k)
            .ints(c.s)
            .ints(c.p);
      }
      continue;
    }
    int64_t ho = (c.in[2] + 2 * c.p[0] - c.k[0]) / c.s[0] + 1, wo = (c.in[3] + 2 * c.p[1] - c.k[1]) / c.s[1] + 1;
    Shp cols = {c.in[0], c.in[1] * c.k[0] * c.k[1], ho * wo};
    for (DType dt : accepted(g.param(0), g.d))
      g.add(fmt::format("{} {}", dtype_name(dt), label))
          .tensor(g.random(dt, cols))
          .ints({c.in[2], c.in[3]})
          .ints(c.k)
          .ints(c.s)
          .ints(c.p);
  }
}

void transfer(Gen& g) {
  for (DType dt : computed_on(g.d))
    for (const Shp& s : std::vector<Shp>{{}, {0}, {2, 3}}) {
      g.add(fmt::format("{} {} to {}", dtype_name(dt), shp(s), g.d.str())).tensor(g.random(dt, s)).device(g.d);
      if (!(g.second == g.d) && (find_backend(g.second) == nullptr || find_backend(g.second)->dtypes().contains(dt)))
        g.add(fmt::format("{} {} to {}", dtype_name(dt), shp(s), g.second.str()))
            .tensor(g.random(dt, s))
            .device(g.second);
    }
}

}  // namespace

Calls cases_for(OpId id, Device d, Device second) {
  Gen g{id, op_def(id), d, second, ValueSource(uint64_t(id) + 1), {}};
  switch (g.op.family) {
    case OpFamily::creation: creation(g); break;
    case OpFamily::unary: unary(g); break;
    case OpFamily::binary: binary(g); break;
    case OpFamily::where: where(g); break;
    case OpFamily::cast: cast(g); break;
    case OpFamily::reduce: reduce(g); break;
    case OpFamily::matmul: matmul(g); break;
    case OpFamily::reshape:
    case OpFamily::permute:
    case OpFamily::slice:
    case OpFamily::expand:
    case OpFamily::cat:
    case OpFamily::index_select: layout(g); break;
    case OpFamily::softmax: softmax(g); break;
    case OpFamily::conv2d: conv2d(g); break;
    case OpFamily::unfold:
    case OpFamily::fold: unfold_fold(g); break;
    case OpFamily::transfer: transfer(g); break;
  }
  return std::move(g.calls);
}

Outcome run_and_compare(const CallBuilder& call, Device expected_device) {
  const OpDef& op = op_def(call.op());
  Tensor out;
  try {
    out = crossfire::call(call.op(), call.args());
  } catch (const Unsupported& e) {
    return {true, e.what()};
  } catch (const Error& e) {
    return {false, fmt::format("{}: dispatch raised {}: {}", call.label(), error_kind_name(e.kind()), e.what())};
  }
  if (!(out.device() == expected_device))
    return {false,
            fmt::format("{}: result is on {}, expected {}", call.label(), out.device().str(), expected_device.str())};
  ref::RefResult want;
  try {
    want = ref::evaluate(ref::RefCall::from(call.op(), call.args()));
  } catch (const Error& e) {
    return {false, fmt::format("{}: the reference raised {}", call.label(), e.what())};
  }
  // reference.hpp, Note [The bound, and the rounding of the output]: the output's rounding is charged against
  // magnitude, which is only sound while magnitude >= |exact|.
  for (size_t i = 0; i < want.value.values.size(); ++i) {
    double v = want.value.values[i];
    if (std::isfinite(v) && !(want.magnitude[i] >= std::fabs(v) * (1 - 0x1p-40)))
      return {false, fmt::format("{}: reference element {} has magnitude {} below |exact| {}", call.label(), i,
                                 want.magnitude[i], std::fabs(v))};
  }
  if (auto m = ref::first_mismatch(op, want, ref::RefTensor::from(out)))
    return {false, fmt::format("{}: {}", call.label(), m->what)};
  return {};
}

}  // namespace crossfire::testing::ops
