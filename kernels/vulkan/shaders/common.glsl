// SPDX-License-Identifier: Apache-2.0
// Shared by every shader: the four storage buffers of the common pipeline layout (binding 0 is the output), dtype
// loads, and NaN-aware float ordering done on bit patterns.
//
// Note [Floats compared as bits]
// Ordering, comparisons, max/min, relu, neg and abs work on the IEEE bit patterns, never on float comparisons: a
// driver may flush denormals to zero (lavapipe does), which would make `denormal > 0` false and break the
// bitwise agreement that contract section 6 asks of compare ops and data movement.
#extension GL_GOOGLE_include_directive : require

#include "op_codes.h"

layout(std430, set = 0, binding = 0) buffer Out0 { uint o_[]; };
layout(std430, set = 0, binding = 1) readonly buffer In1 { uint a_[]; };
layout(std430, set = 0, binding = 2) readonly buffer In2 { uint b_[]; };
layout(std430, set = 0, binding = 3) readonly buffer In3 { uint c_[]; };

uint byte_at(uint word, uint i) { return (word >> ((i & 3u) * 8u)) & 0xffu; }
// Element i of a buffer of dtype dt, as its bit pattern (bool: 0 or 1).
#define LOAD(buf, dt, i) ((dt) == CF_BOOL ? byte_at(buf[(i) >> 2], (i)) : buf[(i)])

bool is_nan(uint b) { return (b & 0x7fffffffu) > 0x7f800000u; }
// A key whose integer order is the float order of non-NaN values; -0 and +0 share key 0.
int fkey(uint b) {
  int m = int(b & 0x7fffffffu);
  return (b >> 31) != 0u ? -m : m;
}

// The same, but -0 < +0 (IEEE 754-2019 maximum/minimum: max(+0, -0) = +0, min(+0, -0) = -0).
int tkey(uint b) {
  int m = int(b & 0x7fffffffu);
  return (b >> 31) != 0u ? -m - 1 : m;
}

// Note [No grid-stride loops]
// Each invocation handles one item at flat_index(); the host spreads the workgroups over x and y (65535 each).
// A grid-stride loop (`for (i = id; i < n; i += grid)`) is the usual idiom, but llvmpipe runs a loop with a store
// in it several hundred times slower (measured: 1M-element gather 6.5 s looped, 16 ms flat).
uint flat_index() { return gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x; }
