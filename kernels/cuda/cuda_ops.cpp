// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's kernel table: one host function per op family that reads the validated call (KernelCall),
// describes the work as one of launch.hpp's plain structs and hands it to the family's device code on the device's
// stream. Dispatch has already checked devices, dtypes, shapes and attributes and allocated the output, so nothing
// here validates anything except what only the device can know (index_select's index values).
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "crossfire/error.hpp"
#include "crossfire/half_bits.hpp"
#include "cuda_backend.hpp"
#include "launch.hpp"

namespace crossfire::cuda {
namespace {

// What every kernel needs: the backend, the device, its stream (current on this thread), and a launch check.
struct Ctx {
  const KernelCall& call;
  CudaBackend& backend;
  Device device;
  cudaStream_t stream;

  explicit Ctx(const KernelCall& c)
      : call(c),
        backend(*static_cast<CudaBackend*>(c.out.owner)),
        device(c.out.device),
        stream(backend.stream(device, c.op.name)) {}
  // Catches a bad launch configuration at once; a fault inside a kernel surfaces at the next synchronisation.
  void launched() const { backend.check(cudaGetLastError(), call.op.name, device, "kernel launch"); }
  void check(cudaError_t e, std::string_view what) const { backend.check(e, call.op.name, device, what); }
};

// Note [Halves through the f32 kernels]
// The reductions, softmax, matmul, conv2d and fold have f32 kernels only. An f16/bf16 call runs them on f32 copies
// of its inputs (exact: every half is an f32) into an f32 buffer, then rounds each result to the output dtype with
// cast's conversion (to nearest even). The f32 result is within the op's f32 bound of the exact one, and the last
// rounding is the half dtype's own, so the whole is within the bound the contract gives an f16/bf16 result (the op's
// k at f32's eps plus one rounding at the dtype's; docs/contract.md, Dtypes): these kernels accumulate in f32 or
// better, as the contract says every built-in backend does. Scratch buffers go back to the cache as soon as the
// work that uses them is queued: stream order keeps them alive until it has run (Note [CUDA backend: streams and
// synchronisation]). The elementwise kernels widen and narrow per element instead (common.cuh), and data movement
// copies bits, so nothing else takes this path.
class Scratch {
 public:
  Scratch(const Ctx& x, size_t bytes) : x_(x), bytes_(bytes), p_(x.backend.scratch(x.device, bytes, x.call.op.name)) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { x_.backend.release_scratch(x_.device, p_, bytes_); }
  void* get() const { return p_; }

 private:
  const Ctx& x_;
  size_t bytes_;
  void* p_;
};

// An input as f32: its own memory, or (f16/bf16) a widened copy.
class AsF32 {
 public:
  AsF32(const Ctx& x, const TensorImpl& t) {
    if (!is_half(t.dtype)) {
      p_ = static_cast<const float*>(t.backend_state);
      return;
    }
    copy_.emplace(x, size_t(t.numel) * sizeof(float));
    cast({t.dtype, DType::f32, t.backend_state, copy_->get(), t.numel, x.stream});
    x.launched();
    p_ = static_cast<const float*>(copy_->get());
  }
  const float* get() const { return p_; }

 private:
  std::optional<Scratch> copy_;
  const float* p_ = nullptr;
};

// Where an f32 kernel writes the call's output: the output itself, or (f16/bf16) an f32 buffer that finish()
// rounds into it.
class F32Out {
 public:
  explicit F32Out(const Ctx& x) : x_(x) {
    if (!is_half(x.call.out.dtype)) {
      p_ = x.call.out.backend_state;
      return;
    }
    buffer_.emplace(x, size_t(x.call.out.numel) * sizeof(float));
    p_ = buffer_->get();
  }
  float* get() const { return static_cast<float*>(p_); }
  void* raw() const { return p_; }
  void finish() const {
    if (!buffer_) return;
    cast({DType::f32, x_.call.out.dtype, p_, x_.call.out.backend_state, x_.call.out.numel, x_.stream});
    x_.launched();
  }

