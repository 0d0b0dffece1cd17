// SPDX-License-Identifier: Apache-2.0
// Plug-ins: backends built outside crossfire, against its installed package, and loaded at run time
// (`crossfire --plugin PATH`, CROSSFIRE_PLUGINS). docs/your-backend.md is the guide; this header is the interface.
//
// A plug-in is a shared library that exports one entry point, `crossfire_plugin`, which returns a PluginInfo:
//
//   void register_my_backends(crossfire::PluginHost& host) {
//     host.add_backend("mine", std::make_unique<MyBackend>());
//   }
//   CROSSFIRE_PLUGIN("my-plugin", register_my_backends)
//
// Note [The plug-in ABI]
// A plug-in's backend is a crossfire::Backend subclass and its kernels read crossfire's TensorImpl and ArgPack
// directly: no C shim in between, so a call into a plug-in's kernel is the same one indirect call as into a
// built-in one. The price is that a plug-in must be built against the same crossfire as the process that loads it.
// The loader checks that before it runs any of the plug-in's code beyond the entry point: PluginInfo's first field
// is kPluginAbiVersion (bumped by hand when this interface changes shape), and its second a fingerprint of what the
// plug-in compiled in (the sizes of the types a kernel and a backend touch, the errors it may raise, and the op
// table's names in order: a kernel table is an array indexed by op). A plug-in does not link crossfire's libraries;
// it takes crossfire's symbols from the process that loads it (the `crossfire` command exports them), so there is
// one registry, one op table and one error hierarchy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crossfire/backend.hpp"
#include "crossfire/error.hpp"
#include "crossfire/version.hpp"

namespace crossfire {

// 2: Backend declares accumulation per op (2026-12-03). 3: a dispatch entry may return a raised error, which the
// inline adopt_result() throws (Note [A raise with no crossfire frame], 2026-12-07).
inline constexpr uint32_t kPluginAbiVersion = 3;

// The fingerprint of Note [The plug-in ABI]: FNV-1a over the layout sizes and the op names.
consteval uint64_t plugin_layout() {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (uint64_t v : {sizeof(TensorImpl), sizeof(Backend), sizeof(KernelCall), sizeof(ArgPack), sizeof(Arg),
                     sizeof(Shape), sizeof(Device), sizeof(Error), sizeof(InvalidArgument), sizeof(BackendFailure),
                     sizeof(OutOfMemory), sizeof(Unsupported), uint64_t(kMaxRank), uint64_t(kMaxBackends),
                     uint64_t(kNumDTypes), uint64_t(kNumOps)})
    mix(v);
  for (const OpDef& op : kOpTable) {
    for (char c : op.name) mix(uint64_t(uint8_t(c)));
    mix(uint64_t(op.num_params));
  }
  return h;
}

// What a plug-in's registration function gets from the process loading it.
class PluginHost {
 public:
  // Adds a backend called `name` (register_backend()'s rules: 1..15 of a-z, 0-9, `_`, not taken). Raises
  // InvalidArgument on a bad or taken name. The plug-in's backends are registered together once its registration
  // function returns; if it throws, none is.
  virtual void add_backend(std::string_view name, std::unique_ptr<Backend> backend) = 0;

 protected:
  ~PluginHost() = default;
};

// What the entry point returns. The field order is part of the ABI: abi_version is read before anything else.
struct PluginInfo {
  uint32_t abi_version;           // kPluginAbiVersion of the crossfire the plug-in was built against
  uint64_t layout;                // plugin_layout() of that crossfire
  const char* crossfire_version;  // its version string, for messages
  const char* name;               // the plug-in's name, for messages
  void (*register_backends)(PluginHost& host);
};

inline constexpr const char* kPluginEntryPoint = "crossfire_plugin";
using PluginEntryFn = const PluginInfo* (*)();

// Defines the entry point. NAME is a string literal; REGISTER is a function `void (crossfire::PluginHost&)`.
#define CROSSFIRE_PLUGIN(NAME, REGISTER)                                                                  \
  extern "C" __attribute__((visibility("default"))) const ::crossfire::PluginInfo* crossfire_plugin() { \
    static const ::crossfire::PluginInfo info{::crossfire::kPluginAbiVersion, ::crossfire::plugin_layout(), \
                                              CROSSFIRE_VERSION_STRING, NAME, REGISTER};                  \
    return &info;                                                                                         \
  }

// A plug-in that loaded, and what it registered.
struct LoadedPlugin {
  std::string path;  // as given
  std::string name;  // PluginInfo::name
  std::vector<BackendKind> backends;
};

// Loads the plug-in at `path` and registers its backends. Raises PluginError, whose message is one line naming the
// path and the problem, when the file is missing or cannot be loaded (an unresolved symbol, not a shared library),
// exports no entry point, was built against another ABI version or layout, throws during registration, registers
// a backend whose name is bad or taken, or registers none. A path already loaded (the same file) is loaded once.
const LoadedPlugin& load_plugin(const std::string& path);
// The plug-ins loaded so far, in load order.
std::vector<LoadedPlugin> loaded_plugins();
// The paths in a colon-separated list (CROSSFIRE_PLUGINS), empty entries skipped.
std::vector<std::string> split_plugin_paths(std::string_view list);

}  // namespace crossfire
