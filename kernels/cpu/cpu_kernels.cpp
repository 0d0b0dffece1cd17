// CPU kernels. (Being filled in: see issue 2.)
#include <cstring>

#include "cpu_backend.hpp"

namespace crossfire::cpu {
namespace {

template <class T>
T* out_ptr(const KernelCall& c) { return static_cast<T*>(c.out.data); }

void fill_kernel(const KernelCall& c) {
  double v = c.op.name == "zeros" ? 0.0 : c.op.name == "ones" ? 1.0 : c.args[1].f;
  switch (c.out.dtype) {
    case DType::f32: std::fill_n(out_ptr<float>(c), c.out.numel, float(v)); break;
    case DType::i32: std::fill_n(out_ptr<int32_t>(c), c.out.numel, int32_t(v)); break;
    case DType::boolean: std::fill_n(out_ptr<uint8_t>(c), c.out.numel, uint8_t(v != 0)); break;
  }
}

}  // namespace

void register_kernels(CpuBackend& b) {
  b.set_kernel("zeros", fill_kernel);
  b.set_kernel("ones", fill_kernel);
  b.set_kernel("full", fill_kernel);
}

}  // namespace crossfire::cpu
