// SPDX-License-Identifier: Apache-2.0
// Vulkan kernels: what each op records. Every kernel computes push constants (shapes, strides) on the host, picks a
// cached pipeline for its shader module and specialization constants, and records one dispatch (or a fill/copy)
// into the device's current batch; none of them waits, except index_select, which must read its indices.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "crossfire/error.hpp"
#include "crossfire/half_bits.hpp"
#include "pipeline_specs.hpp"
#include "vulkan_backend.hpp"

namespace crossfire::vulkan {
namespace {

Context& ctx(const KernelCall& c) { return static_cast<VulkanBackend*>(c.out.owner)->context(c.out.device.index); }
Allocation* A(const TensorImpl& t) { return &alloc_of(t); }
Allocation* A(const Tensor& t) { return &alloc_of(*t.impl()); }

// Workgroups for `items` invocations of `local` each, spread over x and y (Note [No grid-stride loops]).
struct Grid {
  uint32_t x, y;
};
Grid grid_for(uint64_t workgroups) {
  const uint64_t x = std::clamp<uint64_t>(workgroups, 1, 65535);
  return {uint32_t(x), uint32_t((std::max<uint64_t>(workgroups, 1) + x - 1) / x)};
}
Grid groups(uint64_t items, uint32_t local) { return grid_for((items + local - 1) / local); }

// Note [A driver's loop limit]
// llvmpipe (lavapipe's compiler) has a loop limiter: past about 65,535 iterations a shader invocation's loops are
// cut short, silently. An external check found it (issue 16): a softmax row of 21,845 elements, walked three times
// by one invocation, and a conv2d output of 20,000 channels (loops c, ki, kj) came back wrong; 21,844 was right.
// Not every loop counts alike (fold's 160,000-iteration window loop and matmul's K loop of 70,000 were measured
// right), so the kernels that loop in proportion to a dimension are kept well inside it and held by tests at the
// sizes that failed (tests/ops_large_test.cpp): conv2d splits each output's sum into passes of kConvTermsPerPass
// terms; the reductions and softmax take a long row with a workgroup of 256 invocations, each walking every 256th
// element, so a row of kMaxGroupRow elements is at most 3 x 16,384 iterations (softmax's three walks). A longer
// row raises Unsupported on a CPU-type device (llvmpipe's kind); other drivers have no such limiter.
constexpr uint32_t kConvTermsPerPass = 16384;
constexpr int64_t kMaxGroupRow = int64_t(1) << 22;

// Whether rows of `len` elements, `rows` of them, are each walked by a workgroup of 256 (long rows, or fewer rows
// than would fill the device) rather than one invocation per row: the reductions and softmax decide alike.
bool workgroup_per_row(int64_t len, uint64_t rows) { return len >= 1024 || (len >= 64 && rows < 8192); }

void check_row_length(const KernelCall& call, int64_t len) {
  if (len > kMaxGroupRow && ctx(call).props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
    throw Unsupported(std::string(call.op.name), BackendKind::vulkan,
                      fmt::format("a row of {} elements is longer than this kernel walks on a CPU-type device, "
                                  "whose driver cuts long shader loops short (at most {} elements)",
                                  len, kMaxGroupRow));
}

// (packed_code, a data-movement shader's dtype code, is in pipeline_specs.hpp.)
uint64_t elements_per_word(DType dt) { return dt == DType::boolean ? 4 : is_half(dt) ? 2 : 1; }
// Invocations for a kernel that writes `out` one whole word per invocation (a bool word holds four elements, an f16
// or bf16 word two, an i64 element two words), so that no two invocations share a word.
uint64_t words_of(const TensorImpl& out) {
  if (out.dtype == DType::i64) return 2 * uint64_t(out.numel);
  const uint64_t k = elements_per_word(out.dtype);
  return (uint64_t(out.numel) + k - 1) / k;
}

void run(const KernelCall& call, std::string_view module, std::initializer_list<int32_t> spec,
         std::initializer_list<Allocation*> bufs, const void* push, size_t push_size, Grid g) {
  Context& c = ctx(call);
  std::lock_guard l(c.mu);
  VkPipeline p = c.pipeline(module, std::span<const int32_t>(spec.begin(), spec.size()), call.op.name);
  c.dispatch(p, std::span<Allocation* const>(bufs.begin(), bufs.size()), push, push_size, g.x, g.y, 1, call.op.name);
}

void run(const KernelCall& call, std::string_view module, std::initializer_list<int32_t> spec,
         std::initializer_list<Allocation*> bufs, const void* push, size_t push_size, uint32_t gx, uint32_t gy,
         uint32_t gz) {
  Context& c = ctx(call);
  std::lock_guard l(c.mu);
  VkPipeline p = c.pipeline(module, std::span<const int32_t>(spec.begin(), spec.size()), call.op.name);
  c.dispatch(p, std::span<Allocation* const>(bufs.begin(), bufs.size()), push, push_size, gx, gy, gz, call.op.name);
}

// ---- shapes and strides ------------------------------------------------------------------------------------------

// A shape with per-operand strides (in elements), with size-1 dims dropped and mergeable neighbours merged so the
// shader's index arithmetic runs over as few dims as possible (a plain same-shape op becomes rank 1).
template <int Ops>
struct Strided {
  int rank = 0;
  std::array<uint32_t, 6> shape{};
  std::array<std::array<uint32_t, 6>, Ops> stride{};

  void build(const Shape& out, const std::array<std::array<int64_t, kMaxRank>, Ops>& full) {
    rank = 0;
    for (int d = 0; d < out.rank(); ++d) {
      if (out[d] == 1) continue;
      if (rank > 0) {
        bool merge = true;
        for (int o = 0; o < Ops; ++o)
          merge &= int64_t(stride[o][rank - 1]) == full[o][size_t(d)] * out[d];
        if (merge) {
          shape[size_t(rank - 1)] *= uint32_t(out[d]);
          for (int o = 0; o < Ops; ++o) stride[o][size_t(rank - 1)] = uint32_t(full[o][size_t(d)]);
          continue;
        }
      }
      shape[size_t(rank)] = uint32_t(out[d]);
      for (int o = 0; o < Ops; ++o) stride[o][size_t(rank)] = uint32_t(full[o][size_t(d)]);
      ++rank;
    }
  }
};

// Strides of `in` broadcast against `out` (numpy: aligned at the right; a dim of 1 repeats, stride 0).
std::array<int64_t, kMaxRank> broadcast_strides(const Shape& in, const Shape& out) {
  std::array<int64_t, kMaxRank> s{};
  std::array<int64_t, kMaxRank> cs = contiguous_strides(in);
  int off = out.rank() - in.rank();
  for (int d = 0; d < out.rank(); ++d) {
    int id = d - off;
    s[size_t(d)] = (id < 0 || in[id] == 1) ? 0 : cs[size_t(id)];
  }
  return s;
}

// ---- elementwise -----------------------------------------------------------------------------------------------------

struct ElementwisePush {
  uint32_t n, rank, shape[6], s1[6], s2[6], s3[6];
  float a, b;  // the op's float attributes, rounded to f32 (clamp's min and max)
};
static_assert(sizeof(ElementwisePush) <= 128, "Vulkan guarantees 128 bytes of push constants");

// (kCodes, the op codes by OpId, and runs_elementwise are in elementwise_codes.hpp, which the build-time tool that
// specializes the elementwise modules reads too.)
constexpr bool has_code_if_elementwise(const OpDef& op) {
  return !runs_elementwise(op.family) || kCodes[size_t(&op - kOpTable.data())] != 0;
}
// Note [Coverage checks that name the op] (op_table.hpp): a compile error here names an op that needs a code in
// shaders/op_codes.h, a case in elementwise.comp and a line in kCodes (elementwise_codes.hpp).
template <auto Name, bool has_code>
struct vulkan_op_code_for {
  static_assert(has_code, "kernels/vulkan: an op of an elementwise family has no op code (shaders/op_codes.h, "
                          "elementwise.comp, kCodes); the op is this template's first argument");
  static constexpr bool value = has_code;
};
static_assert(every_op_passes<vulkan_op_code_for, has_code_if_elementwise>());

// Note [One module per elementwise op]
// lavapipe compiles a pipeline from the whole SPIR-V module, before the specialization constants let it drop what
// the op does not use. With every elementwise op in one module, each of its pipelines (one per op and dtypes) took
// ~32 ms to create, against 1-5 ms for the other shaders, and a 10 s campaign on cpu:0, cpu:1 and vulkan:0 spent
// 3.5 s creating 111 of them; lavapipe's pipeline cache keeps nothing across processes, so every worker and test
// process paid it again. So elementwise.comp is compiled once per op code (CF_OP, kernels/vulkan/CMakeLists.txt,
// which reads the codes from shaders/op_codes.h), and glslc's optimiser leaves each module only its op's code;
// the dtypes stay specialization constants. A code without a module is a BackendFailure naming the module.
std::string_view elementwise_module(int code, bool f64) {
  constexpr int kCodeLimit = 64;
  static_assert(CF_WHERE < kCodeLimit, "elementwise op codes must stay below kCodeLimit");
  static const std::array<std::string, 2 * kCodeLimit> names = [] {
    std::array<std::string, 2 * kCodeLimit> n;
    for (int c = 0; c < kCodeLimit; ++c) {
      n[size_t(c)] = fmt::format("elementwise_{}", c);
      n[size_t(kCodeLimit + c)] = fmt::format("elementwise_{}_f64", c);
    }
    return n;
  }();
  return names[size_t(code + (f64 ? kCodeLimit : 0))];
}

void elementwise_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const int code = kCodes[call.id];
  std::array<const TensorImpl*, 3> ins{};
  int nin;
  if (code == CF_WHERE) {
    ins = {call.tensor(0).impl(), call.tensor(1).impl(), call.tensor(2).impl()};
    nin = 3;
  } else if (code < CF_ADD) {
    ins[0] = call.tensor(0).impl();
    nin = 1;
  } else {
    ins = {call.tensor(0).impl(), call.tensor(1).impl(), nullptr};
    nin = 2;
  }
  const DType dt_in = code == CF_WHERE ? ins[1]->dtype : ins[0]->dtype;
  std::array<std::array<int64_t, kMaxRank>, 3> full{};
  for (int i = 0; i < nin; ++i) full[size_t(i)] = broadcast_strides(ins[size_t(i)]->shape, out.shape);
  Strided<3> st;
  st.build(out.shape, full);
  ElementwisePush p{};
  p.n = uint32_t(out.numel);
  p.rank = uint32_t(st.rank);
  for (int d = 0; d < st.rank; ++d) {
    p.shape[d] = st.shape[size_t(d)];
    p.s1[d] = st.stride[0][size_t(d)];
    p.s2[d] = st.stride[1][size_t(d)];
    p.s3[d] = st.stride[2][size_t(d)];
  }
  p.a = call.float_attr_f32(0);
  p.b = call.float_attr_f32(1);
  const bool f64 = code == CF_POW && ctx(call).has_f64;
  // An i64 output: one invocation an element, writing its two words (elementwise.comp, WIDE_OUT).
  const uint64_t items = out.dtype == DType::i64 ? uint64_t(out.numel) : words_of(out);
  run(call, elementwise_module(code, f64), {code, int32_t(dt_in), int32_t(out.dtype)},
      {A(out), A(*ins[0]), ins[1] ? A(*ins[1]) : nullptr, ins[2] ? A(*ins[2]) : nullptr}, &p, sizeof p,
      groups(items, 256));
}

// Note [Halves through the f32 kernels]
// The elementwise kernel, fill, rand and randn and the data movement (unfold included) compute f16 and bf16 in
// their shaders. The reductions, softmax, matmul, conv2d and fold have f32 shaders only; a call of theirs with f16 or bf16
// tensors runs the f32 shader on f32 copies: each half input is widened (cast, exact), the f32 kernel computes into
// an f32 temporary, and that is narrowed to the output's dtype (cast: nearest even, overflow to infinity). It is
// what the CPU backend does for these ops (it computes halves in f32 and rounds each result once), so each keeps
// its f32 accumulation and one final rounding, which contract section 6 charges at the half dtype's eps; none of
// them is declared to accumulate in the dtype. The temporaries are ordinary tensors of this device, released when
// the call returns: their memory goes back to the pool once the batch that reads it has run
// (Context::release_chunk). argmax of a half tensor widens its input only (its output is i32).
Tensor temporary(const KernelCall& call, DType dt, const Shape& shape) {
  auto* b = static_cast<VulkanBackend*>(call.out.owner);
  return Tensor::adopt_new(b->allocate(call.out.device, dt, shape, call.op.name));
}

void cast_into(const Tensor& x, TensorImpl& out) {
  static constexpr OpId kCast = op_id("cast");
  ArgPack args;
  args.push(Arg::of(x));
  args.push(Arg::of(out.dtype));
  elementwise_kernel(KernelCall{op_def(kCast), kCast, args, out});
}

Tensor widened(const KernelCall& call, const Tensor& x) {
  Tensor w = temporary(call, DType::f32, x.shape());
  cast_into(x, *w.impl());
  return w;
}

template <KernelFn F32Kernel>
void halves_via_f32(const KernelCall& call) {
  const OpDef& op = call.op;
  auto half_arg = [&](const Arg& a) {
    if (a.role == ParamRole::tensor_list)
      return std::any_of(a.list.begin(), a.list.end(), [](const Tensor& t) { return is_half(t.dtype()); });
    return a.tensor != nullptr && (a.role == ParamRole::tensor || a.present) && is_half(a.tensor->dtype());
  };
  bool any = is_half(call.out.dtype);
  for (int i = 0; i < op.num_tensor_params && !any; ++i) any = half_arg(call.args[op.tensor_params[size_t(i)]]);
  if (!any) return F32Kernel(call);
  if (call.out.numel == 0) return;
  ArgPack args = call.args;
  std::array<Tensor, kMaxParams> single;                // the widened copy of each half tensor argument
  std::array<std::vector<Tensor>, kMaxParams> lists;    // a list with a half member, every member widened
  for (int i = 0; i < op.num_tensor_params; ++i) {
    const int p = op.tensor_params[size_t(i)];
    Arg& a = args.args[size_t(p)];
    if (!half_arg(a)) continue;
    if (a.role == ParamRole::tensor_list) {
      for (const Tensor& t : a.list) lists[size_t(p)].push_back(is_half(t.dtype()) ? widened(call, t) : t);
      a.list = lists[size_t(p)];
    } else {
      single[size_t(p)] = widened(call, *a.tensor);
      a.tensor = &single[size_t(p)];
    }
  }
  if (!is_half(call.out.dtype)) return F32Kernel(KernelCall{op, call.id, args, call.out});
  const Tensor out32 = temporary(call, DType::f32, call.out.shape);
  F32Kernel(KernelCall{op, call.id, args, *out32.impl()});
  cast_into(out32, call.out);
}

// ---- creation ------------------------------------------------------------------------------------------------------

void fill_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.nbytes == 0) return;
  const std::string_view n = call.op.name;
  const double v = n == "zeros" ? 0.0 : n == "ones" ? 1.0 : call.args[1].f;
  uint32_t pattern = 0;
  switch (out.dtype) {
    case DType::f32: {
      float f = round_to_f32(v);
      std::memcpy(&pattern, &f, 4);
      break;
    }
    case DType::i32: pattern = uint32_t(float_to_int<int32_t>(v)); break;
    case DType::boolean: pattern = v != 0 ? 0x01010101u : 0u; break;
    case DType::f16:
    case DType::bf16: {  // two copies of the element, each half of the word
      const uint32_t h = half_bits_of(v, out.dtype);  // crossfire/half_bits.hpp
      pattern = h | (h << 16);
      break;
    }
    case DType::i64: {
      const int64_t x = float_to_int<int64_t>(v);
      if (x == 0 || x == -1) {  // both words alike: one fill
        pattern = uint32_t(x);
        break;
      }
      std::vector<int64_t> values(size_t(out.numel), x);  // two words unlike: written from the host
      Context& c = ctx(call);
      std::lock_guard l(c.mu);
      c.write(*A(out), values.data(), out.nbytes);
      return;
    }
  }
  Context& c = ctx(call);
  std::lock_guard l(c.mu);
  c.fill(*A(out), pattern, n);
}

