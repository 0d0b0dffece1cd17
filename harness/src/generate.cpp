// SPDX-License-Identifier: Apache-2.0
// The program generator: constructive, table-driven, no rejection loops (see generate.hpp).
#include "crossfire/harness/generate.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/reference.hpp"

namespace crossfire::harness {

int64_t ByteChoices::range(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = uint64_t(hi) - uint64_t(lo);
  uint64_t v = 0;
  size_t used = 0;
  // As FuzzedDataProvider: consume just enough bytes to cover the span.
  while (used < 8 && (span >> (8 * used)) > 0 && !data_.empty()) {
    v = (v << 8) | data_[0];
    data_ = data_.subspan(1);
    ++used;
  }
  if (span != UINT64_MAX) v %= (span + 1);
  return int64_t(uint64_t(lo) + v);
}

namespace {
constexpr uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : s) h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return h;
}
constexpr uint64_t mix(uint64_t z) {  // SplitMix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
constexpr uint64_t score(uint64_t name_hash, uint64_t w) { return mix(name_hash ^ (w * 0x9e3779b97f4a7c15ull)); }
constexpr auto kOpNameHashes = [] {
  std::array<uint64_t, kOpTable.size()> h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = fnv1a(kOpTable[i].name);
  return h;
}();
}  // namespace

OpId draw_op(ChoiceSource& c, std::span<const OpId> among) {
  const uint64_t w = uint64_t(c.range(0, 65535));
  OpId best = among.empty() ? OpId(0) : among[0];
  uint64_t best_score = 0;
  bool first = true;
  auto consider = [&](OpId id) {
    const uint64_t s = score(kOpNameHashes[id], w);
    if (first || s > best_score) best = id, best_score = s, first = false;
  };
  if (among.empty()) {
    for (size_t i = 0; i < kOpTable.size(); ++i) consider(OpId(i));
  } else {
    for (OpId id : among) consider(id);
  }
  return best;
}

DType draw_dtype(ChoiceSource& c, DTypeSet among) {
  const uint64_t w = uint64_t(c.range(0, 65535));
  DType best = DType::f32;
  uint64_t best_score = 0;
  bool first = true;
  for (DType d : kAllDTypes) {
    if (!among.contains(d)) continue;
    const uint64_t s = score(fnv1a(dtype_name(d)), w);
    if (first || s > best_score) best = d, best_score = s, first = false;
  }
  return best;
}

uint64_t PrngChoices::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t PrngChoices::range(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = uint64_t(hi) - uint64_t(lo) + 1;
  if (span == 0) return int64_t(next());
  // Lemire's multiply-shift; the tiny bias is irrelevant for test generation.
  return int64_t(uint64_t(lo) + uint64_t((__uint128_t(next()) * span) >> 64));
}

