// SPDX-License-Identifier: Apache-2.0
// Elementwise family: creation fills, unary and binary ops (numpy broadcasting), where, cast. One functor per op;
// the launchers are templates over the functor, instantiated from the X-macro lists in launch.hpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace crossfire::cuda {

// Which storage types a functor accepts.
inline constexpr unsigned kF32 = 1, kI32 = 2, kBool = 4;

namespace fn {

// i32 arithmetic wraps: it is done in uint32_t, where overflow is defined, and converted back (modular in C++20).
__device__ __forceinline__ int32_t wrap(uint32_t v) { return int32_t(v); }

// ---- unary ----
// neg and abs only touch the sign bit, as the host's do: PTX leaves the NaN that neg.f32 / abs.f32 return
// unspecified, and data movement of a NaN must keep its bits.
struct Neg {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float x) const { return __int_as_float(__float_as_int(x) ^ int(0x80000000u)); }
  __device__ int32_t operator()(int32_t x) const { return wrap(0u - uint32_t(x)); }
};
struct Abs {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float x) const { return __int_as_float(__float_as_int(x) & 0x7fffffff); }
  __device__ int32_t operator()(int32_t x) const { return x < 0 ? wrap(0u - uint32_t(x)) : x; }
};
struct Exp {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float x) const { return expf(x); }
};
struct Log {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float x) const { return logf(x); }
};
struct Sqrt {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float x) const { return sqrtf(x); }  // IEEE-rounded: nvcc's default -prec-sqrt=true
};
struct Tanh {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct Sigmoid {
  static constexpr unsigned kTypes = kF32;
  // In f64, rounded once: well inside the transcendental bound for every x (f32 expf's error would not be).
  __device__ float operator()(float x) const { return float(1.0 / (1.0 + exp(-double(x)))); }
};
struct Relu {
  static constexpr unsigned kTypes = kF32;
  // Selected on the bits: written as a float select, nvcc turns it into max.NaN.f32, which returns the canonical
  // NaN 0x7fffffff instead of x's own NaN (seen on an H200), and the CPU backend keeps x's bits.
  __device__ float operator()(float x) const {
    const unsigned u = __float_as_uint(x);
    const bool keep = x > 0.0f || (u & 0x7fffffffu) > 0x7f800000u;
    return __uint_as_float(keep ? u : 0u);
  }
};
struct Clamp {
  static constexpr unsigned kTypes = kF32;
  static constexpr bool kFloatAttributes = true;  // built from the launch's two float attributes
  float lo, hi;
  // On the bits of x where it stays (-0 and NaN keep theirs), like Relu.
  __device__ float operator()(float x) const {
    if (lo != lo || hi != hi) return __uint_as_float(0x7fc00000u);
    if (x < lo) x = lo;  // then against max, so that min > max gives max
    if (x > hi) x = hi;
    return x;
  }
};
struct LogicalNot {
  static constexpr unsigned kTypes = kBool;
  __device__ uint8_t operator()(uint8_t x) const { return x ? 0 : 1; }
};

// ---- binary ----
struct Add {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) + uint32_t(b)); }
};
struct Sub {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float a, float b) const { return a - b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) - uint32_t(b)); }
};
struct Mul {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float a, float b) const { return a * b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) * uint32_t(b)); }
};
struct Div {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float a, float b) const { return a / b; }  // IEEE-rounded: -prec-div=true
};
struct Pow {
  static constexpr unsigned kTypes = kF32;
  __device__ float operator()(float a, float b) const { return powf(a, b); }
};
// NaN if either is NaN (the NaN operand itself). Equal operands (only +0 and -0 differ in bits) follow IEEE
// 754-2019 maximum/minimum: max(+0, -0) = +0 and min(+0, -0) = -0 in either order, as on the host.
struct Maximum {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float a, float b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
  }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};
struct Minimum {
  static constexpr unsigned kTypes = kF32 | kI32;
  __device__ float operator()(float a, float b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
  }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a < b ? a : b; }
};

