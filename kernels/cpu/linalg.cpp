// SPDX-License-Identifier: Apache-2.0
// Linear algebra: matmul (Eigen GEMM per batch, batch dims broadcast), unfold (im2col), fold (col2im) and conv2d
// (im2col + Eigen GEMM + bias).
#include <memory>

#include <Eigen/Core>

#include "kernel_support.hpp"

namespace crossfire::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor, Eigen::Unaligned>;
using ConstMapU = Eigen::Map<const RowMajor, Eigen::Unaligned>;

// C[m, n] = A[m, k] * B[k, n], all row-major and contiguous.
void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  if (m == 0 || n == 0) return;
  Map cm(c, m, n);
  if (k == 0) {
    cm.setZero();
    return;
  }
  cm.noalias() = ConstMapU(a, m, k) * ConstMapU(b, k, n);
}

// ---- matmul --------------------------------------------------------------------------------------------------------
void matmul_kernel(const KernelCall& c) {
  const TensorImpl &lt = impl_of(c, 0), &rt = impl_of(c, 1);
  const Shape &ls = lt.shape, &rs = rt.shape, &os = c.out.shape;
  const int64_t m = ls[ls.rank() - 2], k = ls[ls.rank() - 1], n = rs[rs.rank() - 1];
  if (c.out.numel == 0) return;
  const float* a = data_of<const float>(lt);
  const float* b = data_of<const float>(rt);
  float* o = data_of<float>(c.out);

  // Batch dims: the output's leading dims; each operand's batch offset via broadcast strides (in matrices).
  Shape batch, lb, rb;
  for (int i = 0; i < os.rank() - 2; ++i) batch.push_back(os[i]);
  for (int i = 0; i < ls.rank() - 2; ++i) lb.push_back(ls[i]);
  for (int i = 0; i < rs.rank() - 2; ++i) rb.push_back(rs[i]);
  StridedPlan<2> plan;
  plan.set_output(batch);
  plan.set_broadcast(0, lb);
  plan.set_broadcast(1, rb);
  plan.coalesce();
  int64_t index = 0;
  plan.for_each_row([&](int64_t, const std::array<int64_t, 2>& off, int64_t len) {
    for (int64_t i = 0; i < len; ++i, ++index) {
      const int64_t ai = off[0] + i * plan.inner_stride(0), bi = off[1] + i * plan.inner_stride(1);
      gemm(a + ai * m * k, b + bi * k * n, o + index * m * n, m, k, n);
    }
  });
}

// ---- unfold / fold ---------------------------------------------------------------------------------------------------
// The patch geometry of one image: row c*kh*kw + i*kw + j of the column matrix holds input pixel
// (c, oh*sh - ph + i, ow*sw - pw + j) at column oh*Wo + ow (zero outside the image).
struct Patches {
  int64_t channels, h, w, kh, kw, sh, sw, ph, pw, ho, wo;
  int64_t rows() const { return channels * kh * kw; }
  int64_t cols() const { return ho * wo; }

  Patches(int64_t c_, int64_t h_, int64_t w_, std::span<const int64_t> kernel, std::span<const int64_t> stride,
          std::span<const int64_t> pad)
      : channels(c_), h(h_), w(w_), kh(kernel[0]), kw(kernel[1]), sh(stride[0]), sw(stride[1]), ph(pad[0]),
        pw(pad[1]), ho((h_ + 2 * pad[0] - kernel[0]) / stride[0] + 1),
        wo((w_ + 2 * pad[1] - kernel[1]) / stride[1] + 1) {}

  // Calls f(col0, img0, lo, hi) once per (column-matrix row, oh): the segment of Wo columns starting at col0 takes
  // image elements img0 + ow*sw for ow in [lo, hi) and zeros elsewhere (lo = hi = 0 when the window row lies
  // outside the image). The valid ow range is computed once per row, so the inner loops have no bounds checks.
  template <class F>
  void for_each(F&& f) const {
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t row = (ch * kh + i) * kw + j;
          // ow is valid when 0 <= ow*sw - pw + j < w.
          const int64_t lo = std::min(wo, std::max<int64_t>(0, (pw - j + sw - 1) / sw));
          const int64_t hi = std::max(lo, std::min(wo, (w - 1 + pw - j) >= 0 ? (w - 1 + pw - j) / sw + 1 : 0));
          for (int64_t oh = 0; oh < ho; ++oh) {
            const int64_t ih = oh * sh - ph + i;
            const int64_t col0 = row * cols() + oh * wo;
            if (ih < 0 || ih >= h) {
              f(col0, int64_t(0), int64_t(0), int64_t(0));
              continue;
            }
            const int64_t img0 = (ch * h + ih) * w - pw + j;  // image offset of ow = 0 (may lie before the row)
            f(col0, img0, lo, hi);
          }
        }
  }
};

