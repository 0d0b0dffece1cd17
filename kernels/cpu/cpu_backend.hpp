// SPDX-License-Identifier: Apache-2.0
// The CPU backend: host memory, N logical devices (so device-index mismatches are testable on any machine).
#pragma once

#include "crossfire/backend.hpp"

namespace crossfire::cpu {

// Environment variable that sets the number of logical CPU devices (1..16, default 2).
inline constexpr const char* kDevicesEnv = "CROSSFIRE_CPU_DEVICES";
inline constexpr int kDefaultDevices = 2;

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string unavailable_reason() const override { return {}; }
  // The reductions and sums walk strided rows a chunk of 256 outputs at a time (reduce.cpp).
  std::vector<int64_t> kernel_extents() const override { return {256}; }
  int device_count() const override { return devices_; }
  DeviceInfo device_info(int index) const override;
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) override;
  void release(TensorImpl* t) override;
  void write(TensorImpl& t, const void* src) override;
  void read(const TensorImpl& t, void* dst) override;
  void copy(const TensorImpl& src, TensorImpl& dst) override;

 private:
  int devices_;
};

// Registers every CPU kernel into the backend's table (cpu_kernels.cpp); one line per op.
void register_kernels(CpuBackend& b);

}  // namespace crossfire::cpu