void arange_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const double start = call.args[0].f, step = call.args[2].f;
  Context& c = ctx(call);
  if (c.has_f64 && (out.dtype == DType::f32 || out.dtype == DType::i32)) {
    struct {
      uint32_t n, pad;
      double start, step;
    } p{uint32_t(out.numel), 0, start, step};
    run(call, "arange_f64", {int32_t(out.dtype)}, {A(out)}, &p, sizeof p, groups(uint64_t(out.numel), 256));
    return;
  }
  // No shaderFloat64 on this device, or a dtype the shader does not write (a half, an i64): the values are computed
  // in f64 on the host, as the op table defines them, and rounded once to the dtype.
  std::vector<uint8_t> bytes(out.nbytes);
  for (size_t i = 0; i < size_t(out.numel); ++i) {
    volatile double prod = double(i) * step;  // two roundings, as in the shader (no contraction into an fma)
    const double x = start + prod;
    if (is_half(out.dtype)) {
      const uint16_t h = uint16_t(half_bits_of(x, out.dtype));
      std::memcpy(&bytes[2 * i], &h, 2);
    } else if (out.dtype == DType::f32) {
      const float f = float(x);
      std::memcpy(&bytes[4 * i], &f, 4);
    } else if (out.dtype == DType::i64) {
      const int64_t v = float_to_int<int64_t>(x);
      std::memcpy(&bytes[8 * i], &v, 8);
    } else {
      const int32_t v = float_to_int<int32_t>(x);
      std::memcpy(&bytes[4 * i], &v, 4);
    }
  }
  std::lock_guard l(c.mu);
  c.write(*A(out), bytes.data(), out.nbytes);
}

