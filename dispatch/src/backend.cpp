// SPDX-License-Identifier: Apache-2.0
#include "crossfire/backend.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

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

void Backend::set_accumulates_in_dtype(std::string_view op_name, DTypeSet halves) {
  int id = find_op(op_name);
  if (id < 0) throw std::logic_error(fmt::format("set_accumulates_in_dtype: no op `{}` in the op table", op_name));
  own_accumulation_[size_t(id)] = halves;
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

TensorImpl* UnavailableBackend::allocate(Device, DType, const Shape&, std::string_view) {
  throw BackendUnavailable(kind(), reason_);
}
void UnavailableBackend::write(TensorImpl&, const void*) { throw BackendUnavailable(kind(), reason_); }
void UnavailableBackend::read(const TensorImpl&, void*) { throw BackendUnavailable(kind(), reason_); }
void UnavailableBackend::copy(const TensorImpl&, TensorImpl&) { throw BackendUnavailable(kind(), reason_); }

namespace {
// Note [Registered backends]
// The registry is kMaxBackends slots. The built-in backends hold the first kNumBuiltinBackends (a compiled-out one
// as an UnavailableBackend that says so), and register_backend() fills the rest in order, so the kinds in use are always
// 0..num_kinds-1 and a kind's position in backend_kinds() is its value. A slot is written once and never emptied:
// backends, like the registry itself, are never destroyed (tensors in static storage may outlive main(), and a
// plug-in's code must stay loaded while its tensors exist).
//
// Dispatch reads a slot without a lock: a backend is stored (release) before its kind is counted in num_kinds
// (release), and readers load the pointer with acquire, which on x86 and ARM64 is the plain load the fast path
// had before registration existed (docs/benchmarks.md measures it). What a registered backend gets is exactly
// what a built-in one gets: its own kernel table (a plain array), its device count read once, and every check of
// the dispatch contract, which never asks which backend it is looking at.
struct Registry {
  std::array<std::atomic<Backend*>, kMaxBackends> backends{};
  // Each backend's device count, read once (discovery may be lazy and slow: a CPU-only process never pays for
  // Vulkan's); -1 until then. backend_for() reads this instead of a virtual call.
  std::array<std::atomic<int>, kMaxBackends> device_counts{-1, -1, -1, -1, -1, -1, -1, -1};
  std::array<BackendKind, kMaxBackends> kinds{};
  std::atomic<int> num_kinds{0};
  // Registered backends' names, NUL-terminated; built-in names come from backend_name()'s switch.
  std::array<std::array<char, kMaxBackendNameLength + 1>, kMaxBackends> names{};
  std::mutex registering;  // serialises register_backend()
};
static_assert(kMaxBackends == 8, "device_counts' initialiser has one -1 per slot");
}  // namespace

namespace detail {
struct RegistryAccess {
  static void place(Registry& r, BackendKind k, Backend* b) {
    b->kind_ = k;
    r.kinds[size_t(k)] = k;
    r.backends[size_t(k)].store(b, std::memory_order_release);
    r.num_kinds.store(int(k) + 1, std::memory_order_release);
  }
};
}  // namespace detail

// Defined in the generated build/generated/backends.cpp: one line per backend that CMake's crossfire_backend()
// compiled in.
void register_compiled_backends(std::array<std::unique_ptr<Backend>, kNumBuiltinBackends>& slots);

namespace {
// The registry once built; find_backend() reads it without the function-local static's guard (see there).
std::atomic<Registry*> g_registry{nullptr};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: tensors in static storage may outlive main()
    std::array<std::unique_ptr<Backend>, kNumBuiltinBackends> builtin;
    register_compiled_backends(builtin);
    for (BackendKind k : kBuiltinBackendKinds) {
      std::unique_ptr<Backend>& b = builtin[size_t(k)];
      if (!b)  // compiled out: present, unavailable, saying why
        b = std::make_unique<UnavailableBackend>(
            fmt::format("not compiled in (configure with -DCROSSFIRE_{}=ON)",
                        k == BackendKind::vulkan ? "VULKAN" : k == BackendKind::cuda ? "CUDA" : "CPU"));
      detail::RegistryAccess::place(*reg, k, b.release());
    }
    g_registry.store(reg, std::memory_order_release);
    return reg;
  }();
  return *r;
}

// The backend in slot k, or nullptr for a slot that holds none (k may be any byte).
inline Backend* slot(Registry& r, size_t k) {
  return k < size_t(kMaxBackends) ? r.backends[k].load(std::memory_order_acquire) : nullptr;
}
}  // namespace

std::span<const BackendKind> backend_kinds() {
  Registry& r = registry();
  return {r.kinds.data(), size_t(r.num_kinds.load(std::memory_order_acquire))};
}

std::string_view registered_backend_name(BackendKind b) {
  Registry& r = registry();
  if (slot(r, size_t(b)) == nullptr) return "?";
  return r.names[size_t(b)].data();
}

std::optional<BackendKind> backend_kind_named(std::string_view name) {
  for (BackendKind k : backend_kinds())
    if (backend_name(k) == name) return k;
  return std::nullopt;
}

std::string backend_names() {
  std::string out;
  for (BackendKind k : backend_kinds()) out += (out.empty() ? "" : ", ") + std::string(backend_name(k));
  return out;
}

