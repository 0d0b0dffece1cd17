#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Renders the benchmark dashboard from synthetic histories in headless Chromium and checks the result (issue 5;
issue 18, item 7: "the benchmark dashboard tells change from noise").

The histories are built the way CI builds them: Google Benchmark JSON with every repetition, appended by
`bench_history.py append --commit SHA`, then rendered by `bench_dashboard.py`. Checked:

- every chart drawn (the page's script writes data-charts-drawn="N" when done), each with its line and points, and
  no script error (window.onerror writes <pre class="script-error"> into the page); a page with a planted script
  error proves the hook reports one;
- each chart's x axis names the runs' commits (their short SHAs), not run numbers;
- the latest-versus-previous table colours a row only when compare.py's U-test calls the change significant and it
  is past the practical threshold: a planted 30% regression with 9 repetitions a side is coloured and shows a small
  p-value; a 2% shift that the U-test calls significant is not coloured; a 30% change with 5 repetitions a side
  (p < 0.05 all the same) is not coloured and says "too few repetitions";
- two runs of the same commit, whose repetitions are drawn from one distribution (random.Random, fixed seed), colour
  no row, each row showing its p-value; and over 150 seeds the share of such rows that gets coloured stays under
  compare.py's alpha (about 2.5%), where the old rule (10% of the median) colours about 40%. By chance alone a
  page of 15 unchanged rows does show a coloured row now and then (about one in three such pages): that is what a
  test at alpha = 0.05 means, and why the rate, not only the one page, is checked.

Exits 77 (ctest SKIP_RETURN_CODE) with the reason when no Chromium is installed, or when this Python cannot import
compare.py's module (gbench, with scipy: run it with /usr/bin/python3, as ctest does)."""
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")
SKIP = 77
sys.path.insert(0, SCRIPTS)
import bench_dashboard  # noqa: E402
from bench_history import summarise  # noqa: E402


def find_chromium():
    for name in (os.environ.get("CROSSFIRE_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def dump_dom(chromium, html_path):
    profile = tempfile.mkdtemp(prefix="crossfire-chromium-")
    try:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--dump-dom", "file://" + os.path.abspath(html_path)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "<body" not in r.stdout:
            raise SystemExit(f"FAIL: chromium exited {r.returncode} without a DOM\n{r.stderr[-2000:]}")
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def sha(text):
    """A commit-like 40-digit SHA (what bench.sh and $GITHUB_SHA give)."""
    return hashlib.sha1(text.encode()).hexdigest()


# ---- Google Benchmark JSON, as the benchmark binaries write it ---------------------------------------------------

def reps(name, times, unit="ns", **counters):
    return [{"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(times),
             "repetition_index": i, "threads": 1, "iterations": 1000, "real_time": t, "cpu_time": t * 0.9,
             "time_unit": unit, **counters} for i, t in enumerate(times)]


def paired_reps(name, overheads):
    """bench_dispatch's `paired` benchmark: each repetition's overhead (overhead_ns) and its baseline, all at the
    machine's nominal speed, so every repetition is kept."""
    return [dict(r, overhead_ns=o, baseline_ns=40.0) for r, o in zip(reps(name, [9000.0] * len(overheads)),
                                                                   overheads)]


def skipped(name, why):
    return [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True, "error_message": why,
             "iterations": 0}]


def run_json(benchmarks):
    return {"context": {"date": "2026-12-03T00:00:00+00:00", "host_name": "test", "num_cpus": 2,
                        "crossfire_backends": "cpu"}, "benchmarks": benchmarks}


# Nine repetitions around a median of exactly 1 (so a table cell can be checked to the digit), 1% apart.
SPREAD9 = [0.98, 0.99, 1.0, 1.01, 1.02, 0.985, 0.995, 1.005, 1.015]


def append(history, commit, doc, work):
    path = os.path.join(work, "run.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "bench_history.py"), "append", path, "--history",
                        history, "--commit", commit, "--ref", "main"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: bench_history.py append exited {r.returncode}: {r.stderr}")


def render(history, page):
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "bench_dashboard.py"), "--history", history,
                        "--out", page], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: bench_dashboard.py exited {r.returncode}: {r.stderr}")
    with open(page) as f:
        return f.read()


# ---- history 1: a trend over four commits ------------------------------------------------------------------------

PAIRED = ["dispatch/cpu/2_tensors_add/paired", "dispatch/cpu/list_8_cat/paired"]
TREND_COMMITS = [sha(f"trend {i}") for i in range(4)]


def trend_history(history, work):
    """Four runs; three benchmarks with nine repetitions each, one skipped in every run, one with five repetitions
    that appears in the last two runs only, and two `paired` dispatch benchmarks (a time and an overhead chart
    each), one within the 10 ns target, one over it. Planted in the last run: kernel/add/cpu/large 30% slower
    (nine repetitions: coloured); kernel/matmul/cpu/small 30% slower (five repetitions: too few, plain). The
    dispatch/cpu/2_tensors_add/* times grow by 2% a run, tightly enough for the U-test to notice: significant, but
    under the practical threshold, so plain."""
    rng = random.Random(7)
    for i, commit in enumerate(TREND_COMMITS):
        benchmarks = []
        for j, n in enumerate(["dispatch/cpu/2_tensors_add/api", "dispatch/cpu/2_tensors_add/direct",
                               "kernel/add/cpu/large"]):
            t = 50.0 * (j + 1) * (1 + 0.02 * i)
            if i == 3 and n == "kernel/add/cpu/large":
                t *= 1.3
            s = SPREAD9[:]
            rng.shuffle(s)
            benchmarks += reps(n, [t * x for x in s], **{"allocs/op": 1.0, "bytes_per_second": 1e9 * (i + 1)})
        for k, n in enumerate(PAIRED):
            o = 6.0 + 6.0 * k + 0.1 * i  # 6.x ns: within the target; 12.x: over it
            benchmarks += paired_reps(n, [o + d for d in (-0.2, -0.1, 0.0, 0.1, 0.3, -0.15, 0.05, 0.15, -0.05)])
        benchmarks += skipped("kernel/neg/cpu/small", "unsupported: the cpu backend has no kernel for `neg`")
        if i >= 2:
            t = 9.5 * (1.3 if i == 3 else 1.0)
            benchmarks += reps("kernel/matmul/cpu/small", [t * x for x in SPREAD9[:5]], "us", **{"FLOP/s": 1.2e10})
        append(history, commit, run_json(benchmarks), work)
    return 3 + 1 + 2 * len(PAIRED)  # charts: benchmarks with a number, and one more per paired one


# ---- history 2: two runs of one commit ---------------------------------------------------------------------------

SAME_COMMIT = sha("one commit, measured twice")


def same_distribution_runs(rng):
    """Two runs' Google Benchmark JSON whose repetitions come from one distribution per benchmark (9 repetitions
    each): 11 benchmarks timed on a shared machine with slow phases, where a repetition runs 1-3% around its
    nominal time or, 45% of the time, 1.2-1.6x slower (docs/benchmarks.md saw 3-8 of 9 repetitions at nominal speed
    on a busy machine, and slow phases 1.45x slower), so that a median moves by 20% or more whenever five of nine
    repetitions fall in slow phases; and 4 paired overheads spread by 8-14%."""
    shapes = [(f"kernel/op{j}/cpu/small", 100.0 * (j + 1), 0.01 + 0.002 * j) for j in range(11)]
    paired = [(f"dispatch/cpu/case{j}/paired", 5.0 + 2 * j, 0.08 + 0.02 * j) for j in range(4)]

    def repetition(mean, cv):
        slow = rng.uniform(1.2, 1.6) if rng.random() < 0.45 else 1.0
        return mean * slow * rng.lognormvariate(0, cv)
    docs = []
    for _ in range(2):
        benchmarks = []
        for name, mean, cv in shapes:
            benchmarks += reps(name, [repetition(mean, cv) for _ in range(9)])
        for name, mean, cv in paired:
            benchmarks += paired_reps(name, [rng.lognormvariate(0, cv) * mean for _ in range(9)])
        docs.append(run_json(benchmarks))
    return docs


def old_rule_coloured(docs):
    """How many rows the old table coloured: a median (or paired overhead) more than 10% from the previous one."""
    a, b = summarise(docs[0]), summarise(docs[1])
    n = 0
    for name in b:
        x, y = (a[name]["paired"]["overhead_ns"], b[name]["paired"]["overhead_ns"]) if "paired" in b[name] else \
            (a[name]["real_time"], b[name]["real_time"])
        n += abs(y - x) / x > 0.10
    return n


# ---- checks ------------------------------------------------------------------------------------------------------

def table_rows(dom):
    """name -> (tr class, data-state, cells' text) of the comparison table."""
    table = re.search(r'<table id="comparison">(.*?)</table>', dom, re.S)
    rows = {}
    for cls, state, body in re.findall(r'<tr class="([^"]*)" data-state="([^"]*)">(.*?)</tr>', table.group(1) if
                                       table else "", re.S):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]
        rows[cells[0]] = (cls, state, cells[1:])
    return rows


