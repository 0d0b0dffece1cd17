#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Grows the checked-in fuzz corpora: fuzzes each target with libFuzzer under AddressSanitizer + UBSan (clang 14,
# the `fuzz` preset) for a given time, then merges what it found into fuzz/corpus/<target> with -merge=1, which
# keeps a minimal set of inputs covering every feature of the old corpus and the new inputs (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--seconds N] [--no-merge] [TARGET ...]     (default: 300 s each, every fuzz/fuzz_*.cpp)
#
# Each target's libFuzzer flags come from fuzz/<target>.options ([libfuzzer] key = value: max_len, timeout, dict;
# a dict named there is the one the build writes from the op table). For each target the script prints the
# coverage of the corpus before and after ("cov" = edges, "ft" = features, as libFuzzer counts them), so that a
# run that adds little says so. A crash stops the script with libFuzzer's report and the input saved under
# build/fuzz/artifacts/ (nothing is merged then). Environment: BUILD_DIR (default build/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=300
merge=1
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --no-merge) merge=0; shift ;;
    -h|--help)
      awk 'NR == 1 || /SPDX-License-Identifier/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
      exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "fuzz.sh: --seconds wants a positive whole number, got '$seconds'" >&2
  exit 2
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

scripts/install-deps.sh
build_dir=${BUILD_DIR:-build/fuzz}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCROSSFIRE_FUZZ=ON -DCROSSFIRE_SANITIZE=ON -DCROSSFIRE_VULKAN=OFF \
  -DCROSSFIRE_CUDA=OFF -DCROSSFIRE_BENCHMARKS=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The flags of fuzz/<target>.options as -key=value arguments (a dict relative to the build's fuzz/ folder).
options_of() {
  local file="fuzz/$1.options" key value
  [[ -f "$file" ]] || return 0
  while IFS='=' read -r key value; do
    key=$(echo "$key" | tr -d '[:space:]'); value=$(echo "$value" | tr -d '[:space:]')
    [[ -z "$key" || "$key" == \[* || "$key" == \#* ]] && continue
    if [[ "$key" == dict ]]; then value="$build_dir/fuzz/$value"; fi
    printf -- '-%s=%s\n' "$key" "$value"
  done <"$file"
}

# "cov: N ft: M" of a corpus, as libFuzzer reports it once every input has run.
coverage_of() {
  local bin=$1 dir=$2
  "$bin" -runs=0 "$dir" 2>&1 | grep -E 'INITED|DONE' | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || echo "cov: 0 ft: 0"
}

mkdir -p "$build_dir/artifacts"
for t in "${targets[@]}"; do
  bin="$build_dir/fuzz/$t"
  corpus="fuzz/corpus/$t"
  mkdir -p "$corpus"
  mapfile -t opts < <(options_of "$t")
  before=$(coverage_of "$bin" "$corpus")
  new=$(mktemp -d)
  echo "fuzz.sh: $t for ${seconds}s (${opts[*]:-no options}); corpus before: $before, $(ls "$corpus" | wc -l) inputs"
  # New inputs go to $new (the first corpus directory); the checked-in corpus is only read.
  log="$build_dir/artifacts/$t.log"
  rc=0
  "$bin" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$t-" \
    "$new" "$corpus" >"$log" 2>&1 || rc=$?
  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb' "$log" || true
  if [[ $rc -ne 0 ]]; then
    tail -60 "$log" >&2
    echo "fuzz.sh: $t failed (exit $rc); the input is under $build_dir/artifacts/, the log at $log" >&2
    exit 1
  fi
  if [[ $merge -eq 1 ]]; then
    merged=$(mktemp -d)
    "$bin" "${opts[@]}" -merge=1 "$merged" "$corpus" "$new" >"$log.merge" 2>&1
    grep -E 'MERGE-OUTER: [0-9]+ new files' "$log.merge" || true
    rm -rf "$corpus" && mkdir -p "$corpus" && cp "$merged"/* "$corpus"/ 2>/dev/null || true
    rm -rf "$merged"
  fi
  rm -rf "$new"
  echo "fuzz.sh: $t corpus after: $(coverage_of "$bin" "$corpus"), $(ls "$corpus" | wc -l) inputs"
done