#define CROSSFIRE_CUDA_COMPARE(Tag, expr, types)                       \
  struct Tag {                                                         \
    static constexpr unsigned kTypes = types;                          \
    template <class T>                                                 \
    __device__ uint8_t operator()(T a, T b) const { return (expr) ? 1 : 0; } \
  };
CROSSFIRE_CUDA_COMPARE(Eq, a == b, kF32 | kI32 | kBool)
CROSSFIRE_CUDA_COMPARE(Ne, a != b, kF32 | kI32 | kBool)
CROSSFIRE_CUDA_COMPARE(Lt, a < b, kF32 | kI32)
CROSSFIRE_CUDA_COMPARE(Le, a <= b, kF32 | kI32)
CROSSFIRE_CUDA_COMPARE(Gt, a > b, kF32 | kI32)
CROSSFIRE_CUDA_COMPARE(Ge, a >= b, kF32 | kI32)
CROSSFIRE_CUDA_COMPARE(LogicalAnd, a && b, kBool)
CROSSFIRE_CUDA_COMPARE(LogicalOr, a || b, kBool)
#undef CROSSFIRE_CUDA_COMPARE

}  // namespace fn

namespace {

// Calls f(T{}) with the storage type of `dt`, for the types in `types` only (the others cannot reach here:
// dispatch has already checked the dtype against the op table).
template <unsigned types, class F>
void with_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32:
      if constexpr ((types & kF32) != 0) f(float{});
      break;
    case DType::i32:
      if constexpr ((types & kI32) != 0) f(int32_t{});
      break;
    case DType::boolean:
      if constexpr ((types & kBool) != 0) f(uint8_t{});
      break;
    case DType::f16:
    case DType::bf16:
    case DType::i64: break;  // never: this backend holds none of these (Backend::dtypes())
  }
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T v) {
  CROSSFIRE_CUDA_FOR(i, n) out[i] = v;
}

// f64 -> i32 as cast defines it for f32: truncate toward zero, saturate, NaN -> 0.
__device__ __forceinline__ int32_t saturate_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483648.0) return INT32_MAX;
  if (v < -2147483648.0) return INT32_MIN;
  return int32_t(v);
}

template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  CROSSFIRE_CUDA_FOR(i, n) {
    // start + i*step in f64 with two roundings, exactly as on the host: the _rn intrinsics are never fused into
    // an FMA, whatever the compiler's contraction setting.
    double v = __dadd_rn(start, __dmul_rn(double(i), step));
    if constexpr (sizeof(T) == 4 && T(0.5) != T(0)) out[i] = __double2float_rn(v);
    else out[i] = saturate_i32(v);
  }
}

// A unary functor is default-built, or, when it says kFloatAttributes, built from the op's two float attributes.
template <class Op, class = void>
struct takes_float_attributes : std::false_type {};
template <class Op>
struct takes_float_attributes<Op, std::void_t<decltype(Op::kFloatAttributes)>> : std::true_type {};
template <class Op>
Op make_unary_op(const UnaryLaunch& l) {
  if constexpr (takes_float_attributes<Op>::value) return Op{l.a, l.b};
  else return Op{};
}

template <class Op, class T, class R>
__global__ void unary_kernel(const T* __restrict__ x, R* __restrict__ out, int64_t n, Op op) {
  CROSSFIRE_CUDA_FOR(i, n) out[i] = op(x[i]);
}

template <class Op, class T, class R>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, R* __restrict__ out, int64_t n,
                              Broadcast ix) {
  Op op;
  CROSSFIRE_CUDA_FOR(i, n) {
    out[i] = op(a[broadcast_offset(ix, 0, uint32_t(i))], b[broadcast_offset(ix, 1, uint32_t(i))]);
  }
}

template <class T>
__global__ void where_kernel(const uint8_t* __restrict__ cond, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out, int64_t n, Broadcast ix) {
  CROSSFIRE_CUDA_FOR(i, n) {
    uint32_t u = uint32_t(i);
    out[i] = cond[broadcast_offset(ix, 0, u)] ? a[broadcast_offset(ix, 1, u)] : b[broadcast_offset(ix, 2, u)];
  }
}

