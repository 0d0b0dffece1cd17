// SPDX-License-Identifier: Apache-2.0
// What every CPU kernel family shares: typed access to tensor data, dtype -> C++ type dispatch, crossfire's value
// conversion rules (cast, full, arange), and strided iteration (Note [Strided iteration]) used by the elementwise
// driver and the data-movement kernels. Internal to kernels/cpu.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include <Eigen/Core>

#include "cpu_backend.hpp"
#include "crossfire/half_bits.hpp"

namespace crossfire::cpu {

// ---- registration: one function per family, called by register_kernels() -----------------------------------------
void register_creation_kernels(CpuBackend& b);
void register_elementwise_kernels(CpuBackend& b);
void register_reduce_kernels(CpuBackend& b);
void register_linalg_kernels(CpuBackend& b);
void register_layout_kernels(CpuBackend& b);

// The position of parameter `param` of op `op` in kOpTable, at compile time (a misspelt name fails to compile), so
// kernels read their arguments by name without a run-time lookup: `c.args[param_of("sum", "axis")]`.
consteval int param_of(std::string_view op, std::string_view param) {
  const int i = kOpTable[op_id(op)].param_index(param);
  if (i < 0) throw "crossfire::cpu::param_of: no such parameter";
  return i;
}

// ---- data and dtypes ---------------------------------------------------------------------------------------------
// bool is stored as one byte holding 0 or 1 and handled as uint8_t.
template <class T>
inline T* data_of(const TensorImpl& t) {
  return static_cast<T*>(t.data);
}
inline const TensorImpl& impl_of(const KernelCall& c, int param) { return *c.tensor(param).impl(); }

template <class T>
struct TypeTag {
  using type = T;
};
// f16 and bf16 are stored and converted as Eigen's half and bfloat16 (whose float -> half conversions round to
// nearest, ties to even, and overflow to infinity: Note [Half precision] in device.hpp).
using f16 = Eigen::half;
using bf16 = Eigen::bfloat16;
template <class T>
inline constexpr bool kIsHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// Note [Half conversions without branches]: the scalar roundings are the core's (crossfire/half_bits.hpp).
// The value of a stored half as f32 (exact), and an f32 rounded to a half (T = f16 or bf16).
inline float to_f32(f16 v) { return half_bits_to_f32(std::bit_cast<uint16_t>(v)); }
inline float to_f32(bf16 v) { return bf16_bits_to_f32(std::bit_cast<uint16_t>(v)); }
template <class T>
inline T from_f32(float x) {
  if constexpr (std::is_same_v<T, f16>) return std::bit_cast<f16>(f32_to_half_bits(x));
  else return std::bit_cast<bf16>(f32_to_bf16_bits(x));
}

// n contiguous elements at once (half.cpp): the same results as the scalar functions above, element for element
// (a NaN's payload aside), vectorised where the CPU allows.
void widen_block(const f16* in, float* out, int64_t n);
void widen_block(const bf16* in, float* out, int64_t n);
void narrow_block(const float* in, f16* out, int64_t n);
void narrow_block(const float* in, bf16* out, int64_t n);

// Calls f(TypeTag<T>{}) with T the C++ type that stores dtype `d`.
template <class F>
inline decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    case DType::f16: return f(TypeTag<f16>{});
    case DType::bf16: return f(TypeTag<bf16>{});
    case DType::boolean: break;
  }
  return f(TypeTag<uint8_t>{});
}

// A valid axis (dispatch's rules checked it) normalised to [0, rank).

// ---- conversions (op table: cast, full, arange) ------------------------------------------------------------------
// float -> i32/i64 is crossfire::float_to_int (device.hpp, Note [Conversions never hit undefined behaviour]), shared
// with every backend's host code.
template <class F>
inline int32_t float_to_i32(F x) {
  return float_to_int<int32_t>(x);
}