namespace {

struct Meta {
  DType dtype;
  Shape shape;
  bool tracked;
  Device device;
};

std::optional<Shape> broadcast_of(const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    int ia = i - (r - a.rank()), ib = i - (r - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

class Generator {
 public:
  Generator(ChoiceSource& c, const GenConfig& cfg) : c_(c), cfg_(cfg) {
    if (cfg_.devices.empty()) cfg_.devices.push_back(Device::cpu(0));
    max_rank_ = std::clamp(cfg_.max_rank, 0, 4);
  }

  Program run() {
    home_ = cfg_.devices[size_t(c_.range(0, int64_t(cfg_.devices.size()) - 1))];
    if (cfg_.large_rate > 0 && c_.range(0, 65535) < int64_t(cfg_.large_rate * 65536.0))
      if (std::optional<Program> p = large_program()) return std::move(*p);
    mismatch_ = cfg_.mismatches && c_.coin(1, 4);
    int n = int(c_.range(std::max(1, cfg_.min_nodes), std::max(cfg_.min_nodes, std::min(cfg_.max_nodes, 30))));
    // A node and its fresh inputs: about three values per node (more only for lists), so the two vectors seldom
    // regrow (each regrowth was a heap block, and a sanitizer build pays a stack trace per block).
    p_.values.reserve(size_t(n) * 3);
    meta_.reserve(size_t(n) * 3);
    for (int i = 0; i < n; ++i) {
      add_node(draw_op(c_, cfg_.ops));
    }
    if (cfg_.backward) {
      std::vector<int> tracked;
      for (size_t i = 0; i < meta_.size(); ++i)
        if (!p_.values[i].is_input() && meta_[i].tracked && is_float(meta_[i].dtype)) tracked.push_back(int(i));
      if (!tracked.empty() && c_.coin(1, 2)) p_.backward_of = tracked[size_t(c_.range(0, int64_t(tracked.size()) - 1))];
    }
    return std::move(p_);
  }

 private:
  // ---- small choices -------------------------------------------------------------------------------------------
  int64_t pick(int64_t lo, int64_t hi) { return c_.range(lo, hi); }
  Device any_device() { return cfg_.devices[size_t(pick(0, int64_t(cfg_.devices.size()) - 1))]; }
  // Whether device d's backend computes dtype dt (Backend::dtypes(): f16 and bf16 are the CPU backend's). A value is
  // only ever placed where its dtype can live: a program the campaign's own devices cannot hold checks nothing.
  static bool computes(Device d, DType dt) {
    const Backend* b = find_backend(d);
    return b == nullptr ? kClassicDTypes.contains(dt) : b->dtypes().contains(dt);
  }
  Device input_device() { return mismatch_ && c_.coin(1, 4) ? any_device() : home_; }

  int64_t dim() {
    // Mostly 1..4, sometimes 0 (empty tensors are part of the contract too).
    int64_t k = pick(0, 15);
    return k == 0 ? 0 : 1 + (k % 4);
  }
  int64_t pos_dim(int64_t hi = 4) { return pick(1, hi); }
  Shape random_shape(int min_rank = 0, bool nonempty = false) {
    Shape s;
    int r = int(pick(min_rank, std::max(min_rank, max_rank_)));
    for (int i = 0; i < r; ++i) s.push_back(nonempty ? pos_dim() : dim());
    return s;
  }
  // A shape that broadcasts with `base`: aligned dims equal, or 1 on either side, plus new leading dims.
  Shape compatible_shape(const Shape& base) {
    int r = int(pick(0, std::max(base.rank(), max_rank_)));
    Shape s;
    for (int i = 0; i < r; ++i) {
      int ib = i - (r - base.rank());
      if (ib < 0) {
        s.push_back(pos_dim(3));
      } else if (base[ib] == 1) {
        s.push_back(c_.coin(1, 2) ? 1 : dim());
      } else {
        s.push_back(c_.coin(1, 4) ? 1 : base[ib]);
      }
    }
    return s;
  }

  // ---- values --------------------------------------------------------------------------------------------------
  float f32_value(Domain dom, int kind) {
    switch (dom) {
      case Domain::positive: return float(pick(1, 64)) / 16.0f;
      case Domain::non_negative: return float(pick(0, 64)) / 16.0f;
      case Domain::non_zero: return float(pick(4, 64)) / 16.0f * (c_.coin(1, 2) ? -1.0f : 1.0f);
      default: break;
    }
    switch (kind) {
      case 0: return float(pick(-3, 3));
      case 1: return float(pick(-2048, 2048)) / 1024.0f;
      case 2: {
        float m = float(pick(1 << 23, (1 << 24) - 1)) / float(1 << 23);
        return std::ldexp(m, int(pick(-8, 4))) * (c_.coin(1, 2) ? -1.0f : 1.0f);
      }
      default: {  // specials, and the stressing values of issue 16 in ordinary programs too (Note [Large programs])
        static constexpr float kSpecial[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e30f, -1e-30f, INFINITY, -INFINITY, NAN};
        const int64_t k = pick(0, 10);
        if (k == 9)  // huge, mostly positive: an f32 sum or product of a few overflows where the exact result may not
          return std::ldexp(float(pick(1 << 23, (1 << 24) - 1)) / float(1 << 23), int(pick(120, 127))) *
                 (c_.coin(1, 8) ? -1.0f : 1.0f);
        if (k == 10)  // a denormal: a backend may flush it (tiny), but compares and data movement must keep it
          return std::ldexp(float(pick(1, 1 << 10)), int(pick(-149, -127))) * (c_.coin(1, 2) ? -1.0f : 1.0f);
        if (k == 8 && c_.coin(1, 2))  // a NaN with a sign and a payload that f16 and bf16 keep too (fraction bits
          // 16-21 below the quiet bit): data movement must copy it (Note [NaN payloads in the text])
          return std::bit_cast<float>((c_.coin(1, 2) ? 0x80000000u : 0u) | 0x7fc00000u | uint32_t(pick(1, 63)) << 16);
        return kSpecial[size_t(k)];
      }
    }
  }
  // A large i64, where narrower arithmetic breaks: anywhere in the range; or next to a power of two past which a
  // narrower type is inexact (2^24: f32; 2^31, 2^32: i32 and u32; 2^53: f64; 2^63: i64 itself, so sums wrap), on
  // either side of it and of either sign.
  int64_t i64_value() {
    if (c_.coin(1, 2)) return pick(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    static constexpr std::array<int, 5> kEdges = {24, 31, 32, 53, 63};
    const int e = kEdges[size_t(pick(0, int64_t(kEdges.size()) - 1))];
    const uint64_t edge = uint64_t(1) << e;  // 2^63 is INT64_MIN's magnitude
    const uint64_t mag = edge - uint64_t(pick(0, 2)) + (e < 63 ? uint64_t(pick(0, 2)) : 0);
    return c_.coin(1, 2) ? int64_t(0 - mag) : int64_t(mag == edge && e == 63 ? mag - 1 : mag);
  }
  int fresh_input(DType dt, const Shape& shape, bool tracked, Domain dom, int64_t index_bound = 0) {
    InputDef in;
    in.dtype = dt;
    in.shape = shape;
    in.device = input_device();
    if (!computes(in.device, dt)) in.device = home_;
    in.tracked = is_float(dt) && tracked;
    int64_t n = shape.numel();
    int kind = int(pick(0, cfg_.special_values ? 3 : 2));
    if (kind == 3 && (in.tracked || !c_.coin(1, 2))) kind = 1;  // specials are rare and never in tracked inputs
    // Among specials, an element sometimes cancels the one before it (x, -x): sums that cancel exactly.
    auto value = [&](int64_t i) {
      if (kind == 3 && i > 0 && dom == Domain::any && c_.coin(1, 5)) return -f32_from_bits(in.f32_bits.back());
      return f32_value(dom, kind);
    };
    for (int64_t i = 0; i < n; ++i) {
      if (dt == DType::f32) {
        in.f32_bits.push_back(f32_to_bits(value(i)));
      } else if (is_half(dt)) {  // the same values, rounded to the dtype (1e30 is inf in f16; 1e-30 is 0)
        in.f32_bits.push_back(f32_to_bits(float(reference::round_to(value(i), dt))));
      } else if (is_integer(dt)) {
        if (dom == Domain::index) in.ints.push_back(pick(0, std::max<int64_t>(0, index_bound - 1)));
        else if (dom == Domain::non_zero) in.ints.push_back(pick(1, 9));
        else if (kind != 2) in.ints.push_back(pick(-5, 5));
        else in.ints.push_back(dt == DType::i32 ? pick(INT32_MIN, INT32_MAX) : i64_value());
      } else {
        in.ints.push_back(int32_t(pick(0, 1)));
      }
    }
    return push(Value{std::move(in)}, Meta{dt, shape, is_float(dt) && tracked, p_.values.size() ? home_ : home_});
  }
  int push(Value v, Meta m) {
    if (v.is_input()) m.device = v.input().device;
    p_.values.push_back(std::move(v));
    meta_.push_back(m);
    return int(p_.values.size()) - 1;
  }

  // A tensor argument: an earlier value that fits, or a fresh input. Arguments with a value domain are always
  // fresh inputs (their values are chosen inside the domain); untracked-only parameters never get tracked values.
  template <class Ok, class Fresh>
  ValueRef tensor_arg(const ParamDef& p, DType dt, Ok&& ok, Fresh&& fresh_shape, int64_t index_bound = 0) {
    const bool untracked_only = p.grad == GradPolicy::forbidden;
    if (p.domain == Domain::any) {
      cand_.clear();
      for (size_t i = 0; i < meta_.size(); ++i) {
        const Meta& m = meta_[i];
        if (m.dtype == dt && !(untracked_only && m.tracked) && m.shape.numel() <= 512 && ok(m.shape))
          cand_.push_back(int(i));
      }
      if (!cand_.empty() && c_.coin(3, 4)) return with_override(cand_[size_t(pick(0, int64_t(cand_.size()) - 1))]);
    }
    bool tracked = cfg_.tracked && !untracked_only && is_float(dt) && p.grad == GradPolicy::differentiable &&
                   c_.coin(1, 2);
    return with_override(fresh_input(dt, fresh_shape(), tracked, p.domain, index_bound));
  }
  ValueRef with_override(int id) {
    ValueRef r{id, std::nullopt};
    if (mismatch_ && c_.coin(1, 5))
      if (const Device d = any_device(); computes(d, meta_[size_t(id)].dtype)) r.on = d;
    return r;
  }
  // A dtype of `s` that `where` computes (the program's home by default); every dtype of `s` if it computes none.
  DType pick_dtype(DTypeSet s) { return pick_dtype(s, home_); }
  DType pick_dtype(DTypeSet s, Device where) {
    // Every dtype is drawn where it can live (f16 and bf16 only where a backend computes them, so a program on
    // vulkan:0 alone has none); an op whose output keeps its input's dtype records that dtype in its Meta.
    DTypeSet here;
    for (DType d : kAllDTypes)
      if (s.contains(d) && computes(where, d)) here.bits |= uint8_t(1u << uint8_t(d));
    return draw_dtype(c_, here.empty() ? s : here);
  }
  const Shape& shape_of(const ValueRef& r) const { return meta_[size_t(r.id)].shape; }

  // The indices of an op's tensor parameters, in order: the op table's own list.
  static std::span<const uint8_t> tensor_params(const OpDef& op) {
    return {op.tensor_params.data(), size_t(op.num_tensor_params)};
  }
  // The k-th parameter of a role (families name their attributes by position, not by name).
  static int nth(const OpDef& op, ParamRole role, int k) {
    for (int i = 0; i < op.num_params; ++i)
      if (op.params[size_t(i)].role == role && k-- == 0) return i;
    return -1;
  }

  // ---- nodes ---------------------------------------------------------------------------------------------------
  void add_node(OpId id) {
    const OpDef& op = op_def(id);
    NodeDef n;
    n.op = id;
    n.args.resize(size_t(op.num_params));
    Meta out{DType::f32, Shape{}, false, home_};
    // Attributes every family fills the same way, when present.
    auto set = [&](int param, NodeArg a) {
      if (param >= 0) n.args[size_t(param)] = std::move(a);
    };
    auto axis_for = [&](int rank) { return rank == 0 ? int64_t(0) : pick(-rank, rank - 1); };
    auto norm = [](int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; };
    const std::span<const uint8_t> tp = tensor_params(op);

    switch (op.family) {
      case OpFamily::creation: {
        Shape s = random_shape();
        DType dt = DType::f32;
        Device where = home_;
        for (int i = 0; i < op.num_params; ++i) {
          const ParamDef& p = op.params[size_t(i)];
          if (p.role == ParamRole::device_attr) n.args[size_t(i)] = where = mismatch_ ? any_device() : home_;
        }
        int start = op.param_index("start"), stop = op.param_index("stop"), step = op.param_index("step");
        int dtp = nth(op, ParamRole::dtype_attr, 0);
        if (start >= 0 && stop >= 0 && step >= 0) {
          // A range: any numeric dtype (a bool range is meaningless), dyadic steps so the length is exact.
          dt = pick_dtype(kNumeric, where);
          double st = is_integer(dt) ? double(pick(1, 3)) : double(pick(1, 8)) / 4.0;
          if (c_.coin(1, 3)) st = -st;
          double a = double(pick(-5, 5));
          int64_t count = pick(0, 12);
          set(start, a);
          set(stop, a + double(count) * st);
          set(step, st);
          s = Shape{count};
        } else {
          int shape_p = nth(op, ParamRole::int_list_attr, 0);
          // Among the dtypes the attribute may name (the op table's: rand and randn draw floats only).
          if (dtp >= 0) dt = pick_dtype(op.params[size_t(dtp)].dtypes, where);
          set(shape_p, std::vector<int64_t>(s.dims().begin(), s.dims().end()));
          int value_p = nth(op, ParamRole::float_attr, 0);
          if (value_p >= 0) set(value_p, c_.coin(1, 2) ? double(pick(-4, 4)) : double(pick(-64, 64)) / 8.0);
          int seed_p = nth(op, ParamRole::int_attr, 0);
          if (seed_p >= 0) set(seed_p, pick(0, 1 << 30));
          int bytes_p = nth(op, ParamRole::bytes_attr, 0);
          if (bytes_p >= 0) {
            ByteData b;
            for (int64_t i = 0; i < s.numel(); ++i) {
              if (dt == DType::boolean) {
                b.bytes.push_back(uint8_t(pick(0, 1)));
              } else if (is_half(dt)) {
                const double v = reference::round_to(f32_value(Domain::any, int(pick(0, 2))), dt);
                const uint16_t h = reference::half_bits(v, dt);
                b.bytes.push_back(uint8_t(h & 0xff));
                b.bytes.push_back(uint8_t(h >> 8));
              } else {  // f32, i32, i64: little-endian
                const uint64_t w = dt == DType::f32   ? f32_to_bits(f32_value(Domain::any, int(pick(0, 2))))
                                   : dt == DType::i64 ? uint64_t(pick(0, 1) ? i64_value() : pick(-5, 5))
                                                      : uint32_t(int32_t(pick(-5, 5)));
                for (size_t k = 0; k < dtype_size(dt); ++k) b.bytes.push_back(uint8_t(w >> (8 * k)));
              }
            }
            set(bytes_p, std::move(b));
          }
        }
        if (dtp >= 0) set(dtp, dt);
        out.dtype = dt;
        out.shape = s;
        break;
      }
      case OpFamily::unary:
      case OpFamily::binary:
      case OpFamily::where: {
        // Elementwise: each tensor argument broadcasts with the shape built so far; a dtype group shares one dtype.
        std::array<int, 8> group_dtype;
        group_dtype.fill(-1);
        std::optional<Shape> acc;
        DType first_dt = DType::f32;
        bool first = true;
        for (int i : tp) {
          const ParamDef& p = op.params[size_t(i)];
          DType dt;
          if (p.same_dtype_group && group_dtype[p.same_dtype_group] >= 0) {
            dt = DType(group_dtype[p.same_dtype_group]);
          } else {
            // Only dtypes every member of the group accepts.
            DTypeSet s = p.dtypes;
            if (p.same_dtype_group)
              for (int j : tp)
                if (op.params[size_t(j)].same_dtype_group == p.same_dtype_group)
                  s.bits &= op.params[size_t(j)].dtypes.bits;
            dt = pick_dtype(s);
            if (p.same_dtype_group) group_dtype[p.same_dtype_group] = int(dt);
          }
          ValueRef r;
          if (!acc) {
            r = tensor_arg(p, dt, [](const Shape&) { return true; }, [&] { return random_shape(); });
            acc = shape_of(r);
          } else {
            Shape base = *acc;
            r = tensor_arg(
                p, dt, [&](const Shape& s) { return broadcast_of(base, s).has_value(); },
                [&] { return compatible_shape(base); });
            acc = broadcast_of(base, shape_of(r));
          }
          if (first) first_dt = dt, first = false;
          n.args[size_t(i)] = r;
        }
        out.shape = *acc;
        // Float attributes (clamp's min and max): values like the inputs', so that they sometimes meet one. Never
        // NaN (a NaN attribute makes a program unequal to itself; tests/ops_cases.cpp covers NaN bounds).
        for (int i = 0; i < op.num_params; ++i)
          if (op.params[size_t(i)].role == ParamRole::float_attr)
            n.args[size_t(i)] = double(f32_value(Domain::any, int(pick(0, 2))));
        // The output dtype: compare/logic ops give bool (no backward, all-constant params); where gives its
        // values' dtype; everything else its first input's.
        bool logical = op.backward == nullptr && op.params[size_t(tp[0])].grad == GradPolicy::constant;
        if (op.family == OpFamily::where) out.dtype = meta_[size_t(std::get<ValueRef>(n.args[size_t(tp[1])]).id)].dtype;
        else out.dtype = logical ? DType::boolean : first_dt;
        break;
      }
      case OpFamily::cast: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        DType dt = pick_dtype(kAnyDType);
        set(nth(op, ParamRole::dtype_attr, 0), dt);
        out = {dt, shape_of(r), false, home_};
        break;
      }
      case OpFamily::reduce: {
        const ParamDef& p = op.params[size_t(tp[0])];
        // Only some reductions are defined over nothing (OpDef::defined_on_empty); the others need a non-empty range.
        bool needs_nonempty = !op.defined_on_empty;
        ValueRef r = tensor_arg(
            p, pick_dtype(p.dtypes), [&](const Shape& s) { return !needs_nonempty || s.numel() > 0; },
            [&] { return random_shape(0, needs_nonempty); });
        n.args[size_t(tp[0])] = r;
        Shape xs = shape_of(r);
        int axis_p = nth(op, ParamRole::optional_int_attr, 0);
        bool keep = c_.coin(1, 2);
        set(nth(op, ParamRole::bool_attr, 0), keep);
        bool has_axis = xs.rank() > 0 && c_.coin(1, 2);
        Shape o;
        if (has_axis) {
          int64_t ax = axis_for(xs.rank());
          set(axis_p, ax);
          for (int i = 0; i < xs.rank(); ++i)
            if (i != norm(ax, xs.rank())) o.push_back(xs[i]);
            else if (keep) o.push_back(1);
        } else {
          set(axis_p, AbsentArg{});
          if (keep)
            for (int i = 0; i < xs.rank(); ++i) o.push_back(1);
        }
        // argmax-like reductions (no backward, i32 out on any input) vs value reductions.
        out.dtype = op.backward == nullptr ? DType::i32 : meta_[size_t(r.id)].dtype;
        out.shape = o;
        break;
      }
      case OpFamily::matmul: {
        const ParamDef& pl = op.params[size_t(tp[0])];
        const ParamDef& pr = op.params[size_t(tp[1])];
        DTypeSet both = pl.dtypes;  // the two operands share one dtype
        both.bits &= pr.dtypes.bits;
        const DType dt = pick_dtype(both);
        ValueRef l = tensor_arg(
            pl, dt, [&](const Shape& s) { return s.rank() >= 2; },
            [&] {
              Shape s = random_shape(0);
              Shape t;
              for (int i = 0; i < std::min(s.rank(), 2); ++i) t.push_back(s[i]);
              t.push_back(dim());
              t.push_back(dim());
              return t;
            });
        Shape ls = shape_of(l);
        int64_t k = ls[ls.rank() - 1];
        Shape lb;
        for (int i = 0; i < ls.rank() - 2; ++i) lb.push_back(ls[i]);
        ValueRef r = tensor_arg(
            pr, dt,
            [&](const Shape& s) {
              if (s.rank() < 2 || s[s.rank() - 2] != k) return false;
              Shape b;
              for (int i = 0; i < s.rank() - 2; ++i) b.push_back(s[i]);
              return broadcast_of(lb, b).has_value();
            },
            [&] {
              Shape b = lb.rank() > 0 ? compatible_shape(lb) : Shape{};
              Shape t;
              for (int i = std::max(0, b.rank() - 2); i < b.rank(); ++i) t.push_back(b[i]);
              t.push_back(k);
              t.push_back(dim());
              return t;
            });
        n.args[size_t(tp[0])] = l;
        n.args[size_t(tp[1])] = r;
        Shape rs = shape_of(r);
        Shape rb;
        for (int i = 0; i < rs.rank() - 2; ++i) rb.push_back(rs[i]);
        Shape o = *broadcast_of(lb, rb);
        o.push_back(ls[ls.rank() - 2]);
        o.push_back(rs[rs.rank() - 1]);
        out = {dt, o, false, home_};
        break;
      }
      case OpFamily::reshape: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        Shape xs = shape_of(r);
        // Split the element count into factors: move each prime-ish factor of every dim into a random new dim.
        std::vector<int64_t> dims;
        int64_t numel = xs.numel();
        if (numel == 0) {
          dims = {0};
          if (c_.coin(1, 2)) dims.push_back(pos_dim(3));
        } else {
          int r2 = int(pick(1, std::max(1, max_rank_)));
          dims.assign(size_t(r2), 1);
          int64_t rest = numel;
          for (int64_t f = 2; f * f <= rest;) {
            if (rest % f == 0) {
              dims[size_t(pick(0, r2 - 1))] *= f;
              rest /= f;
            } else {
              ++f;
            }
          }
          if (rest > 1) dims[size_t(pick(0, r2 - 1))] *= rest;
          if (numel == 1 && c_.coin(1, 3)) dims.clear();  // to a scalar
        }
        Shape o;
        for (int64_t d : dims) o.push_back(d);
        if (!dims.empty() && numel > 0 && c_.coin(1, 4)) dims[size_t(pick(0, int64_t(dims.size()) - 1))] = -1;
        set(nth(op, ParamRole::int_list_attr, 0), dims);
        out = {meta_[size_t(r.id)].dtype, o, false, home_};
        break;
      }
      case OpFamily::permute: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        Shape xs = shape_of(r);
        std::vector<int64_t> perm(size_t(xs.rank()));
        for (int i = 0; i < xs.rank(); ++i) perm[size_t(i)] = i;
        for (int i = xs.rank() - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(pick(0, i))]);
        Shape o;
        for (int64_t d : perm) o.push_back(xs[int(d)]);
        set(nth(op, ParamRole::int_list_attr, 0), perm);
        out = {meta_[size_t(r.id)].dtype, o, false, home_};
        break;
      }
      case OpFamily::slice: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        Shape xs = shape_of(r);
        std::vector<int64_t> starts, stops, steps;
        Shape o;
        for (int i = 0; i < xs.rank(); ++i) {
          int64_t a = pick(0, xs[i]), b = pick(a, xs[i]), st = pick(1, 3);
          starts.push_back(a);
          stops.push_back(b);
          steps.push_back(st);
          o.push_back((b - a + st - 1) / st);
        }
        set(nth(op, ParamRole::int_list_attr, 0), starts);
        set(nth(op, ParamRole::int_list_attr, 1), stops);
        set(nth(op, ParamRole::int_list_attr, 2), steps);
        out = {meta_[size_t(r.id)].dtype, o, false, home_};
        break;
      }
      case OpFamily::expand: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        Shape xs = shape_of(r);
        Shape o;
        int extra = int(pick(0, std::max(0, max_rank_ - xs.rank())));
        for (int i = 0; i < extra; ++i) o.push_back(pos_dim(3));
        for (int i = 0; i < xs.rank(); ++i) o.push_back(xs[i] == 1 ? pos_dim(3) : xs[i]);
        set(nth(op, ParamRole::int_list_attr, 0), std::vector<int64_t>(o.dims().begin(), o.dims().end()));
        out = {meta_[size_t(r.id)].dtype, o, false, home_};
        break;
      }
      case OpFamily::cat: {
        const ParamDef& p = op.params[size_t(tp[0])];
        DType dt = pick_dtype(p.dtypes);
        int count = int(pick(1, 4));
        std::vector<ValueRef> list;
        ValueRef r0 = tensor_arg(p, dt, [](const Shape& s) { return s.rank() >= 1; },
                                 [&] { return random_shape(1); });
        list.push_back(r0);
        Shape s0 = shape_of(r0);
        int64_t ax = axis_for(s0.rank());
        int a = int(norm(ax, s0.rank()));
        int64_t total = s0[a];
        for (int j = 1; j < count; ++j) {
          ValueRef rj = tensor_arg(
              p, dt,
              [&](const Shape& s) {
                if (s.rank() != s0.rank()) return false;
                for (int i = 0; i < s.rank(); ++i)
                  if (i != a && s[i] != s0[i]) return false;
                return true;
              },
              [&] {
                Shape s = s0;
                s[a] = dim();
                return s;
              });
          total += shape_of(rj)[a];
          list.push_back(rj);
        }
        n.args[size_t(tp[0])] = list;
        set(nth(op, ParamRole::int_attr, 0), ax);
        Shape o = s0;
        o[a] = total;
        out = {dt, o, false, home_};
        break;
      }
      case OpFamily::index_select: {
        const ParamDef& px = op.params[size_t(tp[0])];
        const ParamDef& pi = op.params[size_t(tp[1])];
        ValueRef x = tensor_arg(px, pick_dtype(px.dtypes), [](const Shape& s) { return s.rank() >= 1; },
                                [&] { return random_shape(1); });
        Shape xs = shape_of(x);
        int64_t ax = axis_for(xs.rank());
        int64_t d = xs[int(norm(ax, xs.rank()))];
        int64_t len = d == 0 ? 0 : pick(0, 5);
        ValueRef idx = tensor_arg(pi, pick_dtype(pi.dtypes), [](const Shape&) { return false; },
                                  [&] { return Shape{len}; }, d);
        n.args[size_t(tp[0])] = x;
        n.args[size_t(tp[1])] = idx;
        set(nth(op, ParamRole::int_attr, 0), ax);
        Shape o = xs;
        o[int(norm(ax, xs.rank()))] = len;
        out = {meta_[size_t(x.id)].dtype, o, false, home_};
        break;
      }
      case OpFamily::softmax: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape& s) { return s.rank() >= 1; },
                                [&] { return random_shape(1); });
        n.args[size_t(tp[0])] = r;
        set(nth(op, ParamRole::int_attr, 0), axis_for(shape_of(r).rank()));
        out = {meta_[size_t(r.id)].dtype, shape_of(r), false, home_};
        break;
      }
      case OpFamily::conv2d: {
        int64_t stride[2] = {pick(1, 2), pick(1, 2)}, pad[2] = {pick(0, 1), pick(0, 1)};
        const ParamDef& pin = op.params[size_t(tp[0])];
        const DType dt = pick_dtype(pin.dtypes);  // input, weight and bias share it (one dtype group)
        ValueRef in = tensor_arg(
            pin, dt,
            [](const Shape& s) { return s.rank() == 4 && s.numel() > 0 && s[2] <= 6 && s[3] <= 6; },
            [&] { return Shape{pos_dim(2), pos_dim(3), pos_dim(5), pos_dim(5)}; });
        Shape is = shape_of(in);
        int64_t o = pos_dim(3);
        int64_t kh = pick(1, std::min<int64_t>(3, is[2] + 2 * pad[0]));
        int64_t kw = pick(1, std::min<int64_t>(3, is[3] + 2 * pad[1]));
        const ParamDef& pw = op.params[size_t(tp[1])];
        ValueRef w = tensor_arg(pw, dt, [](const Shape&) { return false; },
                                [&] { return Shape{o, is[1], kh, kw}; });
        n.args[size_t(tp[0])] = in;
        n.args[size_t(tp[1])] = w;
        if (tp.size() > 2) {
          const ParamDef& pb = op.params[size_t(tp[2])];
          if (c_.coin(1, 2))
            n.args[size_t(tp[2])] = tensor_arg(pb, dt, [&](const Shape& s) { return s == Shape{o}; },
                                               [&] { return Shape{o}; });
          else
            n.args[size_t(tp[2])] = AbsentArg{};
        }
        set(nth(op, ParamRole::int_list_attr, 0), std::vector<int64_t>{stride[0], stride[1]});
        set(nth(op, ParamRole::int_list_attr, 1), std::vector<int64_t>{pad[0], pad[1]});
        int64_t ho = (is[2] + 2 * pad[0] - kh) / stride[0] + 1, wo = (is[3] + 2 * pad[1] - kw) / stride[1] + 1;
        out = {dt, Shape{is[0], o, ho, wo}, false, home_};
        break;
      }
      case OpFamily::unfold: {
        int64_t stride[2] = {pick(1, 2), pick(1, 2)}, pad[2] = {pick(0, 1), pick(0, 1)};
        const ParamDef& pin = op.params[size_t(tp[0])];
        const DType dt = pick_dtype(pin.dtypes);
        ValueRef in = tensor_arg(
            pin, dt, [](const Shape& s) { return s.rank() == 4 && s[2] <= 6 && s[3] <= 6; },
            [&] { return Shape{pos_dim(2), pos_dim(3), pos_dim(5), pos_dim(5)}; });
        Shape is = shape_of(in);
        int64_t kh = pick(1, std::max<int64_t>(1, std::min<int64_t>(3, is[2] + 2 * pad[0])));
        int64_t kw = pick(1, std::max<int64_t>(1, std::min<int64_t>(3, is[3] + 2 * pad[1])));
        if (is[2] + 2 * pad[0] < kh) pad[0] = kh;  // a zero-height input: pad so the window fits
        if (is[3] + 2 * pad[1] < kw) pad[1] = kw;
        n.args[size_t(tp[0])] = in;
        set(nth(op, ParamRole::int_list_attr, 0), std::vector<int64_t>{kh, kw});
        set(nth(op, ParamRole::int_list_attr, 1), std::vector<int64_t>{stride[0], stride[1]});
        set(nth(op, ParamRole::int_list_attr, 2), std::vector<int64_t>{pad[0], pad[1]});
        int64_t ho = (is[2] + 2 * pad[0] - kh) / stride[0] + 1, wo = (is[3] + 2 * pad[1] - kw) / stride[1] + 1;
        out = {dt, Shape{is[0], is[1] * kh * kw, ho * wo}, false, home_};
        break;
      }
      case OpFamily::fold: {
        int64_t stride[2] = {pick(1, 2), pick(1, 2)}, pad[2] = {pick(0, 1), pick(0, 1)};
        int64_t h = pos_dim(5), w = pos_dim(5), nb = pos_dim(2), ch = pos_dim(2);
        int64_t kh = pick(1, std::min<int64_t>(3, h + 2 * pad[0])), kw = pick(1, std::min<int64_t>(3, w + 2 * pad[1]));
        int64_t l = ((h + 2 * pad[0] - kh) / stride[0] + 1) * ((w + 2 * pad[1] - kw) / stride[1] + 1);
        Shape want{nb, ch * kh * kw, l};
        const ParamDef& pin = op.params[size_t(tp[0])];
        const DType dt = pick_dtype(pin.dtypes);
        ValueRef in = tensor_arg(pin, dt, [&](const Shape& s) { return s == want; }, [&] { return want; });
        n.args[size_t(tp[0])] = in;
        set(nth(op, ParamRole::int_list_attr, 0), std::vector<int64_t>{h, w});
        set(nth(op, ParamRole::int_list_attr, 1), std::vector<int64_t>{kh, kw});
        set(nth(op, ParamRole::int_list_attr, 2), std::vector<int64_t>{stride[0], stride[1]});
        set(nth(op, ParamRole::int_list_attr, 3), std::vector<int64_t>{pad[0], pad[1]});
        out = {dt, Shape{nb, ch, h, w}, false, home_};
        break;
      }
      case OpFamily::transfer: {
        const ParamDef& p = op.params[size_t(tp[0])];
        ValueRef r = tensor_arg(p, pick_dtype(p.dtypes), [](const Shape&) { return true; },
                                [&] { return random_shape(); });
        n.args[size_t(tp[0])] = r;
        Device to = mismatch_ ? any_device() : home_;
        if (!computes(to, meta_[size_t(r.id)].dtype)) to = home_;
        set(nth(op, ParamRole::device_attr, 0), to);
        out = {meta_[size_t(r.id)].dtype, shape_of(r), false, home_};
        break;
      }
    }
    // Tracked: a differentiable op with a tracked input on a differentiable parameter.
    if (op.backward != nullptr) {
      auto tracked_ref = [&](const ValueRef& r) { return meta_[size_t(r.id)].tracked; };
      for (int i : tp) {
        if (op.params[size_t(i)].grad != GradPolicy::differentiable) continue;
        const NodeArg& a = n.args[size_t(i)];
        if (auto* r = std::get_if<ValueRef>(&a)) out.tracked |= tracked_ref(*r);
        if (auto* l = std::get_if<std::vector<ValueRef>>(&a))
          for (const ValueRef& r : *l) out.tracked |= tracked_ref(r);
      }
      out.tracked &= is_float(out.dtype);
    }
    push(Value{std::move(n)}, out);
  }

  // ---- large programs (Note [Large programs] in generate.hpp) ---------------------------------------------------
  // Where a kernel changes behaviour or a driver's limit bites, tiny tensors never go: a softmax row of 21,845
  // elements, a conv2d output of 20,000 products and a mean whose f32 sum overflows were all wrong on lavapipe
  // while every campaign passed (issue 16). A large program is one input (two for conv2d and matmul) and one node
  // that reduces over a long axis; nullopt when --ops allows none of those ops.
  static bool long_axis_family(OpFamily f) {
    return f == OpFamily::softmax || f == OpFamily::reduce || f == OpFamily::conv2d || f == OpFamily::matmul;
  }
  std::optional<Program> large_program() {
    std::vector<OpId> allowed;  // every op of those families in the table (a new reduction joins by its family)
    for (int i = 0; i < kNumOps; ++i) {
      const OpId id = OpId(i);
      if (long_axis_family(op_def(id).family) &&
          (cfg_.ops.empty() || std::find(cfg_.ops.begin(), cfg_.ops.end(), id) != cfg_.ops.end()))
        allowed.push_back(id);
    }
    if (allowed.empty()) return std::nullopt;
    const int64_t budget = std::max<int64_t>(cfg_.large_elements, 1024);
    // The length of the long axis: a declared extent or a neighbour (two times in three, when there are any), else a
    // long axis past 2^16.
    int64_t len;
    if (!cfg_.extents.empty() && !c_.coin(1, 3)) {
      const int64_t e = cfg_.extents[size_t(pick(0, int64_t(cfg_.extents.size()) - 1))];
      len = std::max<int64_t>(2, e + pick(-1, 1));
    } else {
      len = pick(int64_t(1) << 16, std::max<int64_t>(budget, (int64_t(1) << 16) + 1));
    }
    len = std::min(len, budget);
    const int values = int(pick(0, 4));
    const OpId id = draw_op(c_, allowed);
    const OpDef& op = op_def(id);
    const std::span<const uint8_t> tp = tensor_params(op);
    NodeDef n;
    n.op = id;
    n.args.resize(size_t(op.num_params));
    auto set = [&](int param, NodeArg a) {
      if (param >= 0) n.args[size_t(param)] = std::move(a);
    };
    auto input = [&](Shape s) { return ValueRef{large_input(std::move(s), values), std::nullopt}; };
    switch (op.family) {
      case OpFamily::softmax: {
        const int64_t rows = pick(1, 3), l = std::min(len, budget / rows);
        const bool along_rows = c_.coin(1, 2);  // [rows, l] along axis 1, or [l, rows] along axis 0 (strided)
        n.args[size_t(tp[0])] = input(along_rows ? Shape{rows, l} : Shape{l, rows});
        set(nth(op, ParamRole::int_attr, 0), along_rows ? int64_t(-1) : int64_t(0));
        break;
      }
      case OpFamily::reduce: {
        const int64_t cols = pick(1, 3), l = std::min(len, budget / cols);
        const bool flat = c_.coin(1, 2);
        n.args[size_t(tp[0])] = input(flat ? Shape{l} : Shape{l, cols});
        set(nth(op, ParamRole::optional_int_attr, 0), flat && c_.coin(1, 2) ? NodeArg{AbsentArg{}} : NodeArg{int64_t(0)});
        set(nth(op, ParamRole::bool_attr, 0), c_.coin(1, 2));
        break;
      }
      case OpFamily::conv2d: {
        // C * k * k products per output: one output pixel (a k x k image) or two (k + 1 rows), O of them.
        const int64_t k = pick(1, 3), o = pick(1, 2), rows = k + pick(0, 1);
        const int64_t c = std::max<int64_t>(1, std::min(len / (k * k), budget / (k * rows * o)));
        n.args[size_t(tp[0])] = input(Shape{1, c, rows, k});
        n.args[size_t(tp[1])] = input(Shape{o, c, k, k});
        if (tp.size() > 2) n.args[size_t(tp[2])] = c_.coin(1, 2) ? NodeArg{input(Shape{o})} : NodeArg{AbsentArg{}};
        set(nth(op, ParamRole::int_list_attr, 0), std::vector<int64_t>{1, 1});
        set(nth(op, ParamRole::int_list_attr, 1), std::vector<int64_t>{0, 0});
        break;
      }
      default: {  // matmul (long_axis_family): [m, K] x [K, n]
        const int64_t m = pick(1, 3), nn = pick(1, 3), k = std::min(len, budget / std::max(m, nn));
        n.args[size_t(tp[0])] = input(Shape{m, k});
        n.args[size_t(tp[1])] = input(Shape{k, nn});
        break;
      }
    }
    p_.values.push_back(Value{std::move(n)});
    return std::move(p_);
  }
  static float f32_from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  // An f32 input of a large program, untracked, on the home device. Values: 0 small integers (sums exact), 1
  // uniform in [-2, 2), 2 huge and mostly of one sign (an f32 running sum overflows where the mean does not),
  // 3 denormals and tiny normals, 4 pairs that cancel (x, -x) with small ones between.
  int large_input(Shape s, int values) {
    InputDef in;
    in.dtype = DType::f32;
    in.device = home_;
    const int64_t n = s.numel();
    in.shape = std::move(s);
    in.f32_bits.reserve(size_t(n));
    PrngChoices r(uint64_t(pick(0, int64_t(1) << 40)));  // one choice seeds the values: a long input costs one
    for (int64_t i = 0; i < n; ++i) {
      float v;
      switch (values) {
        case 0: v = float(r.range(-3, 3)); break;
        case 1: v = float(r.range(-1 << 20, (1 << 20) - 1)) / float(1 << 19); break;
        case 2: v = std::ldexp(float(r.range(1 << 23, (1 << 24) - 1)) / float(1 << 23), int(r.range(120, 127))) *
                    (r.range(0, 15) == 0 ? -1.0f : 1.0f); break;
        case 3: v = std::ldexp(float(r.range(1, 1 << 10)), int(r.range(-149, -126))) * (r.range(0, 1) ? -1.0f : 1.0f);
                break;
        default: v = i % 2 == 1 ? -f32_from_bits(in.f32_bits.back()) : float(r.range(-1 << 20, (1 << 20) - 1)) / 4096.0f;
      }
      in.f32_bits.push_back(f32_to_bits(v));
    }
    meta_.push_back(Meta{DType::f32, in.shape, false, home_});
    p_.values.push_back(Value{std::move(in)});
    return int(p_.values.size()) - 1;
  }

  ChoiceSource& c_;
  GenConfig cfg_;
  int max_rank_ = 4;
  Device home_;
  bool mismatch_ = false;
  Program p_;
  std::vector<Meta> meta_;
  std::vector<int> cand_;
};

}  // namespace

Program generate_program(ChoiceSource& choices, const GenConfig& config) { return Generator(choices, config).run(); }

}  // namespace crossfire::harness