 private:
  const Ctx& x_;
  std::optional<Scratch> buffer_;
  void* p_ = nullptr;
};

const void* in(const Tensor& t) { return t.impl()->backend_state; }
void* out(const KernelCall& c) { return c.out.backend_state; }
const TensorImpl& arg(const KernelCall& c, int param) { return *c.tensor(param).impl(); }

std::array<int64_t, kMaxRank> strides_of(const Shape& s) { return contiguous_strides(s); }

int64_t prod(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s[i];
  return p;
}

// Broadcast strides of up to three inputs against the output shape (numpy rules: align right, size-1 dims repeat).
Broadcast broadcast_of(const Shape& o, std::initializer_list<const Shape*> inputs) {
  Broadcast b;
  b.rank = o.rank();
  b.flat = true;
  for (const Shape* s : inputs) b.flat &= *s == o;
  if (b.flat) return b;
  for (int d = 0; d < o.rank(); ++d) b.shape[d] = int32_t(o[d]);
  int k = 0;
  for (const Shape* s : inputs) {
    const auto st = strides_of(*s);
    for (int d = 0; d < o.rank(); ++d) {
      const int sd = d - (o.rank() - s->rank());
      b.stride[k][d] = (sd < 0 || (*s)[sd] == 1) ? 0 : int32_t(st[size_t(sd)]);
    }
    ++k;
  }
  return b;
}

// ---- creation ----------------------------------------------------------------------------------------------------

// A value's bits in dtype, converted as cast converts (f32 -> i32 and i64 truncate toward zero and saturate, NaN
// -> 0; f16 and bf16 round the f64 value once to nearest even).
uint64_t bits_of(double v, DType dt) {
  switch (dt) {
    case DType::f16:
    case DType::bf16: return half_bits_of(v, dt);
    case DType::i64: return uint64_t(float_to_int<int64_t>(v));
    case DType::f32: {
      const float f = round_to_f32(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DType::i32: return uint32_t(float_to_int<int32_t>(v));
    case DType::boolean: return v != 0 ? 1u : 0u;
  }
  return 0;
}

void fill_with(const KernelCall& c, double v) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  fill({out(c), c.out.numel, bits_of(v, c.out.dtype), int(dtype_size(c.out.dtype)), x.stream});
  x.launched();
}
void zeros_kernel(const KernelCall& c) { fill_with(c, 0.0); }
void ones_kernel(const KernelCall& c) { fill_with(c, 1.0); }
void full_kernel(const KernelCall& c) { fill_with(c, c.args[1].f); }

void arange_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  arange({out(c), c.out.numel, c.args[0].f, c.args[2].f, c.out.dtype, x.stream});
  x.launched();
}

template <void (*generate)(const RandomLaunch&)>
void random_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  generate({out(c), c.out.dtype, c.out.numel, uint64_t(c.args[1].i), x.stream});
  x.launched();
}

// ---- elementwise ---------------------------------------------------------------------------------------------------

template <class Op>
void unary_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  unary<Op>({arg(c, 0).dtype, in(c.tensor(0)), out(c), c.out.numel, x.stream, c.float_attr_f32(0),
             c.float_attr_f32(1)});
  x.launched();
}

template <class Op>
void binary_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl &a = arg(c, 0), &b = arg(c, 1);
  binary<Op>({a.dtype, a.backend_state, b.backend_state, out(c), c.out.numel,
              broadcast_of(c.out.shape, {&a.shape, &b.shape}), x.stream});
  x.launched();
}

void where_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl &cond = arg(c, 0), &a = arg(c, 1), &b = arg(c, 2);
  where({int(dtype_size(a.dtype)), static_cast<const uint8_t*>(cond.backend_state), a.backend_state,
         b.backend_state, out(c), c.out.numel, broadcast_of(c.out.shape, {&cond.shape, &a.shape, &b.shape}),
         x.stream});
  x.launched();
}

void cast_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl& src = arg(c, 0);
  if (src.dtype == c.out.dtype) {
    x.check(cudaMemcpyAsync(out(c), src.backend_state, src.nbytes, cudaMemcpyDeviceToDevice, x.stream),
            "cudaMemcpyAsync");
    return;
  }
  cast({src.dtype, c.out.dtype, src.backend_state, out(c), c.out.numel, x.stream});
  x.launched();
}

