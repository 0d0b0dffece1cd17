// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels: unary, binary (numpy broadcasting), compare, logic, where and cast. One driver,
// map_elementwise(), serves them all; each op is a small functor whose constraints say which dtypes it takes.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <tuple>
#include <utility>

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

// ---- the driver ----------------------------------------------------------------------------------------------------
// Each input either advances with the output (stride 1) or stays on one element (stride 0, a broadcast scalar or
// row); bit k of Mask says input k stays. Instantiated for every mask, so the common cases (same shape, tensor op
// scalar, matrix op row) are plain vectorisable loops.
template <unsigned Mask, class Out, class F, class Ptrs, size_t... I>
inline void unit_or_fixed_loop(Out* o, int64_t n, const F& f, const Ptrs& p, std::index_sequence<I...>) {
  for (int64_t i = 0; i < n; ++i) o[i] = Out(f(std::get<I>(p)[((Mask >> I) & 1u) ? 0 : i]...));
}

template <class Out, class F, class Ptrs, size_t... I, size_t... M>
inline void dispatch_mask(unsigned mask, Out* o, int64_t n, const F& f, const Ptrs& p, std::index_sequence<I...> is,
                          std::index_sequence<M...>) {
  (void)((mask == M ? (unit_or_fixed_loop<unsigned(M)>(o, n, f, p, is), true) : false) || ...);
}

template <class>
using ImplOf = const TensorImpl&;  // one input tensor per element type in In...

// out[i] = f(in_0[i'], in_1[i'], ...) with every input broadcast to the output's shape. Out and In... are the
// storage types of the output and the inputs; f takes In... and returns something convertible to Out.
template <class Out, class... In, class F>
void map_elementwise(TensorImpl& out, const F& f, ImplOf<In>... in) {
  constexpr int N = int(sizeof...(In));
  const int64_t n = out.numel;
  if (n == 0) return;
  Out* o = data_of<Out>(out);
  using Seq = std::index_sequence_for<In...>;
  using Masks = std::make_index_sequence<size_t(1) << N>;

  // Fast path, no plan: every input is the output's size or a single element.
  if (((in.numel == n || in.numel == 1) && ...)) {
    const std::tuple<const In*...> p{data_of<const In>(in)...};
    unsigned mask = 0, bit = 1;
    ((mask |= (in.numel == n ? 0u : bit), bit <<= 1), ...);
    if (n == 1) mask = 0;
    dispatch_mask(mask, o, n, f, p, Seq{}, Masks{});
    return;
  }

  StridedPlan<N> plan;
  plan.set_output(out.shape);
  {
    int k = 0;
    (plan.set_broadcast(k++, in.shape), ...);
  }
  plan.coalesce();
  // After coalescing, an input's innermost stride is 1 or 0: the innermost output dim is one the input either has
  // in full (and then every later dim of the input is 1, so its stride is 1) or broadcasts (stride 0).
  unsigned mask = 0;
  for (int k = 0; k < N; ++k)
    if (plan.inner_stride(k) == 0) mask |= 1u << k;
  const std::tuple<const In*...> base{data_of<const In>(in)...};
  plan.for_each_row([&](int64_t out_off, const std::array<int64_t, size_t(N)>& off, int64_t len) {
    auto p = [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<const In*...>{(std::get<I>(base) + off[I])...};
    }(Seq{});
    dispatch_mask(mask, o + out_off, len, f, p, Seq{}, Masks{});
  });
}

// f16/bf16 (Note [Half precision on the CPU] in kernel_support.hpp): f is the op's f32 case, Out is T (arithmetic:
// rounded once to T) or uint8_t (compare: a bool). When every input is the output's size or one element, blocks of
// each input are widened into f32 (widen_block), f runs over them through the f32 driver's loops, and the block is
// narrowed into the output (narrow_block): the conversions vectorise, and so does f. Other layouts (a broadcast
// row) convert element by element, with the same results.
template <size_t>
using F32Ptr = const float*;
constexpr int64_t kHalfBlock = 1024;

template <class T, class Out, class F, class... In>
void map_half(TensorImpl& out, const F& f, ImplOf<In>... in) {
  constexpr size_t N = sizeof...(In);
  const int64_t n = out.numel;
  if (n == 0) return;
  if (!((in.numel == n || in.numel == 1) && ...)) {
    if constexpr (std::is_same_v<Out, T>)
      map_elementwise<T, In...>(out, [&](In... v) { return from_f32<T>(f(to_f32(v)...)); }, in...);
    else
      map_elementwise<Out, In...>(out, [&](In... v) { return f(to_f32(v)...); }, in...);
    return;
  }
  const std::array<const TensorImpl*, N> ins{&in...};
  alignas(64) float buf[N][kHalfBlock];
  alignas(64) float res[kHalfBlock];
  unsigned mask = 0;
  for (size_t k = 0; k < N; ++k)
    if (n > 1 && ins[k]->numel == 1) {
      mask |= 1u << k;
      buf[k][0] = to_f32(data_of<const T>(*ins[k])[0]);
    }
  using Seq = std::make_index_sequence<N>;
  const auto p = [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<F32Ptr<I>...>{buf[I]...}; }(Seq{});
  for (int64_t start = 0; start < n; start += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, n - start);
    for (size_t k = 0; k < N; ++k)
      if (!((mask >> k) & 1u)) widen_block(data_of<const T>(*ins[k]) + start, buf[k], len);
    if constexpr (std::is_same_v<Out, T>) {
      dispatch_mask(mask, res, len, f, p, Seq{}, std::make_index_sequence<size_t(1) << N>{});
      narrow_block(res, data_of<T>(out) + start, len);
    } else {
      dispatch_mask(mask, data_of<Out>(out) + start, len, f, p, Seq{}, std::make_index_sequence<size_t(1) << N>{});
    }
  }
}

