// SPDX-License-Identifier: Apache-2.0
// Devices, dtypes and shapes: the small value types every other part of crossfire speaks in.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace crossfire {

// ---------------------------------------------------------------------------------------------------------------
// Backends and devices
// ---------------------------------------------------------------------------------------------------------------

// A backend's slot. The built-in backends take the first three; register_backend() (backend.hpp) hands out the
// others, in order, to backends registered at run time (Note [Registered backends] in backend.cpp). A small fixed
// number of slots keeps every per-backend table a plain array.
enum class BackendKind : uint8_t { cpu = 0, vulkan = 1, cuda = 2 };
inline constexpr int kNumBuiltinBackends = 3;
inline constexpr int kMaxBackends = 8;
inline constexpr std::array<BackendKind, kNumBuiltinBackends> kBuiltinBackendKinds = {
    BackendKind::cpu, BackendKind::vulkan, BackendKind::cuda};

// Every backend kind that has a backend now: the built-in ones (compiled in or not) and then each registered one,
// in slot order, so a kind's position in the span is its value. Grows when a backend is registered.
std::span<const BackendKind> backend_kinds();
// The kind of the backend called `name` ("cpu", or a registered backend's name), if there is one.
std::optional<BackendKind> backend_kind_named(std::string_view name);
// "cpu, vulkan, cuda, torch": every backend's name, for error messages.
std::string backend_names();

// The name of a registered backend's slot, or "?" for a slot that holds none (out of line: backend.cpp).
std::string_view registered_backend_name(BackendKind b);
inline std::string_view backend_name(BackendKind b) {
  switch (b) {
    case BackendKind::cpu: return "cpu";
    case BackendKind::vulkan: return "vulkan";
    case BackendKind::cuda: return "cuda";
  }
  return registered_backend_name(b);
}

// A device is (backend, index). It packs into 16 bits so that the validation loop compares devices with one
// integer comparison (see Note [Validation fast path] in dispatch.cpp).
struct Device {
  BackendKind backend = BackendKind::cpu;
  uint8_t index = 0;

  // The two bytes as they lie in memory: one 16-bit load, no shifts (only ever compared for equality).
  constexpr uint16_t packed() const { return std::bit_cast<uint16_t>(*this); }
  friend constexpr bool operator==(Device a, Device b) { return a.packed() == b.packed(); }
  std::string str() const;  // "cpu:0"

  static constexpr Device cpu(int i = 0) { return {BackendKind::cpu, uint8_t(i)}; }
  static constexpr Device vulkan(int i = 0) { return {BackendKind::vulkan, uint8_t(i)}; }
  static constexpr Device cuda(int i = 0) { return {BackendKind::cuda, uint8_t(i)}; }
  // Parses "cpu:1", "vulkan" (index 0), "torch:0" (a registered backend). Throws InvalidArgument on anything else.
  static Device parse(std::string_view text);
};
static_assert(sizeof(Device) == 2);

// ---------------------------------------------------------------------------------------------------------------
// Dtypes
// ---------------------------------------------------------------------------------------------------------------