// ---- reductions ----------------------------------------------------------------------------------------------------

// x seen as [outer, len, inner] around the reduced axis (or all of x as one row when the axis is absent).
void reduce_geometry(const Shape& s, const Arg& axis, int64_t& outer, int64_t& len, int64_t& inner) {
  if (!axis.present) {
    outer = 1, len = s.numel(), inner = 1;
    return;
  }
  const AxisSplit around = split_at(s, normalised_axis(axis.i, s.rank()));
  outer = around.outer, len = around.len, inner = around.inner;
}

template <class Op>
void reduce_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl& src = arg(c, 0);
  const AsF32 widened(x, src);  // f16/bf16 only (Note [Halves through the f32 kernels])
  const F32Out result(x);       // argmax's i32, or an f32/i32/i64 output: written directly
  const bool half = is_half(src.dtype);
  ReduceLaunch l{half ? DType::f32 : src.dtype, half ? widened.get() : src.backend_state, result.raw(), 0, 0, 0,
                 nullptr, x.stream};
  reduce_geometry(src.shape, c.args[1], l.outer, l.len, l.inner);
  const size_t bytes = reduce_scratch_bytes<Op>(l);
  l.scratch = x.backend.scratch(x.device, bytes, c.op.name);
  reduce<Op>(l);
  x.backend.release_scratch(x.device, l.scratch, bytes);  // stream order makes reuse by a later op safe
  x.launched();
  result.finish();
}

void softmax_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl& src = arg(c, 0);
  const AxisSplit a = split_at(src.shape, normalised_axis(c.args[1].i, src.shape.rank()));
  const AsF32 in(x, src);
  const F32Out result(x);
  softmax({in.get(), result.get(), a.outer, a.len, a.inner, x.stream});
  x.launched();
  result.finish();
}

// ---- matmul ----------------------------------------------------------------------------------------------------------

void matmul_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl &a = arg(c, 0), &b = arg(c, 1);
  const Shape& o = c.out.shape;
  const AsF32 lhs(x, a), rhs(x, b);  // Note [Halves through the f32 kernels]
  const F32Out result(x);
  MatmulLaunch l{};
  l.lhs = lhs.get();
  l.rhs = rhs.get();
  l.out = result.get();
  l.m = o[o.rank() - 2], l.n = o[o.rank() - 1], l.k = a.shape[a.shape.rank() - 1];
  l.batch_rank = o.rank() - 2;
  l.batch = prod(o, 0, l.batch_rank);
  // Batch strides in elements, 0 along broadcast batch dimensions.
  auto batch_strides = [&](const Shape& s, int64_t* stride) {
    const int r = s.rank() - 2;
    int64_t step = s[s.rank() - 2] * s[s.rank() - 1];
    for (int d = l.batch_rank - 1; d >= 0; --d) {
      const int sd = d - (l.batch_rank - r);
      if (sd < 0) {
        stride[d] = 0;
        continue;
      }
      stride[d] = s[sd] == 1 ? 0 : step;
      step *= s[sd];
    }
  };
  for (int d = 0; d < l.batch_rank; ++d) l.batch_shape[d] = o[d];
  batch_strides(a.shape, l.lhs_stride);
  batch_strides(b.shape, l.rhs_stride);
  l.stream = x.stream;
  matmul(l);
  x.launched();
  result.finish();
}

// ---- layout ------------------------------------------------------------------------------------------------------------

void gather_view(const KernelCall& c, const Strided& v) {
  Ctx x(c);
  gather({int(dtype_size(c.out.dtype)), in(c.tensor(0)), out(c), c.out.numel, v, x.stream});
  x.launched();
}

void reshape_kernel(const KernelCall& c) {
  if (c.out.nbytes == 0) return;
  Ctx x(c);
  x.check(cudaMemcpyAsync(out(c), in(c.tensor(0)), c.out.nbytes, cudaMemcpyDeviceToDevice, x.stream),
          "cudaMemcpyAsync");
}