// ---- functors ------------------------------------------------------------------------------------------------------
template <class T>
concept Integer = std::same_as<T, int32_t> || std::same_as<T, int64_t>;  // i32, i64
template <class T>
concept Numeric = std::same_as<T, float> || Integer<T>;
template <class T>
concept AnyDType = Numeric<T> || std::same_as<T, uint8_t>;

// Integer arithmetic wraps (two's complement), computed in the unsigned type of the same width so that overflow is
// defined (the conversion back is modular since C++20).
template <Integer I>
using U = std::make_unsigned_t<I>;

struct Neg {
  float operator()(float x) const { return -x; }
  template <Integer I>
  I operator()(I x) const { return I(U<I>(0) - U<I>(x)); }
};
struct Abs {
  float operator()(float x) const { return std::fabs(x); }
  template <Integer I>
  I operator()(I x) const { return x < 0 ? I(U<I>(0) - U<I>(x)) : x; }  // abs(INT_MIN) = INT_MIN
};
struct Exp {
  float operator()(float x) const { return std::exp(x); }
};
struct Log {
  float operator()(float x) const { return std::log(x); }
};
struct Sqrt {
  float operator()(float x) const { return std::sqrt(x); }
};
struct Tanh {
  float operator()(float x) const { return std::tanh(x); }
};
struct Sigmoid {  // in f64 and rounded once: well inside the transcendental bound for every x
  float operator()(float x) const { return float(1.0 / (1.0 + std::exp(-double(x)))); }
};
struct Relu {
  float operator()(float x) const { return x > 0 || x != x ? x : 0.0f; }
};
struct LogicalNot {
  uint8_t operator()(uint8_t x) const { return uint8_t(x == 0); }
};

struct Add {
  float operator()(float a, float b) const { return a + b; }
  template <Integer I>
  I operator()(I a, I b) const { return I(U<I>(a) + U<I>(b)); }
};
struct Sub {
  float operator()(float a, float b) const { return a - b; }
  template <Integer I>
  I operator()(I a, I b) const { return I(U<I>(a) - U<I>(b)); }
};
struct Mul {
  float operator()(float a, float b) const { return a * b; }
  template <Integer I>
  I operator()(I a, I b) const { return I(U<I>(a) * U<I>(b)); }
};
struct Div {
  float operator()(float a, float b) const { return a / b; }
};
struct Pow {
  float operator()(float a, float b) const { return std::pow(a, b); }
};
// maximum/minimum propagate NaN. Equal values (only +0 and -0 differ in bits) follow IEEE 754-2019
// maximum/minimum: max(+0, -0) = +0, min(+0, -0) = -0, in either order, so the result is bitwise well defined.
struct Maximum {
  float operator()(float a, float b) const {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return std::signbit(a) ? b : a;
    return a > b ? a : b;
  }
  template <Integer I>
  I operator()(I a, I b) const { return a > b ? a : b; }
};
struct Minimum {
  float operator()(float a, float b) const {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return std::signbit(a) ? a : b;
    return a < b ? a : b;
  }
  template <Integer I>
  I operator()(I a, I b) const { return a < b ? a : b; }
};

struct Eq {
  template <AnyDType T>
  bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  template <AnyDType T>
  bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  template <Numeric T>
  bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  template <Numeric T>
  bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  template <Numeric T>
  bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  template <Numeric T>
  bool operator()(T a, T b) const { return a >= b; }
};
struct LogicalAnd {
  template <std::same_as<uint8_t> T>
  bool operator()(T a, T b) const { return a != 0 && b != 0; }
};
struct LogicalOr {
  template <std::same_as<uint8_t> T>
  bool operator()(T a, T b) const { return a != 0 || b != 0; }
};

// ---- kernels -------------------------------------------------------------------------------------------------------
// The arithmetic functors overload exactly the types they accept and return that type; the predicates are templates
// constrained to theirs. So "invocable and returns T" tells which dtypes to instantiate (a call through an implicit
// conversion returns another type and is not instantiated); dispatch has already rejected the others.
template <class Op, class... T>
constexpr bool returns_same() {
  using First = std::tuple_element_t<0, std::tuple<T...>>;
  if constexpr (std::is_invocable_v<Op, T...>) return std::is_same_v<std::invoke_result_t<Op, T...>, First>;
  else return false;
}

