// SPDX-License-Identifier: Apache-2.0
// Elementwise family: creation fills, unary and binary ops (numpy broadcasting), where, cast. One functor per op;
// the launchers are templates over the functor, instantiated from the X-macro lists in launch.hpp, which also say
// which dtypes each functor takes. A functor computes on f32, i32, i64 or bool; an f16/bf16 element is widened to
// f32 for it and a float result rounded once back (load() and narrow() in common.cuh; Note [Half precision] in
// device.hpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace crossfire::cuda {

namespace fn {

// Integer arithmetic wraps: it is done in uint32_t / uint64_t, where overflow is defined, and converted back
// (modular in C++20).
__device__ __forceinline__ int32_t wrap(uint32_t v) { return int32_t(v); }
__device__ __forceinline__ int64_t wrap(uint64_t v) { return int64_t(v); }

// ---- unary ----
// neg and abs only touch the sign bit, as the host's do: PTX leaves the NaN that neg.f32 / abs.f32 return
// unspecified, and data movement of a NaN must keep its bits.
struct Neg {
  __device__ float operator()(float x) const { return __int_as_float(__float_as_int(x) ^ int(0x80000000u)); }
  __device__ int32_t operator()(int32_t x) const { return wrap(0u - uint32_t(x)); }
  __device__ int64_t operator()(int64_t x) const { return wrap(uint64_t(0) - uint64_t(x)); }
};
struct Abs {
  __device__ float operator()(float x) const { return __int_as_float(__float_as_int(x) & 0x7fffffff); }
  __device__ int32_t operator()(int32_t x) const { return x < 0 ? wrap(0u - uint32_t(x)) : x; }
  __device__ int64_t operator()(int64_t x) const { return x < 0 ? wrap(uint64_t(0) - uint64_t(x)) : x; }
};
struct Exp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct Log {
  __device__ float operator()(float x) const { return logf(x); }
};
struct Sqrt {
  __device__ float operator()(float x) const { return sqrtf(x); }  // IEEE-rounded: nvcc's default -prec-sqrt=true
};
struct Tanh {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct Sigmoid {
  // In f64, rounded once: well inside the transcendental bound for every x (f32 expf's error would not be).
  __device__ float operator()(float x) const { return float(1.0 / (1.0 + exp(-double(x)))); }
};
struct Relu {
  // Selected on the bits: written as a float select, nvcc turns it into max.NaN.f32, which returns the canonical
  // NaN 0x7fffffff instead of x's own NaN (seen on an H200), and the CPU backend keeps x's bits.
  __device__ float operator()(float x) const {
    const unsigned u = __float_as_uint(x);
    const bool keep = x > 0.0f || (u & 0x7fffffffu) > 0x7f800000u;
    return __uint_as_float(keep ? u : 0u);
  }
};
struct Clamp {
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
  __device__ uint8_t operator()(uint8_t x) const { return x ? 0 : 1; }
};

// ---- binary ----
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) + uint32_t(b)); }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap(uint64_t(a) + uint64_t(b)); }
};
struct Sub {
  __device__ float operator()(float a, float b) const { return a - b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) - uint32_t(b)); }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap(uint64_t(a) - uint64_t(b)); }
};
struct Mul {
  __device__ float operator()(float a, float b) const { return a * b; }
  __device__ int32_t operator()(int32_t a, int32_t b) const { return wrap(uint32_t(a) * uint32_t(b)); }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap(uint64_t(a) * uint64_t(b)); }
};
struct Div {
  __device__ float operator()(float a, float b) const { return a / b; }  // IEEE-rounded: -prec-div=true
};
struct Pow {
  __device__ float operator()(float a, float b) const { return powf(a, b); }
};
// NaN if either is NaN (the NaN operand itself). Equal operands (only +0 and -0 differ in bits) follow IEEE
// 754-2019 maximum/minimum: max(+0, -0) = +0 and min(+0, -0) = -0 in either order, as on the host.
struct Maximum {
  __device__ float operator()(float a, float b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
  }
  template <class I>  // i32, i64
  __device__ I operator()(I a, I b) const { return a > b ? a : b; }
};
struct Minimum {
  __device__ float operator()(float a, float b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
  }
  template <class I>  // i32, i64
  __device__ I operator()(I a, I b) const { return a < b ? a : b; }
};

// (Which dtypes each takes is launch.hpp's list; i64 compares the integers, never through a float.)
#define CROSSFIRE_CUDA_COMPARE(Tag, expr)                                      \
  struct Tag {                                                                 \
    template <class T>                                                         \
    __device__ uint8_t operator()(T a, T b) const { return (expr) ? 1 : 0; }   \
  };
CROSSFIRE_CUDA_COMPARE(Eq, a == b)
CROSSFIRE_CUDA_COMPARE(Ne, a != b)
CROSSFIRE_CUDA_COMPARE(Lt, a < b)
CROSSFIRE_CUDA_COMPARE(Le, a <= b)
CROSSFIRE_CUDA_COMPARE(Gt, a > b)
CROSSFIRE_CUDA_COMPARE(Ge, a >= b)
CROSSFIRE_CUDA_COMPARE(LogicalAnd, a && b)
CROSSFIRE_CUDA_COMPARE(LogicalOr, a || b)
#undef CROSSFIRE_CUDA_COMPARE

}  // namespace fn