void rand_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const uint64_t seed = uint64_t(call.args[1].i);
  const bool normal = call.op.name == "randn";
  struct {
    uint32_t n, k0, k1;
  } p{uint32_t(out.numel), uint32_t(seed), uint32_t(seed >> 32)};
  const bool f64 = normal && ctx(call).has_f64;
  run(call, f64 ? "rand_f64" : "rand", {int32_t(normal), int32_t(out.dtype)}, {A(out)}, &p, sizeof p,
      groups((uint64_t(out.numel) + 3) / 4, 256));
}

// ---- reductions ------------------------------------------------------------------------------------------------------


void reduce_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& x = *call.tensor(0).impl();
  AxisSplit a;
  if (call.args[1].present) a = split_at(x.shape, normalised_axis(call.args[1].i, x.shape.rank()));
  else a.len = x.numel;
  const uint64_t n_out = uint64_t(a.outer * a.inner);
  const bool group = workgroup_per_row(a.len, n_out);
  check_row_length(call, a.len);
  struct {
    uint32_t n_out, r, inner;
  } p{uint32_t(n_out), uint32_t(a.len), uint32_t(a.inner)};
  run(call, "reduce", {kCodes[call.id], int32_t(x.dtype), int32_t(group)}, {A(out), A(x)}, &p, sizeof p,
      group ? grid_for(n_out) : groups(n_out, 256));
}

