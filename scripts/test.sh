#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, configures, builds and runs every
# test through ctest (which prints the runner summary). Run as root or with sudo available.
#
# Environment (all optional):
#   BUILD_DIR=build/test        where to build
#   CC/CXX=clang-14/clang++-14  another compiler (default: the system g++)
#   CROSSFIRE_SANITIZE=1        AddressSanitizer + UndefinedBehaviorSanitizer build
#   CROSSFIRE_SANITIZE=thread   ThreadSanitizer build of the CPU backend (Vulkan and CUDA off: their drivers are not
#                               instrumented), building and running only the tests labelled `threads`
#                               (docs/contract.md section 8); any data race fails the test that raced
#   CROSSFIRE_VULKAN_VALIDATION=0  run without the Khronos validation layer (default 1: every process that uses
#                               Vulkan runs under it, and any validation message fails that test)
#   CTEST_ARGS="-L vulkan"      extra ctest arguments (a label, a regex)
#   CMAKE_ARGS="-DCROSSFIRE_CUDA=OFF"  extra configure arguments
# ctest's results are also written as JUnit XML to $BUILD_DIR/ctest-junit.xml (CI publishes it).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

scripts/install-deps.sh --with-browser

build_dir=${BUILD_DIR:-build/test}
sanitize=OFF
mode_args=""        # configure arguments of the sanitizer mode (CMAKE_ARGS, after them, may override)
build_targets=""    # empty: everything
ctest_args=${CTEST_ARGS:-}
case "${CROSSFIRE_SANITIZE:-0}" in
  1 | ON | on | address) sanitize=ON ;;
  thread)
    sanitize=thread
    mode_args="-DCROSSFIRE_VULKAN=OFF -DCROSSFIRE_CUDA=OFF"
    build_targets="--target threads_tests"
    ctest_args=${CTEST_ARGS:--L threads}
    # TSan maps its shadow memory at fixed addresses; kernels with more than 28 bits of mmap randomisation
    # (Linux 6.x defaults to 32) place libraries there and TSan dies with "FATAL: ThreadSanitizer: unexpected
    # memory mapping". Lower the randomisation when allowed, else run the tests without it (setarch -R).
    if [[ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ]] &&
       ! sysctl -qw vm.mmap_rnd_bits=28 2>/dev/null && ! sudo -n sysctl -qw vm.mmap_rnd_bits=28 2>/dev/null; then
      echo "test.sh: vm.mmap_rnd_bits > 28 and cannot be lowered: running the tests under setarch -R"
      no_aslr="setarch $(uname -m) -R"
    fi
    ;;
  0 | "" | OFF | off) ;;
  *) echo "test.sh: CROSSFIRE_SANITIZE=${CROSSFIRE_SANITIZE}: want 1 (ASan + UBSan) or thread (TSan)" >&2; exit 2 ;;
esac
jobs=$(nproc)

# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCROSSFIRE_WERROR=ON \
  -DCROSSFIRE_SANITIZE="$sanitize" $mode_args ${CMAKE_ARGS:-}
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$jobs" $build_targets
echo "test.sh: build finished after $(( $(date +%s) - start ))s"

export CROSSFIRE_VULKAN_VALIDATION=${CROSSFIRE_VULKAN_VALIDATION:-1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/kernels/vulkan/lsan.supp}  # leaks inside lavapipe itself
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# shellcheck disable=SC2086
${no_aslr:-} ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600 \
  --output-junit "$PWD/$build_dir/ctest-junit.xml" $ctest_args
echo "test.sh: done after $(( $(date +%s) - start ))s"
