#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs crossfire's benchmarks (issue 5), writes Google Benchmark JSON to an output folder, appends the
# run to the history and renders the dashboard. What CI runs (.github/workflows/bench.yml) is this script.
#
#   scripts/bench.sh [--out DIR] [--repetitions N] [--min-time SECONDS] [--filter REGEX] [--history FILE]
#                    [--no-history] [--no-build] [--ref NAME]
#
# Environment: BUILD_DIR (default build-bench), CC/CXX (compilers for a fresh configure), CMAKE_ARGS (extra
# configure arguments). Defaults: 9 repetitions (what the U-test in bench_compare.py wants), output in
# $BUILD_DIR/bench-results/<UTC time>, history $BUILD_DIR/bench-results/history.jsonl.
#
# Output folder: bench_<binary>.json per binary, bench.json (all merged: compare.py's input), bench-medians.json
# (one median per benchmark: github-action-benchmark's input), summary.md (bench_summary.py), dashboard.html.
# Benchmark numbers from a shared, loaded machine are noisy: compare runs with bench_compare.py, which uses the
# repetitions, rather than by eye.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

build_dir="${BUILD_DIR:-build-bench}"
[[ $build_dir = /* ]] || build_dir="$root/$build_dir"
out=""
reps=9
min_time=""
filter=""
history=""
use_history=1
build=1
ref="${GITHUB_REF_NAME:-}"

# The comment block that opens this file, and nothing after it.
usage() { awk 'NR == 1 || /SPDX-License-Identifier/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --repetitions) reps="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --history) history="$2"; shift 2 ;;
    --no-history) use_history=0; shift ;;
    --no-build) build=0; shift ;;
    --ref) ref="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[0-9]+$ && $reps -ge 1 ]] || { echo "bench.sh: --repetitions wants a positive integer, got $reps" >&2; exit 2; }
out="${out:-$build_dir/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
history="${history:-$build_dir/bench-results/history.jsonl}"
mkdir -p "$out"

# ---- build: Release, benchmark binaries only ----
if ((build)); then
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    # shellcheck disable=SC2086
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSFIRE_BENCHMARKS=ON ${CMAKE_ARGS:-}
  fi
  targets=$(ninja -C "$build_dir" -t targets all | sed -n 's/^\(bench_[A-Za-z0-9_]*\): phony$/\1/p' | sort -u)
  [[ -n $targets ]] || { echo "bench.sh: no bench_* targets in $build_dir (CROSSFIRE_BENCHMARKS=OFF?)" >&2; exit 1; }
  # shellcheck disable=SC2086
  ninja -C "$build_dir" $targets
fi

# ---- run every benchmark binary: bench/ and, when the harness has some, harness/bench/ ----
shopt -s nullglob
binaries=()
for exe in "$build_dir"/bench/bench_* "$build_dir"/harness/bench_* "$build_dir"/harness/bench/bench_*; do
  [[ -f $exe && -x $exe ]] && binaries+=("$exe")
done
((${#binaries[@]})) || { echo "bench.sh: no benchmark binaries under $build_dir/bench" >&2; exit 1; }

# Random interleaving spreads each benchmark's repetitions over the run, so a load spike on a shared machine does not
# land on one benchmark's repetitions only.
flags=(--benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true
       --benchmark_display_aggregates_only=true --benchmark_out_format=json)
[[ -n $min_time ]] && flags+=(--benchmark_min_time="$min_time")
[[ -n $filter ]] && flags+=(--benchmark_filter="$filter")
jsons=()
for exe in "${binaries[@]}"; do
  name=$(basename "$exe")
  # A binary with nothing matching --filter would write an empty file; leave it out instead.
  if [[ -n $filter ]] && [[ -z $("$exe" --benchmark_list_tests --benchmark_filter="$filter" 2>/dev/null) ]]; then
    echo "bench.sh: $name has no benchmark matching --filter $filter; skipped"
    continue
  fi
  echo "bench.sh: running $name ($reps repetitions)"
  "$exe" "${flags[@]}" --benchmark_out="$out/$name.json"
  jsons+=("$out/$name.json")
done

((${#jsons[@]})) || { echo "bench.sh: no benchmark matches --filter $filter" >&2; exit 2; }

# ---- merge, history, summary, dashboard ----
"$PY" "$here/bench_history.py" merge "$out/bench.json" "${jsons[@]}" --medians "$out/bench-medians.json"
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || true)
if ((use_history)); then
  "$PY" "$here/bench_history.py" append "$out/bench.json" --history "$history" --commit "$commit" --ref "$ref"
  "$PY" "$here/bench_dashboard.py" --history "$history" --out "$out/dashboard.html"
fi
"$PY" "$here/bench_summary.py" "$out/bench.json" --out "$out/summary.md"
echo "bench.sh: results in $out"
