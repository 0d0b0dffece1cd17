#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Compares a benchmark run against a baseline (issue 5) and fails past a threshold.

  bench_compare.py BASELINE.json CONTENDER.json [--threshold 0.10] [--alpha 0.05] [--filter REGEX]
                   [--markdown FILE] [--no-utest]

Both files are Google Benchmark JSON (scripts/bench.sh writes bench.json). The table is Google Benchmark's own
compare.py report, U-test included (/usr/share/benchmark/gbench; another copy with --gbench-dir or
CROSSFIRE_GBENCH_DIR). Run it with /usr/bin/python3, which has scipy.

A benchmark regresses when its median real time grew by more than --threshold (a fraction: 0.10 is 10%) and, when
both sides have enough repetitions for the U-test (9 or more is what compare.py recommends), the change is also
significant (time p-value < --alpha). With too few repetitions the median alone decides, and the report says so.

Exit status: 0 no regression, 1 at least one regression, 2 a missing or corrupt input (the message names the file).
"""
import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_history import BenchFileError, errors_of, iterations_of, load_benchmark_json  # noqa: E402


def import_gbench(gbench_dir):
    if not os.path.isdir(os.path.join(gbench_dir, "gbench")):
        raise BenchFileError(f"Google Benchmark's compare tool is not in {gbench_dir} (no gbench/ there); "
                             "install libbenchmark-tools or pass --gbench-dir")
    sys.path.insert(0, gbench_dir)
    try:
        from gbench import report  # noqa: E402
    except ImportError as e:
        raise BenchFileError(f"cannot import gbench from {gbench_dir}: {e} (run with /usr/bin/python3, which has scipy)")
    return report


def filtered(data, pattern):
    """A copy without failed/skipped entries (compare.py cannot use them) and, with a pattern, only matching ones."""
    out = dict(data)
    rx = re.compile(pattern) if pattern else None
    out["benchmarks"] = [b for b in data["benchmarks"]
                         if not b.get("error_occurred") and (rx is None or rx.search(b.get("run_name", b["name"])))]
    return out


def fmt_time(v, unit):
    return f"{v:.4g} {unit}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline")
    ap.add_argument("contender")
    ap.add_argument("--threshold", type=float, default=0.10,
                    help="relative growth of the median time that counts as a regression (default 0.10)")
    ap.add_argument("--alpha", type=float, default=0.05, help="U-test significance level (default 0.05)")
    ap.add_argument("--filter", default="", help="only benchmarks whose name matches this regex")
    ap.add_argument("--markdown", help="also write the verdict as a Markdown table (for a pull-request comment)")
    ap.add_argument("--no-utest", dest="utest", action="store_false")
    ap.add_argument("--gbench-dir", default=os.environ.get("CROSSFIRE_GBENCH_DIR", "/usr/share/benchmark"))
    ap.add_argument("--no-color", dest="color", action="store_false")
    args = ap.parse_args(argv)
    if not (args.threshold >= 0):
        ap.error("--threshold must be >= 0")

    try:
        base = load_benchmark_json(args.baseline, "baseline")
        cont = load_benchmark_json(args.contender, "contender")
        report = import_gbench(args.gbench_dir)
    except BenchFileError as e:
        print(f"bench_compare: error: {e}", file=sys.stderr)
        return 2

    b, c = filtered(base, args.filter), filtered(cont, args.filter)
    if not b["benchmarks"] or not c["benchmarks"]:
        print("bench_compare: error: no comparable benchmarks"
              f"{' match ' + repr(args.filter) if args.filter else ''} in {args.baseline if not b['benchmarks'] else args.contender}",
              file=sys.stderr)
        return 2

    # 1. compare.py's own table, U-test included.
    diff = report.get_difference_report(b, c, utest=args.utest)
    use_color = args.color and sys.stdout.isatty()
    for line in report.print_difference_report(diff, include_aggregates_only=True, utest=args.utest,
                                               utest_alpha=args.alpha, use_color=use_color):
        print(line)

    # 2. The verdict, per benchmark, on the medians of the repetitions.
    utest_of = {d["name"]: d.get("utest") or {} for d in diff}
    base_runs, cont_runs = iterations_of(b), iterations_of(c)
    rows = []
    for name, reps in base_runs.items():
        if name not in cont_runs:
            continue
        unit = reps[0]["time_unit"]
        old = statistics.median(r["real_time"] for r in reps)
        new = statistics.median(r["real_time"] for r in cont_runs[name])
        change = (new - old) / old if old > 0 else 0.0
        u = utest_of.get(name, {})
        p = u.get("time_pvalue")
        significant = p is not None and p < args.alpha
        if change > args.threshold and (p is None or significant):
            verdict = "REGRESSION" if p is not None else "REGRESSION (median only: too few repetitions for a U-test)"
        elif change < -args.threshold and (p is None or significant):
            verdict = "faster"
        else:
            verdict = "same"
        rows.append((name, unit, old, new, change, p, verdict))

    only_base = sorted(set(base_runs) - set(cont_runs))
    only_cont = sorted(set(cont_runs) - set(base_runs))
    regressions = [r for r in rows if r[6].startswith("REGRESSION")]
    print()
    print(f"bench_compare: {len(rows)} benchmarks compared, threshold {args.threshold:.0%}, alpha {args.alpha}: "
          f"{len(regressions)} regression(s), {sum(r[6] == 'faster' for r in rows)} faster")
    for name, unit, old, new, change, p, verdict in regressions:
        ptxt = f", p={p:.4f}" if p is not None else ""
        print(f"  REGRESSION {name}: {fmt_time(old, unit)} -> {fmt_time(new, unit)} ({change:+.1%}{ptxt})")
    if only_base:
        print(f"  only in the baseline: {len(only_base)} (e.g. {only_base[0]})")
    if only_cont:
        print(f"  new in the contender: {len(only_cont)} (e.g. {only_cont[0]})")
    skipped = errors_of(cont)
    if skipped:
        print(f"  skipped in the contender: {len(skipped)} (e.g. {next(iter(skipped))}: {next(iter(skipped.values()))})")

    if args.markdown:
        write_markdown(args, rows, regressions, only_base, only_cont)
    return 1 if regressions else 0


def write_markdown(args, rows, regressions, only_base, only_cont):
    def row(r):
        name, unit, old, new, change, p, verdict = r
        ptxt = f"{p:.4f}" if p is not None else "n/a"
        mark = "**" if verdict.startswith("REGRESSION") else ""
        return f"| `{name}` | {fmt_time(old, unit)} | {fmt_time(new, unit)} | {mark}{change:+.1%}{mark} | {ptxt} | {verdict} |"

    head = ["| Benchmark | Baseline (median) | This run (median) | Change | U-test p | Verdict |",
            "|---|---:|---:|---:|---:|---|"]
    lines = [f"### Benchmarks vs baseline: {len(regressions)} regression(s)", "",
             f"Threshold {args.threshold:.0%} on the median real time; U-test alpha {args.alpha} "
             "(Google Benchmark compare.py). Shared CI runners are noisy: read small changes with care.", ""]
    notable = [r for r in rows if r[6] != "same"]
    if notable:
        lines += head + [row(r) for r in sorted(notable, key=lambda r: -r[4])] + [""]
    else:
        lines += ["No significant change.", ""]
    lines += ["<details><summary>All benchmarks</summary>", ""] + head + [row(r) for r in rows] + ["", "</details>"]
    if only_base or only_cont:
        lines += ["", f"Only in the baseline: {len(only_base)}; new in this run: {len(only_cont)}."]
    with open(args.markdown, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