// Note [Half precision]
// f16 is IEEE 754 binary16 (1 sign, 5 exponent, 10 fraction bits; largest finite 65504), bf16 the top 16 bits of
// an f32 (8 exponent, 7 fraction bits). Every f16 and bf16 value is an f32 value exactly, and crossfire's built-in
// kernels compute f16/bf16 ops in f32 and round the result once to the output dtype, to nearest, ties to even;
// a result past the dtype's largest finite value by half an ulp or more becomes infinity (overflow to infinity is
// a result, never an error). Contract section 6's bound for them: the op's own k at f32's eps (the arithmetic is
// f32's) plus one rounding at the output dtype's eps (docs/contract.md, "Half precision").
//
// Note [64-bit integers]
// i64 is two's complement like i32: add, sub, mul, neg, abs and sum wrap; a float cast to i64 truncates toward
// zero, saturates at INT64_MIN/INT64_MAX and sends NaN to 0; an i64 cast to a float dtype is rounded once, to
// nearest (ties to even), from the exact integer (never through an intermediate rounding to f64, which would round
// twice: 2^60 + 2^52 + 1 is not 2^60 in bf16); an i64 cast to i32 keeps the low 32 bits, as C++ and every
// framework do. argmax gives i32 whatever it reads (every index fits: the element bound), and index_select takes
// an i32 or an i64 index.
enum class DType : uint8_t { f32 = 0, i32 = 1, boolean = 2, f16 = 3, bf16 = 4, i64 = 5 };
inline constexpr int kNumDTypes = 6;
inline constexpr std::array<DType, kNumDTypes> kAllDTypes = {DType::f32, DType::i32, DType::boolean,
                                                             DType::f16, DType::bf16, DType::i64};

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::boolean: return "bool";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
  }
  return "?";
}
// bool is stored as one byte holding 0 or 1; f16 and bf16 as their 16 bits; i64 as 8 bytes.
// Each of these is one shift of a constant (4 bits per dtype for the size, 1 for the classes): they run in every
// tensor's construction and every dispatch, which must not slow down as dtypes are added.
constexpr size_t dtype_size(DType d) {
  static_assert(kNumDTypes <= 8);
  constexpr uint32_t kSizes = 4u | 4u << 4 | 1u << 8 | 2u << 12 | 2u << 16 | 8u << 20;  // f32 i32 bool f16 bf16 i64
  return (kSizes >> (4 * unsigned(d))) & 0xfu;
}
constexpr bool is_float(DType d) { return (0b11001u >> unsigned(d)) & 1u; }  // f32, f16, bf16
constexpr bool is_half(DType d) { return (0b11000u >> unsigned(d)) & 1u; }   // f16, bf16
static_assert(dtype_size(DType::f32) == 4 && dtype_size(DType::i32) == 4 && dtype_size(DType::boolean) == 1 &&
              dtype_size(DType::f16) == 2 && dtype_size(DType::bf16) == 2 && dtype_size(DType::i64) == 8);
static_assert(is_float(DType::f32) && is_float(DType::f16) && is_float(DType::bf16) && !is_float(DType::i32) &&
              !is_float(DType::boolean) && !is_float(DType::i64) && is_half(DType::f16) && is_half(DType::bf16) &&
              !is_half(DType::f32) && !is_half(DType::i64));
constexpr bool is_integer(DType d) { return d == DType::i32 || d == DType::i64; }
DType parse_dtype(std::string_view text);  // throws InvalidArgument

// Note [Conversions never hit undefined behaviour]
// C++ leaves float -> int conversion of a NaN or an out-of-range value undefined, and double -> float of a value
// beyond FLT_MAX too. crossfire defines them: f32/f64 -> i32 or i64 truncates toward zero, saturates at the
// integer's MIN/MAX and maps NaN to 0; x -> bool is x != 0 (so NaN -> true); f64 -> f32 rounds to nearest with
// overflow to +-inf (round_to_f32); i64 -> i32 keeps the low 32 bits. Every backend must produce the same bits, so
// the float -> integer rule is this one function, for the CPU kernels, every backend's host code and CUDA's device
// code alike, and the tests pin it.
#if defined(__CUDACC__)
#define CROSSFIRE_HOST_DEVICE __host__ __device__
#else
#define CROSSFIRE_HOST_DEVICE
#endif
template <class I, class F>
CROSSFIRE_HOST_DEVICE constexpr I float_to_int(F x) {
  static_assert(std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>, "float_to_int: i32 or i64");
  constexpr F kLimit = sizeof(I) == 4 ? F(2147483648.0) : F(9223372036854775808.0);  // 2^31, 2^63: exact in f32/f64
  constexpr I kMax = sizeof(I) == 4 ? I(2147483647) : I(9223372036854775807LL);
  if (x != x) return 0;
  if (x >= kLimit) return kMax;
  if (x < -kLimit) return I(-kMax - 1);
  return I(x);  // in range: truncates toward zero
}

