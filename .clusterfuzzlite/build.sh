#!/bin/bash -eu
# Called by ClusterFuzzLite / OSS-Fuzz (which set CC, CXX, CFLAGS, CXXFLAGS with the sanitizer and
# -fsanitize=fuzzer-no-link, LIB_FUZZING_ENGINE, OUT). Builds every fuzz target of fuzz/ against libFuzzer and
# ships each one's corpus as <target>_seed_corpus.zip. Adding a target needs no change here.
cmake -S "$SRC/crossfire" -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCROSSFIRE_FUZZ=ON -DCROSSFIRE_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" \
  -DCROSSFIRE_VULKAN=OFF -DCROSSFIRE_CUDA=OFF -DCROSSFIRE_BENCHMARKS=OFF -DCROSSFIRE_TESTS=ON
for src in "$SRC"/crossfire/fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  ninja -C build "$name"
  cp "build/fuzz/$name" "$OUT/"
  # libFuzzer flags and the program format's dictionary (written from the op table at build time).
  if [ -f "$SRC/crossfire/fuzz/$name.options" ]; then cp "$SRC/crossfire/fuzz/$name.options" "$OUT/"; fi
  if [ -f "build/fuzz/$name.dict" ]; then cp "build/fuzz/$name.dict" "$OUT/"; fi
  if [ -d "$SRC/crossfire/fuzz/corpus/$name" ]; then
    (cd "$SRC/crossfire/fuzz/corpus/$name" && zip -q -r "$OUT/${name}_seed_corpus.zip" .)
  fi
done
