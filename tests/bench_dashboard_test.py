#!/usr/bin/python3
"""Renders the benchmark dashboard from a small synthetic history in headless Chromium and checks the result
(issue 5): every chart drawn (the page's script writes data-charts-drawn="N" when done), each with its line, the
comparison table present, and no script error (window.onerror writes <pre class="script-error"> into the page).
A second page with a planted script error proves the error hook reports one.

Exits 77 (ctest SKIP_RETURN_CODE) with the reason when no Chromium is installed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")
SKIP = 77


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


PAIRED = ["dispatch/cpu/2_tensors_add/paired", "dispatch/cpu/list_8_cat/paired"]


def synthetic_history(path):
    """Four runs; three benchmarks with numbers, one skipped in every run, one that appears only later, and two
    `paired` dispatch benchmarks (a time and a paired overhead each), one within the 10 ns target, one over it."""
    names = ["dispatch/cpu/2_tensors_add/api", "dispatch/cpu/2_tensors_add/direct", "kernel/add/cpu/large"]
    with open(path, "w") as f:
        for i in range(4):
            benchmarks = {}
            for j, n in enumerate(names):
                t = 50.0 * (j + 1) + i
                if i == 3 and n == "kernel/add/cpu/large":
                    t *= 1.3  # a regression the comparison table must flag
                benchmarks[n] = {"real_time": t, "cpu_time": t * 0.9, "min": t - 1, "max": t + 2, "time_unit": "ns",
                                 "repetitions": 9, "counters": {"allocs/op": 1.0, "bytes_per_second": 1e9 * (i + 1)}}
            for k, n in enumerate(PAIRED):
                o = 6.0 + 6.0 * k + 0.1 * i  # 6.x ns: within the target; 12.x: over it
                benchmarks[n] = {"real_time": 9000.0 + i, "cpu_time": 9000.0, "min": 8990.0, "max": 9010.0,
                                 "time_unit": "ns", "repetitions": 9, "counters": {"overhead_ns": o},
                                 "paired": {"overhead_ns": o, "min": o - 0.2, "max": o + 0.3, "nominal": 8,
                                            "repetitions": 9}}
            benchmarks["kernel/neg/cpu/small"] = {"skipped": "unsupported: the cpu backend has no kernel for `neg`"}
            if i >= 2:
                benchmarks["kernel/matmul/cpu/small"] = {"real_time": 9.5 - i, "cpu_time": 9.0, "time_unit": "us",
                                                         "repetitions": 9, "counters": {"FLOP/s": 1.2e10}}
            rec = {"schema": 1, "timestamp": f"2026-01-0{i + 1}T00:00:00+00:00", "commit": f"{i:040x}",
                   "ref": "main", "context": {"host_name": "test", "num_cpus": 2, "crossfire_backends": "cpu"},
                   "benchmarks": benchmarks}
            f.write(json.dumps(rec) + "\n")
    return len(names) + 1 + 2 * len(PAIRED)  # charts: benchmarks with a number, and one more per paired one


def main():
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no chromium found (install Debian's chromium: scripts/install-deps.sh --with-browser)")
        return SKIP
    work = tempfile.mkdtemp(prefix="crossfire-dashboard-")
    try:
        hist, page = os.path.join(work, "history.jsonl"), os.path.join(work, "dashboard.html")
        expected = synthetic_history(hist)
        r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "bench_dashboard.py"), "--history", hist,
                            "--out", page], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"FAIL: bench_dashboard.py exited {r.returncode}: {r.stderr}")
            return 1
        with open(page) as f:
            text = f.read()
        for bad in ("http://", "https://"):  # self-contained: the only URL allowed is the SVG namespace
            stray = [m for m in re.findall(bad + r"[^\s'\"<>]+", text) if "www.w3.org/2000/svg" not in m]
            if stray:
                print(f"FAIL: the page refers to {stray[0]}: it must be self-contained")
                return 1

        dom = dump_dom(chromium, page)
        failures = []
        errors = re.findall(r'<pre class="script-error">(.*?)</pre>', dom, re.S)
        if errors:
            failures.append(f"script errors: {errors}")
        m = re.search(r'data-charts-drawn="(\d+)"', dom)
        if not m:
            failures.append("the page never wrote data-charts-drawn (its script did not finish)")
        elif int(m.group(1)) != expected:
            failures.append(f"data-charts-drawn={m.group(1)}, expected {expected}")
        figures = re.findall(r'<figure class="chart(?: overhead)?" data-benchmark="([^"]+)">(.*?)</figure>', dom, re.S)
        if len(figures) != expected:
            failures.append(f"{len(figures)} chart figures in the DOM, expected {expected}")
        for name, body in figures:
            if not re.search(r'<polyline class="line" points="[-\d.,\s]+"', body):
                failures.append(f"chart {name} has no line")
            if len(re.findall(r"<circle", body)) == 0:
                failures.append(f"chart {name} has no points")
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
        if not re.search(r'list_8_cat/paired</td><td>12.2 ns overhead</td><td>12.3 ns overhead</td>', dom):
            failures.append("the table does not compare a paired benchmark on its overhead")
        if 'id="comparison"' not in dom or 'class="regression"' not in dom:
            failures.append("the latest-vs-previous table is missing, or did not flag the +30% change")

        # Negative control: a planted error must be reported by the page's error hook.
        planted = os.path.join(work, "planted.html")
        with open(planted, "w") as f:
            f.write(text.replace("</body>", "<script>crossfireNoSuchFunction();</script></body>"))
        if '<pre class="script-error">' not in dump_dom(chromium, planted):
            failures.append("a planted script error was not reported by window.onerror")

        if failures:
            print("FAIL:\n  " + "\n  ".join(failures))
            return 1
        print(f"ok: {expected} charts drawn in headless chromium, no script errors; planted error detected")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