void softmax_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& x = *call.tensor(0).impl();
  AxisSplit a = split_at(x.shape, normalised_axis(call.args[1].i, x.shape.rank()));
  check_row_length(call, a.len);
  const uint64_t rows = uint64_t(a.outer * a.inner);
  const bool group = workgroup_per_row(a.len, rows);
  struct {
    uint32_t rows, r, inner;
  } p{uint32_t(rows), uint32_t(a.len), uint32_t(a.inner)};
  run(call, "softmax", {int32_t(group)}, {A(out), A(x)}, &p, sizeof p, group ? grid_for(rows) : groups(rows, 256));
}

// ---- matmul ----------------------------------------------------------------------------------------------------------

// Note [Small matmuls without tiles]
// matmul.comp computes a 64x64 tile per workgroup of 256 invocations, staging K-slices in shared memory between
// barriers: right for large products, but a campaign's matmuls are a few rows by a few columns, and lavapipe ran
// the whole tile for them (a 32x32 product took ~650 us of its time; one JIT-compiled function, matmul's, was half
// of a cpu+vulkan campaign's samples). A product of at most 4096 outputs (one tile's worth) goes to
// matmul_small.comp instead: one invocation per output, summing its K products in order, as each tile does (the
// same f32 accumulation, so the same bound), no shared memory and no barrier; a long K in passes of 4096 products,
// each continuing from the partial sum the one before stored, so no loop nears llvmpipe's limit (Note [A driver's
// loop limit]). On lavapipe a 32x32x32 product went from 333-706 us to 118 us (bench_kernels, synchronised); a
// 128x128x128 one was faster tiled (4.1 ms against 5.6), hence the limit on outputs.
constexpr uint64_t kSmallMatmulOutputs = 4096;
constexpr int64_t kSmallMatmulTermsPerPass = 4096;

