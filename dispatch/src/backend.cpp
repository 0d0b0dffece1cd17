// SPDX-License-Identifier: Apache-2.0
#include "crossfire/backend.hpp"

#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {

// Note [Counters are cheap]
// The counters are bumped on every dispatch, so they are relaxed load+store pairs rather than atomic
// read-modify-writes (no lock prefix). They are exact when one thread dispatches at a time, as the tests and
// harness do; with several threads they may undercount, but never tear or race in the C++ sense.

std::string Backend::unsupported_reason(OpId id) const {
  return fmt::format("the {} backend has no kernel for `{}`", backend_name(kind()), op_def(id).name);
}

void Backend::set_kernel(std::string_view op_name, KernelFn fn) {
  int id = find_op(op_name);
  if (id < 0) throw std::logic_error(fmt::format("set_kernel: no op `{}` in the op table", op_name));
  kernels_[size_t(id)] = fn;
}

CounterSnapshot Backend::snapshot() const {
  auto l = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {l(counters_.allocations), l(counters_.releases), l(counters_.kernel_launches), l(counters_.bytes_allocated),
          l(counters_.transfers)};
}

int find_op(std::string_view name) {
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (kOpTable[i].name == name) return int(i);
  return -1;
}

int count_input_slots(const OpDef& op, const ArgPack& args) {
  int n = 0;
  for (int i = 0; i < op.num_params; ++i) {
    switch (op.params[size_t(i)].role) {
      case ParamRole::tensor: ++n; break;
      case ParamRole::optional_tensor: n += args[i].present ? 1 : 0; break;
      case ParamRole::tensor_list: n += int(args[i].list.size()); break;
      default: break;
    }
  }
  return n;
}

namespace {
// A backend that was compiled out: present in the registry, unavailable, saying why.
class CompiledOutBackend final : public Backend {
 public:
  explicit CompiledOutBackend(BackendKind k) : kind_(k) {}
  BackendKind kind() const override { return kind_; }
  std::string unavailable_reason() const override {
    return fmt::format("not compiled in (configure with -DCROSSFIRE_{}=ON)",
                       kind_ == BackendKind::vulkan ? "VULKAN" : kind_ == BackendKind::cuda ? "CUDA" : "CPU");
  }
  int device_count() const override { return 0; }
  DeviceInfo device_info(int) const override { return {}; }
  TensorImpl* allocate(Device, DType, const Shape&, std::string_view) override { throw_unavailable(); }
  void release(TensorImpl*) override {}
  void write(TensorImpl&, const void*) override { throw_unavailable(); }
  void read(const TensorImpl&, void*) override { throw_unavailable(); }
  void copy(const TensorImpl&, TensorImpl&) override { throw_unavailable(); }

 private:
  [[noreturn]] void throw_unavailable() const { throw BackendUnavailable(kind_, unavailable_reason()); }
  BackendKind kind_;
};

struct Registry {
  std::array<std::unique_ptr<Backend>, kNumBackendKinds> backends;
  // Each backend's device count, read once (discovery may be lazy and slow: a CPU-only process never pays for
  // Vulkan's); -1 until then. backend_for() reads this instead of a virtual call.
  std::array<std::atomic<int>, kNumBackendKinds> device_counts{-1, -1, -1};
};
}  // namespace

// Defined in the generated build/generated/backends.cpp: one line per backend that CMake's crossfire_backend()
// compiled in.
void register_compiled_backends(std::array<std::unique_ptr<Backend>, kNumBackendKinds>& slots);

namespace {
// The registry once built; find_backend() reads it without the function-local static's guard (see there).
std::atomic<Registry*> g_registry{nullptr};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: tensors in static storage may outlive main()
    register_compiled_backends(reg->backends);
    for (BackendKind k : kAllBackendKinds)
      if (!reg->backends[size_t(k)]) reg->backends[size_t(k)] = std::make_unique<CompiledOutBackend>(k);
    g_registry.store(reg, std::memory_order_release);
    return reg;
  }();
  return *r;
}
}  // namespace

