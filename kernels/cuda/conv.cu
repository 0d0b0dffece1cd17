// SPDX-License-Identifier: Apache-2.0
// Convolution family: conv2d as a direct convolution (one thread per output element), unfold (im2col) and its
// adjoint fold (col2im). fold gathers rather than scatters: each output pixel sums the patch entries that cover
// it in a fixed order, so it needs no atomics and is deterministic.
#include <cuda_runtime.h>

#include <cstdint>

#include "common.cuh"

namespace crossfire::cuda {
namespace {

__global__ void conv2d_kernel(Conv2dLaunch l, int64_t n) {
  CROSSFIRE_CUDA_FOR(o, n) {
    const int64_t x = o % l.Wo, y = (o / l.Wo) % l.Ho, oc = (o / (l.Wo * l.Ho)) % l.O, b = o / (l.Wo * l.Ho * l.O);
    float acc = l.bias ? l.bias[oc] : 0.0f;
    for (int64_t c = 0; c < l.C; ++c) {
      const float* in = l.input + (b * l.C + c) * l.H * l.W;
      const float* w = l.weight + (oc * l.C + c) * l.kh * l.kw;
      for (int64_t i = 0; i < l.kh; ++i) {
        const int64_t iy = y * l.sh - l.ph + i;
        const bool row_in = iy >= 0 && iy < l.H;
        for (int64_t j = 0; j < l.kw; ++j) {
          const int64_t ix = x * l.sw - l.pw + j;
          // Zero padding is real zeros: a padded position still contributes 0 * w (NaN for a NaN or inf weight),
          // as on every backend (op table: conv2d).
          const float v = (row_in && ix >= 0 && ix < l.W) ? in[iy * l.W + ix] : 0.0f;
          acc = fmaf(v, w[i * l.kw + j], acc);
        }
      }
    }
    l.out[o] = acc;
  }
}

// out [N, C*kh*kw, Ho*Wo]: row c*kh*kw + i*kw + j, column y*Wo + x holds input[c, y*sh - ph + i, x*sw - pw + j]
// (its bits: T is an unsigned integer of the element's size; a padded position is 0, +0 in every float dtype).
template <class T>
__global__ void unfold_kernel(WindowLaunch l, int64_t n) {
  const T* in = static_cast<const T*>(l.x);
  T* out = static_cast<T*>(l.out);
  const int64_t L = l.Ho * l.Wo, rows = l.C * l.kh * l.kw;
  CROSSFIRE_CUDA_FOR(o, n) {
    const int64_t col = o % L, row = (o / L) % rows, b = o / (L * rows);
    const int64_t c = row / (l.kh * l.kw), i = (row / l.kw) % l.kh, j = row % l.kw;
    const int64_t iy = (col / l.Wo) * l.sh - l.ph + i, ix = (col % l.Wo) * l.sw - l.pw + j;
    out[o] = (iy >= 0 && iy < l.H && ix >= 0 && ix < l.W) ? in[((b * l.C + c) * l.H + iy) * l.W + ix] : T(0);
  }
}

// out [N, C, H, W]: the sum of every patch entry that unfold would have read from this pixel, i then j ascending.
__global__ void fold_kernel(WindowLaunch l, int64_t n) {
  const float* in = static_cast<const float*>(l.x);
  float* out = static_cast<float*>(l.out);
  const int64_t L = l.Ho * l.Wo, rows = l.C * l.kh * l.kw;
  CROSSFIRE_CUDA_FOR(o, n) {
    const int64_t px = o % l.W, py = (o / l.W) % l.H, c = (o / (l.W * l.H)) % l.C, b = o / (l.W * l.H * l.C);
    float acc = 0.0f;
    for (int64_t i = 0; i < l.kh; ++i) {
      const int64_t ty = py + l.ph - i;  // = y * sh for the patch row y that covers py with kernel row i
      if (ty < 0 || ty % l.sh != 0 || ty / l.sh >= l.Ho) continue;
      for (int64_t j = 0; j < l.kw; ++j) {
        const int64_t tx = px + l.pw - j;
        if (tx < 0 || tx % l.sw != 0 || tx / l.sw >= l.Wo) continue;
        const int64_t row = (c * l.kh + i) * l.kw + j, col = (ty / l.sh) * l.Wo + tx / l.sw;
        acc += in[(b * rows + row) * L + col];
      }
    }
    out[o] = acc;
  }
}

}  // namespace

void conv2d(const Conv2dLaunch& l) {
  const int64_t n = l.N * l.O * l.Ho * l.Wo;
  conv2d_kernel<<<grid_for(n), kThreads, 0, l.stream>>>(l, n);
}

void unfold(const WindowLaunch& l) {
  const int64_t n = l.N * l.C * l.kh * l.kw * l.Ho * l.Wo;
  with_bits(l.elem_size, [&](auto t) { unfold_kernel<decltype(t)><<<grid_for(n), kThreads, 0, l.stream>>>(l, n); });
}

void fold(const WindowLaunch& l) {
  const int64_t n = l.N * l.C * l.H * l.W;
  fold_kernel<<<grid_for(n), kThreads, 0, l.stream>>>(l, n);
}

}  // namespace crossfire::cuda
