#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA backend's check on a machine with an NVIDIA GPU (made for one H200, 16 cores, a fresh Debian-like image
# with the CUDA toolkit and driver): installs crossfire's packages, builds a Release tree with CUDA on and only the
# CUDA test binaries, prints the GPUs and crossfire's device list, and runs every CUDA test through ctest.
# Designed to finish well inside 8 minutes; each stage prints its duration.
#
# Usage: scripts/gpu-check.sh [build-dir]        (default: build-gpu)
# Logs go to <build-dir>/gpu-check-logs, and to $OUT/gpu-check when $OUT is set (also when a stage fails).
# Environment: CROSSFIRE_GPU_EXTRA_TARGETS="a b" builds more test binaries; CROSSFIRE_GPU_JOBS (default 16) sets
# the build's parallelism; CUDACXX picks nvcc.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build-gpu}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
LOGS="$BUILD/gpu-check-logs"
mkdir -p "$LOGS"
T0=$(date +%s)
STAGE_T0=$T0
STAGE=""
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"

elapsed() { echo $(($(date +%s) - T0)); }
end_stage() {
  if [[ -n "$STAGE" ]]; then
    local took=$(($(date +%s) - STAGE_T0))
    printf '%-10s %4ss\n' "$STAGE" "$took" | tee -a "$SUMMARY"
  fi
}
stage() {
  end_stage
  STAGE=$1
  STAGE_T0=$(date +%s)
  echo
  echo "=================== [$(elapsed)s] $1: $2 ==================="
}
finish() {
  local rc=$?
  end_stage
  STAGE=""
  echo
  echo "=================== [$(elapsed)s] gpu-check: $([[ $rc -eq 0 ]] && echo PASSED || echo "FAILED (exit $rc)") ==================="
  echo "total      $(elapsed)s" >>"$SUMMARY"
  [[ -f "$BUILD/Testing/Temporary/LastTest.log" ]] && cp "$BUILD/Testing/Temporary/LastTest.log" "$LOGS/" || true
  if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT/gpu-check" && cp -r "$LOGS"/. "$OUT/gpu-check/" || true
    echo "logs copied to $OUT/gpu-check"
  fi
  cat "$SUMMARY"
  exit $rc
}
trap finish EXIT

# ---- 1. the GPU, before anything slow ----------------------------------------------------------------------------
stage gpu "nvidia-smi -L"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L 2>&1 | tee "$LOGS/nvidia-smi-L.txt" || echo "warning: nvidia-smi -L failed (see above)"
  nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1 || true
else
  echo "warning: nvidia-smi not found; the CUDA tests will say whether the driver sees a device" | tee "$LOGS/nvidia-smi-L.txt"
fi

# ---- 2. packages ---------------------------------------------------------------------------------------------------
stage deps "scripts/install-deps.sh"
scripts/install-deps.sh 2>&1 | tee "$LOGS/install-deps.log"

# ---- 3. configure ---------------------------------------------------------------------------------------------------
stage configure "Release, CUDA on, Vulkan and benchmarks off"
NVCC=${CUDACXX:-$(command -v nvcc || true)}
if [[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]]; then NVCC=/usr/local/cuda/bin/nvcc; fi
if [[ -z "$NVCC" ]]; then
  echo "error: nvcc not found (set CUDACXX or install the CUDA toolkit in /usr/local/cuda)" >&2
  exit 1
fi
"$NVCC" --version | tail -n 2 | tee "$LOGS/nvcc-version.txt"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSFIRE_CUDA=ON -DCROSSFIRE_VULKAN=OFF \
  -DCROSSFIRE_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER="$NVCC" 2>&1 | tee "$LOGS/configure.log"

# ---- 4. build only what the check runs ------------------------------------------------------------------------------
stage build "the CUDA test binaries, -j${CROSSFIRE_GPU_JOBS:-16}"
targets=()
for t in test_ops_cuda test_autodiff_cuda test_contract_cuda test_cuda_backend cuda_device_list \
  ${CROSSFIRE_GPU_EXTRA_TARGETS:-}; do
  if ninja -C "$BUILD" -t query "$t" >/dev/null 2>&1; then targets+=("$t"); else echo "(no target $t in this tree)"; fi
done
echo "building: ${targets[*]}"
if ! ninja -C "$BUILD" -j"${CROSSFIRE_GPU_JOBS:-16}" "${targets[@]}" >"$LOGS/build.log" 2>&1; then
  grep -E 'error|FAILED' "$LOGS/build.log" | head -n 40 >&2 || true
  tail -n 40 "$LOGS/build.log" >&2
  echo "error: the build failed; the full log is $LOGS/build.log" >&2
  exit 1
fi
grep -iE 'warning' "$LOGS/build.log" | head -n 20 || true
tail -n 1 "$LOGS/build.log"

# ---- 5. the device list -------------------------------------------------------------------------------------------------
stage devices "crossfire's backends and devices"
"$BUILD/tests/cuda_device_list" | tee "$LOGS/devices.txt"
no_device=0
if ! grep -q '^cuda: [0-9]' "$LOGS/devices.txt"; then
  echo "error: crossfire sees no CUDA device (its reason is above); the tests below will only skip" >&2
  no_device=1
fi

# ---- 6. the tests -------------------------------------------------------------------------------------------------------
stage tests "ctest -L cuda"
# Every CUDA test is named cuda.<suite>.<case> and labelled cuda. If this CMake flattened a list of labels (3.25's
# gtest_discover_tests does, see tests/cuda.cmake), -L cuda misses the shared suites; select by name then.
count() { ctest --test-dir "$BUILD" -N "$@" 2>/dev/null | sed -n 's/^Total Tests: //p'; }
by_label=$(count -L cuda)
by_name=$(count -R '^cuda\.')
select=(-L cuda)
if [[ "${by_label:-0}" -lt "${by_name:-0}" ]]; then
  echo "note: -L cuda selects ${by_label:-0} tests but ${by_name} are named cuda.*: running -R '^cuda\\.'"
  select=(-R '^cuda\.')
fi
# Each test is its own process with its own CUDA context; a GPU in an exclusive compute mode takes one at a time.
jobs=12
mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -n 1 || true)
if [[ "$mode" == Exclusive* ]]; then
  echo "note: compute mode $mode: running the tests one at a time"
  jobs=1
fi
timeout 270 ctest --test-dir "$BUILD" "${select[@]}" --output-on-failure -j "$jobs" --timeout 120 \
  --output-junit "$LOGS/ctest-junit.xml" 2>&1 | tee "$LOGS/ctest.log"
skipped=$(grep -c '(Skipped)' "$LOGS/ctest.log" || true)
echo "skipped: $skipped (with a GPU, only cases that need a second CUDA device or another backend should skip)"
if [[ $no_device -eq 1 ]]; then
  echo "error: no CUDA device was found, so nothing above ran on a GPU" >&2
  exit 1
fi
