#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The key numbers of a benchmark run, as a Markdown report (issue 5; docs/benchmarks.md quotes it).

  bench_summary.py RUN.json [--out FILE]

From the medians of the repetitions: dispatch cost per backend (public API vs a direct kernel call, with and
without the output allocation), allocations per op, the autodiff layer's cost, the error path, and CPU matmul
against a direct Eigen GEMM of the same size, each next to its target. Exit status 0, or 2 for a missing or
corrupt input.
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_history import (BenchFileError, iterations_of, load_benchmark_json, nominal_repetitions,  # noqa: E402
                           summarise)

CASES = ["0_tensors_full", "1_tensor_neg", "2_tensors_add", "3_tensors_where", "list_8_cat"]


def ok(cond):
    return "yes" if cond else "**no**"


def median_difference_interval(a, b, level=0.95, resamples=4000, seed=1):
    """A bootstrap interval for median(a) - median(b), a and b independent samples (the repetitions of two
    benchmarks). Deterministic (fixed seed), so a summary is reproducible from its JSON."""
    rng = random.Random(seed)
    diffs = sorted(statistics.median(rng.choices(a, k=len(a))) - statistics.median(rng.choices(b, k=len(b)))
                   for _ in range(resamples))
    tail = int((1 - level) / 2 * resamples)
    return diffs[tail], diffs[resamples - 1 - tail]


def median_interval(a, level=0.95, resamples=4000, seed=1):
    """A bootstrap interval for median(a), a the repetitions of one benchmark. Deterministic, as above."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(a, k=len(a))) for _ in range(resamples))
    tail = int((1 - level) / 2 * resamples)
    return meds[tail], meds[resamples - 1 - tail]


def verdict_of(limit, lo, hi):
    return "yes" if hi <= limit else "**no**" if lo > limit else "unclear"


def paired_at_most(limit, reps, key="overhead_ns", how="paired"):
    """The 10 ns judgement on the `paired` benchmark: each repetition holds one paired difference (counter
    overhead_ns, API - (direct + alloc) per call over its nominal pairs), so the interval is that of the median of
    the nominal repetitions. The text says how many repetitions that was. With key="call_ns" the same judgement of
    a `nominal` benchmark: a call's own time over its nominal pairs."""
    kept = nominal_repetitions(reps)
    values = [r[key] for r in kept]
    used = f"{len(kept)} of {len(reps)} repetitions at nominal speed"
    if len(values) < 3:
        return f"{ok(statistics.median(values) <= limit)} (medians only: {used}, fewer than 3)"
    lo, hi = median_interval(values)
    return f"{verdict_of(limit, lo, hi)} (95% interval {lo:.1f} to {hi:.1f} ns, {how}, {used})"


# bench_dispatch's `nominal` benchmarks (bm_nominal): a CPU call's own time at the machine's nominal speed, for
# issue 19's absolute-time targets: the case, what it is, and the target in ns.
NOMINAL = [("2_tensors_add", "1-element add through the API, output allocated", 25),
           ("2_tensors_add_tracked", "tracked 1-element add (a node recorded)", 80),
           ("device_mismatch", "DeviceMismatch raise + catch", 2000)]


def at_most(limit, a, b):
    """Whether median(a) - median(b) <= limit, judged on the repetitions a and b: "yes" when the whole 95% interval
    of the difference is within the limit, "**no**" when all of it is over, else "unclear" (the machine's noise is
    larger than the margin). With fewer than 3 repetitions of either, the medians alone decide, and the text says so."""
    if min(len(a), len(b)) < 3:
        return f"{ok(statistics.median(a) - statistics.median(b) <= limit)} (medians only: fewer than 3 repetitions)"
    lo, hi = median_difference_interval(a, b)
    return f"{verdict_of(limit, lo, hi)} (95% interval of the difference {lo:.1f} to {hi:.1f} ns, {min(len(a), len(b))} repetitions)"


# The harness's own benchmarks (harness/bench/generate_bench.cpp): name, what it measures, and the target, if any
# (issue 4 asks for at least 20,000 generated programs per second on one core).
HARNESS = [("BM_GenerateTenNodePrograms", "valid 10-node programs generated", 20000),
           ("BM_PrintParseRoundTrip", "10-node programs printed and parsed back", None),
           ("BM_CampaignProgramsAllOracles", "programs checked by all four oracles (one campaign worker)", None)]


UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def harness_lines(s):
    out = []
    for name, what, target in HARNESS:
        b = s.get(name)
        if not b or "skipped" in b:
            continue
        # One program per iteration (SetItemsProcessed(iterations)), so the rate is one over the median CPU time.
        seconds = b["cpu_time"] * UNIT_SECONDS.get(b.get("time_unit", "ns"), 1e-9)
        if seconds <= 0:
            continue
        rate = 1 / seconds
        line = f"- {what}: {rate:,.0f}/s"
        checks = (b.get("counters") or {}).get("checks/program")
        if checks is not None:
            line += f" ({checks:.1f} checks per program)"
        if target is not None:
            line += f"; target >= {target:,}/s: {ok(rate >= target)}"
        out.append(line)
    return ["### Harness (one core)", ""] + out + [""] if out else []


def report(data):
    s = summarise(data)
    ctx = data.get("context", {})
    out = [f"Run on {ctx.get('host_name', '?')} ({ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, "
           f"load average {', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}), {ctx.get('date', '')}. "
           "Medians of the repetitions; real (wall) time, with CPU time in brackets.", ""]

    def t(name):
        b = s.get(name) or s.get(name + "/real_time")  # UseRealTime() appends /real_time to a name
        return b if b and "real_time" in b else None

    reps = iterations_of(data)

    def paired_reps(be, case):
        return [r for r in reps.get(f"dispatch/{be}/{case}/paired", []) if "overhead_ns" in r]

    def paired_overhead(be, case):
        """The paired difference over the nominal repetitions (None when the run has no `paired` benchmark)."""
        kept = nominal_repetitions(paired_reps(be, case))
        return statistics.median(r["overhead_ns"] for r in kept) if kept else None

    backends = sorted({n.split("/")[1] for n in s if n.startswith("dispatch/")})
    for be in backends:
        out += [f"### Dispatch on {be} (1-element tensors, ns/op)", "",
                "| Case | API | call (prepared pack) | direct kernel | direct + alloc | validate | API - direct "
                "| API - (direct + alloc) | the same, paired | allocs/op (API) |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for case in CASES:
            p = f"dispatch/{be}/{case}/"
            api, gen, direct = t(p + "api"), t(p + "call"), t(p + "direct")
            da, val = t(p + "direct_alloc"), t(p + "validate")
            if not api:
                why = (s.get(p + "api") or {}).get("skipped", "not run")
                out.append(f"| {case} | skipped: {why} | | | | | | | | |")
                continue

            def cell(b):
                return f"{b['real_time']:.1f} ({b['cpu_time']:.1f})" if b else "-"

            def diff(a, b, key="real_time"):
                return f"{a[key] - b[key]:.1f}" if a and b else "-"
            allocs = (api.get("counters") or {}).get("allocs/op")
            paired = paired_overhead(be, case)
            out.append(f"| {case} | {cell(api)} | {cell(gen)} | {cell(direct)} | {cell(da)} | {cell(val)} | "
                       f"{diff(api, direct)} ({diff(api, direct, 'cpu_time')}) | {diff(api, da)} ({diff(api, da, 'cpu_time')}) | "
                       f"{'-' if paired is None else f'{paired:.1f}'} | {'-' if allocs is None else f'{allocs:.2f}'} |")
        out.append("")
        add, da = t(f"dispatch/{be}/2_tensors_add/api"), t(f"dispatch/{be}/2_tensors_add/direct_alloc")
        tr, ng = t(f"dispatch/{be}/2_tensors_add_tracked/api"), t(f"dispatch/{be}/2_tensors_add_tracked_no_grad/api")
        err = t(f"dispatch/{be}/device_mismatch/raise_catch")
        if add and tr:
            c = tr.get("counters") or {}
            out.append(f"- Tracked add: {tr['real_time']:.1f} ns ({tr['cpu_time']:.1f} CPU; "
                       f"{c.get('allocs/op', float('nan')):.2f} allocs/op, {c.get('nodes/op', float('nan')):.2f} nodes/op) "
                       f"vs untracked {add['real_time']:.1f} ns ({add['cpu_time']:.1f} CPU): the autodiff layer costs "
                       f"{tr['real_time'] - add['real_time']:.1f} ns ({tr['cpu_time'] - add['cpu_time']:.1f} CPU) per recorded op.")
        if add and ng:
            out.append(f"- Tracked input under no_grad: {ng['real_time']:.1f} ns ({ng['cpu_time']:.1f} CPU); untracked: "
                       f"{add['real_time']:.1f} ns ({add['cpu_time']:.1f} CPU).")
        if err:
            c = err.get("counters") or {}
            out.append(f"- Error path (raise + catch DeviceMismatch): {err['real_time']:.0f} ns ({err['cpu_time']:.0f} CPU), "
                       f"{c.get('allocs/op', float('nan')):.1f} allocs/op.")
        if be == "cpu" and add:
            allocs = (add.get("counters") or {}).get("allocs/op")
            out += ["", "Targets (CPU):", ""]
            for case in CASES:
                api, da = t(f"dispatch/{be}/{case}/api"), t(f"dispatch/{be}/{case}/direct_alloc")
                if paired_reps(be, case):
                    # The paired difference is the measurement to judge by (bench_dispatch.cpp, bm_paired; Note
                    # [Judging nanoseconds on a shared machine] in docs/benchmarks.md).
                    out.append(f"- dispatch + validation over the direct kernel (API - (direct + alloc), paired), "
                               f"{case}, <= 10 ns: {paired_overhead(be, case):.1f} ns: "
                               f"{paired_at_most(10, paired_reps(be, case))}")
                elif api and da:
                    d_real, d_cpu = api["real_time"] - da["real_time"], api["cpu_time"] - da["cpu_time"]
                    cpu = [[r["cpu_time"] for r in reps.get(f"dispatch/{be}/{case}/{v}", [])]
                           for v in ("api", "direct_alloc")]
                    out.append(f"- dispatch + validation over the direct kernel (API - (direct + alloc)), {case}, "
                               f"<= 10 ns: {d_real:.1f} ns real, {d_cpu:.1f} ns CPU: {at_most(10, *cpu)}")
            for case, what, limit in NOMINAL:
                # Google Benchmark appends its settings to the name (".../nominal/iterations:50000/manual_time").
                name = f"dispatch/{be}/{case}/nominal"
                nominal = [r for n, rs in reps.items() if n == name or n.startswith(name + "/") for r in rs
                           if "call_ns" in r]
                if nominal:
                    kept = nominal_repetitions(nominal)
                    out.append(f"- {what}, at nominal speed, <= {limit} ns: "
                               f"{statistics.median(r['call_ns'] for r in kept):.1f} ns: "
                               f"{paired_at_most(limit, nominal, 'call_ns', 'nominal')}")
            out.append(f"- 1-element add through the public API, output allocation included, <= 100 ns: "
                       f"{add['real_time']:.1f} ns real, {add['cpu_time']:.1f} ns CPU: {ok(add['cpu_time'] <= 100)}")
            if allocs is not None:
                # At most the output's block: 0 where a recycled block serves it (Note [Recycled tensor blocks] in
                # kernels/cpu/cpu_backend.cpp), 1 where it is new (a build with a sanitizer, which turns recycling off).
                out.append(f"- heap allocations per successful op <= 1 (the output block; 0 when a recycled block "
                           f"serves it): {allocs:.2f}: {ok(allocs <= 1 + 0.01)}")
        out.append("")

    rows = []
    for size in ("small", "medium", "large"):
        cf, eg = t(f"kernel/matmul/cpu/{size}"), t(f"reference/eigen_gemm/cpu/{size}")
        if not eg:
            continue
        gf = lambda b: (b.get("counters") or {}).get("FLOP/s", 0) / 1e9  # noqa: E731
        if cf:
            rows.append(f"| {size} | {eg.get('label', '')} | {gf(cf):.2f} | {gf(eg):.2f} | {100 * gf(cf) / gf(eg):.0f}% "
                        f"| {ok(gf(cf) >= 0.9 * gf(eg))} |")
        else:
            why = (s.get(f"kernel/matmul/cpu/{size}") or {}).get("skipped", "not run")
            rows.append(f"| {size} | {eg.get('label', '')} | skipped: {why} | {gf(eg):.2f} | - | - |")
    if rows:
        out += ["### CPU matmul vs a direct Eigen GEMM (GFLOP/s, single thread)", "",
                "| Size | Shape | crossfire matmul | Eigen GEMM | ratio | >= 90% |", "|---|---|---:|---:|---:|---|"] + rows + [""]

    out += harness_lines(s)

    kern = [n for n in s if n.startswith("kernel/")]
    skipped = [n for n in kern if "skipped" in s[n]]
    if kern:
        out.append(f"Kernel benchmarks in this run: {len(kern)} (registered from the op table), "
                   f"{len(kern) - len(skipped)} ran, {len(skipped)} skipped "
                   "(the backend has no kernel for the op yet).")
    else:
        out.append("Kernel benchmarks: none in this run (filtered out, or bench_kernels was not run).")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        data = load_benchmark_json(args.run, "run")
    except BenchFileError as e:
        print(f"bench_summary: error: {e}", file=sys.stderr)
        return 2
    text = report(data)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
