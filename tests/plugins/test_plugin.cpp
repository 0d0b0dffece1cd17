// SPDX-License-Identifier: Apache-2.0
// The test plug-ins (tests/plugin.cmake builds this file once per mode, as plugin_<mode>.so): one that works, and
// one for each way a plug-in can be wrong, each of which `crossfire --plugin` must answer with one line naming the
// plug-in and the problem (tests/harness/plugin_test.cpp). The working ones register the CPU backend's kernels under
// another name (support/mirror_backend.cpp), so their results are known to be right and any failure is the
// plug-in machinery's, or one planted here on purpose.
#include <csignal>
#include <stdexcept>

#include "crossfire/plugin.hpp"
#include "support/mirror_backend.hpp"

#define MODE(m) (CROSSFIRE_TEST_PLUGIN_MODE_##m)

#if MODE(unresolved)
extern "C" void crossfire_symbol_that_nobody_defines();
#endif

namespace {
using namespace crossfire;

// (Every mode compiles every helper; each mode uses some.)
#pragma GCC diagnostic ignored "-Wunused-function"

// The faulty backend's planted faults: a kernel that throws something that is not a crossfire error, one that
// crashes the process, one that computes a wrong value, and an op it leaves out.
void neg_throws(const KernelCall&) { throw std::runtime_error("the accelerator's queue was lost (planted)"); }
void exp_crashes(const KernelCall&) { std::raise(SIGSEGV); }
KernelFn g_cpu_relu = nullptr;
void relu_off_by_one(const KernelCall& call) {
  g_cpu_relu(call);
  if (call.out.numel > 0) static_cast<float*>(call.out.data)[0] += 1.0f;
}

[[maybe_unused]] void register_backends([[maybe_unused]] PluginHost& host) {
#if MODE(good)
  host.add_backend("plug", testing::make_mirror_backend());
#elif MODE(faulty)
  auto b = testing::make_mirror_backend();
  b->set_kernel("neg", &neg_throws);
  b->set_kernel("exp", &exp_crashes);
  g_cpu_relu = backend(BackendKind::cpu).kernel(op_id("relu"));
  b->set_kernel("relu", &relu_off_by_one);
  b->set_kernel("sum", nullptr);
  host.add_backend("faulty", std::move(b));
#elif MODE(no_devices)
  // A backend with no devices: loads, registers, and is unavailable with its own reason.
  host.add_backend("ghost", std::make_unique<UnavailableBackend>("no accelerator found (test plug-in)"));
#elif MODE(throws)
  host.add_backend("early", testing::make_mirror_backend());  // added, then the registration fails: not registered
  throw std::runtime_error("no licence for the accelerator");
#elif MODE(clash)
  host.add_backend("cpu", testing::make_mirror_backend());
#elif MODE(bad_name)
  host.add_backend("My-Backend", testing::make_mirror_backend());
#elif MODE(none)
  // registers nothing
#elif MODE(unresolved)
  crossfire_symbol_that_nobody_defines();
#endif
}
}  // namespace

#if MODE(bad_abi)
extern "C" __attribute__((visibility("default"))) const PluginInfo* crossfire_plugin() {
  static const PluginInfo info{kPluginAbiVersion + 1, plugin_layout(), CROSSFIRE_VERSION_STRING, "bad-abi",
                               register_backends};
  return &info;
}
#elif MODE(bad_layout)
extern "C" __attribute__((visibility("default"))) const PluginInfo* crossfire_plugin() {
  static const PluginInfo info{kPluginAbiVersion, plugin_layout() ^ 1, "0.1.0", "bad-layout", register_backends};
  return &info;
}
#elif MODE(no_entry)
// No entry point: only a function under another name.
extern "C" __attribute__((visibility("default"))) int crossfire_plugin_v0() { return 0; }
#else
CROSSFIRE_PLUGIN("test-plugin", register_backends)
#endif
