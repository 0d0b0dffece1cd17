// SPDX-License-Identifier: Apache-2.0
// Loading plug-ins (plugin.hpp, Note [The plug-in ABI]).
#include "crossfire/plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire {
namespace {

// Collects a plug-in's backends while its registration function runs; they are registered only once it returns.
class PendingRegistrations final : public PluginHost {
 public:
  void add_backend(std::string_view name, std::unique_ptr<Backend> backend) override {
    std::string why = backend_name_problem(name);
    if (why.empty() && std::any_of(pending.begin(), pending.end(), [&](const auto& p) { return p.first == name; }))
      why = fmt::format("the plug-in adds a backend called `{}` twice", name);
    if (why.empty() && !backend) why = fmt::format("the backend object for `{}` is null", name);
    if (!why.empty()) throw InvalidArgument("register_backend", "name", "cannot register backend: " + why);
    pending.emplace_back(std::string(name), std::move(backend));
  }
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> pending;
};

struct Loaded {
  std::mutex mutex;
  std::vector<std::pair<std::filesystem::path, LoadedPlugin>> plugins;  // (canonical path, what it registered)
};
Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed, like the registry the plug-ins' backends live in
  return *l;
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

// Checks the entry point's answer before any more of the plug-in's code runs (Note [The plug-in ABI]).
void check_abi(const std::string& path, const PluginInfo* info) {
  if (info == nullptr) throw PluginError(path, "its `crossfire_plugin` entry point returned no PluginInfo");
  if (info->abi_version != kPluginAbiVersion)
    throw PluginError(path, fmt::format("built for plug-in ABI version {}, but this crossfire ({}) speaks version {}: "
                                        "rebuild the plug-in against this crossfire",
                                        info->abi_version, kVersion, kPluginAbiVersion));
  if (info->layout != plugin_layout())
    throw PluginError(path, fmt::format("built against a crossfire whose tensors, backends or op table differ from "
                                        "this one's (layout {} vs {}; it was built against crossfire {}, this is "
                                        "{}): rebuild the plug-in against this crossfire",
                                        hex(info->layout), hex(plugin_layout()),
                                        info->crossfire_version ? printable(info->crossfire_version) : "?", kVersion));
  if (info->register_backends == nullptr) throw PluginError(path, "its PluginInfo has no registration function");
}

}  // namespace

std::vector<std::string> split_plugin_paths(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = std::min(list.find(':', start), list.size());
    if (end > start) out.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

const LoadedPlugin& load_plugin(const std::string& path) {
  namespace fs = std::filesystem;
  Loaded& l = loaded();
  std::lock_guard lock(l.mutex);
  std::error_code ec;
  if (path.empty()) throw PluginError(path, "the path is empty");
  if (!fs::exists(path, ec)) throw PluginError(path, "no such file");
  if (fs::is_directory(path, ec)) throw PluginError(path, "is a directory, not a shared library");
  const fs::path canonical = fs::canonical(path, ec);
  for (const auto& [p, plugin] : l.plugins)
    if (!ec && p == canonical) return plugin;  // the same file twice (say --plugin and CROSSFIRE_PLUGINS)

  // RTLD_NOW: a symbol the plug-in needs and this process lacks is an error here, not a crash mid-campaign.
  // RTLD_LOCAL: two plug-ins' own symbols stay apart. The library is never closed (its backends live on).
  // A path without a slash is made relative to the working directory, not looked up on the library path.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  dlerror();
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw PluginError(path, fmt::format("cannot load: {}", why ? printable(why, 512) : "dlopen failed"));
  }
  auto entry = reinterpret_cast<PluginEntryFn>(dlsym(handle, kPluginEntryPoint));
  if (entry == nullptr)
    throw PluginError(path, fmt::format("exports no `{}` entry point (define one with CROSSFIRE_PLUGIN; "
                                        "docs/your-backend.md)",
                                        kPluginEntryPoint));
  const PluginInfo* info = entry();
  check_abi(path, info);

  LoadedPlugin plugin{path, info->name ? printable(info->name) : "?", {}};
  PendingRegistrations host;
  try {
    info->register_backends(host);
  } catch (const std::exception& e) {
    throw PluginError(path, fmt::format("registration failed: {}", printable(e.what(), 512)));
  } catch (...) {
    throw PluginError(path, "registration failed: it threw something that is not a std::exception");
  }
  if (host.pending.empty()) throw PluginError(path, "registration added no backend");
  for (auto& [name, backend] : host.pending) {
    try {
      plugin.backends.push_back(register_backend(name, std::move(backend)));
    } catch (const InvalidArgument& e) {
      throw PluginError(path, e.what());  // all slots taken, or a name another thread registered meanwhile
    }
  }
  l.plugins.emplace_back(ec ? fs::path(path) : canonical, std::move(plugin));
  return l.plugins.back().second;
}

std::vector<LoadedPlugin> loaded_plugins() {
  Loaded& l = loaded();
  std::lock_guard lock(l.mutex);
  std::vector<LoadedPlugin> out;
  for (const auto& [p, plugin] : l.plugins) out.push_back(plugin);
  return out;
}

}  // namespace crossfire
