// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>

#include "crossfire/crossfire.hpp"

namespace crossfire::testing {

inline constexpr const char* kMirrorName = "mirror";
inline constexpr int kMirrorDevices = 2;  // two, so that index mismatches are testable as on the CPU

// A backend with host memory of its own and the CPU backend's kernels (mirror_backend.cpp); the test plug-ins
// (tests/plugins/) register it under other names.
std::unique_ptr<Backend> make_mirror_backend();

// Registers the test-only `mirror` backend on first call and returns its kind.
BackendKind mirror_backend();

}  // namespace crossfire::testing