void permute_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  const TensorImpl& src = arg(c, 0);
  const auto st = strides_of(src.shape);
  const std::span<const int64_t> dims = c.args[1].ints;
  Strided v;
  v.rank = c.out.shape.rank();
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = int32_t(c.out.shape[i]);
    v.stride[i] = int32_t(st[size_t(dims[size_t(i)])]);
  }
  gather_view(c, v);
}

void slice_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  const SliceView sv = slice_view(arg(c, 0).shape, c.out.shape, c.args[1].ints, c.args[3].ints);
  Strided v;
  v.rank = c.out.shape.rank();
  v.offset = sv.offset;
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = int32_t(c.out.shape[i]);
    v.stride[i] = int32_t(sv.strides[size_t(i)]);
  }
  gather_view(c, v);
}

void expand_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  const TensorImpl& src = arg(c, 0);
  const auto st = strides_of(src.shape);
  Strided v;
  v.rank = c.out.shape.rank();
  for (int d = 0; d < v.rank; ++d) {
    const int sd = d - (v.rank - src.shape.rank());
    v.shape[d] = int32_t(c.out.shape[d]);
    v.stride[d] = (sd < 0 || src.shape[sd] == 1) ? 0 : int32_t(st[size_t(sd)]);
  }
  gather_view(c, v);
}

// cat: the output is [outer, total, inner] around the axis, and input j fills the column block [offset_j,
// offset_j + len_j) of every row: one strided 2-D copy per input, no kernel.
void cat_kernel(const KernelCall& c) {
  if (c.out.nbytes == 0) return;
  Ctx x(c);
  const std::span<const Tensor> ts = c.args[0].list;
  const int a = normalised_axis(c.args[1].i, c.out.shape.rank());
  const size_t es = dtype_size(c.out.dtype);
  const auto [outer, total, inner] = split_at(c.out.shape, a);
  const size_t dpitch = size_t(total * inner) * es;
  size_t offset = 0;
  for (const Tensor& t : ts) {
    const size_t width = size_t(t.shape()[a] * inner) * es;
    if (width > 0) {
      char* dst = static_cast<char*>(out(c)) + offset;
      const void* src = in(t);
      if (outer == 1) {
        x.check(cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, x.stream), "cudaMemcpyAsync");
      } else if (dpitch <= size_t(INT32_MAX)) {
        x.check(cudaMemcpy2DAsync(dst, dpitch, src, width, width, size_t(outer), cudaMemcpyDeviceToDevice, x.stream),
                "cudaMemcpy2DAsync");
      } else {  // pitches beyond what cudaMemcpy2D accepts: few, huge rows
        for (int64_t r = 0; r < outer; ++r)
          x.check(cudaMemcpyAsync(dst + size_t(r) * dpitch, static_cast<const char*>(src) + size_t(r) * width, width,
                                  cudaMemcpyDeviceToDevice, x.stream),
                  "cudaMemcpyAsync");
      }
    }
    offset += width;
  }
}