// f64 -> f32 rounded to nearest (ties to even), a value at or past FLT_MAX + half an ulp becoming the infinity of its
// sign, without the undefined behaviour of converting an out-of-range double: how every float attribute reaches an
// f32 kernel (full's value, clamp's bounds) and how the reference rounds.
constexpr float round_to_f32(double v) {
  constexpr double kOverflow = 0x1.ffffffp127;
  if (v >= kOverflow) return __builtin_huge_valf();
  if (v <= -kOverflow) return -__builtin_huge_valf();
  return float(v);
}

// A set of dtypes, as a bit mask; what a parameter accepts.
struct DTypeSet {
  uint8_t bits = 0;
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> ds) {
    for (DType d : ds) bits |= uint8_t(1u << uint8_t(d));
  }
  constexpr bool contains(DType d) const { return (bits >> uint8_t(d)) & 1u; }
  constexpr bool empty() const { return bits == 0; }
  std::string str() const;  // "f32|i32"
};
inline constexpr DTypeSet kFloat{DType::f32, DType::f16, DType::bf16};
inline constexpr DTypeSet kNumeric{DType::f32, DType::i32, DType::f16, DType::bf16, DType::i64};
inline constexpr DTypeSet kBool{DType::boolean};
inline constexpr DTypeSet kInt{DType::i32, DType::i64};
inline constexpr DTypeSet kAnyDType{DType::f32, DType::i32, DType::boolean, DType::f16, DType::bf16, DType::i64};
// What a backend computes unless it says more (Backend::dtypes()): the dtypes crossfire had before f16, bf16 and
// i64.
inline constexpr DTypeSet kClassicDTypes{DType::f32, DType::i32, DType::boolean};
// Every dtype but i64: for a backend without 64-bit integers (and the dtypes before i64, 2026-12-04).
inline constexpr DTypeSet kAllButI64{DType::f32, DType::i32, DType::boolean, DType::f16, DType::bf16};

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

inline constexpr int kMaxRank = 6;
// No tensor may hold more elements than this (2^31 - 1 keeps every index an i32 on every backend, and stops a
// hostile shape from asking for an unbounded allocation). Checked by every shape rule.
inline constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;

// A shape of rank 0..6, stored inline: shapes never touch the heap.
class Shape {
 public:
  constexpr Shape() = default;
  constexpr Shape(std::initializer_list<int64_t> dims) {
    for (int64_t d : dims) push_back(d);
  }
  // Copies read the `rank` dims one 8-byte word at a time (dims past the rank stay zero). A defaulted copy reads
  // all 56 bytes in 16-byte words, and when the source has just been built dim by dim (an output rule's push_back
  // or `out[axis] = n`) each wide load straddles two narrow stores: a failed store-to-load forward, which cost
  // `cat` ~15 ns per call on the dispatch path (docs/benchmarks.md; the same trap as Note [Arguments are built in
  // place] in args.hpp). noexcept, as a defaulted copy would be: without it no type holding a Shape is nothrow
  // movable, and std::vector then grows by copying its elements instead of moving them (a program's values, the
  // reference's tensors, with all their data).
  constexpr Shape(const Shape& o) noexcept : rank_(o.rank_) { copy_dims(o); }
  constexpr Shape& operator=(const Shape& o) noexcept {
    dims_ = {};
    rank_ = o.rank_;
    copy_dims(o);
    return *this;
  }
  // A shape of rank R from its dims (which the caller has checked), every slot written once: no zeroing pass
  // before the dims, which is what compilers make of `Shape s; s.push_back(...)` when it is inlined into a large
  // function (a `rep stos` that the dims' narrow stores and later loads then wait behind).
  template <size_t R>
    requires(R <= kMaxRank)
  constexpr explicit Shape(const std::array<int64_t, R>& dims)
      : Shape(dims, std::make_index_sequence<size_t(kMaxRank + 1)>()) {}
  // Builds a shape from caller data; throws ShapeError on rank > 6, negative dims or more than kMaxElements.
  static Shape checked(std::span<const int64_t> dims, std::string_view op, std::string_view param);

