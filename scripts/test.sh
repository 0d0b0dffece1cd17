#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, configures, builds and runs every
# test through ctest (which prints the runner summary). Run as root or with sudo available.
#
# Environment (all optional):
#   BUILD_DIR=build/test        where to build
#   CC/CXX=clang-14/clang++-14  another compiler (default: the system g++)
#   CROSSFIRE_SANITIZE=1        AddressSanitizer + UndefinedBehaviorSanitizer build
#   CROSSFIRE_VULKAN_VALIDATION=0  run without the Khronos validation layer (default 1: every process that uses
#                               Vulkan runs under it, and any validation message fails that test)
#   CTEST_ARGS="-L vulkan"      extra ctest arguments (a label, a regex)
#   CMAKE_ARGS="-DCROSSFIRE_CUDA=OFF"  extra configure arguments
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

scripts/install-deps.sh --with-browser

build_dir=${BUILD_DIR:-build/test}
sanitize=OFF
if [[ "${CROSSFIRE_SANITIZE:-0}" == "1" ]]; then sanitize=ON; fi
jobs=$(nproc)

# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCROSSFIRE_WERROR=ON \
  -DCROSSFIRE_SANITIZE="$sanitize" ${CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"
echo "test.sh: build finished after $(( $(date +%s) - start ))s"

export CROSSFIRE_VULKAN_VALIDATION=${CROSSFIRE_VULKAN_VALIDATION:-1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/kernels/vulkan/lsan.supp}  # leaks inside lavapipe itself
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# shellcheck disable=SC2086
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600 ${CTEST_ARGS:-}
echo "test.sh: done after $(( $(date +%s) - start ))s"