void index_select_kernel(const KernelCall& c) {
  const TensorImpl &src = arg(c, 0), &index = arg(c, 2);
  const int a = normalised_axis(c.args[1].i, src.shape.rank());
  const AxisSplit around = split_at(src.shape, a);
  IndexSelectLaunch l{int(dtype_size(src.dtype)), src.backend_state, index.backend_state,
                      int(dtype_size(index.dtype)), out(c), around.outer, around.len, around.inner, index.numel,
                      nullptr};
  if (l.count == 0) return;
  Ctx x(c);
  l.stream = x.stream;
  // Index values are data: check them on the device and wait for the verdict (Note [CUDA backend: streams and
  // synchronisation]). The flag starts at 0x7f7f7f7f (above any position) and ends at the first bad position.
  constexpr int32_t kNone = 0x7f7f7f7f;
  int32_t* flag = x.backend.device_flag(x.device, c.op.name);
  int32_t* host = x.backend.host_flag(x.device, c.op.name);
  x.check(cudaMemsetAsync(flag, 0x7f, sizeof(int32_t), x.stream), "cudaMemsetAsync");
  index_check(l, flag);
  x.launched();
  x.check(cudaMemcpyAsync(host, flag, sizeof(int32_t), cudaMemcpyDeviceToHost, x.stream), "cudaMemcpyAsync");
  x.check(cudaStreamSynchronize(x.stream), "cudaStreamSynchronize");
  if (*host != kNone) {
    const int32_t pos = *host;
    int64_t value = 0;  // an i32 or i64 entry, read as its own width
    if (l.index_size == 8) {
      x.check(cudaMemcpy(&value, static_cast<const int64_t*>(l.index) + pos, 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
    } else {
      int32_t v32 = 0;
      x.check(cudaMemcpy(&v32, static_cast<const int32_t*>(l.index) + pos, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
      value = v32;
    }
    throw InvalidArgument(std::string(c.op.name), "index",
                          fmt::format("index[{}] = {} is out of range for axis {} of size {} (valid: 0..{})", pos,
                                      value, a, l.dim, l.dim - 1));
  }
  if (c.out.numel == 0) return;
  index_select(l);
  x.launched();
}

// ---- nn ------------------------------------------------------------------------------------------------------------------

void conv2d_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl &input = arg(c, 0), &weight = arg(c, 1);
  const Shape &is = input.shape, &ws = weight.shape, &os = c.out.shape;
  const std::span<const int64_t> stride = c.args[3].ints, pad = c.args[4].ints;
  const AsF32 in(x, input), w(x, weight);  // Note [Halves through the f32 kernels]
  std::optional<AsF32> bias;
  if (c.args[2].present) bias.emplace(x, arg(c, 2));
  const F32Out result(x);
  conv2d({in.get(), w.get(), bias ? bias->get() : nullptr, result.get(), is[0], is[1], is[2], is[3], ws[0], ws[2],
          ws[3], os[2], os[3], stride[0], stride[1], pad[0], pad[1], x.stream});
  x.launched();
  result.finish();
}

// unfold moves bits (f16/bf16 elements as themselves); fold sums, through f32 for the halves.
void unfold_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const Shape& is = arg(c, 0).shape;
  const std::span<const int64_t> k = c.args[1].ints, stride = c.args[2].ints, pad = c.args[3].ints;
  const int64_t ho = (is[2] + 2 * pad[0] - k[0]) / stride[0] + 1, wo = (is[3] + 2 * pad[1] - k[1]) / stride[1] + 1;
  unfold({int(dtype_size(c.out.dtype)), in(c.tensor(0)), out(c), is[0], is[1], is[2], is[3], k[0], k[1], ho, wo,
          stride[0], stride[1], pad[0], pad[1], x.stream});
  x.launched();
}

void fold_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const Shape& os = c.out.shape;
  const std::span<const int64_t> k = c.args[2].ints, stride = c.args[3].ints, pad = c.args[4].ints;
  const int64_t ho = (os[2] + 2 * pad[0] - k[0]) / stride[0] + 1, wo = (os[3] + 2 * pad[1] - k[1]) / stride[1] + 1;
  const AsF32 src(x, arg(c, 0));
  const F32Out result(x);
  fold({4, src.get(), result.raw(), os[0], os[1], os[2], os[3], k[0], k[1], ho, wo, stride[0], stride[1], pad[0],
        pad[1], x.stream});
  x.launched();
  result.finish();
}

}  // namespace

// Note [Coverage checks that name the op] (op_table.hpp): every unary, binary and reduce op of the table is in
// launch.hpp's list of its family, or compilation stops naming the op.
constexpr bool in_list(std::initializer_list<std::string_view> list, std::string_view name) {
  for (std::string_view n : list)
    if (n == name) return true;
  return false;
}
#define CROSSFIRE_CUDA_NAME(name, Tag, types) #name,
constexpr bool cuda_has_kernel(const OpDef& op) {
  switch (op.family) {
    case OpFamily::unary: return in_list({CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_NAME)}, op.name);
    case OpFamily::binary: return in_list({CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_NAME)}, op.name);
    case OpFamily::reduce: return in_list({CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_NAME)}, op.name);
    default: return true;  // registered one by one below; an op missing there is Unsupported at run time
  }
}
#undef CROSSFIRE_CUDA_NAME
template <auto Name, bool listed>
struct cuda_op_list_has {
  static_assert(listed, "kernels/cuda: an op of the unary, binary or reduce family is not in launch.hpp's list "
                        "of its family (CROSSFIRE_CUDA_*_OPS); the op is this template's first argument");
  static constexpr bool value = listed;
};
static_assert(every_op_passes<cuda_op_list_has, cuda_has_kernel>());

