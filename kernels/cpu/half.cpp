// SPDX-License-Identifier: Apache-2.0
// f16/bf16 through the f32 kernels (Note [Half precision on the CPU] in kernel_support.hpp).
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

// The owner of scratch tensors: plain aligned host blocks that no device holds and no counter sees. Only
// allocate() and release() are ever called (by widen() and by the scratch handles' release).
class Scratch final : public Backend {
 public:
  Scratch() { set_dtypes(kAnyDType); }
  std::string unavailable_reason() const override { return "scratch memory of the CPU backend's kernels"; }
  int device_count() const override { return 0; }
  DeviceInfo device_info(int) const override { return {}; }
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view) override {
    auto impl = std::make_unique<TensorImpl>(device, dtype, shape, this);
    impl->data = ::operator new(std::max<size_t>(impl->nbytes, 1), std::align_val_t(64));
    return impl.release();
  }
  void release(TensorImpl* t) override {
    ::operator delete(t->data, std::align_val_t(64));
    delete t;
  }
  void write(TensorImpl&, const void*) override {}
  void read(const TensorImpl&, void*) override {}
  void copy(const TensorImpl&, TensorImpl&) override {}
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

// An f32 copy of an f16/bf16 tensor (exact).
Tensor widen(const TensorImpl& x) {
  Tensor w = Tensor::adopt_new(scratch().allocate(x.device, DType::f32, x.shape, "widen"));
  float* o = data_of<float>(*w.impl());
  visit_dtype(x.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (kIsHalf<T>) widen_block(data_of<const T>(x), o, x.numel);
  });
  return w;
}

// ---- block conversions (Note [Half conversions without branches]) ------------------------------------------------
// On x86-64 with AVX2 and F16C (asked of the CPU once, at run time: the build targets baseline x86-64), eight
// elements at a time: vcvtph2ps / vcvtps2ph for f16 (rounding to nearest even; a NaN keeps its sign and becomes
// quiet), shifts and an add for bf16 (the same rounding as f32_to_bf16_bits). Elsewhere, the scalar functions.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CROSSFIRE_HALF_SIMD 1
#define CROSSFIRE_SIMD_TARGET __attribute__((target("avx2,f16c")))

bool has_simd() {
  // (clang 14's __builtin_cpu_supports does not know "f16c": CPUID leaf 1, ECX bit 29, says it. "avx2" also checks
  // that the OS saves the AVX registers.)
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return yes;
}

CROSSFIRE_SIMD_TARGET void widen_f16_simd(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = half_bits_to_f32(in[i]);
}
CROSSFIRE_SIMD_TARGET void narrow_f16_simd(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = f32_to_half_bits(in[i]);
}
CROSSFIRE_SIMD_TARGET void widen_bf16_simd(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
}
CROSSFIRE_SIMD_TARGET void narrow_bf16_simd(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), qnan = _mm256_set1_epi32(0x7fc0),
                sign = _mm256_set1_epi32(0x8000);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(hi, sign), qnan);
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);  // every lane is <= 0xffff: packs losslessly
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0b1000);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = f32_to_bf16_bits(in[i]);
}
#endif

// A half's storage as its 16-bit pattern (f16 and bf16 are 2-byte wrappers of it).
template <class T>
const uint16_t* bits_of(const T* p) { return reinterpret_cast<const uint16_t*>(p); }
template <class T>
uint16_t* bits_of(T* p) { return reinterpret_cast<uint16_t*>(p); }

}  // namespace

void widen_block(const f16* in, float* out, int64_t n) {
#ifdef CROSSFIRE_HALF_SIMD
  if (has_simd()) return widen_f16_simd(bits_of(in), out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_f32(bits_of(in)[i]);
}
void widen_block(const bf16* in, float* out, int64_t n) {
#ifdef CROSSFIRE_HALF_SIMD
  if (has_simd()) return widen_bf16_simd(bits_of(in), out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(bits_of(in)[i]);
}
void narrow_block(const float* in, f16* out, int64_t n) {
#ifdef CROSSFIRE_HALF_SIMD
  if (has_simd()) return narrow_f16_simd(in, bits_of(out), n);
#endif
  for (int64_t i = 0; i < n; ++i) bits_of(out)[i] = f32_to_half_bits(in[i]);
}
void narrow_block(const float* in, bf16* out, int64_t n) {
#ifdef CROSSFIRE_HALF_SIMD
  if (has_simd()) return narrow_bf16_simd(in, bits_of(out), n);
#endif
  for (int64_t i = 0; i < n; ++i) bits_of(out)[i] = f32_to_bf16_bits(in[i]);
}

bool touches_half(const KernelCall& c) {
  if (is_half(c.out.dtype)) return true;
  for (int k = 0; k < c.op.num_tensor_params; ++k) {
    const Arg& a = c.args[c.op.tensor_params[size_t(k)]];
    if (a.role != ParamRole::tensor_list && a.present && is_half(a.tensor->dtype())) return true;
  }
  return false;
}

void run_widened(KernelFn f32_kernel, const KernelCall& c) {
  ArgPack args = c.args;
  std::array<Tensor, kMaxParams> wide;
  for (int i = 0; i < c.op.num_params; ++i) {
    Arg& a = args.args[size_t(i)];
    if ((a.role == ParamRole::tensor || (a.role == ParamRole::optional_tensor && a.present)) &&
        is_half(a.tensor->dtype())) {
      wide[size_t(i)] = widen(*a.tensor->impl());
      a.tensor = &wide[size_t(i)];
    }
  }
  if (!is_half(c.out.dtype)) {
    f32_kernel(KernelCall{c.op, c.id, args, c.out});
    return;
  }
  Tensor out = Tensor::adopt_new(scratch().allocate(c.out.device, DType::f32, c.out.shape, c.op.name));
  f32_kernel(KernelCall{c.op, c.id, args, *out.impl()});
  const float* r = data_of<const float>(*out.impl());
  visit_dtype(c.out.dtype, [&]<class T>(TypeTag<T>) {
    if constexpr (kIsHalf<T>) {
      narrow_block(r, data_of<T>(c.out), c.out.numel);
    }
  });
}

}  // namespace crossfire::cpu
