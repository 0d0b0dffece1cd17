#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The torch plug-in as a user builds and runs it (issue 15, item 6; docs/your-backend.md), label `plugin`:
#  1. `cmake --install` of this build into a temporary prefix;
#  2. plugins/torch configured as a project of its own, with find_package(crossfire) from that prefix and
#     find_package(Torch) from Debian's libtorch-dev, and built;
#  3. a campaign of a fixed number of programs with `--plugin ... --backends cpu,torch` and the plug-in's expect
#     file passes (exit 0), checks every oracle and scores torch:0 on most ops;
#  4. every kept finding (plugins/torch/findings/*.program) still fails as recorded: a difference that libtorch
#     stops making must leave the expect file, and this says so;
#  5. every program of plugins/torch/agrees/ (once failed, not a difference of semantics) replays clean.
# Exits 77 (skipped, with the reason) when libtorch's CMake package is not installed.
#
#   tests/plugin_torch_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER [PROGRAMS]
set -euo pipefail
build=$1 src=$2 cxx=$3 programs=${4:-3000}
tmp=$(mktemp -d /tmp/crossfire-plugin-torch-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plugin_torch_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "install"; }
if ! cmake -S "$src/plugins/torch" -B "$tmp/torch" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" 2>&1; then
  if grep -q 'package configuration file provided by "Torch"' "$tmp/configure.log"; then
    echo "plugin_torch_test: SKIP: libtorch's CMake package is not installed (Debian: libtorch-dev)"
    exit 77
  fi
  cat "$tmp/configure.log"; fail "configuring plugins/torch against the installed crossfire"
fi
cmake --build "$tmp/torch" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building plugins/torch"; }
plugin="$tmp/torch/crossfire_torch.so"
crossfire="$tmp/prefix/bin/crossfire"
echo "plugin_torch_test: built $(basename "$plugin") against the installed crossfire"

"$crossfire" --plugin "$plugin" run --backends cpu,torch --programs "$programs" --seed 1 --jobs 2 \
  --expect "$src/plugins/torch/torch.expect" --out "$tmp/campaign" >"$tmp/campaign.log" 2>&1 ||
  { tail -40 "$tmp/campaign.log"; fail "the campaign on cpu,torch with torch.expect exited $?"; }
/usr/bin/python3 - "$tmp/campaign/report.json" <<'PY' || fail "the campaign's report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["unexpected_failures"] == 0, r["unexpected_failures"]
assert "torch:0" in r["config"]["devices"], r["config"]["devices"]
for name, o in r["oracles"].items():
    assert o["checked"] > 0, f"oracle {name} checked nothing"
scored = [op for op, per in r["coverage"].items() if per.get("torch:0", {}).get("checked", 0) > 0]
assert len(scored) >= 35, f"torch:0 was checked on {len(scored)} ops only: {scored}"
expected = sum(e["matched"] for e in r["expectations"])
print(f"plugin_torch_test: {r['programs']} programs, torch:0 checked on {len(scored)} ops, "
      f"{r['failures']} failures of which {r['failures'] - r['unexpected_failures']} expected ({expected} occurrences)")
PY

n=0
for f in "$src"/plugins/torch/findings/*.program; do
  out=$("$crossfire" --plugin "$plugin" replay "$f" --backends cpu:0,torch 2>&1) && status=0 || status=$?
  [[ $status == 1 ]] || { echo "$out" | tail -20; fail "$(basename "$f"): replay exited $status, not 1 (does libtorch no longer differ?)"; }
  grep -q "the recorded failure reproduces" <<<"$out" || { echo "$out" | tail -20; fail "$(basename "$f") fails otherwise than recorded"; }
  n=$((n + 1))
done
((n > 0)) || fail "no findings under plugins/torch/findings/"
echo "plugin_torch_test: all $n findings still reproduce"

# Programs that once failed on torch:0 without being differences of semantics (plugins/torch/agrees/: ATen's
# accumulation in the half dtype, declared, and what it may do to a gradient): each must replay clean.
n=0
for f in "$src"/plugins/torch/agrees/*.program; do
  out=$("$crossfire" --plugin "$plugin" replay "$f" --backends cpu:0,torch 2>&1) && status=0 || status=$?
  [[ $status == 0 ]] || { echo "$out" | tail -20; fail "$(basename "$f"): replay exited $status, not 0"; }
  n=$((n + 1))
done
((n > 0)) || fail "no programs under plugins/torch/agrees/"
echo "plugin_torch_test: all $n programs of plugins/torch/agrees/ agree"
echo "plugin_torch_test: ok"
