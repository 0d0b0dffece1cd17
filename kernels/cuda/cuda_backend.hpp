// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: one crossfire device per CUDA device, one stream per device, a caching allocator.
//
// Note [CUDA backend: streams and synchronisation]
// Every kernel, copy and memset of a device goes onto that device's one stream, in call order, so an op never waits
// for the one before it: the stream orders them. The host waits only where it must see results: read() (values
// out), synchronize(), a copy between two devices, and index_select, whose contract asks for InvalidArgument when
// an index (data, not metadata) is out of range, which the host cannot know until the device has checked.
//
// Note [CUDA backend: caching allocator]
// cudaMalloc and cudaFree are slow and cudaFree synchronises the device, so released buffers go onto a free list
// per (device, size class) and the next allocation of that class reuses one. Reuse is safe without events because
// every use of a buffer is on the same stream as the op that takes it next. Size classes: multiples of 512 bytes up
// to 1 MiB, then multiples of 2 MiB, so that a buffer serves requests up to its class size. When cudaMalloc fails,
// the cache is returned to the driver and the allocation retried once before OutOfMemory is raised.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crossfire/backend.hpp"

namespace crossfire::cuda {

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  std::string unavailable_reason() const override { return reason_; }
  // Blocks of 256 threads (kThreads in common.cuh), and the grid's 65,535 blocks in y.
  std::vector<int64_t> kernel_extents() const override { return {256, 65535}; }
  int device_count() const override { return count_; }
  DeviceInfo device_info(int index) const override;
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) override;
  void release(TensorImpl* t) override;
  void write(TensorImpl& t, const void* src) override;
  void read(const TensorImpl& t, void* dst) override;
  void copy(const TensorImpl& src, TensorImpl& dst) override;
  void synchronize() override;

  // For kernels (cuda_ops.cpp). stream() makes `device` current on this thread and returns its stream.
  cudaStream_t stream(Device device, std::string_view op);
  // Scratch device memory from the cache, for kernels that need temporary space; give it back with
  // release_scratch() once the kernels that use it are queued (stream order keeps the reuse safe).
  void* scratch(Device device, size_t bytes, std::string_view op);
  void release_scratch(Device device, void* p, size_t bytes);
  // A persistent device int and its pinned host mirror, for kernels that report a value back (index_select).
  int32_t* device_flag(Device device, std::string_view op);
  int32_t* host_flag(Device device, std::string_view op);

  // Raises BackendFailure naming the op when `e` is an error; `what` names the CUDA call.
  void check(cudaError_t e, std::string_view op, Device device, std::string_view what) const {
    if (e != cudaSuccess) [[unlikely]]
      fail(e, op, device, what);
  }
  [[noreturn]] void fail(cudaError_t e, std::string_view op, Device device, std::string_view what) const;

  // Bytes held in free lists (for tests and the device list).
  size_t cached_bytes(int device);

 private:
  struct PerDevice {
    std::once_flag started;
    cudaError_t start_error = cudaSuccess;
    cudaStream_t stream = nullptr;
    int32_t* device_flag = nullptr;
    int32_t* host_flag = nullptr;
    std::mutex mutex;  // guards the free lists
    std::unordered_map<size_t, std::vector<void*>> free_lists;
    size_t cached = 0;
  };
  PerDevice& start(Device device, std::string_view op);
  void* device_alloc(Device device, size_t bytes, std::string_view op);
  void device_free(Device device, void* p, size_t bytes);
  void empty_cache(PerDevice& d, int device);

  int count_ = 0;
  std::string reason_;
  std::vector<std::unique_ptr<PerDevice>> devices_;
};

// Registers every CUDA kernel into the backend's table (cuda_ops.cpp); one line per op or per X-macro list.
void register_kernels(CudaBackend& b);

// The size class a request of `bytes` is served from (see Note [CUDA backend: caching allocator]).
constexpr size_t size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20, kSmallLimit = size_t(1) << 20;
  if (bytes <= kSmallLimit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

}  // namespace crossfire::cuda
