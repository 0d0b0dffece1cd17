#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/bench_instructions.py: instructions per call under callgrind, and its verdict on a change. Run by ctest
(label bench) with the bench_dispatch binary as its argument; needs valgrind (skipped, exit 77, without it)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "bench_instructions.py")
BENCH = None  # set from argv


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=600)


def fake_bench(folder, name, work):
    """A stand-in for bench_dispatch whose every call (`--crossfire_repeat=CASE N`: N of them) does `work` steps."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\ni=0\nwhile [ $i -lt $(($2 * %d)) ]; do i=$((i+1)); done\n" % work)
    os.chmod(path, 0o755)
    return path


def counts(stdout):
    """case -> instructions per call, from the printed table."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 2 and "/" in cells[0] and cells[1].replace(".", "").isdigit():
            out[cells[0]] = float(cells[1])
    return out


class InstructionsTest(unittest.TestCase):
    def test_counts_dispatch_cases_and_a_binary_matches_itself(self):
        r = run(BENCH, "--base", BENCH, "--case", "1_tensor_neg/api", "--case", "1_tensor_neg/direct_alloc",
                "--case", "2_tensors_add_tracked/api")
        self.assertEqual(r.returncode, 0, r.stderr)
        c = counts(r.stdout)
        # Bounds wide enough for any build type, narrow enough to catch a count of the wrong thing (a whole run,
        # or nothing): a 1-element neg is a few hundred instructions, a tracked add more than an untracked call.
        self.assertTrue(50 < c["1_tensor_neg/direct_alloc"] < c["1_tensor_neg/api"] < 2000, r.stdout)
        self.assertGreater(c["2_tensors_add_tracked/api"], c["1_tensor_neg/api"], r.stdout)
        self.assertIn("| 1_tensor_neg: api - direct_alloc |", r.stdout)
        self.assertIn("+0 (+0.0%)", r.stdout)

    def test_growth_past_the_threshold_fails_and_less_passes(self):
        with tempfile.TemporaryDirectory() as d:
            one, two = fake_bench(d, "one", 1), fake_bench(d, "two", 2)
            r = run(two, "--base", one, "--case", "x/api", "--n", "50")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("**grew**", r.stdout)
            self.assertIn("x/api", r.stderr)
            c = counts(r.stdout)
            self.assertGreater(c["x/api"], 0)
            r = run(one, "--base", two, "--case", "x/api", "--n", "50")  # fewer instructions: no failure
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = run(two, "--base", one, "--case", "x/api", "--n", "50", "--threshold", "2")  # under a 200% threshold
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_bad_input_is_named(self):
        r = run("/nonexistent/bench_dispatch")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/bench_dispatch is not an executable file", r.stderr)
        r = run(BENCH, "--case", "no_such_case/api")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no_such_case/api", r.stderr)
        r = run(BENCH, "--n", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--n", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench_instructions_test.py BENCH_DISPATCH")
    BENCH = sys.argv.pop(1)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: skipped")
        sys.exit(77)
    unittest.main()