def check_page(dom, expected, commits, failures, what):
    errors = re.findall(r'<pre class="script-error">(.*?)</pre>', dom, re.S)
    if errors:
        failures.append(f"{what}: script errors: {errors}")
    m = re.search(r'data-charts-drawn="(\d+)"', dom)
    if not m:
        failures.append(f"{what}: the page never wrote data-charts-drawn (its script did not finish)")
    elif int(m.group(1)) != expected:
        failures.append(f"{what}: data-charts-drawn={m.group(1)}, expected {expected}")
    figures = re.findall(r'<figure class="chart(?: overhead)?" data-benchmark="([^"]+)">(.*?)</figure>', dom, re.S)
    if len(figures) != expected:
        failures.append(f"{what}: {len(figures)} chart figures in the DOM, expected {expected}")
    short = [c[:7] for c in commits]
    for name, body in figures:
        if not re.search(r'<polyline class="line" points="[-\d.,\s]+"', body):
            failures.append(f"{what}: chart {name} has no line")
        if len(re.findall(r"<circle", body)) == 0:
            failures.append(f"{what}: chart {name} has no points")
        # The x axis: every label is the short SHA of the run at its position, the last run's among them.
        labels = [(int(i), t) for i, t in re.findall(r'<text class="xlabel"[^>]*data-run="(\d+)"[^>]*>([^<]*)', body)]
        if not labels:
            failures.append(f"{what}: chart {name} has no x axis labels")
        elif any(t != short[i] for i, t in labels) or labels[-1][1] != short[-1]:
            failures.append(f"{what}: chart {name}'s x axis says {[t for _, t in labels]}, not the commits {short}")
    return figures


