// SPDX-License-Identifier: Apache-2.0
#include "cpu_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {
namespace cpu {

namespace {
int devices_from_env() {
  const char* v = std::getenv(kDevicesEnv);
  if (v == nullptr || *v == 0) return kDefaultDevices;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != 0 || n < 1 || n > 16) {
    fmt::print(stderr, "crossfire: ignoring {}={} (want 1..16); using {}\n", kDevicesEnv, v, kDefaultDevices);
    return kDefaultDevices;
  }
  return int(n);
}

// Header and data in one block (Note [One allocation per tensor]); data is 64-byte aligned for Eigen and SIMD.
// The block comes from plain operator new, over-allocated by kAlign - 1 bytes, and the data pointer is aligned by
// hand: glibc's aligned operator new (memalign) costs ~100 ns more per call, which dominated a 1-element op.
constexpr size_t kAlign = 64;
constexpr size_t kSlack = sizeof(TensorImpl) + kAlign - 1;
}  // namespace

CpuBackend::CpuBackend() : devices_(devices_from_env()) {
  register_kernels(*this);
}

DeviceInfo CpuBackend::device_info(int index) const {
  return {Device::cpu(index),
          fmt::format("host (logical device {} of {}, {} hardware threads)", index, devices_,
                      std::thread::hardware_concurrency()),
          "cpu", "crossfire cpu backend (Eigen)"};
}

TensorImpl* CpuBackend::allocate(Device device, DType dtype, const Shape& shape, std::string_view op) {
  const size_t nbytes = TensorImpl::nbytes_of(dtype, shape);  // the block's size, before the header exists
  void* block = ::operator new(kSlack + nbytes, std::nothrow);
  if (block == nullptr) throw OutOfMemory(std::string(op), device, nbytes);
  auto* t = new (block) TensorImpl(device, dtype, shape, this);
  const uintptr_t after_header = reinterpret_cast<uintptr_t>(block) + sizeof(TensorImpl);
  t->data = reinterpret_cast<void*>((after_header + kAlign - 1) & ~uintptr_t(kAlign - 1));
  BackendCounters::bump(counters_.allocations);
  BackendCounters::bump(counters_.bytes_allocated, nbytes);
  return t;
}

void CpuBackend::release(TensorImpl* t) {
  BackendCounters::bump(counters_.releases);
  t->~TensorImpl();
  ::operator delete(static_cast<void*>(t));
}

void CpuBackend::write(TensorImpl& t, const void* src) { std::memcpy(t.data, src, t.nbytes); }
void CpuBackend::read(const TensorImpl& t, void* dst) { std::memcpy(dst, t.data, t.nbytes); }
void CpuBackend::copy(const TensorImpl& src, TensorImpl& dst) { std::memcpy(dst.data, src.data, src.nbytes); }

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace crossfire
