#!/bin/bash -eu
# SPDX-License-Identifier: Apache-2.0
# Called by ClusterFuzzLite / OSS-Fuzz (which set CC, CXX, CFLAGS, CXXFLAGS with the sanitizer, -stdlib=libc++ and
# -fsanitize=fuzzer-no-link, LIB_FUZZING_ENGINE, SRC and OUT). Builds every fuzz target of fuzz/ against the fuzzing
# engine and ships, per target, its libFuzzer options, its dictionary and its corpus as <target>_seed_corpus.zip.
# Adding a target needs no change here. scripts/cflite-local.sh runs this file as written, with ClusterFuzzLite's
# variables, on Debian's clang-14 and libc++.
#
# Only the fuzz targets are configured: no tests (GTest, RapidCheck), no `crossfire` command (CLI11), no GPU
# backends, and fmt as headers only, since the fmt library a distribution ships is built for libstdc++
# (see the Dockerfile).
build="${WORK:-$SRC/crossfire}/build-cflite"
cmake -S "$SRC/crossfire" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCROSSFIRE_FUZZ=ON -DCROSSFIRE_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" \
  -DCROSSFIRE_TESTS=OFF -DCROSSFIRE_COMMAND=OFF -DCROSSFIRE_BENCHMARKS=OFF -DCROSSFIRE_FMT_HEADER_ONLY=ON \
  -DCROSSFIRE_VULKAN=OFF -DCROSSFIRE_CUDA=OFF
for src in "$SRC"/crossfire/fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  cmake --build "$build" --target "$name"
  cp "$build/fuzz/$name" "$OUT/"
  # libFuzzer flags and the program format's dictionary (written from the op table at build time).
  if [ -f "$SRC/crossfire/fuzz/$name.options" ]; then cp "$SRC/crossfire/fuzz/$name.options" "$OUT/"; fi
  if [ -f "$build/fuzz/$name.dict" ]; then cp "$build/fuzz/$name.dict" "$OUT/"; fi
  if [ -d "$SRC/crossfire/fuzz/corpus/$name" ]; then
    rm -f "$OUT/${name}_seed_corpus.zip"
    (cd "$SRC/crossfire/fuzz/corpus/$name" && zip -q -r "$OUT/${name}_seed_corpus.zip" .)
  fi
done