void matmul_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& l = *call.tensor(0).impl();
  const TensorImpl& r = *call.tensor(1).impl();
  const int orank = out.shape.rank();
  const int64_t m = out.shape[orank - 2], n = out.shape[orank - 1], k = l.shape[l.shape.rank() - 1];
  Shape ob, lb, rb;
  for (int d = 0; d < orank - 2; ++d) ob.push_back(out.shape[d]);
  for (int d = 0; d < l.shape.rank() - 2; ++d) lb.push_back(l.shape[d]);
  for (int d = 0; d < r.shape.rank() - 2; ++d) rb.push_back(r.shape[d]);
  Strided<2> st;
  st.build(ob, {broadcast_strides(lb, ob), broadcast_strides(rb, ob)});
  struct {
    uint32_t m, n, k, batch, brank, bshape[4], sa[4], sb[4], base_x, base_y, base_z;
  } p{};
  p.m = uint32_t(m);
  p.n = uint32_t(n);
  p.k = uint32_t(k);
  p.batch = uint32_t(ob.numel());
  p.brank = uint32_t(st.rank);
  for (int d = 0; d < st.rank; ++d) {
    p.bshape[d] = st.shape[size_t(d)];
    p.sa[d] = st.stride[0][size_t(d)];
    p.sb[d] = st.stride[1][size_t(d)];
  }
  const uint64_t outputs = uint64_t(p.batch) * uint64_t(m) * uint64_t(n);
  if (outputs <= kSmallMatmulOutputs) {
    int64_t k0 = 0;
    do {  // passes over K; the tile offsets carry [k0, k1) (matmul_small.comp)
      const int64_t k1 = std::min<int64_t>(k, k0 + kSmallMatmulTermsPerPass);
      p.base_x = uint32_t(k0);
      p.base_y = uint32_t(k1);
      run(call, "matmul_small", {}, {A(out), A(l), A(r)}, &p, sizeof p, groups(outputs, 64));
      k0 = k1;
    } while (k0 < k);
    return;
  }
  // One workgroup per 64x64 tile per batch entry; grids beyond 65535 in any dimension are split into dispatches.
  const int64_t tn = (n + 63) / 64, tm = (m + 63) / 64, nb = int64_t(p.batch);
  for (int64_t z = 0; z < nb; z += 65535)
    for (int64_t y = 0; y < tm; y += 65535)
      for (int64_t x = 0; x < tn; x += 65535) {
        p.base_x = uint32_t(x);
        p.base_y = uint32_t(y);
        p.base_z = uint32_t(z);
        run(call, "matmul", {}, {A(out), A(l), A(r)}, &p, sizeof p, uint32_t(std::min<int64_t>(tn - x, 65535)),
            uint32_t(std::min<int64_t>(tm - y, 65535)), uint32_t(std::min<int64_t>(nb - z, 65535)));
      }
}

