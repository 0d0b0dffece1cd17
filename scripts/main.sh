#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job, from a fresh Debian 12 machine: installs what is missing, builds the `crossfire` command and runs a
# campaign on every available backend (the CPU's logical devices and, where present, Vulkan (Mesa's lavapipe on
# machines without a GPU) and CUDA). Reports land in out/campaign/ (report.html, report.json, junit.xml and every
# failure, reduced, as a program file that `crossfire replay` reproduces). Exit status: docs/cli.md (0 only when the run checked something and nothing failed).
#
#   scripts/main.sh                                            # a 60-second campaign, reports in out/campaign
#   scripts/main.sh --seconds 600 --seed 7 --out out/nightly   # any `crossfire run` options (--out: out/campaign
#                                                              # unless given)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=${BUILD_DIR:-build/release}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSFIRE_TESTS=OFF -DCROSSFIRE_BENCHMARKS=OFF
cmake --build "$build_dir" -j "$(nproc)" --target crossfire_cli
"$build_dir"/harness/crossfire backends
if [[ $# -eq 0 ]]; then set -- --seconds 60; fi
# Reports always land somewhere: out/campaign unless the caller names a place (--out DIR or --out=DIR).
has_out=0
for a in "$@"; do [[ $a == --out || $a == --out=* ]] && has_out=1; done
if [[ $has_out -eq 0 ]]; then set -- "$@" --out out/campaign; fi
exec "$build_dir"/harness/crossfire run "$@"
