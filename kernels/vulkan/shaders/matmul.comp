// SPDX-License-Identifier: Apache-2.0
#version 450
// Batched matmul [.., M, K] x [.., K, N] -> [.., M, N] with broadcast batch dims. 64x64 output tiles per
// workgroup of 16x16 invocations, each computing a 4x4 block from K-slices staged in shared memory.
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(push_constant) uniform Params {
  uint m;
  uint n;
  uint k;
  uint batch;
  uint brank;
  uint bshape[4];
  uint sa[4];  // lhs batch strides, in matrices
  uint sb[4];
  uint base_x, base_y, base_z;  // tile / batch offsets of this dispatch (grids beyond 65535 are split by the host)
} p;

const uint TM = 64u, TN = 64u, TK = 16u;
shared float sa_[TK][TM];
shared float sb_[TK][TN];

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint lid = ty * 16u + tx;
  uint b = p.base_z + gl_WorkGroupID.z;
  {
    uint ba = 0u, bb = 0u, rem = b;
    for (int d = int(p.brank) - 1; d >= 0; --d) {
      uint c = rem % p.bshape[d];
      rem /= p.bshape[d];
      ba += c * p.sa[d];
      bb += c * p.sb[d];
    }
    uint abase = ba * p.m * p.k, bbase = bb * p.k * p.n, obase = b * p.m * p.n;
    uint tm = p.base_y + gl_WorkGroupID.y;
    {
      uint tn = p.base_x + gl_WorkGroupID.x;
      {
        uint row0 = tm * TM, col0 = tn * TN;
        float acc[4][4];
        for (uint i = 0u; i < 4u; ++i)
          for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;
        for (uint k0 = 0u; k0 < p.k; k0 += TK) {
          // 256 invocations load the 16x64 slices of A (transposed) and B: 4 elements each.
          for (uint e = 0u; e < 4u; ++e) {
            uint idx = lid + e * 256u;
            uint kk = idx % TK, mm = idx / TK;  // A: 64 rows x 16 k
            uint gr = row0 + mm, gk = k0 + kk;
            sa_[kk][mm] = (gr < p.m && gk < p.k) ? uintBitsToFloat(a_[abase + gr * p.k + gk]) : 0.0;
            uint nn = idx % TN, kb = idx / TN;  // B: 16 k x 64 cols
            uint gc = col0 + nn, gkb = k0 + kb;
            sb_[kb][nn] = (gc < p.n && gkb < p.k) ? uintBitsToFloat(b_[bbase + gkb * p.n + gc]) : 0.0;
          }
          barrier();
          for (uint kk = 0u; kk < TK; ++kk) {
            vec4 av = vec4(sa_[kk][ty * 4u], sa_[kk][ty * 4u + 1u], sa_[kk][ty * 4u + 2u], sa_[kk][ty * 4u + 3u]);
            vec4 bv = vec4(sb_[kk][tx * 4u], sb_[kk][tx * 4u + 1u], sb_[kk][tx * 4u + 2u], sb_[kk][tx * 4u + 3u]);
            for (uint i = 0u; i < 4u; ++i)
              for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
          }
          barrier();
        }
        for (uint i = 0u; i < 4u; ++i) {
          uint r = row0 + ty * 4u + i;
          if (r >= p.m) continue;
          for (uint j = 0u; j < 4u; ++j) {
            uint c = col0 + tx * 4u + j;
            if (c < p.n) o_[obase + r * p.n + c] = floatBitsToUint(acc[i][j]);
          }
        }
      }
    }
  }
}
