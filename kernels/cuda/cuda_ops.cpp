// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's kernel table: one host function per op family that reads the validated call (KernelCall),
// describes the work as one of launch.hpp's plain structs and hands it to the family's device code on the device's
// stream. Dispatch has already checked devices, dtypes, shapes and attributes and allocated the output, so nothing
// here validates anything except what only the device can know (index_select's index values).
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "crossfire/error.hpp"
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

// A value converted to dtype as cast converts (f32 -> i32 truncates toward zero and saturates, NaN -> 0).
uint32_t bits_of(double v, DType dt) {
  switch (dt) {
    case DType::f16:
    case DType::bf16:
    case DType::i64: return 0;  // never: this backend holds no f16, bf16 or i64 tensor (Backend::dtypes())
    case DType::f32: {
      const float f = round_to_f32(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DType::i32: {
      int32_t i = v != v ? 0 : v >= 2147483648.0 ? INT32_MAX : v < -2147483648.0 ? INT32_MIN : int32_t(v);
      return uint32_t(i);
    }
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
  generate({static_cast<float*>(out(c)), c.out.numel, uint64_t(c.args[1].i), x.stream});
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
  ReduceLaunch l{src.dtype, src.backend_state, out(c), 0, 0, 0, nullptr, x.stream};
  reduce_geometry(src.shape, c.args[1], l.outer, l.len, l.inner);
  const size_t bytes = reduce_scratch_bytes<Op>(l);
  l.scratch = x.backend.scratch(x.device, bytes, c.op.name);
  reduce<Op>(l);
  x.backend.release_scratch(x.device, l.scratch, bytes);  // stream order makes reuse by a later op safe
  x.launched();
}

void softmax_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl& src = arg(c, 0);
  const AxisSplit a = split_at(src.shape, normalised_axis(c.args[1].i, src.shape.rank()));
  softmax({static_cast<const float*>(src.backend_state), static_cast<float*>(out(c)), a.outer, a.len, a.inner,
           x.stream});
  x.launched();
}

// ---- matmul ----------------------------------------------------------------------------------------------------------

void matmul_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const TensorImpl &a = arg(c, 0), &b = arg(c, 1);
  const Shape& o = c.out.shape;
  MatmulLaunch l{};
  l.lhs = static_cast<const float*>(a.backend_state);
  l.rhs = static_cast<const float*>(b.backend_state);
  l.out = static_cast<float*>(out(c));
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
  IndexSelectLaunch l{int(dtype_size(src.dtype)), src.backend_state,
                      static_cast<const int32_t*>(index.backend_state), out(c), around.outer, around.len,
                      around.inner, index.numel, nullptr};
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
    int32_t value = 0;
    x.check(cudaMemcpy(&value, l.index + pos, sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
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
  conv2d({static_cast<const float*>(input.backend_state), static_cast<const float*>(weight.backend_state),
          c.args[2].present ? static_cast<const float*>(arg(c, 2).backend_state) : nullptr,
          static_cast<float*>(out(c)), is[0], is[1], is[2], is[3], ws[0], ws[2], ws[3], os[2], os[3], stride[0],
          stride[1], pad[0], pad[1], x.stream});
  x.launched();
}

void unfold_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const Shape& is = arg(c, 0).shape;
  const std::span<const int64_t> k = c.args[1].ints, stride = c.args[2].ints, pad = c.args[3].ints;
  const int64_t ho = (is[2] + 2 * pad[0] - k[0]) / stride[0] + 1, wo = (is[3] + 2 * pad[1] - k[1]) / stride[1] + 1;
  unfold({static_cast<const float*>(in(c.tensor(0))), static_cast<float*>(out(c)), is[0], is[1], is[2], is[3], k[0],
          k[1], ho, wo, stride[0], stride[1], pad[0], pad[1], x.stream});
  x.launched();
}

void fold_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  Ctx x(c);
  const Shape& os = c.out.shape;
  const std::span<const int64_t> k = c.args[2].ints, stride = c.args[3].ints, pad = c.args[4].ints;
  const int64_t ho = (os[2] + 2 * pad[0] - k[0]) / stride[0] + 1, wo = (os[3] + 2 * pad[1] - k[1]) / stride[1] + 1;
  fold({static_cast<const float*>(in(c.tensor(0))), static_cast<float*>(out(c)), os[0], os[1], os[2], os[3], k[0],
        k[1], ho, wo, stride[0], stride[1], pad[0], pad[1], x.stream});
  x.launched();
}

}  // namespace

// Note [Coverage checks that name the op] (op_table.hpp): every unary, binary and reduce op of the table is in
// launch.hpp's list of its family, or compilation stops naming the op.
constexpr bool in_list(std::initializer_list<std::string_view> list, std::string_view name) {
  for (std::string_view n : list)
    if (n == name) return true;
  return false;
}
#define CROSSFIRE_CUDA_NAME(name, Tag) #name,
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

// Every op of kOpTable but from_data and to, which dispatch runs through write/read/copy.
void register_kernels(CudaBackend& b) {
  b.set_kernel("zeros", zeros_kernel);
  b.set_kernel("ones", ones_kernel);
  b.set_kernel("full", full_kernel);
  b.set_kernel("arange", arange_kernel);
  b.set_kernel("rand", random_kernel<rand>);
  b.set_kernel("randn", random_kernel<randn>);
#define CROSSFIRE_CUDA_REGISTER_UNARY(name, Tag) b.set_kernel(#name, unary_kernel<fn::Tag>);
#define CROSSFIRE_CUDA_REGISTER_BINARY(name, Tag) b.set_kernel(#name, binary_kernel<fn::Tag>);
#define CROSSFIRE_CUDA_REGISTER_REDUCE(name, Tag) b.set_kernel(#name, reduce_kernel<fn::Tag>);
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