// ---- layout ----------------------------------------------------------------------------------------------------------

void gather(const KernelCall& call, const TensorImpl& x, int64_t base, const std::array<int64_t, kMaxRank>& strides) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  Strided<1> st;
  st.build(out.shape, {strides});
  struct {
    uint32_t n, rank, base, shape[6], stride[6];
  } p{};
  p.n = uint32_t(out.numel);
  p.rank = uint32_t(st.rank);
  p.base = uint32_t(base);
  for (int d = 0; d < st.rank; ++d) {
    p.shape[d] = st.shape[size_t(d)];
    p.stride[d] = st.stride[0][size_t(d)];
  }
  const uint64_t items = words_of(out);
  run(call, "gather", {packed_code(out.dtype)}, {A(out), A(x)}, &p, sizeof p,
      groups(items, 256));
}

void reshape_kernel(const KernelCall& call) {
  if (call.out.nbytes == 0) return;
  Context& c = ctx(call);
  std::lock_guard l(c.mu);
  c.copy(*A(call.tensor(0)), *A(call.out), call.out.nbytes);
}

void permute_kernel(const KernelCall& call) {
  const TensorImpl& x = *call.tensor(0).impl();
  std::array<int64_t, kMaxRank> cs = contiguous_strides(x.shape), s{};
  std::span<const int64_t> dims = call.args[1].ints;
  for (size_t i = 0; i < dims.size(); ++i) s[i] = cs[size_t(dims[i])];
  gather(call, x, 0, s);
}

void slice_kernel(const KernelCall& call) {
  const TensorImpl& x = *call.tensor(0).impl();
  const SliceView v = slice_view(x.shape, call.out.shape, call.args[1].ints, call.args[3].ints);
  gather(call, x, v.offset, v.strides);
}

