// SPDX-License-Identifier: Apache-2.0
// The backend interface: the small set of things dispatch needs from a backend (cf. ggml's registry -> device ->
// buffer): discovery, availability, memory, transfers, and a flat kernel table indexed by OpId.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crossfire/op_table.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire {

// What a kernel receives. Dispatch has already validated the call and allocated `out` on the target device, so a
// kernel only computes: it never allocates the output, never checks devices, never formats an error.
struct KernelCall {
  const OpDef& op;
  OpId id;
  const ArgPack& args;
  TensorImpl& out;

  CallView view() const { return {op, args, out.device}; }
  const Tensor& tensor(int param) const { return *args[param].tensor; }
  // The op's k-th float attribute (in signature order), rounded to f32 (round_to_f32): clamp's min is 0, max 1.
  float float_attr_f32(int k) const {
    for (int i = 0; i < op.num_params; ++i)
      if (op.params[size_t(i)].role == ParamRole::float_attr && k-- == 0) return round_to_f32(args[i].f);
    return 0;
  }
};
using KernelFn = void (*)(const KernelCall& call);

struct DeviceInfo {
  Device device;
  std::string name;    // "llvmpipe (LLVM 15.0.6, 256 bits)", "host (logical device 1 of 2)"
  std::string type;    // "cpu", "integrated", "discrete", "virtual", "other"
  std::string driver;  // driver name and version, when the backend has one
};

// Counters that let tests and harnesses prove "nothing changed" after an error (contract section 4). They are
// exact when one thread dispatches at a time; see Note [Counters are cheap] in backend.cpp.
struct BackendCounters {
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> releases{0};
  std::atomic<uint64_t> kernel_launches{0};
  std::atomic<uint64_t> bytes_allocated{0};
  std::atomic<uint64_t> transfers{0};  // host<->device and device<->device copies

  static void bump(std::atomic<uint64_t>& c, uint64_t by = 1) {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
};

struct CounterSnapshot {
  uint64_t allocations, releases, kernel_launches, bytes_allocated, transfers;
  friend bool operator==(const CounterSnapshot&, const CounterSnapshot&) = default;
};

namespace detail {
struct RegistryAccess;
}

class Backend {
 public:
  virtual ~Backend() = default;
  // The slot the registry put this backend in: set once, when it is registered (a built-in backend's is its
  // own), before anything can dispatch to it.
  BackendKind kind() const { return kind_; }

  // Empty when the backend has at least one device; else the one-line reason ("no Vulkan loader found").
  virtual std::string unavailable_reason() const = 0;
  bool available() const { return device_count() > 0 && unavailable_reason().empty(); }
  virtual int device_count() const = 0;
  virtual DeviceInfo device_info(int index) const = 0;

  // Memory. allocate() fills every TensorImpl field but refcount/autograd and bumps the counters; it raises
  // OutOfMemory (naming `op`) on failure. release() is called exactly once, when the last handle goes.
  virtual TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) = 0;
  virtual void release(TensorImpl* t) = 0;

  // Transfers. write(): host bytes into t (t.nbytes of them). read(): t into host memory; waits for pending work.
  virtual void write(TensorImpl& t, const void* src) = 0;
  virtual void read(const TensorImpl& t, void* dst) = 0;
  // A copy between two tensors of this backend (any indices), same dtype and size.
  virtual void copy(const TensorImpl& src, TensorImpl& dst) = 0;
  // Waits until every submitted kernel has finished.
  virtual void synchronize() {}

  // The extents this backend's kernels change behaviour at, or where its driver has a limit (workgroup and block
  // sizes, a path's threshold, a loop limit): the program generator draws long axes from them and their neighbours
  // (Note [Large programs] in harness/include/crossfire/harness/generate.hpp). Empty: none declared.
  virtual std::vector<int64_t> kernel_extents() const { return {}; }

  // The dtypes this backend's tensors may have (kClassicDTypes unless the backend says more with set_dtypes()).
  // Dispatch raises Unsupported, naming the dtype and the device, for a call whose output would have another, before
  // any side effect; since every tensor on the backend was once an output, its inputs need no check.
  DTypeSet dtypes() const { return dtypes_; }
  void set_dtypes(DTypeSet d) { dtypes_ = d; }