def check_trend(chromium, work, failures):
    hist, page = os.path.join(work, "trend.jsonl"), os.path.join(work, "trend.html")
    expected = trend_history(hist, work)
    text = render(hist, page)
    for bad in ("http://", "https://"):  # self-contained: the only URL allowed is the SVG namespace
        stray = [m for m in re.findall(bad + r"[^\s'\"<>]+", text) if "www.w3.org/2000/svg" not in m]
        if stray:
            failures.append(f"the page refers to {stray[0]}: it must be self-contained")
    if '"samples"' in text:
        failures.append("the page embeds the repetitions' samples: the table is computed in Python, the charts "
                        "need medians only")
    dom = dump_dom(chromium, page)
    figures = check_page(dom, expected, TREND_COMMITS, failures, "trend")
    overhead = re.findall(r'<figure class="chart overhead" data-benchmark="([^"]+)">(.*?)</figure>', dom, re.S)
    if sorted(n for n, _ in overhead) != PAIRED:
        failures.append(f"overhead charts for {[n for n, _ in overhead]}, expected {PAIRED}")
    for name, body in overhead:
        if '<line class="target"' not in body:
            failures.append(f"overhead chart {name} has no target line")
    verdicts = [re.search(r'\((within|over) the target\)', b).group(1) if re.search(r'the target\)', b) else None
                for _, b in sorted(overhead)]
    if verdicts != ["within", "over"]:
        failures.append(f"overhead charts say {verdicts} of the target, expected within (add), over (cat)")
    if "kernel/neg/cpu/small" in [n for n, _ in figures]:
        failures.append("a benchmark skipped in every run got a chart")

    rows = table_rows(dom)
    if not rows:
        return failures.append("the latest-vs-previous table is missing")
    cat = rows.get("dispatch/cpu/list_8_cat/paired")
    if not cat or cat[2][:2] != ["12.2 ns overhead", "12.3 ns overhead"]:
        failures.append(f"the table does not compare a paired benchmark on its overhead: {cat}")
    coloured = sorted(n for n, (cls, _, _) in rows.items() if cls)
    if coloured != ["kernel/add/cpu/large"]:
        failures.append(f"coloured rows {coloured}, expected only the planted regression kernel/add/cpu/large")
    cls, state, cells = rows["kernel/add/cpu/large"]
    if cls != "regression" or not 25 <= float(cells[2].rstrip("%")) <= 35 or not cells[3] or \
            float(cells[3]) >= 0.01:
        failures.append(f"the planted +30% regression (9 vs 9 repetitions) is not coloured with p < 0.01: "
                        f"{cls!r} {cells}")
    cls, state, cells = rows["kernel/matmul/cpu/small"]
    if cls or state != "few" or "too few repetitions (5 vs 5" not in cells[4] or not cells[3] or \
            float(cells[3]) >= 0.05:
        failures.append(f"a +30% change with 5 repetitions a side (p < 0.05) must be plain and say too few "
                        f"repetitions: {cls!r} {state} {cells}")
    for n in ("dispatch/cpu/2_tensors_add/api", "dispatch/cpu/2_tensors_add/direct"):
        cls, state, cells = rows[n]
        if cls or state != "significant" or "under the threshold" not in cells[4]:
            failures.append(f"{n}: a significant 2% shift must be plain (under the threshold): {cls!r} {cells}")
    if rows.get("kernel/neg/cpu/small", ("", "", []))[1] != "skipped":
        failures.append("the skipped benchmark is not shown as skipped in the table")

    # Negative control: a planted error must be reported by the page's error hook.
    planted = os.path.join(work, "planted.html")
    with open(planted, "w") as f:
        f.write(text.replace("</body>", "<script>crossfireNoSuchFunction();</script></body>"))
    if '<pre class="script-error">' not in dump_dom(chromium, planted):
        failures.append("a planted script error was not reported by window.onerror")
    return expected


