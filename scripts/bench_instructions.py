#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Instructions per call of dispatch's CPU cases, counted by callgrind: the machine-independent measure.

    scripts/bench_instructions.py BENCH_DISPATCH [--base BENCH_DISPATCH] [--case NAME ...] [--n N]
                                  [--threshold FRACTION] [--markdown FILE]

Runs `BENCH_DISPATCH --crossfire_repeat=<case> N` and `... 2N` under `valgrind --tool=callgrind` and reports
(I(2N) - I(N)) / N, the instructions of one call with every one-time cost (start-up, first use of a backend, the
free lists filling) cancelled. Nanoseconds on a shared 2-vCPU runner move by more than most changes do (Note
[Judging nanoseconds on a shared machine] in docs/benchmarks.md); these counts do not move unless the code does.

With --base, the same cases of a second binary (the base of a pull request, built alike) beside each count, and
the exit status says whether any case grew: by more than --threshold (default 0.02) of the base's count *and* by
at least 3 instructions. Exit 0, 1 when a case grew, 2 when a binary, valgrind or a case is missing or a run
failed (the message says which).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# bench_dispatch's CPU cases (its cases() and repeat()): each as the API call and as direct_alloc (the output
# allocated and the same kernel launched, with no validation), so that the difference is dispatch's own.
CASES = ["0_tensors_full", "1_tensor_neg", "2_tensors_add", "3_tensors_where", "list_8_cat"]
DEFAULT = [f"{c}/{v}" for c in CASES for v in ("api", "direct_alloc")] + [
    "2_tensors_add_tracked/api", "device_mismatch/raise_catch"]
MIN_GROWTH = 3  # instructions: below this a change is reported, never failed


class Failed(Exception):
    pass


def total_instructions(binary, case, n):
    """The instructions callgrind counts for one run of `binary --crossfire_repeat=case n`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = dict(os.environ, CROSSFIRE_CPU_DEVICES="2")  # device_mismatch needs a second CPU device
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
                            f"--crossfire_repeat={case}", str(n)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        if r.returncode != 0:
            last = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("==")]
            raise Failed(f"{binary} --crossfire_repeat={case} {n} exited with {r.returncode}"
                         + (f": {last[-1]}" if last else ""))
        try:
            with open(out) as f:
                for line in f:
                    if line.startswith("summary:") or line.startswith("totals:"):
                        return int(line.split()[1])
        except OSError as e:
            raise Failed(f"callgrind wrote no output for {case}: {e}")
    raise Failed(f"callgrind's output for {case} has no instruction total")


def per_call(binary, case, n):
    return (total_instructions(binary, case, 2 * n) - total_instructions(binary, case, n)) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="a bench_dispatch binary (Release, as scripts/bench.sh builds it)")
    ap.add_argument("--base", help="a second bench_dispatch to compare with")
    ap.add_argument("--case", action="append", dest="cases", metavar="NAME",
                    help="<case>/<variant>, repeatable (default: every CPU dispatch case, the tracked add and the "
                         "DeviceMismatch raise)")
    ap.add_argument("--n", type=int, default=1000, help="calls in the shorter run (default 1000)")
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--markdown", help="also write the table here")
    a = ap.parse_args()
    if a.n < 1:
        print(f"bench_instructions.py: --n wants a positive number, got {a.n}", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("bench_instructions.py: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    binaries = [a.bench] + ([a.base] if a.base else [])
    for b in binaries:
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            print(f"bench_instructions.py: {b} is not an executable file", file=sys.stderr)
            return 2
    cases = a.cases or DEFAULT
    rows, grew = [], []
    try:
        for case in cases:
            head = per_call(a.bench, case, a.n)
            base = per_call(a.base, case, a.n) if a.base else None
            rows.append((case, head, base))
            if base is not None and head - base >= MIN_GROWTH and head > base * (1 + a.threshold):
                grew.append(case)
    except Failed as e:
        print(f"bench_instructions.py: {e}", file=sys.stderr)
        return 2

    def fmt(x):
        return "" if x is None else f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"

    lines = ["| case | instructions per call |" + (" base | change |" if a.base else ""),
             "|---|---:|" + ("---:|---:|" if a.base else "")]
    for case, head, base in rows:
        line = f"| {case} | {fmt(head)} |"
        if a.base:
            change = f"{head - base:+.0f} ({(head - base) / base:+.1%})" if base else ""
            line += f" {fmt(base)} | {change}{' **grew**' if case in grew else ''} |"
        lines.append(line)
    # Dispatch's own instructions: each case's API call minus its direct + alloc.
    got = {c: (h, b) for c, h, b in rows}
    for c in CASES:
        if f"{c}/api" in got and f"{c}/direct_alloc" in got:
            (ha, ba), (hd, bd) = got[f"{c}/api"], got[f"{c}/direct_alloc"]
            line = f"| {c}: api - direct_alloc | {fmt(ha - hd)} |"
            if a.base:
                line += f" {fmt(ba - bd)} | {(ha - hd) - (ba - bd):+.0f} |"
            lines.append(line)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if grew:
        print(f"bench_instructions.py: {len(grew)} case(s) grew by more than {a.threshold:.0%} and "
              f"{MIN_GROWTH} instructions: {', '.join(grew)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