// And each list's dtype mask is exactly the op table's set for the op's first input, so that no dtype the table
// admits reaches a launcher that would skip it (with_type in elementwise.cu launches nothing for a dtype outside
// the mask).
constexpr bool mask_matches(std::initializer_list<std::pair<std::string_view, unsigned>> list, const OpDef& op) {
  for (const auto& [n, mask] : list)
    if (n == op.name) return mask == op.params[0].dtypes.bits;
  return true;  // not in this list
}
#define CROSSFIRE_CUDA_MASK(name, Tag, types) std::pair<std::string_view, unsigned>{#name, types},
constexpr bool cuda_mask_matches(const OpDef& op) {
  switch (op.family) {
    case OpFamily::unary: return mask_matches({CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_MASK)}, op);
    case OpFamily::binary: return mask_matches({CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_MASK)}, op);
    case OpFamily::reduce: return mask_matches({CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_MASK)}, op);
    default: return true;
  }
}
#undef CROSSFIRE_CUDA_MASK
template <auto Name, bool matches>
struct cuda_mask_is_the_tables {
  static_assert(matches, "kernels/cuda: the dtype mask in launch.hpp's list (CROSSFIRE_CUDA_*_OPS) differs from "
                         "the op table's dtype set of the op's first input; the op is this template's first argument");
  static constexpr bool value = matches;
};
static_assert(every_op_passes<cuda_mask_is_the_tables, cuda_mask_matches>());

// Every op of kOpTable but from_data and to, which dispatch runs through write/read/copy.
void register_kernels(CudaBackend& b) {
  b.set_kernel("zeros", zeros_kernel);
  b.set_kernel("ones", ones_kernel);
  b.set_kernel("full", full_kernel);
  b.set_kernel("arange", arange_kernel);
  b.set_kernel("rand", random_kernel<rand>);
  b.set_kernel("randn", random_kernel<randn>);
#define CROSSFIRE_CUDA_REGISTER_UNARY(name, Tag, types) b.set_kernel(#name, unary_kernel<fn::Tag>);
#define CROSSFIRE_CUDA_REGISTER_BINARY(name, Tag, types) b.set_kernel(#name, binary_kernel<fn::Tag>);
#define CROSSFIRE_CUDA_REGISTER_REDUCE(name, Tag, types) b.set_kernel(#name, reduce_kernel<fn::Tag>);
  CROSSFIRE_CUDA_UNARY_OPS(CROSSFIRE_CUDA_REGISTER_UNARY)
  CROSSFIRE_CUDA_BINARY_OPS(CROSSFIRE_CUDA_REGISTER_BINARY)
  CROSSFIRE_CUDA_REDUCE_OPS(CROSSFIRE_CUDA_REGISTER_REDUCE)
#undef CROSSFIRE_CUDA_REGISTER_UNARY
#undef CROSSFIRE_CUDA_REGISTER_BINARY
#undef CROSSFIRE_CUDA_REGISTER_REDUCE
  b.set_kernel("where", where_kernel);
  b.set_kernel("cast", cast_kernel);
  b.set_kernel("matmul", matmul_kernel);
  b.set_kernel("reshape", reshape_kernel);
  b.set_kernel("permute", permute_kernel);
  b.set_kernel("slice", slice_kernel);
  b.set_kernel("expand", expand_kernel);
  b.set_kernel("cat", cat_kernel);
  b.set_kernel("index_select", index_select_kernel);
  b.set_kernel("softmax", softmax_kernel);
  b.set_kernel("conv2d", conv2d_kernel);
  b.set_kernel("unfold", unfold_kernel);
  b.set_kernel("fold", fold_kernel);
}

}  // namespace crossfire::cuda
