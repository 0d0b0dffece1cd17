// SPDX-License-Identifier: Apache-2.0
// Matmul family: a shared-memory tiled SGEMM (64 x 64 output tile per block, 16-deep k slices, 4 x 4 outputs per
// thread) over a broadcast batch. Straightforward rather than peak: it accumulates each output along k in order
// with FMA, so its error is within the op's reduction bound and the result is deterministic.
#include <cuda_runtime.h>

#include <cstdint>

#include "common.cuh"

namespace crossfire::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16;
constexpr int kTX = 16, kTY = 16;  // 256 threads; thread (ty, tx) owns rows ty + 16 i and columns tx + 16 j
static_assert(kTX * kTY == kThreads);

__global__ void __launch_bounds__(kThreads) matmul_kernel(MatmulLaunch l, int64_t tiles_m, int64_t tiles_n) {
  __shared__ float as[kBK][kBM + 4];  // a slice of lhs, transposed; padded against bank conflicts
  __shared__ float bs[kBK][kBN];
  const int tx = int(threadIdx.x) % kTX, ty = int(threadIdx.x) / kTX;
  const int64_t M = l.m, N = l.n, K = l.k;

  for (int64_t z = blockIdx.z; z < l.batch; z += gridDim.z) {
    int64_t a_off = 0, b_off = 0, rest = z;
    for (int d = l.batch_rank - 1; d >= 0; --d) {
      const int64_t idx = rest % l.batch_shape[d];
      rest /= l.batch_shape[d];
      a_off += idx * l.lhs_stride[d];
      b_off += idx * l.rhs_stride[d];
    }
    const float* A = l.lhs + a_off;
    const float* B = l.rhs + b_off;
    float* C = l.out + z * M * N;

    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const int64_t row0 = tm * kBM, col0 = tn * kBN;
        float acc[4][4] = {};
        for (int64_t k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
          for (int r = 0; r < (kBM * kBK) / kThreads; ++r) {
            const int e = int(threadIdx.x) + r * kThreads;
            const int row = e / kBK, col = e % kBK;
            const int64_t gr = row0 + row, gk = k0 + col;
            as[col][row] = (gr < M && gk < K) ? A[gr * K + gk] : 0.0f;
          }
#pragma unroll
          for (int r = 0; r < (kBK * kBN) / kThreads; ++r) {
            const int e = int(threadIdx.x) + r * kThreads;
            const int row = e / kBN, col = e % kBN;
            const int64_t gk = k0 + row, gc = col0 + col;
            bs[row][col] = (gk < K && gc < N) ? B[gk * N + gc] : 0.0f;
          }
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < kBK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = as[kk][ty + kTY * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = bs[kk][tx + kTX * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
              for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
          }
          __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t gr = row0 + ty + kTY * i;
          if (gr >= M) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int64_t gc = col0 + tx + kTX * j;
            if (gc < N) C[gr * N + gc] = acc[i][j];
          }
        }
      }
    }
  }
}

unsigned clamp_grid(int64_t n) { return unsigned(n < 1 ? 1 : n > 65535 ? 65535 : n); }

}  // namespace

void matmul(const MatmulLaunch& l) {
  const int64_t tiles_m = (l.m + kBM - 1) / kBM, tiles_n = (l.n + kBN - 1) / kBN;
  dim3 grid(clamp_grid(tiles_n), clamp_grid(tiles_m), clamp_grid(l.batch));
  matmul_kernel<<<grid, kThreads, 0, l.stream>>>(l, tiles_m, tiles_n);
}

}  // namespace crossfire::cuda
