#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs .clusterfuzzlite/build.sh as ClusterFuzzLite would, where its Docker image cannot run: with the variables
# its base-builder sets (CC, CXX, CFLAGS and CXXFLAGS with AddressSanitizer, -fsanitize=fuzzer-no-link and
# -stdlib=libc++, LIB_FUZZING_ENGINE, SRC, OUT, WORK) on Debian's clang-14 and libc++-14, then checks what it left
# in OUT: each fuzz target, its code compiled against libc++ and linked with it, with its options, dictionary and
# seed corpus, and each target run over its whole seed corpus (libFuzzer -runs=0) with its options, as ClusterFuzzLite's
# first step does.
#
#   scripts/cflite-local.sh [--keep DIR]     (default: a temporary directory, removed at the end)
#
# What it cannot show: the image itself (Ubuntu 20.04, its newer clang, Eigen/fmt/json installed from release tags
# by the Dockerfile). Those differ in versions, not in kind: the same CMake options, the same header-only fmt, the
# same libc++ link. One difference is in kind, and is made up for here: OSS-Fuzz's libFuzzer carries its own
# private copy of the C++ library, while Debian's libclang_rt.fuzzer.a was built against libstdc++ and needs it at
# link time. So LIB_FUZZING_ENGINE links libstdc++.so.6 here (by file name: clang rewrites a plain -lstdc++ into
# the -stdlib it was given), and instead of "no libstdc++ in the binary" the script checks that every one of
# crossfire's own libraries was compiled against libc++ (std::__1) and none against libstdc++ (std::__cxx11).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=$2; shift 2 ;;
    -h|--help)
      awk 'NR == 1 || /SPDX-License-Identifier/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
      exit 0 ;;
    *) echo "cflite-local.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh
for need in clang-14 clang++-14 zip unzip; do
  command -v "$need" >/dev/null || { echo "cflite-local.sh: $need not found" >&2; exit 2; }
done
if ! echo '#include <vector>
int main() { std::vector<int> v{1}; return v[0] - 1; }' |
     clang++-14 -stdlib=libc++ -x c++ - -o /dev/null 2>/dev/null; then
  echo "cflite-local.sh: clang++-14 cannot link against libc++ (install libc++-14-dev libc++abi-14-dev)" >&2
  exit 2
fi

if [[ -n "$keep" ]]; then
  base=$keep
  mkdir -p "$base"
else
  base=$(mktemp -d /tmp/crossfire-cflite-XXXXXX)
  trap 'rm -rf "$base"' EXIT
fi
mkdir -p "$base/src" "$base/out" "$base/work"
ln -sfn "$root" "$base/src/crossfire"

# ClusterFuzzLite's address-sanitizer build, as base-builder's compile step sets it.
export SRC=$base/src OUT=$base/out WORK=$base/work
export CC=clang-14 CXX=clang++-14
export SANITIZER=address FUZZING_ENGINE=libfuzzer ARCHITECTURE=x86_64
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
-fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS -stdlib=libc++"
# (libstdc++ for Debian's libFuzzer only: see above)
export LIB_FUZZING_ENGINE="-fsanitize=fuzzer -Wl,-l:libstdc++.so.6"
if command -v ccache >/dev/null; then export CCACHE_DIR=${CCACHE_DIR:-$HOME/.ccache}; fi

echo "cflite-local: build.sh with CXXFLAGS=$CXXFLAGS"
(cd "$SRC/crossfire" && bash -eu "$SRC/crossfire/.clusterfuzzlite/build.sh")

status=0
fail() { echo "cflite-local: FAIL: $*" >&2; status=1; }
# crossfire's own code, compiled against libc++ only: its static libraries name std::__1 and never std::__cxx11.
build=$WORK/build-cflite
libs=$(find "$build" -name 'libcrossfire*.a')
[[ -n "$libs" ]] || fail "no libcrossfire*.a in $build"
for lib in $libs; do
  syms=$(nm -C "$lib" 2>/dev/null)
  grep -q 'std::__1::' <<<"$syms" || fail "$(basename "$lib"): no libc++ (std::__1) symbol"
  if grep -q 'std::__cxx11::' <<<"$syms"; then fail "$(basename "$lib"): compiled against libstdc++ (std::__cxx11)"; fi
done
targets=()
for src in fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
for t in "${targets[@]}"; do
  bin=$OUT/$t
  [[ -x "$bin" ]] || { fail "$t: not in OUT"; continue; }
  ldd "$bin" | grep -q 'libc++' || fail "$t: not linked against libc++"
  [[ -f "$OUT/$t.options" ]] || fail "$t: no $t.options in OUT"
  dict=$(sed -n 's/^dict *= *//p' "fuzz/$t.options" 2>/dev/null || true)
  if [[ -n "$dict" && ! -f "$OUT/$dict" ]]; then fail "$t: its options name $dict, which is not in OUT"; fi
  corpus=$base/corpus/$t
  rm -rf "$corpus" && mkdir -p "$corpus"
  unzip -q "$OUT/${t}_seed_corpus.zip" -d "$corpus" || fail "$t: no seed corpus"
  n=$(find "$corpus" -type f | wc -l)
  # The options file's flags, as ClusterFuzzLite passes them (a dictionary relative to OUT).
  flags=()
  while IFS='=' read -r key value; do
    key=$(tr -d '[:space:]' <<<"$key"); value=$(tr -d '[:space:]' <<<"$value")
    [[ -z "$key" || "$key" == \[* || "$key" == \#* ]] && continue
    [[ "$key" == dict ]] && value=$OUT/$value
    flags+=("-$key=$value")
  done <"fuzz/$t.options"
  if (cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 "$bin" "${flags[@]}" -runs=0 "$corpus" >"$base/$t.log" 2>&1); then
    echo "cflite-local: $t: libc++, $(tail -n 1 "$base/$t.log" | sed 's/^ *//') ($n seed inputs)"
  else
    fail "$t: running its seed corpus failed:"
    tail -n 30 "$base/$t.log" >&2
  fi
done
if [[ $status -eq 0 ]]; then
  echo "cflite-local: ok: ${#targets[@]} targets built by .clusterfuzzlite/build.sh with libc++," \
    "each ran its seed corpus"
fi
exit $status
