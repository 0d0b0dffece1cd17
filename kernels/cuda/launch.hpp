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

// ---- dtype masks ---------------------------------------------------------------------------------------------------
// Bit (1 << DType) for each dtype a kernel takes: the same sets as the op table's, spelled for nvcc (which cannot
// see DTypeSet's constexpr constructor run over the table either). cuda_ops.cpp checks at compile time that each
// op's mask below is exactly its table set, naming the op when it is not.
constexpr unsigned dtype_bit(DType d) { return 1u << unsigned(d); }
inline constexpr unsigned kFloatTypes = dtype_bit(DType::f32) | dtype_bit(DType::f16) | dtype_bit(DType::bf16);
inline constexpr unsigned kIntTypes = dtype_bit(DType::i32) | dtype_bit(DType::i64);
inline constexpr unsigned kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr unsigned kBoolTypes = dtype_bit(DType::boolean);
inline constexpr unsigned kAnyTypes = kNumericTypes | kBoolTypes;

// ---- functor tags: one per op, defined (with their device code) in the family's .cu file ----------------------
// X(op name in kOpTable, functor tag, the dtypes of its input)
#define CROSSFIRE_CUDA_UNARY_OPS(X)    \
  X(neg, Neg, kNumericTypes)           \
  X(abs, Abs, kNumericTypes)           \
  X(exp, Exp, kFloatTypes)             \
  X(log, Log, kFloatTypes)             \
  X(sqrt, Sqrt, kFloatTypes)           \
  X(tanh, Tanh, kFloatTypes)           \
  X(sigmoid, Sigmoid, kFloatTypes)     \
  X(relu, Relu, kFloatTypes)           \
  X(clamp, Clamp, kFloatTypes)         \
  X(logical_not, LogicalNot, kBoolTypes)

#define CROSSFIRE_CUDA_BINARY_OPS(X)         \
  X(add, Add, kNumericTypes)                 \
  X(sub, Sub, kNumericTypes)                 \
  X(mul, Mul, kNumericTypes)                 \
  X(div, Div, kFloatTypes)                   \
  X(pow, Pow, kFloatTypes)                   \
  X(maximum, Maximum, kNumericTypes)         \
  X(minimum, Minimum, kNumericTypes)         \
  X(eq, Eq, kAnyTypes)                       \
  X(ne, Ne, kAnyTypes)                       \
  X(lt, Lt, kNumericTypes)                   \
  X(le, Le, kNumericTypes)                   \
  X(gt, Gt, kNumericTypes)                   \
  X(ge, Ge, kNumericTypes)                   \
  X(logical_and, LogicalAnd, kBoolTypes)     \
  X(logical_or, LogicalOr, kBoolTypes)

// f16/bf16 reductions run the f32 kernels on widened copies (Note [Halves through the f32 kernels] in
// cuda_ops.cpp): the device code of this family sees f32, i32 and i64 only.
#define CROSSFIRE_CUDA_REDUCE_OPS(X) \
  X(sum, Sum, kNumericTypes)         \
  X(mean, Mean, kFloatTypes)         \
  X(max, Max, kNumericTypes)         \
  X(argmax, Argmax, kNumericTypes)

namespace fn {
#define CROSSFIRE_CUDA_DECLARE_TAG(name, Tag, types) struct Tag;
CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_DECLARE_TAG)
#undef CROSSFIRE_CUDA_DECLARE_TAG
}  // namespace fn

// The dtypes each functor takes, from the lists above (the .cu files launch only these).
template <class Tag>
inline constexpr unsigned kTypesOf = 0;
#define CROSSFIRE_CUDA_TYPES_OF(name, Tag, types) \
  template <>                                     \
  inline constexpr unsigned kTypesOf<fn::Tag> = types;
CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_TYPES_OF)
CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_TYPES_OF)
CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_TYPES_OF)
#undef CROSSFIRE_CUDA_TYPES_OF

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
  uint64_t bits;   // the value's bit pattern, in the low elem_size bytes
  int elem_size;   // 1, 2, 4 or 8
  cudaStream_t stream;
};
void fill(const FillLaunch& l);

struct ArangeLaunch {
  void* out;
  int64_t n;
  double start, step;
  DType dtype;  // any numeric dtype: each element is computed in f64 and converted once
  cudaStream_t stream;
};
void arange(const ArangeLaunch& l);

struct RandomLaunch {
  void* out;
  DType dtype;  // f32, f16 or bf16
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
  int elem_size;  // of a and b (1, 2, 4 or 8): selection is bitwise, whatever the dtype
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
  DType dtype;  // f32, i32 or i64 (halves arrive widened)
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
  int elem_size;  // 1, 2, 4 or 8: data movement is bitwise
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
  const void* index;
  int index_size;  // 4 (i32) or 8 (i64)
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

// unfold: [N, C, H, W] -> [N, C*kh*kw, Ho*Wo]; fold is its adjoint. unfold moves bits (elem_size 2 or 4, so that
// an f16/bf16 patch is its input's bits); fold sums, in f32 (elem_size 4).
struct WindowLaunch {
  int elem_size;
  const void* x;
  void* out;
  int64_t N, C, H, W, kh, kw, Ho, Wo, sh, sw, ph, pw;
  cudaStream_t stream;
};
void unfold(const WindowLaunch& l);
void fold(const WindowLaunch& l);

}  // namespace crossfire::cuda