  constexpr int rank() const { return rank_; }
  constexpr int64_t operator[](int i) const { return dims_[size_t(i)]; }
  constexpr int64_t& operator[](int i) { return dims_[size_t(i)]; }
  constexpr void push_back(int64_t d) { dims_[size_t(rank_++)] = d; }
  constexpr int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[size_t(i)];
    return n;
  }
  // Whether the non-zero dims multiply to at most kMaxElements (Note [The element bound] in dispatch.cpp): true of
  // every shape from Shape::checked and of every tensor's shape.
  constexpr bool within_element_bound() const {
    ElementBound b;
    for (int i = 0; i < rank_; ++i) b.add(dims_[size_t(i)]);
    return !b.over;
  }
  constexpr std::span<const int64_t> dims() const { return {dims_.data(), size_t(rank_)}; }
  friend constexpr bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[size_t(i)] != b.dims_[size_t(i)]) return false;
    return true;
  }
  std::string str() const;  // "[2, 3]"

 private:
  // The element bound's test, one dim at a time (within_element_bound, and checked(), which copies as it tests).
  // Unsigned, so a negative dim reads as huge; while `n` stays within the bound, n * d cannot wrap (both are below
  // 2^32), and once anything is over, `over` stays set whatever `n` becomes.
  struct ElementBound {
    uint64_t n = 1;
    bool over = false;
    constexpr void add(int64_t dim) {
      const uint64_t d = uint64_t(dim);
      n *= d == 0 ? 1 : d;
      over |= (d | n) > uint64_t(kMaxElements);
    }
  };

  // (The inner `I < R ? I : 0` keeps the index in range in the branch that the outer test discards.)
  template <size_t R, size_t... I>
  constexpr Shape(const std::array<int64_t, R>& dims, std::index_sequence<I...>)
      : rank_(int(R)), dims_{(I < R ? dims[I < R ? I : 0] : 0)...} {}

  constexpr void copy_dims(const Shape& o) {
    for (int i = 0; i < rank_; ++i) {
      int64_t d = o.dims_[size_t(i)];
      // An empty asm that "may change" d: the compiler can neither merge these moves into wide ones nor turn
      // the loop into a memcpy call (whose 16-byte loads would straddle the same narrow stores).
      if (!std::is_constant_evaluated()) asm("" : "+r"(d));
      dims_[size_t(i)] = d;
    }
  }
  int rank_ = 0;  // first, so that a TensorImpl's rank shares a cache line with its device (Note [Hot fields])
  std::array<int64_t, kMaxRank + 1> dims_{};  // one spare slot so a rank-6 check can fail without overflow
};

// Row-major contiguous strides, in elements.
std::array<int64_t, kMaxRank> contiguous_strides(const Shape& s);

// Shape arithmetic every backend's kernels share. Kernels see only calls the output rules accepted, so an axis
// here is already in range.
// An axis counted from the front: -1 -> rank - 1.
constexpr int normalised_axis(int64_t axis, int rank) { return int(axis < 0 ? axis + rank : axis); }
// A shape seen as [outer, len, inner] around `axis` (in [0, rank)): the layout reductions, softmax, cat and
// index_select walk.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit split_at(const Shape& s, int axis);
// A slice of `in` (shape `out`) as a strided view of it, in elements: the offset of its first element and, per
// axis, the distance between kept elements: the contiguous stride times the step, or 0 on an axis that keeps at
// most one element, whose step may be anything up to INT64_MAX and is never used (so it is never multiplied).
struct SliceView {
  int64_t offset = 0;
  std::array<int64_t, kMaxRank> strides{};
};
SliceView slice_view(const Shape& in, const Shape& out, std::span<const int64_t> starts,
                     std::span<const int64_t> steps);

}  // namespace crossfire
