#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package crossfire needs to build, test, fuzz and benchmark.
# Idempotent: packages already present are skipped, so a second run costs seconds.
# Usage: scripts/install-deps.sh [--with-browser]   (chromium is only needed for the dashboard test)
set -euo pipefail

packages=(
  cmake ninja-build g++ clang-14 libclang-rt-14-dev libc++-14-dev libc++abi-14-dev ccache pkg-config zip unzip
  libeigen3-dev libgtest-dev libgmock-dev librapidcheck-dev
  libbenchmark-dev libbenchmark-tools valgrind
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libvulkan-dev glslc spirv-tools vulkan-tools vulkan-validationlayers mesa-vulkan-drivers
  python3 python3-scipy python3-yaml python3-xmlschema python3-junitparser python3-jsonschema
  libtorch-dev
)
if [[ "${1:-}" == "--with-browser" || "${CROSSFIRE_WITH_BROWSER:-0}" == "1" ]]; then
  packages+=(chromium)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