namespace {
// Note [A device of no known backend]
// BackendKind is an enum over a byte, so `Device{BackendKind(3), 0}` is legal C++ and a caller can build it.
// Every lookup refuses it here, with a typed error, before anything indexes a table by it: backend(),
// backend_for() (which the generic path of every op call goes through, for the target and for `to`'s
// destination) and find_backend() (nullptr, so the fast path hands the call to the generic one, which raises).
// No tensor can ever be made on such a device, so the validation loop never meets one.
[[gnu::cold, noreturn]] void throw_unknown_backend(BackendKind kind, uint8_t index) {
  throw InvalidArgument("device", "",
                        fmt::format("device {}:{} names no known backend (backend value {}; known: cpu, vulkan, cuda)",
                                    backend_name(kind), index, unsigned(kind)));
}
}  // namespace

Backend& backend(BackendKind kind) {
  if (size_t(kind) >= size_t(kNumBackendKinds)) [[unlikely]]
    throw_unknown_backend(kind, 0);
  return *registry().backends[size_t(kind)];
}

namespace {
[[gnu::cold, noreturn]] void throw_no_such_device(Device device, Backend& b, int n) {
  if (n == 0) throw BackendUnavailable(device.backend, b.unavailable_reason());
  throw InvalidArgument("device", "",
                          fmt::format("{} does not exist: the {} backend has {} device{} ({}:0..{}:{})", device.str(),
                                      backend_name(device.backend), n, n == 1 ? "" : "s",
                                      backend_name(device.backend), backend_name(device.backend), n - 1));
}
}  // namespace

namespace {
// The device count of a backend kind, read once (see Registry::device_counts).
inline int device_count_of(Registry& r, size_t k) {
  int n = r.device_counts[k].load(std::memory_order_relaxed);
  if (n < 0) [[unlikely]] {
    n = r.backends[k]->device_count();
    r.device_counts[k].store(n, std::memory_order_relaxed);
  }
  return n;
}
}  // namespace

Backend& backend_for(Device device) {
  Registry& r = registry();
  const size_t k = size_t(device.backend);
  if (k >= size_t(kNumBackendKinds)) [[unlikely]]
    throw_unknown_backend(device.backend, device.index);  // Note [A device of no known backend]
  const int n = device_count_of(r, k);
  if (device.index >= n) [[unlikely]]
    throw_no_such_device(device, *r.backends[k], n);
  return *r.backends[k];
}

namespace {
[[gnu::noinline]] Backend* find_backend_first_time(Device device) {
  Registry& r = registry();
  const size_t k = size_t(device.backend);
  return device.index < device_count_of(r, k) ? r.backends[k].get() : nullptr;
}
}  // namespace

// A creation op's dispatch calls this on every call. Once the registry and the backend's device count are known
// it is two loads and two compares; everything else (building the registry, the first device count) is in
// find_backend_first_time, a tail call, so the common path saves no registers (it saved four while the
// construction was inlined here: 28 instructions a call, now 14, of a 1-element `full`'s ~200).
Backend* find_backend(Device device) {
  const size_t k = size_t(device.backend);
  if (k >= size_t(kNumBackendKinds)) return nullptr;
  if (Registry* r = g_registry.load(std::memory_order_acquire)) [[likely]] {
    const int n = r->device_counts[k].load(std::memory_order_relaxed);
    if (n >= 0) [[likely]]
      return device.index < n ? r->backends[k].get() : nullptr;
  }
  return find_backend_first_time(device);
}

std::vector<Device> available_devices() {
  std::vector<Device> out;
  for (BackendKind k : kAllBackendKinds) {
    Backend& b = backend(k);
    for (int i = 0; i < b.device_count(); ++i) out.push_back(Device{k, uint8_t(i)});
  }
  return out;
}

}  // namespace crossfire
