#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Adds up the reports of a sharded campaign (`scripts/main.sh --shard I/N` on N machines) into one set, from a
# fresh Debian 12 machine: installs what is missing, builds the `crossfire` command as scripts/main.sh does (the
# same build directory) and runs `crossfire merge`. Exit status: docs/cli.md (3 when a shard is missing or was
# cut short; 2, with the file named, for reports that cannot be added up).
#
#   scripts/merge.sh --out out/nightly shards/shard-0 shards/shard-1 ...
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=${BUILD_DIR:-build/release}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSFIRE_TESTS=OFF -DCROSSFIRE_BENCHMARKS=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target crossfire_cli
exec "$build_dir"/harness/crossfire merge "$@"
