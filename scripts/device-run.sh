#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA check on a GPU machine, from the archive scripts/device-pack.sh made (unpacked into a temporary folder):
# the GPU and crossfire's device list, every CUDA test binary, a campaign on every device the pack sees (cpu:0,
# cpu:1, cuda:0), and the CUDA kernel benchmarks. Made to finish in about 6 minutes on one H200; each stage is
# bounded by `timeout`, prints its duration, and a failing stage does not stop the later ones. The exit status is
# that of the worst stage.
#
# Usage: scripts/device-run.sh [pack.tar.gz [campaign-seconds]]   (defaults: .device/pack.tar.gz, 90)
# Results: $OUT/device/ when OUT is set (test XML, the campaign's report, the benchmarks' JSON, the log), else
# out/device/.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ARCHIVE=${1:-.device/pack.tar.gz}
[[ -f "$ARCHIVE" ]] || { echo "error: no pack at $ARCHIVE (make one with scripts/device-pack.sh)" >&2; exit 2; }
PACK=$(mktemp -d)
tar -C "$PACK" -xzf "$ARCHIVE" || { echo "error: cannot unpack $ARCHIVE" >&2; exit 2; }
RESULTS=${OUT:+$OUT/device}
RESULTS=${RESULTS:-out/device}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
cd "$PACK"
export LD_LIBRARY_PATH="$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SECONDS_CAMPAIGN=${2:-90}
T0=$(date +%s)
worst=0

stage() {  # stage <name> <timeout-seconds> <command...>
  local name=$1 limit=$2
  shift 2
  local t=$(date +%s)
  echo
  echo "=================== [$(($(date +%s) - T0))s] $name ==================="
  timeout "$limit" "$@"
  local rc=$?
  echo "--- $name: exit $rc after $(($(date +%s) - t))s"
  [[ $rc -ne 0 && $rc -gt $worst ]] && worst=$rc
  return 0
}

{
  echo "pack of commit $(cat commit)"
  stage gpu 30 nvidia-smi -L
  stage devices 30 bin/cuda_device_list
  for t in test_cuda_backend test_ops_cuda test_contract_cuda test_autodiff_cuda; do
    stage "$t" 240 bin/$t --gtest_brief=1 --gtest_output=xml:"$RESULTS/$t.xml"
  done
  stage campaign $((SECONDS_CAMPAIGN + 60)) bin/crossfire run --seconds "$SECONDS_CAMPAIGN" --out "$RESULTS/campaign"
  stage bench 180 bin/bench_kernels --benchmark_filter='^kernel/[a-z_0-9]+/cuda/' --benchmark_min_time=0.05 \
    --benchmark_out="$RESULTS/bench_kernels_cuda.json" --benchmark_out_format=json
  echo
  echo "=================== [$(($(date +%s) - T0))s] device-run: worst exit status $worst ==================="
  exit "$worst"
} 2>&1 | tee "$RESULTS/device-run.log"
exit "${PIPESTATUS[0]}"
