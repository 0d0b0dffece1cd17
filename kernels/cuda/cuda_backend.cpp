// SPDX-License-Identifier: Apache-2.0
#include "cuda_backend.hpp"

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {
namespace cuda {

namespace {
// One line, as the contract wants it: "CUDA driver version is insufficient for CUDA runtime version (35)".
std::string describe(cudaError_t e) { return fmt::format("{} ({})", cudaGetErrorString(e), int(e)); }
}  // namespace

// Device discovery happens once, when the registry first builds the backend. cudaGetDeviceCount creates no
// context, so this is cheap, and with the static runtime it works (and fails cleanly) on machines with no driver.
CudaBackend::CudaBackend() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so that it is not reported again by an unrelated call
    reason_ = describe(e);
    n = 0;
  } else if (n == 0) {
    reason_ = "no CUDA device found";
  }
  count_ = n > 255 ? 255 : n;  // Device::index is 8 bits
  for (int i = 0; i < count_; ++i) devices_.push_back(std::make_unique<PerDevice>());
  set_dtypes(kAnyDType);  // f16 and bf16 as __half / __nv_bfloat16 computed in f32, i64 natively (common.cuh)
  register_kernels(*this);
}

DeviceInfo CudaBackend::device_info(int index) const {
  if (index < 0 || index >= count_) return {};
  cudaDeviceProp p{};
  if (cudaError_t e = cudaGetDeviceProperties(&p, index); e != cudaSuccess) {
    (void)cudaGetLastError();
    return {Device::cuda(index), fmt::format("(properties unavailable: {})", describe(e)), "other", ""};
  }
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  return {Device::cuda(index),
          fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                      double(p.totalGlobalMem) / double(size_t(1) << 30)),
          p.integrated ? "integrated" : "discrete",
          fmt::format("CUDA driver {}.{}, runtime {}.{}", driver / 1000, driver % 1000 / 10, runtime / 1000,
                      runtime % 1000 / 10)};
}

void CudaBackend::fail(cudaError_t e, std::string_view op, Device device, std::string_view what) const {
  (void)cudaGetLastError();  // clear a non-sticky error so that the next call starts clean
  throw BackendFailure(std::string(op), device,
                       fmt::format("{}: {}: {} ({}, {})", device.str(), what, cudaGetErrorString(e),
                                   cudaGetErrorName(e), int(e)));
}

CudaBackend::PerDevice& CudaBackend::start(Device device, std::string_view op) {
  PerDevice& d = *devices_[device.index];
  // call_once retries when the callable throws, so a failed start is reported again on the next use.
  std::call_once(d.started, [&] {
    check(cudaSetDevice(device.index), op, device, "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), op, device, "cudaStreamCreate");
    check(cudaMalloc(reinterpret_cast<void**>(&d.device_flag), sizeof(int32_t)), op, device, "cudaMalloc");
    check(cudaMallocHost(reinterpret_cast<void**>(&d.host_flag), sizeof(int32_t)), op, device, "cudaMallocHost");
  });
  return d;
}

cudaStream_t CudaBackend::stream(Device device, std::string_view op) {
  PerDevice& d = start(device, op);
  check(cudaSetDevice(device.index), op, device, "cudaSetDevice");
  return d.stream;
}

int32_t* CudaBackend::device_flag(Device device, std::string_view op) { return start(device, op).device_flag; }
int32_t* CudaBackend::host_flag(Device device, std::string_view op) { return start(device, op).host_flag; }

void* CudaBackend::device_alloc(Device device, size_t bytes, std::string_view op) {
  PerDevice& d = start(device, op);
  const size_t cls = size_class(bytes);
  {
    std::lock_guard lock(d.mutex);
    auto it = d.free_lists.find(cls);
    if (it != d.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      d.cached -= cls;
      return p;
    }
  }
  check(cudaSetDevice(device.index), op, device, "cudaSetDevice");
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, cls);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t released = 0;
    {
      std::lock_guard lock(d.mutex);
      released = d.cached;
      empty_cache(d, device.index);
    }
    if (released > 0) e = cudaMalloc(&p, cls);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      throw OutOfMemory(std::string(op), device, bytes,
                        fmt::format("cudaMalloc of {} bytes failed ({} bytes of cached buffers were released first; "
                                    "the device has {} of {} bytes free)",
                                    cls, released, free_b, total_b));
    }
  }
  check(e, op, device, "cudaMalloc");
  return p;
}