  // Accumulation precision, declared per op and half dtype (contract section 6). By default a kernel with an f16 or
  // bf16 result computes in f32 and rounds once, and the bound charges the op's own rounding errors at f32's eps.
  // A kernel that rounds its partial results to the output's dtype (ATen's bf16 matmul on the CPU does) says so
  // here, and the agreement oracle then charges all of them at that dtype's eps:
  //   set_accumulates_in_dtype("matmul", {DType::bf16});   (an unknown op name fails loudly at start-up)
  bool accumulates_in_dtype(OpId id, DType out) const { return is_half(out) && own_accumulation_[id].contains(out); }
  void set_accumulates_in_dtype(std::string_view op_name, DTypeSet halves);

  // Capability query (cf. ggml's supports_op): the kernel, or nullptr with unsupported_reason() saying why.
  KernelFn kernel(OpId id) const { return kernels_[id]; }
  virtual std::string unsupported_reason(OpId id) const;
  // Runs a kernel directly, bypassing dispatch (benchmarks compare the two); counts a launch.
  void launch(KernelFn fn, const KernelCall& call) {
    BackendCounters::bump(counters_.kernel_launches);
    fn(call);
  }

  BackendCounters& counters() { return counters_; }
  CounterSnapshot snapshot() const;

  // Backends fill their table when they are built, one line per op they implement:
  //   set_kernel("add", &add_kernel);   (an unknown name fails loudly at start-up)
  void set_kernel(std::string_view op_name, KernelFn fn);

 protected:
  std::array<KernelFn, kNumOps> kernels_{};
  BackendCounters counters_;
  DTypeSet dtypes_ = kClassicDTypes;
  std::array<DTypeSet, kNumOps> own_accumulation_{};

 private:
  friend struct detail::RegistryAccess;
  BackendKind kind_ = BackendKind::cpu;
};

// A backend with no devices, which says why in one line: a compiled-out built-in backend, or a plug-in's that found
// no hardware (register it anyway, so that asking for it says why). Every memory call raises BackendUnavailable.
class UnavailableBackend : public Backend {
 public:
  explicit UnavailableBackend(std::string reason) : reason_(std::move(reason)) {}
  std::string unavailable_reason() const override { return reason_; }
  int device_count() const override { return 0; }
  DeviceInfo device_info(int) const override { return {}; }
  TensorImpl* allocate(Device, DType, const Shape&, std::string_view) override;
  void release(TensorImpl*) override {}
  void write(TensorImpl&, const void*) override;
  void read(const TensorImpl&, void*) override;
  void copy(const TensorImpl&, TensorImpl&) override;

 private:
  std::string reason_;
};

// The registry: one Backend object per BackendKind in backend_kinds(), the built-in ones created on first use. A
// built-in backend that is compiled out is still present, as an unavailable backend whose reason says so.
// backend() raises InvalidArgument for a kind no backend holds.
Backend& backend(BackendKind kind);

// Registers a backend under `name` in the next free slot and returns its kind; from then on its devices are
// `<name>:<index>` everywhere (Note [Registered backends] in backend.cpp). `name` is 1..15 characters of a-z, 0-9
// and `_`, starting with a letter, and names no backend already known (built-in ones included, compiled in or
// not). Raises InvalidArgument, naming the problem, on a bad or taken name, a null backend, or when all
// kMaxBackends slots are taken; the registry is then unchanged. A backend with no devices may be registered: it
// is unavailable, with its own reason. Register before any thread dispatches to the new backend's devices.
BackendKind register_backend(std::string_view name, std::unique_ptr<Backend> b);
inline constexpr size_t kMaxBackendNameLength = 15;
// Why register_backend() would refuse `name` now (a bad or taken name), or empty.
std::string backend_name_problem(std::string_view name);
// The backend for `device`, or BackendUnavailable; InvalidArgument if the index is out of range.
Backend& backend_for(Device device);
// The same, but nullptr where backend_for() would raise (no such device, backend unavailable).
Backend* find_backend(Device device);
// Every device of every available backend, in (backend, index) order.
std::vector<Device> available_devices();

// Each backend folder provides one factory: std::unique_ptr<Backend> make_<name>_backend(); CMake's
// crossfire_backend() lists it in the generated registry (build/generated/backends.cpp).
}  // namespace crossfire
