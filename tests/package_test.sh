#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# crossfire as other projects use it (issue 15, item 1), label `package`:
#  1. `cmake --install` of this build into a temporary prefix installs the headers, libraries, the command and a
#     package configuration, and the core header (crossfire.hpp) compiles in a project built with -fno-rtti;
#  2. a separate project (tests/package/consumer) finds it with find_package(crossfire 0.2 CONFIG REQUIRED), links
#     crossfire::core and crossfire::harness, builds and runs; asking for a version it is not (0.9) is refused;
#  3. a project that adds crossfire with add_subdirectory (tests/package/subproject) and uses crossfire::core builds
#     with GTest, CLI11 and nlohmann-json made unfindable.
#
#   tests/package_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER
set -euo pipefail
build=$1 src=$2 cxx=$3
tmp=$(mktemp -d /tmp/crossfire-package-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "install"; }
for f in include/crossfire/crossfire.hpp include/crossfire/version.hpp include/crossfire/harness/campaign.hpp \
         include/crossfire/reference/reference.hpp lib/cmake/crossfire/crossfireConfig.cmake \
         lib/cmake/crossfire/crossfireConfigVersion.cmake lib/cmake/crossfire/crossfireTargets.cmake bin/crossfire; do
  [[ -e "$tmp/prefix/$f" ]] || fail "cmake --install left no $f"
done
echo "package_test: installed $(find "$tmp/prefix" -type f | wc -l) files"

# The installed core headers compile in a project built without RTTI (as LLVM-style projects are): what they do in
# line (Note [A raise with no crossfire frame]) must not need typeid.
printf '#include <crossfire/crossfire.hpp>\nint main() { return 0; }\n' >"$tmp/nortti.cpp"
"$cxx" -std=c++20 -fno-rtti -fsyntax-only -I"$tmp/prefix/include" "$tmp/nortti.cpp" 2>"$tmp/nortti.log" ||
  { cat "$tmp/nortti.log"; fail "the installed crossfire.hpp does not compile with -fno-rtti"; }
echo "package_test: crossfire.hpp compiles with -fno-rtti"

common=(-G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release)
cmake -S "$src/tests/package/consumer" -B "$tmp/consumer" "${common[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "find_package(crossfire 0.2) from the prefix"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "building the consumer"; }
"$tmp/consumer/consumer" || fail "the consumer exited $?"
if cmake -S "$src/tests/package/consumer" -B "$tmp/wrong" "${common[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
     -DCROSSFIRE_WANT=0.9 >"$tmp/wrong.log" 2>&1; then
  fail "find_package(crossfire 0.9) accepted version $(grep -o 'crossfire [0-9.]*' "$tmp/wrong.log" | head -1)"
fi
grep -q 'crossfireConfig.cmake, version: 0\.2' "$tmp/wrong.log" || { cat "$tmp/wrong.log"; fail "0.9 refused, but why?"; }
echo "package_test: find_package(crossfire 0.9) refused the installed 0.2"

cmake -S "$src/tests/package/subproject" -B "$tmp/sub" "${common[@]}" -DCROSSFIRE_SOURCE_DIR="$src" \
  -DCROSSFIRE_VULKAN=OFF -DCROSSFIRE_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
  >"$tmp/sub.log" 2>&1 || { cat "$tmp/sub.log"; fail "configuring crossfire as a subproject"; }
cmake --build "$tmp/sub" --target core_user >>"$tmp/sub.log" 2>&1 || { cat "$tmp/sub.log"; fail "building it"; }
"$tmp/sub/core_user" || fail "the subproject's program exited $?"
echo "package_test: ok"