void CudaBackend::device_free(Device device, void* p, size_t bytes) {
  PerDevice& d = *devices_[device.index];
  const size_t cls = size_class(bytes);
  std::lock_guard lock(d.mutex);
  d.free_lists[cls].push_back(p);
  d.cached += cls;
}

// Caller holds d.mutex. cudaFree waits for the device, so buffers still in use by queued work are safe.
void CudaBackend::empty_cache(PerDevice& d, int device) {
  if (cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  for (auto& [cls, list] : d.free_lists) {
    for (void* p : list) (void)cudaFree(p);
    list.clear();
  }
  (void)cudaGetLastError();
  d.cached = 0;
}

size_t CudaBackend::cached_bytes(int device) {
  if (device < 0 || device >= count_) return 0;
  PerDevice& d = *devices_[size_t(device)];
  std::lock_guard lock(d.mutex);
  return d.cached;
}

void* CudaBackend::scratch(Device device, size_t bytes, std::string_view op) {
  return bytes == 0 ? nullptr : device_alloc(device, bytes, op);
}

void CudaBackend::release_scratch(Device device, void* p, size_t bytes) {
  if (p != nullptr) device_free(device, p, bytes);
}

TensorImpl* CudaBackend::allocate(Device device, DType dtype, const Shape& shape, std::string_view op) {
  auto t = std::make_unique<TensorImpl>(device, dtype, shape, this);
  const size_t nbytes = t->nbytes;
  t->data = nullptr;  // device memory is not host-addressable
  if (nbytes > 0) t->backend_state = device_alloc(device, nbytes, op);
  BackendCounters::bump(counters_.allocations);
  BackendCounters::bump(counters_.bytes_allocated, nbytes);
  return t.release();
}

// Never throws: it runs from destructors, possibly during shutdown. The buffer goes to the cache (see
// Note [CUDA backend: caching allocator]); the driver gets it back on the next cache flush.
void CudaBackend::release(TensorImpl* t) {
  BackendCounters::bump(counters_.releases);
  if (t->backend_state != nullptr) device_free(t->device, t->backend_state, t->nbytes);
  delete t;
}

void CudaBackend::write(TensorImpl& t, const void* src) {
  if (t.nbytes == 0) return;
  cudaStream_t s = stream(t.device, "write");
  // From pageable memory the copy has consumed `src` when the call returns, so the caller may free it at once.
  check(cudaMemcpyAsync(t.backend_state, src, t.nbytes, cudaMemcpyHostToDevice, s), "write", t.device,
        "cudaMemcpyAsync (host to device)");
}

void CudaBackend::read(const TensorImpl& t, void* dst) {
  if (t.nbytes == 0) return;
  cudaStream_t s = stream(t.device, "read");
  check(cudaMemcpyAsync(dst, t.backend_state, t.nbytes, cudaMemcpyDeviceToHost, s), "read", t.device,
        "cudaMemcpyAsync (device to host)");
  // Also where an asynchronous failure of an earlier kernel surfaces (as BackendFailure naming `read`).
  check(cudaStreamSynchronize(s), "read", t.device, "cudaStreamSynchronize");
}

void CudaBackend::copy(const TensorImpl& src, TensorImpl& dst) {
  if (src.nbytes == 0) return;
  if (src.device == dst.device) {
    cudaStream_t s = stream(src.device, "to");
    check(cudaMemcpyAsync(dst.backend_state, src.backend_state, src.nbytes, cudaMemcpyDeviceToDevice, s), "to",
          src.device, "cudaMemcpyAsync (device to device)");
    return;
  }
  // Between devices: the source's stream must have produced it, and it must not be reused (released) while the
  // destination's stream still reads it, so both sides wait. Rare enough that simple beats clever.
  check(cudaStreamSynchronize(stream(src.device, "to")), "to", src.device, "cudaStreamSynchronize");
  cudaStream_t s = stream(dst.device, "to");
  check(cudaMemcpyPeerAsync(dst.backend_state, dst.device.index, src.backend_state, src.device.index, src.nbytes, s),
        "to", dst.device, "cudaMemcpyPeerAsync");
  check(cudaStreamSynchronize(s), "to", dst.device, "cudaStreamSynchronize");
}

void CudaBackend::synchronize() {
  for (int i = 0; i < count_; ++i) {
    PerDevice& d = *devices_[size_t(i)];
    if (d.stream == nullptr) continue;  // never used
    Device dev = Device::cuda(i);
    check(cudaSetDevice(i), "synchronize", dev, "cudaSetDevice");
    check(cudaStreamSynchronize(d.stream), "synchronize", dev, "cudaStreamSynchronize");
  }
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

}  // namespace crossfire