// cast's conversions (op table: f32 -> i32 truncates toward zero and saturates, NaN -> 0; x -> bool is x != 0).
template <class To>
struct Convert;
template <>
struct Convert<float> {
  __device__ float operator()(float x) const { return x; }
  __device__ float operator()(int32_t x) const { return __int2float_rn(x); }
  __device__ float operator()(uint8_t x) const { return x ? 1.0f : 0.0f; }
};
template <>
struct Convert<int32_t> {
  __device__ int32_t operator()(float x) const {
    if (is_nan(x)) return 0;
    if (x >= 2147483648.0f) return INT32_MAX;
    if (x < -2147483648.0f) return INT32_MIN;
    return __float2int_rz(x);
  }
  __device__ int32_t operator()(int32_t x) const { return x; }
  __device__ int32_t operator()(uint8_t x) const { return x; }
};
template <>
struct Convert<uint8_t> {
  template <class T>
  __device__ uint8_t operator()(T x) const { return x != T(0) ? 1 : 0; }
};

template <class From, class To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ out, int64_t n) {
  Convert<To> c;
  CROSSFIRE_CUDA_FOR(i, n) out[i] = c(x[i]);
}

}  // namespace

void fill(const FillLaunch& l) {
  if (l.elem_size == 1) fill_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<uint8_t*>(l.out), l.n,
                                                                              uint8_t(l.bits));
  else fill_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<uint32_t*>(l.out), l.n, l.bits);
}

void arange(const ArangeLaunch& l) {
  if (l.dtype == DType::f32)
    arange_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<float*>(l.out), l.n, l.start, l.step);
  else
    arange_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<int32_t*>(l.out), l.n, l.start, l.step);
}

template <class Op>
void unary(const UnaryLaunch& l) {
  with_type<Op::kTypes>(l.dtype, [&](auto t) {
    using T = decltype(t);
    const Op op = make_unary_op<Op>(l);
    using R = decltype(op(T{}));
    unary_kernel<Op, T, R><<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<const T*>(l.x),
                                                                     static_cast<R*>(l.out), l.n, op);
  });
}

template <class Op>
void binary(const BinaryLaunch& l) {
  with_type<Op::kTypes>(l.dtype, [&](auto t) {
    using T = decltype(t);
    using R = decltype(Op{}(T{}, T{}));
    binary_kernel<Op, T, R><<<grid_for(l.n), kThreads, 0, l.stream>>>(
        static_cast<const T*>(l.lhs), static_cast<const T*>(l.rhs), static_cast<R*>(l.out), l.n, l.ix);
  });
}

void where(const WhereLaunch& l) {
  if (l.elem_size == 1)
    where_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(l.cond, static_cast<const uint8_t*>(l.a),
                                                           static_cast<const uint8_t*>(l.b),
                                                           static_cast<uint8_t*>(l.out), l.n, l.ix);
  else
    where_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(l.cond, static_cast<const uint32_t*>(l.a),
                                                           static_cast<const uint32_t*>(l.b),
                                                           static_cast<uint32_t*>(l.out), l.n, l.ix);
}

void cast(const CastLaunch& l) {
  with_type<kF32 | kI32 | kBool>(l.from, [&](auto f) {
    with_type<kF32 | kI32 | kBool>(l.to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      cast_kernel<From, To><<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<const From*>(l.x),
                                                                      static_cast<To*>(l.out), l.n);
    });
  });
}

#define CROSSFIRE_CUDA_INSTANTIATE_UNARY(name, Tag) template void unary<fn::Tag>(const UnaryLaunch&);
#define CROSSFIRE_CUDA_INSTANTIATE_BINARY(name, Tag) template void binary<fn::Tag>(const BinaryLaunch&);
CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_INSTANTIATE_UNARY)
CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_INSTANTIATE_BINARY)

}  // namespace crossfire::cuda