// Note [i64 to a half, rounded once]
// An i64 past 2^24 is not an f32, and past 2^53 not an f64, so converting it through either and then to f16/bf16
// rounds twice (2^60 + 2^52 + 1 -> f64 2^60 + 2^52, a bf16 tie -> 2^60; once-rounded it is 2^60 + 2^53). Cut to 24
// significant bits rounded to odd (the dropped bits OR-ed into the last kept one) instead: f32 then holds it exactly,
// and rounding that to the at most 11 bits of a half is the once-rounded result (24 >= 11 + 2).
inline float i64_to_f32_odd(int64_t x) {
  const uint64_t mag = x < 0 ? 0 - uint64_t(x) : uint64_t(x);
  if (mag < (uint64_t(1) << 24)) return float(x);
  const int shift = 64 - std::countl_zero(mag) - 24;
  const uint64_t kept = (mag >> shift) | uint64_t((mag & ((uint64_t(1) << shift) - 1)) != 0);
  const float f = std::ldexp(float(kept), shift);  // exact: 24 bits, an exponent below 64
  return x < 0 ? -f : f;
}

// f64 -> f32 rounded to odd: crossfire/half_bits.hpp (shared with the Vulkan backend's host code).

// Converts one value of type S to type D (S, D in {float, f16, bf16, int32_t, int64_t, uint8_t (bool), and double as a
// source}). Every conversion to f16/bf16 is one rounding to nearest, ties to even, of the exact source value.
template <class D, class S>
inline D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (kIsHalf<S>) {
    return convert<D>(to_f32(x));  // exact: every f16/bf16 value is an f32 value
  } else if constexpr (kIsHalf<D>) {
    if constexpr (std::is_same_v<S, float>) return from_f32<D>(x);
    else if constexpr (std::is_same_v<S, int64_t>) return from_f32<D>(i64_to_f32_odd(x));
    else return from_f32<D>(f64_to_f32_odd(double(x)));  // double, i32 (exact in double), bool
  } else if constexpr (std::is_same_v<D, uint8_t>) {
    return uint8_t(x != S(0));
  } else if constexpr (std::is_same_v<D, int32_t> || std::is_same_v<D, int64_t>) {
    if constexpr (std::is_floating_point_v<S>) return float_to_int<D>(x);
    else return D(x);  // widening, or i64 -> i32: the low 32 bits (modular since C++20)
  } else if constexpr (std::is_same_v<S, double>) {
    return round_to_f32(x);
  } else {
    return float(x);  // i32, i64 -> f32 round once to nearest (the default rounding mode); bool -> 0 or 1
  }
}

// Note [Half precision on the CPU]
// The CPU backend computes every f16/bf16 op in f32 and rounds once (Note [Half precision] in device.hpp).
// Elementwise ops do it per element, on blocks widened to f32 and narrowed back (elementwise.cpp's map_half, with
// the block conversions of Note [Half conversions without branches]); data movement copies 2-byte elements; the ops that compute
// over many elements (sum, mean, max, argmax, softmax, matmul, conv2d, fold) run their f32 kernel through
// widened<>: every f16/bf16 tensor argument is widened (exactly) into an f32 scratch tensor, the f32 kernel writes
// an f32 scratch result, and that is rounded once into the output. The scratch tensors belong to no device and
// touch no backend counter.
bool touches_half(const KernelCall& c);
void run_widened(KernelFn f32_kernel, const KernelCall& c);
template <KernelFn F32>
void widened(const KernelCall& c) {
  if (touches_half(c)) [[unlikely]]
    run_widened(F32, c);
  else
    F32(c);
}

// ---- strided iteration ---------------------------------------------------------------------------------------------
// Note [Strided iteration]
// Every kernel that reads inputs in a different order than it writes its output (broadcasting, permute, slice,
// expand) describes the read as N operands, each with a base offset and one stride per output dimension (0 for a
// broadcast dimension), over a contiguous row-major output. coalesce() drops size-1 dimensions and merges adjacent
// dimensions that are contiguous for every operand, so [m, n] + [n] is one 2-D loop and a same-shape add is one 1-D
// loop. for_each_row() then walks all but the innermost dimension with a stack counter and hands each innermost row
// to the caller, which picks a loop specialised for that row's strides. Everything lives on the stack: no heap.
template <int N>
struct StridedPlan {
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<std::array<int64_t, kMaxRank>, N> strides{};  // per operand, in elements
  std::array<int64_t, N> base{};                           // per operand, in elements

