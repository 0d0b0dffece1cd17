#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds, on this machine, everything the CUDA check needs and packs it into .device/ for a GPU machine that can
# neither install packages nor reach the network (scripts/gpu-check.sh builds on the GPU machine instead, where it
# can): a Release tree with CUDA on and Vulkan off, only the CUDA test binaries, the `crossfire` command and the
# kernel benchmarks, stripped, with the shared libraries they need beside them (glibc excepted: the GPU machine's
# own, as new as this one's or newer, serves), in one archive: .device/pack.tar.gz (about 14 MB; gzip, which every
# machine unpacks; the folder is ignored by git, so a device run carries it by name). scripts/device-run.sh runs
# the check there.
#
# Usage: scripts/device-pack.sh [build-dir]      (default: build/device)
# Then, on the GPU machine, from the repository root: scripts/device-run.sh .device/pack.tar.gz
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/device}
PACK=.device
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$NVCC" ]] || { echo "error: nvcc not found (set CUDACXX)" >&2; exit 1; }

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSFIRE_CUDA=ON -DCROSSFIRE_VULKAN=OFF \
  -DCROSSFIRE_BENCHMARKS=ON -DCROSSFIRE_FMT_HEADER_ONLY=ON -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
targets=(test_ops_cuda test_autodiff_cuda test_contract_cuda test_cuda_backend cuda_device_list crossfire_cli
         bench_kernels)
cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"

STAGE="$BUILD/pack"
rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$PACK"
for t in test_ops_cuda test_autodiff_cuda test_contract_cuda test_cuda_backend cuda_device_list; do
  cp "$BUILD/tests/$t" "$STAGE/bin/"
done
cp "$BUILD/harness/crossfire" "$BUILD/bench/bench_kernels" "$STAGE/bin/"
strip "$STAGE"/bin/*

# Every shared library the binaries load but glibc's own (libc, libm, the loader, ...): libstdc++ and libgcc_s
# too, so that a GPU machine with an older C++ runtime still runs what g++ here built.
is_glibc() { [[ $1 =~ ^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl|librt|libresolv) ]]; }
for b in "$STAGE"/bin/*; do
  ldd "$b" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
    is_glibc "$name" || cp -Ln "$path" "$STAGE/lib/$name"
  done
done
git rev-parse HEAD >"$STAGE/commit" 2>/dev/null || echo unknown >"$STAGE/commit"
tar -C "$STAGE" -czf "$PACK/pack.tar.gz" bin lib commit
echo "packed $(du -sh "$STAGE" | cut -f1) as $PACK/pack.tar.gz ($(du -h "$PACK/pack.tar.gz" | cut -f1)," \
  "commit $(cat "$STAGE/commit")):"
ls -la "$STAGE/bin" "$STAGE/lib"