// f16/bf16: the functor's f32 case on the widened values, rounded once to the dtype (map_half).
template <class Op>
void unary_with(const KernelCall& c, const Op& op) {
  const TensorImpl& x = impl_of(c, 0);
  visit_dtype(x.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (returns_same<Op, T>())
      map_elementwise<T, T>(c.out, op, x);
    else if constexpr (kIsHalf<T> && returns_same<Op, float>())
      map_half<T, T, Op, T>(c.out, op, x);
  });
}
template <class Op>
void unary_kernel(const KernelCall& c) {
  unary_with(c, Op{});
}

template <class Op>
void binary_kernel(const KernelCall& c) {  // same-dtype arithmetic: the output has the inputs' dtype
  const TensorImpl &a = impl_of(c, 0), &b = impl_of(c, 1);
  visit_dtype(a.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (returns_same<Op, T, T>())
      map_elementwise<T, T, T>(c.out, Op{}, a, b);
    else if constexpr (kIsHalf<T> && returns_same<Op, float, float>())
      map_half<T, T, Op, T, T>(c.out, Op{}, a, b);
  });
}

template <class Op>
void predicate_kernel(const KernelCall& c) {  // compare and logic: bool out
  const TensorImpl &a = impl_of(c, 0), &b = impl_of(c, 1);
  visit_dtype(a.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (std::is_invocable_v<Op, T, T>)
      map_elementwise<uint8_t, T, T>(c.out, Op{}, a, b);
    else if constexpr (kIsHalf<T> && std::is_invocable_v<Op, float, float>)
      map_half<T, uint8_t, Op, T, T>(c.out, Op{}, a, b);
  });
}

void where_kernel(const KernelCall& c) {
  const TensorImpl &cond = impl_of(c, 0), &a = impl_of(c, 1), &b = impl_of(c, 2);
  visit_element_size(a.dtype, [&]<class T>(TypeTag<T>) {  // a selection moves bits: any type of the right size
    map_elementwise<T, uint8_t, T, T>(c.out, [](uint8_t k, T x, T y) { return k ? x : y; }, cond, a, b);
  });
}

// clamp (op table): min and max rounded to f32 as `full` rounds its value; x itself where min <= x <= max.
struct Clamp {
  float lo, hi;
  float operator()(float x) const {
    if (lo != lo || hi != hi) return std::numeric_limits<float>::quiet_NaN();
    if (x < lo) x = lo;  // then against max, so that min > max gives max
    if (x > hi) x = hi;
    return x;  // NaN, and x in range, keep their bits
  }
};
void clamp_kernel(const KernelCall& c) { unary_with(c, Clamp{c.float_attr_f32(0), c.float_attr_f32(1)}); }

void cast_kernel(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  if (x.dtype == c.out.dtype) {
    if (x.nbytes) std::memcpy(c.out.data, x.data, x.nbytes);
    return;
  }
  visit_dtype(x.dtype, [&]<class S>(TypeTag<S>) {
    visit_dtype(c.out.dtype, [&]<class D>(TypeTag<D>) {
      map_elementwise<D, S>(c.out, [](S v) { return convert<D>(v); }, x);
    });
  });
}

}  // namespace

void register_elementwise_kernels(CpuBackend& b) {
  b.set_kernel("neg", unary_kernel<Neg>);
  b.set_kernel("abs", unary_kernel<Abs>);
  b.set_kernel("exp", unary_kernel<Exp>);
  b.set_kernel("log", unary_kernel<Log>);
  b.set_kernel("sqrt", unary_kernel<Sqrt>);
  b.set_kernel("tanh", unary_kernel<Tanh>);
  b.set_kernel("sigmoid", unary_kernel<Sigmoid>);
  b.set_kernel("relu", unary_kernel<Relu>);
  b.set_kernel("clamp", clamp_kernel);
  b.set_kernel("logical_not", unary_kernel<LogicalNot>);

  b.set_kernel("add", binary_kernel<Add>);
  b.set_kernel("sub", binary_kernel<Sub>);
  b.set_kernel("mul", binary_kernel<Mul>);
  b.set_kernel("div", binary_kernel<Div>);
  b.set_kernel("pow", binary_kernel<Pow>);
  b.set_kernel("maximum", binary_kernel<Maximum>);
  b.set_kernel("minimum", binary_kernel<Minimum>);

  b.set_kernel("eq", predicate_kernel<Eq>);
  b.set_kernel("ne", predicate_kernel<Ne>);
  b.set_kernel("lt", predicate_kernel<Lt>);
  b.set_kernel("le", predicate_kernel<Le>);
  b.set_kernel("gt", predicate_kernel<Gt>);
  b.set_kernel("ge", predicate_kernel<Ge>);
  b.set_kernel("logical_and", predicate_kernel<LogicalAnd>);
  b.set_kernel("logical_or", predicate_kernel<LogicalOr>);

  b.set_kernel("where", where_kernel);
  b.set_kernel("cast", cast_kernel);
}

}  // namespace crossfire::cpu
