#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the code the fuzz targets are built from compiles against LLVM's libc++ (clang -stdlib=libc++).

OSS-Fuzz and ClusterFuzzLite build with -stdlib=libc++ (.clusterfuzzlite/build.sh; scripts/cflite-local.sh runs
that build here), while the test build uses g++ and libstdc++. The two libraries do not implement the same parts
of the standard: libc++ 14 has no std::from_chars for double, and a parser that called it built and passed every
test here for three sessions while the OSS-Fuzz build could not compile it. This runs every translation unit of
the fuzz build's sources (dispatch/, harness/, kernels/cpu/, fuzz/) from the test build's compile_commands.json
through clang with -stdlib=libc++ -fsyntax-only: no code generation, no link, a few seconds per file.

  libcxx_syntax.py BUILD_DIR SOURCE_DIR [CLANG]      (CLANG default: clang++-14)

Exit status 0: every file compiled; 1: at least one did not (its errors are printed); 77: clang or libc++'s
headers are missing here, so nothing was checked (ctest reports the test as skipped).
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

CHECKED_DIRS = ("dispatch/", "harness/src/", "harness/reference/", "kernels/cpu/", "fuzz/")
SKIP = 77


def libcxx_available(clang):
    if shutil.which(clang) is None:
        return f"{clang} is not installed"
    with tempfile.NamedTemporaryFile("w", suffix=".cpp") as f:
        f.write("#include <charconv>\nint main() {}\n")
        f.flush()
        r = subprocess.run([clang, "-std=c++20", "-stdlib=libc++", "-fsyntax-only", f.name], capture_output=True,
                           text=True)
        if r.returncode != 0:
            return f"{clang} -stdlib=libc++ cannot compile an empty program (is libc++-14-dev installed?): " \
                   f"{r.stderr.strip()[:300]}"
    return None


def libcxx_command(entry, clang):
    """The entry's compile command for clang and libc++, syntax only: no output files, no -Werror (g++'s warning
    options are not all clang's; what is checked here is that the code compiles)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = [clang, "-stdlib=libc++", "-fsyntax-only", "-Wno-unknown-warning-option"]
    skip_next = False
    for a in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip_next = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-Werror"):
            continue
        out.append(a)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    clang = sys.argv[3] if len(sys.argv) > 3 else "clang++-14"
    why = libcxx_available(clang)
    if why:
        print(f"libcxx_syntax: skipped, nothing checked: {why}")
        return SKIP
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    chosen = {}
    for e in entries:
        path = os.path.abspath(os.path.join(e.get("directory", build), e["file"]))
        rel = os.path.relpath(path, source)
        if rel.endswith(".cpp") and rel.startswith(CHECKED_DIRS):
            chosen.setdefault(rel, e)  # a file built into several targets: once
    if not chosen:
        print(f"libcxx_syntax: no source of {', '.join(CHECKED_DIRS)} in {build}/compile_commands.json")
        return 1

    def check(item):
        rel, e = item
        r = subprocess.run(libcxx_command(e, clang), cwd=e.get("directory", build), capture_output=True, text=True)
        return rel, r.returncode, r.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for rel, rc, err in pool.map(check, sorted(chosen.items())):
            if rc != 0:
                failed.append(rel)
                print(f"--- {rel} does not compile against libc++:\n{err}")
    print(f"libcxx_syntax: {len(chosen) - len(failed)} of {len(chosen)} files compile with {clang} -stdlib=libc++")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
