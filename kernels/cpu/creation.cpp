// SPDX-License-Identifier: Apache-2.0
// Creation kernels: zeros, ones, full, arange, rand, randn. (from_data is dispatch's own: it is a plain write.)
#include <cmath>
#include <numbers>

#include "kernel_support.hpp"
#include "philox.hpp"

namespace crossfire::cpu {
namespace {

// Fills the output with `value` converted to its dtype by crossfire's conversion rules (Note [Conversions never hit
// undefined behaviour]).
void fill(TensorImpl& out, double value) {
  visit_dtype(out.dtype, [&]<class T>(TypeTag<T>) { std::fill_n(data_of<T>(out), out.numel, convert<T>(value)); });
}

void zeros_kernel(const KernelCall& c) {
  if (c.out.nbytes) std::memset(c.out.data, 0, c.out.nbytes);  // 0 is all-zero bits in every dtype
}
void ones_kernel(const KernelCall& c) { fill(c.out, 1.0); }
void full_kernel(const KernelCall& c) { fill(c.out, c.args[param_of("full", "value")].f); }

void arange_kernel(const KernelCall& c) {
  const double start = c.args[param_of("arange", "start")].f;
  const double step = c.args[param_of("arange", "step")].f;
  visit_dtype(c.out.dtype, [&]<class T>(TypeTag<T>) {
    T* o = data_of<T>(c.out);
    for (int64_t i = 0; i < c.out.numel; ++i) o[i] = convert<T>(start + double(i) * step);
  });
}

// Calls f(i, word) for the first n words of the Philox stream for `seed`, one block at a time.
template <class F>
void for_each_word(int64_t seed, int64_t n, F&& f) {
  const philox::Key key = philox::key_of(seed);
  for (int64_t b = 0; b * 4 < n; ++b) {
    const philox::Counter w = philox::stream_block(key, uint64_t(b));
    for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) f(b * 4 + j, w[size_t(j)]);
  }
}

// Calls f(TypeTag<T>) for the output's float dtype (the output rule admits only f32, f16 and bf16).
template <class F>
void visit_float(DType d, F&& f) {
  visit_dtype(d, [&]<class T>(TypeTag<T> tag) {
    if constexpr (std::is_same_v<T, float> || kIsHalf<T>) f(tag);
  });
}

// The top p bits of each word, p the dtype's precision: exact in the dtype and below 1 (op table, `rand`).
void rand_kernel(const KernelCall& c) {
  visit_float(c.out.dtype, [&]<class T>(TypeTag<T>) {
    T* o = data_of<T>(c.out);
    if constexpr (std::is_same_v<T, float>) {
      for_each_word(c.args[param_of("rand", "seed")].i, c.out.numel,
                    [&](int64_t i, uint32_t w) { o[i] = philox::uniform_f32(w); });
    } else {
      constexpr int p = std::is_same_v<T, f16> ? 11 : 8;
      for_each_word(c.args[param_of("rand", "seed")].i, c.out.numel,
                    [&](int64_t i, uint32_t w) { o[i] = from_f32<T>(float(w >> (32 - p)) * (1.0f / float(1u << p))); });
    }
  });
}

// Box-Muller on word pairs (2j, 2j+1), in f64 and rounded once to the dtype (op table, `randn`).
void randn_kernel(const KernelCall& c) {
  visit_float(c.out.dtype, [&]<class T>(TypeTag<T>) {
    T* o = data_of<T>(c.out);
    const int64_t n = c.out.numel;
    const int64_t pairs_end = n + (n & 1);  // an odd last element still draws its pair's second word
    uint32_t first = 0;
    for_each_word(c.args[param_of("randn", "seed")].i, pairs_end, [&](int64_t i, uint32_t w) {
      if ((i & 1) == 0) {
        first = w;
        return;
      }
      const double u1 = (double(first >> 8) + 0.5) * 0x1p-24;
      const double u2 = double(w >> 8) * 0x1p-24;
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double theta = 2.0 * std::numbers::pi * u2;
      o[i - 1] = convert<T>(r * std::cos(theta));
      if (i < n) o[i] = convert<T>(r * std::sin(theta));
    });
  });
}

}  // namespace

void register_creation_kernels(CpuBackend& b) {
  b.set_kernel("zeros", zeros_kernel);
  b.set_kernel("ones", ones_kernel);
  b.set_kernel("full", full_kernel);
  b.set_kernel("arange", arange_kernel);
  b.set_kernel("rand", rand_kernel);
  b.set_kernel("randn", randn_kernel);
}

}  // namespace crossfire::cpu