void expand_kernel(const KernelCall& call) {
  const TensorImpl& x = *call.tensor(0).impl();
  gather(call, x, 0, broadcast_strides(x.shape, call.out.shape));
}

void cat_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  std::span<const Tensor> ts = call.args[0].list;
  const int64_t axis = normalised_axis(call.args[1].i, out.shape.rank());
  AxisSplit a = split_at(out.shape, int(axis));
  const uint64_t k = elements_per_word(out.dtype);  // 1: one element per invocation; else one word
  int64_t off = 0;
  for (const Tensor& t : ts) {
    const int64_t d = t.shape()[int(axis)];
    if (t.numel() > 0) {
      struct {
        uint32_t n, inner, total, off, d, word_begin, word_end, out_n;
      } p{};
      p.n = uint32_t(t.numel());
      p.inner = uint32_t(a.inner);
      p.total = uint32_t(a.len);
      p.off = uint32_t(off);
      p.d = uint32_t(d);
      const uint64_t first = uint64_t(off * a.inner);
      const uint64_t last = uint64_t(((a.outer - 1) * a.len + off + d) * a.inner);
      p.word_begin = uint32_t(first / k);
      p.word_end = uint32_t((last + k - 1) / k);
      p.out_n = uint32_t(out.numel);
      const uint64_t items = out.dtype == DType::i64 ? 2 * uint64_t(p.n) : k > 1 ? p.word_end - p.word_begin : p.n;
      run(call, "cat", {packed_code(out.dtype)}, {A(out), A(t)}, &p, sizeof p, groups(items, 256));
    }
    off += d;
  }
}

void index_select_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  const TensorImpl& x = *call.tensor(0).impl();
  const TensorImpl& index = *call.tensor(2).impl();
  const int64_t axis = normalised_axis(call.args[1].i, x.shape.rank());
  AxisSplit a = split_at(x.shape, int(axis));
  // Indices are data, not metadata: reading them is the one synchronisation a kernel does (op table doc).
  if (index.numel > 0) {
    auto check = [&]<typename I>(std::vector<I> idx) {  // i32 or i64
      {
        Context& c = ctx(call);
        std::lock_guard l(c.mu);
        c.read(*A(index), idx.data(), index.nbytes, call.op.name);
      }
      for (size_t j = 0; j < idx.size(); ++j)
        if (idx[j] < 0 || idx[j] >= a.len)
          throw InvalidArgument(std::string(call.op.name), "index",
                                fmt::format("entry {} is {}, out of range [0, {}) for axis {} of x {}", j, idx[j],
                                            a.len, axis, x.shape.str()));
    };
    if (index.dtype == DType::i64) check(std::vector<int64_t>(size_t(index.numel)));
    else check(std::vector<int32_t>(size_t(index.numel)));
  }
  if (out.numel == 0) return;
  struct {
    uint32_t n, inner, j, d;
  } p{uint32_t(out.numel), uint32_t(a.inner), uint32_t(index.numel), uint32_t(a.len)};
  const uint64_t items = words_of(out);
  run(call, "index_select", {packed_code(out.dtype), int32_t(index.dtype)}, {A(out), A(x), A(index)}, &p, sizeof p,
      groups(items, 256));
}

// ---- nn --------------------------------------------------------------------------------------------------------------

void conv2d_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& in = *call.tensor(0).impl();
  const TensorImpl& w = *call.tensor(1).impl();
  const bool bias = call.args[2].present;
  std::span<const int64_t> stride = call.args[3].ints, pad = call.args[4].ints;
  struct {
    uint32_t total, N, C, H, W, O, KH, KW, SH, SW, PH, PW, HO, WO, has_bias, j0, j1;
  } p{uint32_t(out.numel), uint32_t(in.shape[0]), uint32_t(in.shape[1]), uint32_t(in.shape[2]),
      uint32_t(in.shape[3]), uint32_t(w.shape[0]), uint32_t(w.shape[2]), uint32_t(w.shape[3]),
      uint32_t(stride[0]), uint32_t(stride[1]), uint32_t(pad[0]), uint32_t(pad[1]),
      uint32_t(out.shape[2]), uint32_t(out.shape[3]), uint32_t(bias), 0, 0};
  // The sum of each output in passes (Note [A driver's loop limit]); each pass reads what the one before stored.
  const uint64_t terms = uint64_t(in.shape[1]) * uint64_t(w.shape[2]) * uint64_t(w.shape[3]);
  uint64_t j0 = 0;
  do {
    const uint64_t j1 = std::min<uint64_t>(terms, j0 + kConvTermsPerPass);
    p.j0 = uint32_t(j0);
    p.j1 = uint32_t(j1);
    run(call, "conv2d", {}, {A(out), A(in), A(w), bias ? A(call.tensor(2)) : nullptr}, &p, sizeof p,
        groups(uint64_t(out.numel), 256));
    j0 = j1;
  } while (j0 < terms);
}

