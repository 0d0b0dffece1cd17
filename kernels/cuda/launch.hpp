// SPDX-License-Identifier: Apache-2.0
// The seam between the CUDA backend's host code (compiled by the C++ compiler, which sees the op table) and its
// device code (compiled by nvcc, which never does: nvcc's front end cannot evaluate kOpTable, see
// Note [Why the kernels never see the op table]). Everything that crosses it is plain data: pointers, sizes and
// small fixed-size index descriptions. The host side (cuda_ops.cpp) turns a KernelCall into one of the launch
// structs below; a family's .cu file turns the launch struct into a kernel launch on the given stream.
//
// Note [Why the kernels never see the op table]
// nvcc's front end rejects the constexpr lambda that builds kOpTable ("expression must have a constant value"),
// so no .cu file may include op_table.hpp (and with it backend.hpp). Only device.hpp (DType, kMaxRank) crosses.
// The op -> functor mapping therefore lives in one X-macro list per family, below: cuda_ops.cpp expands it into
// set_kernel() lines and each .cu file expands it into explicit template instantiations, so adding an elementwise
// op is one line here and one functor in the family's .cu file.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "crossfire/device.hpp"

namespace crossfire::cuda {

// Every element index fits an int32 (kMaxElements = 2^31 - 1), so index arithmetic on the device is 32-bit.
inline constexpr int kRank = kMaxRank;

// ---- functor tags: one per op, defined (with their device code) in the family's .cu file ----------------------
// X(op name in kOpTable, functor tag)
#define CROSSFIRE_CUDA_UNARY_OPS(X) \
  X(neg, Neg)                       \
  X(abs, Abs)                       \
  X(exp, Exp)                       \
  X(log, Log)                       \
  X(sqrt, Sqrt)                     \
  X(tanh, Tanh)                     \
  X(sigmoid, Sigmoid)               \
  X(relu, Relu)                     \
  X(clamp, Clamp)                   \
  X(logical_not, LogicalNot)

#define CROSSFIRE_CUDA_BINARY_OPS(X) \
  X(add, Add)                        \
  X(sub, Sub)                        \
  X(mul, Mul)                        \
  X(div, Div)                        \
  X(pow, Pow)                        \
  X(maximum, Maximum)                \
  X(minimum, Minimum)                \
  X(eq, Eq)                          \
  X(ne, Ne)                          \
  X(lt, Lt)                          \
  X(le, Le)                          \
  X(gt, Gt)                          \
  X(ge, Ge)                          \
  X(logical_and, LogicalAnd)         \
  X(logical_or, LogicalOr)

#define CROSSFIRE_CUDA_REDUCE_OPS(X) \
  X(sum, Sum)                        \
  X(mean, Mean)                      \
  X(max, Max)                        \
  X(argmax, Argmax)

namespace fn {
#define CROSSFIRE_CUDA_DECLARE_TAG(name, Tag) struct Tag;
CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
#undef CROSSFIRE_CUDA_DECLARE_TAG
}  // namespace fn

// ---- index descriptions -------------------------------------------------------------------------------------------

// Up to three inputs broadcast against one row-major output: input k's offset of output element i is
// sum_d idx_d(i) * stride[k][d], with stride 0 along broadcast dimensions.
struct Broadcast {
  int rank = 0;
  int32_t shape[kRank] = {};
  int32_t stride[3][kRank] = {};
  bool flat = true;  // every input has the output's shape: offset == i, no index arithmetic
};

// A gather: output element i (row-major over `shape`) reads in[offset + sum_d idx_d(i) * stride[d]]. Permute,
// slice and expand are all this one kernel with different strides.
struct Strided {
  int rank = 0;
  int32_t shape[kRank] = {};
  int32_t stride[kRank] = {};
  int64_t offset = 0;
};

// ---- launch descriptions, one per family ---------------------------------------------------------------------------

struct FillLaunch {
  void* out;
  int64_t n;
  uint32_t bits;   // the value's bit pattern
  int elem_size;   // 1 or 4
  cudaStream_t stream;
};
void fill(const FillLaunch& l);

struct ArangeLaunch {
  void* out;
  int64_t n;
  double start, step;
  DType dtype;  // f32 or i32
  cudaStream_t stream;
};
void arange(const ArangeLaunch& l);

struct RandomLaunch {
  float* out;
  int64_t n;
  uint64_t seed;
  cudaStream_t stream;
};
void rand(const RandomLaunch& l);
void randn(const RandomLaunch& l);

struct UnaryLaunch {
  DType dtype;
  const void* x;
  void* out;
  int64_t n;
  cudaStream_t stream;
  float a = 0, b = 0;  // the op's float attributes, rounded to f32 (clamp: min, max); a functor built from two
                       // floats receives them
};
template <class Op>
void unary(const UnaryLaunch& l);

struct BinaryLaunch {
  DType dtype;  // of the inputs
  const void* lhs;
  const void* rhs;
  void* out;
  int64_t n;
  Broadcast ix;
  cudaStream_t stream;
};
template <class Op>
void binary(const BinaryLaunch& l);

struct WhereLaunch {
  int elem_size;  // of a and b: selection is bitwise, whatever the dtype
  const uint8_t* cond;
  const void* a;
  const void* b;
  void* out;
  int64_t n;
  Broadcast ix;  // inputs in order cond, a, b
  cudaStream_t stream;
};
void where(const WhereLaunch& l);

struct CastLaunch {
  DType from, to;
  const void* x;
  void* out;
  int64_t n;
  cudaStream_t stream;
};
void cast(const CastLaunch& l);

// Reductions see x as [outer, len, inner] and write [outer, inner].
struct ReduceLaunch {
  DType dtype;
  const void* x;
  void* out;
  int64_t outer, len, inner;
  void* scratch;  // reduce_scratch_bytes() bytes, or nullptr when that is 0
  cudaStream_t stream;
};
template <class Op>
size_t reduce_scratch_bytes(const ReduceLaunch& l);
template <class Op>
void reduce(const ReduceLaunch& l);

struct SoftmaxLaunch {
  const float* x;
  float* out;
  int64_t outer, len, inner;
  cudaStream_t stream;
};
void softmax(const SoftmaxLaunch& l);

// [batch..., m, k] x [batch..., k, n]: batch index b of the output (row-major over batch_shape) reads the lhs
// matrix at sum_d idx_d(b) * lhs_stride[d] (in elements; 0 along broadcast batch dims), the rhs likewise.
struct MatmulLaunch {
  const float* lhs;
  const float* rhs;
  float* out;
  int64_t m, n, k;
  int batch_rank;
  int64_t batch;  // number of output matrices
  int64_t batch_shape[kRank];
  int64_t lhs_stride[kRank];
  int64_t rhs_stride[kRank];
  cudaStream_t stream;
};
void matmul(const MatmulLaunch& l);

struct GatherLaunch {
  int elem_size;  // 1 or 4: data movement is bitwise
  const void* x;
  void* out;
  int64_t n;
  Strided view;
  cudaStream_t stream;
};
void gather(const GatherLaunch& l);

// index_select: x as [outer, dim, inner], out as [outer, count, inner].
struct IndexSelectLaunch {
  int elem_size;
  const void* x;
  const int32_t* index;
  void* out;
  int64_t outer, dim, inner, count;
  cudaStream_t stream;
};
// Writes into *first_bad (device memory) the lowest position j with index[j] outside [0, dim), if any is lower
// than the value already there.
void index_check(const IndexSelectLaunch& l, int32_t* first_bad);
void index_select(const IndexSelectLaunch& l);

struct Conv2dLaunch {
  const float* input;   // [N, C, H, W]
  const float* weight;  // [O, C, kh, kw]
  const float* bias;    // [O] or nullptr
  float* out;           // [N, O, Ho, Wo]
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, sh, sw, ph, pw;
  cudaStream_t stream;
};
void conv2d(const Conv2dLaunch& l);

// unfold: [N, C, H, W] -> [N, C*kh*kw, Ho*Wo]; fold is its adjoint.
struct WindowLaunch {
  const float* x;
  float* out;
  int64_t N, C, H, W, kh, kw, Ho, Wo, sh, sw, ph, pw;
  cudaStream_t stream;
};
void unfold(const WindowLaunch& l);
void fold(const WindowLaunch& l);

}  // namespace crossfire::cuda