std::string backend_name_problem(std::string_view name) {
  if (name.empty()) return "the name is empty";
  if (name.size() > kMaxBackendNameLength)
    return fmt::format("the name `{}` is longer than {} characters", printable(name), kMaxBackendNameLength);
  const bool starts_with_letter = name[0] >= 'a' && name[0] <= 'z';
  for (char c : name)
    if (!starts_with_letter || !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return fmt::format("the name `{}` is not a-z, 0-9 and `_`, starting with a letter (it appears in device "
                         "names like `{}:0` and in program files)",
                         printable(name), printable(name));
  if (backend_kind_named(name)) return fmt::format("a backend called `{}` is already registered", name);
  return {};
}

BackendKind register_backend(std::string_view name, std::unique_ptr<Backend> b) {
  Registry& r = registry();
  std::lock_guard lock(r.registering);
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("register_backend", "name", fmt::format("cannot register backend: {}", why));
  };
  if (std::string why = backend_name_problem(name); !why.empty()) throw refuse(why);
  if (!b) throw refuse(fmt::format("the backend object for `{}` is null", name));
  const int k = r.num_kinds.load(std::memory_order_relaxed);
  if (k >= kMaxBackends)
    throw refuse(fmt::format("all {} backend slots are taken ({})", kMaxBackends, backend_names()));
  std::copy(name.begin(), name.end(), r.names[size_t(k)].data());
  detail::RegistryAccess::place(r, BackendKind(k), b.release());
  return BackendKind(k);
}

namespace {
// Note [A device of no known backend]
// BackendKind is an enum over a byte, so `Device{BackendKind(7), 0}` is legal C++ and a caller can build it.
// Every lookup refuses a kind no backend holds here, with a typed error, before anything indexes a table by it:
// backend(), backend_for() (which the generic path of every op call goes through, for the target and for `to`'s
// destination) and find_backend() (nullptr, so the fast path hands the call to the generic one, which raises).
// No tensor can ever be made on such a device, so the validation loop never meets one.
[[gnu::cold, noreturn]] void throw_unknown_backend(BackendKind kind, uint8_t index) {
  throw InvalidArgument("device", "",
                        fmt::format("device {}:{} names no known backend (backend value {}; known: {})",
                                    backend_name(kind), index, unsigned(kind), backend_names()));
}
}  // namespace

Backend& backend(BackendKind kind) {
  Backend* b = slot(registry(), size_t(kind));
  if (b == nullptr) [[unlikely]]
    throw_unknown_backend(kind, 0);
  return *b;
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
// The device count of the backend in slot k (which holds one), read once (see Registry::device_counts).
inline int device_count_of(Registry& r, Backend& b, size_t k) {
  int n = r.device_counts[k].load(std::memory_order_relaxed);
  if (n < 0) [[unlikely]] {
    n = b.device_count();
    r.device_counts[k].store(n, std::memory_order_relaxed);
  }
  return n;
}
}  // namespace

Backend& backend_for(Device device) {
  Registry& r = registry();
  const size_t k = size_t(device.backend);
  Backend* b = slot(r, k);
  if (b == nullptr) [[unlikely]]
    throw_unknown_backend(device.backend, device.index);  // Note [A device of no known backend]
  const int n = device_count_of(r, *b, k);
  if (device.index >= n) [[unlikely]]
    throw_no_such_device(device, *b, n);
  return *b;
}

namespace {
[[gnu::noinline]] Backend* find_backend_first_time(Device device) {
  Registry& r = registry();
  const size_t k = size_t(device.backend);
  Backend* b = slot(r, k);
  return b != nullptr && device.index < device_count_of(r, *b, k) ? b : nullptr;
}
}  // namespace

// A creation op's dispatch calls this on every call. Once the registry and the backend's device count are known
// it is two loads and two compares; everything else (building the registry, the first device count) is in
// find_backend_first_time, a tail call, so the common path saves no registers (it saved four while the
// construction was inlined here: 28 instructions a call, now 14, of a 1-element `full`'s ~200). A slot that holds
// no backend keeps its count at -1, so it always takes the slow path, which answers nullptr.
Backend* find_backend(Device device) {
  const size_t k = size_t(device.backend);
  if (k >= size_t(kMaxBackends)) return nullptr;
  if (Registry* r = g_registry.load(std::memory_order_acquire)) [[likely]] {
    const int n = r->device_counts[k].load(std::memory_order_relaxed);
    if (n >= 0) [[likely]]
      return device.index < n ? r->backends[k].load(std::memory_order_acquire) : nullptr;
  }
  return find_backend_first_time(device);
}

std::vector<Device> available_devices() {
  std::vector<Device> out;
  size_t n = 0;
  for (BackendKind k : backend_kinds()) n += size_t(std::max(backend(k).device_count(), 0));
  out.reserve(n);  // one allocation, not one per doubling (the harness asks for this list per program)
  for (BackendKind k : backend_kinds()) {
    Backend& b = backend(k);
    for (int i = 0; i < b.device_count(); ++i) out.push_back(Device{k, uint8_t(i)});
  }
  return out;
}

}  // namespace crossfire