namespace {

// Calls f(T{}) with the storage type of `dt`, for the dtypes in `types` only (launch.hpp's mask; the others cannot
// reach here: dispatch has already checked the dtype against the op table, and cuda_ops.cpp the mask against it).
template <unsigned types, class F>
void with_type(DType dt, F&& f) {
  if (!(types & dtype_bit(dt))) return;
  switch (dt) {
    case DType::f32:
      if constexpr ((types & dtype_bit(DType::f32)) != 0) f(float{});
      break;
    case DType::i32:
      if constexpr ((types & dtype_bit(DType::i32)) != 0) f(int32_t{});
      break;
    case DType::boolean:
      if constexpr ((types & dtype_bit(DType::boolean)) != 0) f(uint8_t{});
      break;
    case DType::f16:
      if constexpr ((types & dtype_bit(DType::f16)) != 0) f(__half{});
      break;
    case DType::bf16:
      if constexpr ((types & dtype_bit(DType::bf16)) != 0) f(__nv_bfloat16{});
      break;
    case DType::i64:
      if constexpr ((types & dtype_bit(DType::i64)) != 0) f(int64_t{});
      break;
  }
}

// What a functor's result is stored as, for storage type T: a float result of f16/bf16 inputs is rounded back to
// their dtype; anything else (a bool of a compare, an integer) is stored as computed.
template <class T, class C>
using stored_t = std::conditional_t<kIsHalf<T> && std::is_same_v<C, float>, T, C>;
template <class R, class C>
__device__ __forceinline__ R store(C v) {
  if constexpr (std::is_same_v<R, C>) return v;
  else return narrow<R>(v);
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T v) {
  CROSSFIRE_CUDA_FOR(i, n) out[i] = v;
}

template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  CROSSFIRE_CUDA_FOR(i, n) {
    // start + i*step in f64 with two roundings, exactly as on the host: the _rn intrinsics are never fused into
    // an FMA, whatever the compiler's contraction setting. Then one conversion to the dtype.
    out[i] = convert<T>(__dadd_rn(start, __dmul_rn(double(i), step)));
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
  CROSSFIRE_CUDA_FOR(i, n) out[i] = store<R>(op(load(x[i])));
}

template <class Op, class T, class R>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, R* __restrict__ out, int64_t n,
                              Broadcast ix) {
  Op op;
  CROSSFIRE_CUDA_FOR(i, n) {
    out[i] = store<R>(op(load(a[broadcast_offset(ix, 0, uint32_t(i))]), load(b[broadcast_offset(ix, 1, uint32_t(i))])));
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

// cast's conversions: convert() in common.cuh (f32 -> i32 truncates toward zero and saturates, NaN -> 0; x -> bool
// is x != 0; into a half rounds the exact value once).
template <class From, class To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ out, int64_t n) {
  CROSSFIRE_CUDA_FOR(i, n) out[i] = convert<To>(x[i]);
}

}  // namespace

void fill(const FillLaunch& l) {
  with_bits(l.elem_size, [&](auto t) {
    using T = decltype(t);
    fill_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<T*>(l.out), l.n, T(l.bits));
  });
}

void arange(const ArangeLaunch& l) {
  with_type<kNumericTypes>(l.dtype, [&](auto t) {
    using T = decltype(t);
    arange_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<T*>(l.out), l.n, l.start, l.step);
  });
}

template <class Op>
void unary(const UnaryLaunch& l) {
  with_type<kTypesOf<Op>>(l.dtype, [&](auto t) {
    using T = decltype(t);
    const Op op = make_unary_op<Op>(l);
    using R = stored_t<T, decltype(op(load(T{})))>;
    unary_kernel<Op, T, R><<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<const T*>(l.x),
                                                                     static_cast<R*>(l.out), l.n, op);
  });
}

template <class Op>
void binary(const BinaryLaunch& l) {
  with_type<kTypesOf<Op>>(l.dtype, [&](auto t) {
    using T = decltype(t);
    using R = stored_t<T, decltype(Op{}(load(T{}), load(T{})))>;
    binary_kernel<Op, T, R><<<grid_for(l.n), kThreads, 0, l.stream>>>(
        static_cast<const T*>(l.lhs), static_cast<const T*>(l.rhs), static_cast<R*>(l.out), l.n, l.ix);
  });
}

void where(const WhereLaunch& l) {
  with_bits(l.elem_size, [&](auto t) {
    using T = decltype(t);
    where_kernel<<<grid_for(l.n), kThreads, 0, l.stream>>>(l.cond, static_cast<const T*>(l.a),
                                                           static_cast<const T*>(l.b), static_cast<T*>(l.out), l.n,
                                                           l.ix);
  });
}

void cast(const CastLaunch& l) {
  with_type<kAnyTypes>(l.from, [&](auto f) {
    with_type<kAnyTypes>(l.to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      cast_kernel<From, To><<<grid_for(l.n), kThreads, 0, l.stream>>>(static_cast<const From*>(l.x),
                                                                      static_cast<To*>(l.out), l.n);
    });
  });
}

#define CROSSFIRE_CUDA_INSTANTIATE_UNARY(name, Tag, types) template void unary<fn::Tag>(const UnaryLaunch&);
#define CROSSFIRE_CUDA_INSTANTIATE_BINARY(name, Tag, types) template void binary<fn::Tag>(const BinaryLaunch&);
CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_INSTANTIATE_UNARY)
CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_INSTANTIATE_BINARY)

}  // namespace crossfire::cuda