  void set_output(const Shape& out) {
    rank = out.rank();
    for (int i = 0; i < rank; ++i) dims[size_t(i)] = out[i];
  }
  // Operand k is a contiguous tensor of shape `in` broadcast (numpy rules) to the output shape.
  void set_broadcast(int k, const Shape& in) {
    const int off = rank - in.rank();
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) {
      const int j = i - off;
      if (j < 0) {
        strides[size_t(k)][size_t(i)] = 0;
      } else {
        strides[size_t(k)][size_t(i)] = in[j] == 1 ? 0 : s;
        s *= in[j];
      }
    }
  }
  void coalesce() {
    int r = 0;
    for (int i = 0; i < rank; ++i) {
      const size_t ui = size_t(i);
      if (dims[ui] == 1) continue;
      if (r > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k) merge &= strides[size_t(k)][size_t(r - 1)] == strides[size_t(k)][ui] * dims[ui];
        if (merge) {
          dims[size_t(r - 1)] *= dims[ui];
          for (int k = 0; k < N; ++k) strides[size_t(k)][size_t(r - 1)] = strides[size_t(k)][ui];
          continue;
        }
      }
      dims[size_t(r)] = dims[ui];
      for (int k = 0; k < N; ++k) strides[size_t(k)][size_t(r)] = strides[size_t(k)][ui];
      ++r;
    }
    if (r == 0) {  // every dimension was 1: a single element
      dims[0] = 1;
      for (int k = 0; k < N; ++k) strides[size_t(k)][0] = 0;
      r = 1;
    }
    rank = r;
  }
  int64_t inner_stride(int k) const { return strides[size_t(k)][size_t(rank - 1)]; }

  // row(out_offset, operand_offsets, length) for every innermost row, in output order. Call after coalesce().
  template <class Row>
  void for_each_row(Row&& row) const {
    const int outer = rank - 1;
    const int64_t len = dims[size_t(outer)];
    int64_t rows = 1;
    for (int d = 0; d < outer; ++d) rows *= dims[size_t(d)];
    std::array<int64_t, kMaxRank> idx{};
    std::array<int64_t, N> off = base;
    int64_t out_off = 0;
    for (int64_t r = 0; r < rows; ++r, out_off += len) {
      row(out_off, off, len);
      for (int d = outer - 1; d >= 0; --d) {
        const size_t ud = size_t(d);
        if (++idx[ud] < dims[ud]) {
          for (int k = 0; k < N; ++k) off[size_t(k)] += strides[size_t(k)][ud];
          break;
        }
        idx[ud] = 0;
        for (int k = 0; k < N; ++k) off[size_t(k)] -= strides[size_t(k)][ud] * (dims[ud] - 1);
      }
    }
  }
};

// Copies a one-operand plan's elements (T: an unsigned type of the element's size) into a contiguous output.
template <class T>
void gather_copy(const StridedPlan<1>& plan, const T* src, T* dst) {
  const int64_t s = plan.inner_stride(0);
  plan.for_each_row([&](int64_t o, const std::array<int64_t, 1>& off, int64_t len) {
    const T* in = src + off[0];
    T* out = dst + o;
    if (s == 1) {
      std::memcpy(out, in, size_t(len) * sizeof(T));
    } else if (s == 0) {
      std::fill_n(out, len, *in);
    } else {
      for (int64_t i = 0; i < len; ++i) out[i] = in[i * s];
    }
  });
}

// Calls f(TypeTag<U>{}) with U an unsigned integer of dtype d's size: data movement never looks at values.
template <class F>
inline void visit_element_size(DType d, F&& f) {
  if (dtype_size(d) == 1) f(TypeTag<uint8_t>{});
  else if (dtype_size(d) == 2) f(TypeTag<uint16_t>{});
  else if (dtype_size(d) == 4) f(TypeTag<uint32_t>{});
  else f(TypeTag<uint64_t>{});
}

}  // namespace crossfire::cpu