// col[row, l] = image pixel or 0. T: float, or (unfold of f16/bf16, which moves bits) an unsigned type of the
// element's size, whose 0 is +0 in every float dtype.
template <class T>
void im2col(const Patches& p, const T* img, T* col) {
  p.for_each([&](int64_t col0, int64_t img0, int64_t lo, int64_t hi) {
    T* dst = col + col0;
    std::fill_n(dst, lo, T(0));
    if (p.sw == 1) {
      if (hi > lo) std::memcpy(dst + lo, img + (img0 + lo), size_t(hi - lo) * sizeof(T));
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = img[img0 + ow * p.sw];
    }
    std::fill(dst + hi, dst + p.wo, T(0));
  });
}

// image pixel += col[row, l] for every pixel a column covers; image zeroed by the caller.
void col2im(const Patches& p, const float* col, float* img) {
  p.for_each([&](int64_t col0, int64_t img0, int64_t lo, int64_t hi) {
    const float* src = col + col0;
    for (int64_t ow = lo; ow < hi; ++ow) img[img0 + ow * p.sw] += src[ow];
  });
}

void unfold_kernel(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  if (c.out.numel == 0) return;
  const Shape& s = x.shape;
  const Patches p(s[1], s[2], s[3], c.args[1].ints, c.args[2].ints, c.args[3].ints);
  visit_element_size(x.dtype, [&]<class T>(TypeTag<T>) {
    const T* in = data_of<const T>(x);
    T* o = data_of<T>(c.out);
    for (int64_t n = 0; n < s[0]; ++n) im2col(p, in + n * p.channels * p.h * p.w, o + n * p.rows() * p.cols());
  });
}

void fold_kernel(const KernelCall& c) {
  const TensorImpl& x = impl_of(c, 0);
  if (c.out.numel == 0) return;
  std::memset(c.out.data, 0, c.out.nbytes);
  const Shape& os = c.out.shape;
  const Patches p(os[1], os[2], os[3], c.args[2].ints, c.args[3].ints, c.args[4].ints);
  const float* in = data_of<const float>(x);
  float* o = data_of<float>(c.out);
  for (int64_t n = 0; n < os[0]; ++n) col2im(p, in + n * p.rows() * p.cols(), o + n * p.channels * p.h * p.w);
}

// ---- conv2d --------------------------------------------------------------------------------------------------------
// Per image: out[O, L] = weight[O, C*kh*kw] * unfold(image)[C*kh*kw, L] (+ bias per row). A 1x1 kernel with
// stride 1 and no padding needs no unfold: the image itself is the column matrix.
void conv2d_kernel(const KernelCall& c) {
  const TensorImpl &x = impl_of(c, 0), &wt = impl_of(c, 1);
  if (c.out.numel == 0) return;
  const Shape &s = x.shape, &ws = wt.shape;
  const int64_t kernel[2] = {ws[2], ws[3]};
  const Patches p(s[1], s[2], s[3], kernel, c.args[3].ints, c.args[4].ints);
  const int64_t outc = ws[0], rows = p.rows(), cols = p.cols();
  const float* in = data_of<const float>(x);
  const float* w = data_of<const float>(wt);
  const float* bias = c.args[2].present ? data_of<const float>(*c.args[2].tensor->impl()) : nullptr;
  float* o = data_of<float>(c.out);

  const bool direct = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0;
  std::unique_ptr<float[]> col;
  // Left uninitialised: every element is written before it is read. (`new float[n]` rather than C++20's
  // make_unique_for_overwrite, which libc++ 14, the fuzz targets' standard library under ClusterFuzzLite, lacks.)
  if (!direct && rows * cols > 0) col.reset(new float[size_t(rows * cols)]);
  for (int64_t n = 0; n < s[0]; ++n) {
    const float* img = in + n * p.channels * p.h * p.w;
    const float* cm = img;
    if (!direct) {
      im2col(p, img, col.get());
      cm = col.get();
    }
    float* on = o + n * outc * cols;
    gemm(w, cm, on, outc, rows, cols);
    if (bias != nullptr) {
      Map om(on, outc, cols);
      om.colwise() += Eigen::Map<const Eigen::VectorXf>(bias, outc);
    }
  }
}

}  // namespace

void register_linalg_kernels(CpuBackend& b) {
  b.set_kernel("matmul", widened<matmul_kernel>);
  b.set_kernel("unfold", unfold_kernel);
  b.set_kernel("fold", widened<fold_kernel>);
  b.set_kernel("conv2d", widened<conv2d_kernel>);
}

}  // namespace crossfire::cpu