struct WindowPush {
  uint32_t total, N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO;
};

void unfold_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& in = *call.tensor(0).impl();
  std::span<const int64_t> k = call.args[1].ints, s = call.args[2].ints, pd = call.args[3].ints;
  const int64_t ho = (in.shape[2] + 2 * pd[0] - k[0]) / s[0] + 1, wo = (in.shape[3] + 2 * pd[1] - k[1]) / s[1] + 1;
  WindowPush p{uint32_t(out.numel), uint32_t(in.shape[0]), uint32_t(in.shape[1]), uint32_t(in.shape[2]),
               uint32_t(in.shape[3]), uint32_t(k[0]), uint32_t(k[1]), uint32_t(s[0]), uint32_t(s[1]),
               uint32_t(pd[0]), uint32_t(pd[1]), uint32_t(ho), uint32_t(wo)};
  // A gather of bits, packed like the other data movement (f16/bf16 two to a word): a NaN keeps its payload.
  run(call, "unfold", {packed_code(out.dtype)}, {A(out), A(in)}, &p, sizeof p, groups(words_of(out), 256));
}

void fold_kernel(const KernelCall& call) {
  const TensorImpl& out = call.out;
  if (out.numel == 0) return;
  const TensorImpl& in = *call.tensor(0).impl();
  std::span<const int64_t> k = call.args[2].ints, s = call.args[3].ints, pd = call.args[4].ints;
  const int64_t h = out.shape[2], w = out.shape[3];
  const int64_t ho = (h + 2 * pd[0] - k[0]) / s[0] + 1, wo = (w + 2 * pd[1] - k[1]) / s[1] + 1;
  WindowPush p{uint32_t(out.numel), uint32_t(out.shape[0]), uint32_t(out.shape[1]), uint32_t(h), uint32_t(w),
               uint32_t(k[0]), uint32_t(k[1]), uint32_t(s[0]), uint32_t(s[1]), uint32_t(pd[0]), uint32_t(pd[1]),
               uint32_t(ho), uint32_t(wo)};
  run(call, "fold", {}, {A(out), A(in)}, &p, sizeof p, groups(uint64_t(out.numel), 256));
}

}  // namespace

void register_kernels(VulkanBackend& b) {
  b.set_kernel("zeros", fill_kernel);
  b.set_kernel("ones", fill_kernel);
  b.set_kernel("full", fill_kernel);
  b.set_kernel("arange", arange_kernel);
  b.set_kernel("rand", rand_kernel);
  b.set_kernel("randn", rand_kernel);
  for (const OpDef& op : kOpTable)
    if (runs_elementwise(op.family)) b.set_kernel(op.name, elementwise_kernel);
  b.set_kernel("sum", halves_via_f32<reduce_kernel>);
  b.set_kernel("mean", halves_via_f32<reduce_kernel>);
  b.set_kernel("max", halves_via_f32<reduce_kernel>);
  b.set_kernel("argmax", halves_via_f32<reduce_kernel>);
  b.set_kernel("matmul", halves_via_f32<matmul_kernel>);
  b.set_kernel("reshape", reshape_kernel);
  b.set_kernel("permute", permute_kernel);
  b.set_kernel("slice", slice_kernel);
  b.set_kernel("expand", expand_kernel);
  b.set_kernel("cat", cat_kernel);
  b.set_kernel("index_select", index_select_kernel);
  b.set_kernel("softmax", halves_via_f32<softmax_kernel>);
  b.set_kernel("conv2d", halves_via_f32<conv2d_kernel>);
  b.set_kernel("unfold", unfold_kernel);  // bits, in every dtype
  b.set_kernel("fold", halves_via_f32<fold_kernel>);
  // from_data and to are run by dispatch through write(), read() and copy().
}

}  // namespace crossfire::vulkan