def check_same_commit(chromium, work, failures):
    hist, page = os.path.join(work, "same.jsonl"), os.path.join(work, "same.html")
    docs = same_distribution_runs(random.Random(20261203))
    for doc in docs:
        append(hist, SAME_COMMIT, doc, work)
    render(hist, page)
    dom = dump_dom(chromium, page)
    check_page(dom, 15 + 4, [SAME_COMMIT, SAME_COMMIT], failures, "same commit")
    rows = table_rows(dom)
    coloured = sorted(n for n, (cls, _, _) in rows.items() if cls)
    if len(rows) != 15 or coloured:
        failures.append(f"two runs of the same commit: {len(coloured)} of {len(rows)} rows coloured ({coloured})")
    if any(not cells[3] for _, _, cells in rows.values()):
        failures.append("two runs of the same commit: a row without its U-test p-value")
    return old_rule_coloured(docs)


def check_rates(failures):
    """Over many seeds (in this process, through bench_dashboard.compare_runs): the share of coloured rows for two
    runs of one distribution stays under alpha, where the old rule (10% of the median) coloured a quarter or more,
    and a 30% shift with 9 repetitions is coloured nearly always."""
    report, why = bench_dashboard.load_utest(os.environ.get("CROSSFIRE_GBENCH_DIR", "/usr/share/benchmark"))
    rng = random.Random(1)
    rows = coloured = old = 0
    for _ in range(150):
        docs = same_distribution_runs(rng)
        prev, last = ({"benchmarks": summarise(d)} for d in docs)
        result = bench_dashboard.compare_runs(prev, last, report)
        rows += len(result)
        coloured += sum(bool(r["cls"]) for r in result)
        old += old_rule_coloured(docs)
    if coloured / rows >= 0.05:
        failures.append(f"same distribution: {coloured} of {rows} rows coloured ({coloured / rows:.1%}), not under "
                        "alpha = 5%")
    if old / rows < 0.25:  # the check must have teeth: this noise moves medians past the old rule's 10%
        failures.append(f"same distribution: the old 10% rule would colour only {old} of {rows} rows: the "
                        "synthetic noise does not exercise the U-test")
    found = 0
    for _ in range(200):
        cv = rng.uniform(0.01, 0.12)
        base = [rng.lognormvariate(0, cv) * 100 for _ in range(9)]
        slow = [rng.lognormvariate(0, cv) * 130 for _ in range(9)]
        prev, last = ({"benchmarks": summarise(run_json(reps("k", s)))} for s in (base, slow))
        found += bench_dashboard.compare_runs(prev, last, report)[0]["cls"] == "regression"
    if found < 190:
        failures.append(f"a planted 30% regression (9 vs 9 repetitions, spread 1-12%) coloured {found} of 200 times")
    return coloured, old, rows, found


def main():
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no chromium found (install Debian's chromium: scripts/install-deps.sh --with-browser)")
        return SKIP
    report, why = bench_dashboard.load_utest(os.environ.get("CROSSFIRE_GBENCH_DIR", "/usr/share/benchmark"))
    if report is None:
        print(f"SKIP: compare.py's U-test cannot be imported by {sys.executable}: {why}")
        return SKIP
    work = tempfile.mkdtemp(prefix="crossfire-dashboard-")
    try:
        failures = []
        expected = check_trend(chromium, work, failures)
        old = check_same_commit(chromium, work, failures)
        coloured, old_rate, rows, found = check_rates(failures)
        if failures:
            print("FAIL:\n  " + "\n  ".join(failures))
            return 1
        print(f"ok: {expected} charts drawn in headless chromium with commits on the x axis, no script errors; "
              "planted error detected; the planted 30% regression coloured, 5-repetition and 2% changes plain; "
              f"two runs of one commit: no row coloured (the old 10% rule: {old} of 15); same distribution over "
              f"150 seeds: {coloured} of {rows} rows coloured (the old rule: {old_rate}); 30% with 9 repetitions: "
              f"coloured {found} of 200")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
