#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Renders the benchmark history as one self-contained HTML page (issue 5).

  bench_dashboard.py --history HISTORY.jsonl --out dashboard.html [--threshold 0.05] [--alpha 0.05]
                     [--gbench-dir DIR] [--last N] [--title TEXT]

The page has one chart per benchmark (median real time over the runs in the history, drawn as inline SVG by the
page's own script: no CDN, no network; the x axis names each run's commit), one more per `paired` dispatch benchmark
with its overhead against the 10 ns target (the summary's judgement: the median of the repetitions at nominal
speed), and a table comparing the latest run with the one before. The table is computed here, not in the page:
each row carries the p-value of compare.py's U-test (Google Benchmark's gbench.report.calc_utest, Mann-Whitney U,
two-sided) on the two runs' repetitions as the history keeps them, and a row is coloured only when that test is
significant (p < --alpha, with compare.py's recommended 9 repetitions or more on each side; fewer: "too few
repetitions", plain) and the median moved by at least --threshold (DEFAULT_THRESHOLD below says why 5%). Run it
with /usr/bin/python3, which has scipy; without gbench or scipy the page is drawn and no row is coloured.

When the script has drawn every chart it writes `data-charts-drawn="N"` on <body> and "charts drawn: N" into
#status; any script error is caught by window.onerror and written into the page as <pre class="script-error">, so a
headless browser's --dump-dom shows both (tests/bench_dashboard_test.py checks them).

Exit status: 0, or 2 when the history is missing or corrupt (the message names the file and line).
"""
import argparse
import html
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compare import import_gbench  # noqa: E402
from bench_history import BenchFileError, load_history  # noqa: E402

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<script>
// Installed first, so that an error anywhere below is reported in the page itself.
window.__scriptErrors = 0;
window.onerror = function (msg, src, line, col) {
  window.__scriptErrors++;
  var pre = document.createElement('pre');
  pre.className = 'script-error';
  pre.textContent = 'script error: ' + msg + ' (line ' + line + ':' + col + ')';
  (document.body || document.documentElement).appendChild(pre);
  if (document.body) document.body.setAttribute('data-script-errors', String(window.__scriptErrors));
  return false;
};
</script>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin-top: 1.5em; border-bottom: 1px solid #ccc; }
#status { color: #666; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure.chart { margin: 0; width: 360px; border: 1px solid #ddd; border-radius: 4px; padding: 6px; }
figure.chart figcaption { font: 12px monospace; word-break: break-all; }
figure.chart .latest { color: #555; font: 11px sans-serif; }
svg .axis { stroke: #999; stroke-width: 1; }
svg .line { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
svg .target { stroke: #d62728; stroke-width: 1; stroke-dasharray: 4 3; }
svg .band { fill: #1f77b4; fill-opacity: 0.12; stroke: none; }
svg circle { fill: #1f77b4; }
svg text { font: 10px sans-serif; fill: #555; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
td:first-child, th:first-child { text-align: left; font-family: monospace; }
td.verdict { text-align: left; }
tr.regression td { background: #fdd; }
tr.faster td { background: #dfd; }
.script-error { color: #b00; font-weight: bold; }
input#filter { width: 30em; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<div id="meta">__META__</div>
<p id="status">drawing charts...</p>
<h2>Latest run against the previous one</h2>
__TABLE__
<h2>Dispatch overhead over time (API - (direct + alloc), paired; median of the repetitions at nominal speed;
band: their range; dashed: the __TARGET__ ns target)</h2>
<div id="overhead" class="charts"></div>
<h2>Every benchmark over time (median real time; band: min..max of the repetitions; x axis: the commit of each
run)</h2>
<p><label>Filter: <input id="filter" type="search" placeholder="regular expression, e.g. dispatch/cpu"></label></p>
<div id="sections"></div>
<script type="application/json" id="bench-data">__DATA__</script>
<script>
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var data = JSON.parse(document.getElementById('bench-data').textContent);
  var runs = data.runs;

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e4 || a < 1e-2) return v.toExponential(2);
    return v.toPrecision(3);
  }

  // A run's name on the x axis: its commit's short SHA; only a run recorded without a commit gets its number.
  function commitLabel(run, i) { return run.commit ? run.commit.slice(0, 7) : 'run ' + (i + 1); }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  // What a chart draws of a run's record of a benchmark: {y, lo, hi, unit}, or null where it has no number.
  function realTime(b) {
    return b && isNum(b.real_time) ? {y: b.real_time, lo: b.min, hi: b.max, unit: b.time_unit} : null;
  }
  function pairedOverhead(b) {
    var p = b && b.paired;
    return p && isNum(p.overhead_ns) ? {y: p.overhead_ns, lo: p.min, hi: p.max, unit: 'ns',
                                        note: p.nominal + ' of ' + p.repetitions + ' repetitions at nominal speed'}
                                     : null;
  }

  // Draws one benchmark's series of `value` (realTime, pairedOverhead); a `target` draws a dashed line there.
  // Returns the <figure>, or null when no run has a number for it.
  function chart(name, value, target) {
    var pts = [];
    runs.forEach(function (r, i) {
      var v = value(r.benchmarks[name]);
      if (v) pts.push({i: i, y: v.y, lo: v.lo, hi: v.hi, unit: v.unit, note: v.note, run: r, b: r.benchmarks[name]});
    });
    if (pts.length === 0) return null;
    var W = 340, H = 160, L = 48, R = 8, T = 18, B = 22;
    var ymax = 0, ymin = Infinity;
    pts.forEach(function (p) {
      ymax = Math.max(ymax, p.hi != null ? p.hi : p.y, p.y);
      ymin = Math.min(ymin, p.lo != null ? p.lo : p.y, p.y);
    });
    if (target != null) ymax = Math.max(ymax, target * 1.1);
    ymin = Math.min(0, ymin);
    if (ymax <= ymin) ymax = ymin + 1;
    var n = Math.max(runs.length - 1, 1);
    function x(i) { return L + (W - L - R) * (runs.length === 1 ? 0.5 : i / n); }
    function y(v) { return T + (H - T - B) * (1 - (v - ymin) / (ymax - ymin)); }

    var fig = document.createElement('figure');
    fig.className = 'chart';
    fig.setAttribute('data-benchmark', name);
    var svg = el('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img'}, fig);
    el('title', {}, svg).textContent = name;
    el('line', {'class': 'axis', x1: L, y1: T, x2: L, y2: H - B}, svg);
    el('line', {'class': 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B}, svg);
    [ymin, (ymin + ymax) / 2, ymax].forEach(function (v) {
      var t = el('text', {x: L - 4, y: y(v) + 3, 'text-anchor': 'end'}, svg);
      t.textContent = fmt(v);
    });
    el('text', {x: 2, y: 10}, svg).textContent = pts[0].unit;
    // The x axis names commits: a few of the charted runs, evenly spread, by the short SHA the history recorded.
    var most = Math.max(2, Math.floor((W - L - R) / 60)), shown = [];
    if (pts.length <= most) shown = pts;
    else for (var k = 0; k < most; k++) shown.push(pts[Math.round(k * (pts.length - 1) / (most - 1))]);
    shown.forEach(function (p, k) {
      var anchor = shown.length === 1 ? 'middle' : k === 0 ? 'start' : k === shown.length - 1 ? 'end' : 'middle';
      el('line', {'class': 'axis', x1: x(p.i), y1: H - B, x2: x(p.i), y2: H - B + 3}, svg);
      var t = el('text', {'class': 'xlabel', x: x(p.i), y: H - 6, 'text-anchor': anchor, 'data-run': p.i}, svg);
      t.textContent = commitLabel(p.run, p.i);
      el('title', {}, t).textContent = (p.run.commit || 'no commit recorded') +
          (p.run.ref ? ' (' + p.run.ref + ')' : '') + '\n' + (p.run.timestamp || '');
    });
    var band = pts.filter(function (p) { return p.lo != null && p.hi != null; });
    if (band.length > 1) {
      var d = band.map(function (p) { return x(p.i) + ',' + y(p.hi); })
          .concat(band.slice().reverse().map(function (p) { return x(p.i) + ',' + y(p.lo); }));
      el('polygon', {'class': 'band', points: d.join(' ')}, svg);
    }
    if (target != null) {
      el('line', {'class': 'target', x1: L, y1: y(target), x2: W - R, y2: y(target)}, svg);
      el('text', {x: W - R, y: y(target) - 3, 'text-anchor': 'end'}, svg).textContent = 'target ' + fmt(target);
    }
    el('polyline', {'class': 'line', points: pts.map(function (p) { return x(p.i) + ',' + y(p.y); }).join(' ')}, svg);
    pts.forEach(function (p) {
      var c = el('circle', {cx: x(p.i), cy: y(p.y), r: 2.5}, svg);
      el('title', {}, c).textContent = name + '\n' + fmt(p.y) + ' ' + p.unit + (p.note ? ' (' + p.note + ')' : '') +
          '\n' + (p.run.timestamp || '') +
          (p.run.commit ? '\ncommit ' + p.run.commit.slice(0, 12) : '') + (p.run.ref ? ' (' + p.run.ref + ')' : '');
    });
    var cap = document.createElement('figcaption');
    cap.textContent = name;
    var lastPt = pts[pts.length - 1], last = lastPt.b, extra = [];
    if (lastPt.note) extra.push(lastPt.note);
    if (target == null && last.counters) {
      if (last.counters.bytes_per_second) extra.push(fmt(last.counters.bytes_per_second / 1e9) + ' GB/s');
      if (last.counters['FLOP/s']) extra.push(fmt(last.counters['FLOP/s'] / 1e9) + ' GFLOP/s');
      if (last.counters['allocs/op'] != null) extra.push(fmt(last.counters['allocs/op']) + ' allocs/op');
    }
    var latest = document.createElement('div');
    latest.className = 'latest';
    latest.textContent = 'latest: ' + fmt(lastPt.y) + ' ' + lastPt.unit +
        (target != null ? (lastPt.y <= target ? ' (within the target)' : ' (over the target)') : '') +
        (extra.length ? ' | ' + extra.join(', ') : '');
    cap.appendChild(latest);
    fig.appendChild(cap);
    return fig;
  }

  // Benchmarks grouped by their first two name parts ("dispatch/cpu", "kernel/add").
  var names = {};
  runs.forEach(function (r) { Object.keys(r.benchmarks).forEach(function (k) { names[k] = true; }); });
  var groups = {};
  Object.keys(names).sort().forEach(function (k) {
    var g = k.split('/').slice(0, 2).join('/');
    (groups[g] = groups[g] || []).push(k);
  });
  var drawn = 0;
  var overhead = document.getElementById('overhead');
  Object.keys(names).sort().forEach(function (k) {
    var f = chart(k, pairedOverhead, data.target_ns);
    if (f) { f.classList.add('overhead'); overhead.appendChild(f); drawn++; }
  });
  if (!overhead.firstChild) overhead.textContent = 'No paired dispatch benchmark in the history.';
  var root = document.getElementById('sections');
  Object.keys(groups).forEach(function (g) {
    var sec = document.createElement('section');
    sec.setAttribute('data-group', g);
    var h = document.createElement('h3');
    h.textContent = g;
    sec.appendChild(h);
    var box = document.createElement('div');
    box.className = 'charts';
    groups[g].forEach(function (k) {
      var f = chart(k, realTime, null);
      if (f) { box.appendChild(f); drawn++; }
    });
    sec.appendChild(box);
    root.appendChild(sec);
  });

  document.getElementById('filter').addEventListener('input', function (e) {
    var rx;
    try { rx = new RegExp(e.target.value); } catch (err) { return; }
    document.querySelectorAll('#sections figure.chart').forEach(function (f) {
      f.style.display = rx.test(f.getAttribute('data-benchmark')) ? '' : 'none';
    });
  });

  document.body.setAttribute('data-charts-drawn', String(drawn));
  document.getElementById('status').textContent =
      'charts drawn: ' + drawn + ' (' + runs.length + ' run' + (runs.length === 1 ? '' : 's') + ')';
})();
</script>
</body>
</html>
"""


# ---- latest run against the previous one: change or noise? ----------------------------------------------------

# What a row must show, besides compare.py's significance, to be coloured: the median moved by at least this share.
# With 9 repetitions a side the U-test calls even a 1-2% shift significant when the repetitions are tight, and shifts
# of that size come from things other than the code: the repetitions of one run share one process, so the code's
# placement in that process (~0.5 ns on a 35 ns dispatch case, docs/benchmarks.md) and the machine's speed in the
# minutes it ran move all of them together, and no test on the repetitions can see that. 5% is over those and under
# what the checks fail on (bench_compare.py 10%, 15% on a pull request; github-action-benchmark 30%), so the page
# shows a change before a check fails on it.
DEFAULT_THRESHOLD = 0.05
# A paired overhead row must also have moved by this many ns: 5% of a 5 ns overhead is 0.25 ns, half of what code
# placement alone moves it between two processes of the same build (Note [Judging nanoseconds on a shared machine]).
PAIRED_FLOOR_NS = 1.0


def load_utest(gbench_dir):
    """compare.py's U-test: Google Benchmark's gbench.report module (calc_utest: scipy's Mann-Whitney U,
    two-sided; UTEST_OPTIMAL_REPETITIONS), imported as bench_compare.py imports it. (module, None) or (None, why)."""
    try:
        return import_gbench(gbench_dir), None
    except BenchFileError as e:
        return None, str(e)


def utest_verdict(old, new, report, alpha):
    """compare.py's U-test on two runs' repetitions of one quantity: {"p": p-value or None, "state": one of
    "significant", "same", "few" (fewer than compare.py's UTEST_OPTIMAL_REPETITIONS on a side: compare.py prints
    "Results unreliable" there, so the row is not coloured; the p-value is still shown where compare.py computes
    one), "none" (a run recorded without its repetitions), "untested" (no gbench/scipy here)}."""
    if old is None or new is None:
        return {"p": None, "state": "none"}
    if report is None:
        return {"p": None, "state": "untested"}
    # calc_utest tests real and CPU time; the history keeps real time (what bench_compare.py's verdict reads), so
    # both arguments are the real times and its time p-value is the answer.
    _, _, p = report.calc_utest([old, new], [old, new])
    if p is not None and not math.isfinite(p):
        p = None
    if min(len(old), len(new)) < report.UTEST_OPTIMAL_REPETITIONS:
        return {"p": p, "state": "few"}
    if p is None:
        return {"p": None, "state": "same"}
    return {"p": p, "state": "significant" if p < alpha else "same"}


def _samples(holder):
    v = holder.get("samples") if isinstance(holder, dict) else None
    return v if isinstance(v, list) and v else None


def compare_runs(prev, last, report, alpha=0.05, threshold=DEFAULT_THRESHOLD):
    """One row per benchmark of `last`: {name, old, new, unit, change, p, state, cls, verdict, allocs}. `cls` is
    "regression" or "faster" only for a change that compare.py's U-test calls significant (p < alpha, enough
    repetitions on both sides) and that is past the practical threshold; every other row is plain."""
    rows = []
    for name in sorted(last["benchmarks"]):
        nb, ob = last["benchmarks"][name], prev["benchmarks"].get(name)
        row = {"name": name, "cls": "", "p": None, "allocs": (nb.get("counters") or {}).get("allocs/op")}
        if "real_time" not in nb:
            row.update(state="skipped", verdict=f"skipped: {nb.get('skipped', '')}",
                       old=ob.get("real_time") if ob else None, old_unit=(ob or {}).get("time_unit", ""))
            rows.append(row)
            continue
        if not ob or "real_time" not in ob:
            row.update(state="new", verdict="new", old=None, new=nb["real_time"], unit=nb["time_unit"], change=None)
            rows.append(row)
            continue
        # A paired dispatch benchmark is compared on its overhead (what its chart shows), not on the pair's time, and
        # tested on the overheads of its repetitions at nominal speed (the ones its median is taken over).
        paired = "paired" in nb and "paired" in ob
        if paired:
            old_v, new_v, unit = ob["paired"]["overhead_ns"], nb["paired"]["overhead_ns"], "ns overhead"
            old_s, new_s = _samples(ob["paired"]), _samples(nb["paired"])
        else:
            old_v, new_v, unit = ob["real_time"], nb["real_time"], nb["time_unit"]
            old_s, new_s = _samples(ob), _samples(nb)
            if ob["time_unit"] != nb["time_unit"]:  # not comparable as numbers; say so rather than guess
                row.update(state="units", old=old_v, old_unit=ob["time_unit"], new=new_v, unit=nb["time_unit"],
                           change=None, verdict="not compared: the time unit changed")
                rows.append(row)
                continue
        change = (new_v - old_v) / old_v if old_v > 0 else 0.0
        u = utest_verdict(old_s, new_s, report, alpha)
        row.update(old=old_v, new=new_v, unit=unit, old_unit=unit if paired else ob["time_unit"], change=change,
                   p=u["p"], state=u["state"])
        practical = abs(change) >= threshold and (not paired or abs(new_v - old_v) >= PAIRED_FLOOR_NS)
        nominal = " at nominal speed" if paired else ""
        if u["state"] == "significant" and practical:
            row["cls"] = "regression" if change > 0 else "faster"
            row["verdict"] = "slower" if change > 0 else "faster"
        elif u["state"] == "significant":
            row["verdict"] = ("significant, under the threshold" if abs(change) < threshold else
                              f"significant, under {PAIRED_FLOOR_NS:g} ns")
        elif u["state"] == "same":
            row["verdict"] = "no significant change"
        elif u["state"] == "few":
            row["verdict"] = (f"too few repetitions ({len(old_s)} vs {len(new_s)}{nominal}; "
                              f"compare.py's U-test wants {report.UTEST_OPTIMAL_REPETITIONS})")
        elif u["state"] == "none":
            row["verdict"] = "no repetitions in the history for " + ("either run" if old_s is None and new_s is None
                                                                       else "the previous run" if old_s is None
                                                                       else "the latest run")
        else:
            row["verdict"] = "not tested (no U-test here)"
        rows.append(row)
    return rows


def _num(v, unit):
    return "-" if v is None else f"{v:.4g} {html.escape(unit)}"


def comparison_table(runs, threshold=DEFAULT_THRESHOLD, alpha=0.05, report=None, why_untested=""):
    if len(runs) < 2:
        return "<p id=\"comparison\">Only one run in the history: nothing to compare yet.</p>"
    prev, last = runs[-2], runs[-1]
    rows = compare_runs(prev, last, report, alpha, threshold)
    order = {"regression": 0, "faster": 1, "": 2}
    lines = []
    for r in sorted(rows, key=lambda r: (r["state"] == "skipped", order[r["cls"]], r["name"])):
        if r["state"] == "skipped":
            cells = f"<td>{_num(r['old'], r['old_unit'])}</td><td colspan=\"4\">{html.escape(r['verdict'])}</td>"
        else:
            change = "" if r.get("change") is None else f"{r['change']:+.1%}"
            p = "" if r["p"] is None else f"{r['p']:.4f}" if r["p"] >= 1e-4 else f"{r['p']:.1e}"
            cells = (f"<td>{_num(r['old'], r.get('old_unit', r['unit']))}</td><td>{_num(r['new'], r['unit'])}</td>"
                     f"<td>{change}</td><td class=\"p\">{p}</td><td class=\"verdict\">{html.escape(r['verdict'])}</td>")
        allocs = "" if r["allocs"] is None else f"{r['allocs']:.3g}"
        lines.append(f"<tr class=\"{r['cls']}\" data-state=\"{r['state']}\"><td>{html.escape(r['name'])}</td>{cells}"
                     f"<td>{allocs}</td></tr>")
    n_reg = sum(r["cls"] == "regression" for r in rows)
    n_fast = sum(r["cls"] == "faster" for r in rows)
    if report is None:
        legend = (f"compare.py's U-test is not available here ({html.escape(why_untested)}), so no row is coloured: "
                  "a difference of medians alone cannot tell a change from noise.")
    else:
        legend = (f"A row is coloured only when compare.py's U-test (Mann-Whitney U, two-sided, on the two runs' "
                  f"repetitions) gives p &lt; {alpha:g} with at least {report.UTEST_OPTIMAL_REPETITIONS} repetitions "
                  f"on each side, and the median moved by at least {threshold:.0%} (paired overhead rows: and by "
                  f"{PAIRED_FLOOR_NS:g} ns): red slower, green faster. Every other row is plain: no significant "
                  "change, a significant one too small to matter, or too few repetitions to test. Paired rows are "
                  "tested on their repetitions at nominal speed.")
    return ("<table id=\"comparison\"><thead><tr><th>Benchmark</th><th>Previous (median)</th><th>Latest (median)</th>"
            "<th>Change</th><th>U-test p</th><th>Verdict</th><th>allocs/op</th></tr></thead><tbody>\n"
            + "\n".join(lines) + "\n</tbody></table>"
            f"<p id=\"comparison-legend\">{n_reg} slower, {n_fast} faster. {legend} "
            f"Previous: {html.escape(prev.get('timestamp', ''))} {html.escape(prev.get('commit', '')[:12])}; "
            f"latest: {html.escape(last.get('timestamp', ''))} {html.escape(last.get('commit', '')[:12])}.</p>")


def chart_runs(runs):
    """The runs as the page's script needs them: without the repetitions' samples (the table above is computed
    here, in Python; the charts draw medians and ranges), which would make the page grow by every run's samples."""
    out = []
    for r in runs:
        benchmarks = {}
        for name, b in r["benchmarks"].items():
            b = {k: v for k, v in b.items() if k != "samples"}
            if isinstance(b.get("paired"), dict):
                b["paired"] = {k: v for k, v in b["paired"].items() if k != "samples"}
            benchmarks[name] = b
        out.append(dict(r, benchmarks=benchmarks))
    return out


# The CPU dispatch target (issue 5): dispatch plus validation adds at most this over the direct kernel call.
DISPATCH_TARGET_NS = 10.0


def render(runs, threshold=DEFAULT_THRESHOLD, title="crossfire benchmarks", alpha=0.05, report=None,
           why_untested=""):
    if runs:
        ctx = runs[-1].get("context", {})
        meta = (f"{len(runs)} run(s); latest on {html.escape(str(ctx.get('host_name', '?')))}, "
                f"{html.escape(str(ctx.get('num_cpus', '?')))} CPUs, backends: "
                f"{html.escape(str(ctx.get('crossfire_backends', '?')))}")
    else:
        meta = "The history is empty."
    # The data goes into a <script type="application/json">: only "</" could end it early.
    data = json.dumps({"runs": chart_runs(runs), "target_ns": DISPATCH_TARGET_NS}, separators=(",", ":"),
                      allow_nan=False).replace("</", "<\\/")
    table = comparison_table(runs, threshold, alpha, report, why_untested)
    return (PAGE.replace("__TITLE__", html.escape(title)).replace("__META__", meta)
            .replace("__TARGET__", f"{DISPATCH_TARGET_NS:g}")
            .replace("__TABLE__", table).replace("__DATA__", data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    help="least relative change of the median a coloured row must show (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=0.05, help="U-test significance level (default 0.05, compare.py's)")
    ap.add_argument("--gbench-dir", default=os.environ.get("CROSSFIRE_GBENCH_DIR", "/usr/share/benchmark"),
                    help="where Google Benchmark's gbench/ (compare.py's module) is")
    ap.add_argument("--title", default="crossfire benchmarks")
    ap.add_argument("--last", type=int, default=0, help="only the last N runs (0: all)")
    args = ap.parse_args(argv)
    if not (args.threshold >= 0) or not (0 < args.alpha < 1):
        ap.error("--threshold must be >= 0 and --alpha between 0 and 1")
    try:
        runs = load_history(args.history)
    except BenchFileError as e:
        print(f"bench_dashboard: error: {e}", file=sys.stderr)
        return 2
    if args.last > 0:
        runs = runs[-args.last:]
    report, why = load_utest(args.gbench_dir)
    if report is None and len(runs) >= 2:
        print(f"bench_dashboard: warning: no U-test, so no row of the table is coloured: {why}", file=sys.stderr)
    page = render(runs, args.threshold, args.title, args.alpha, report, why)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, args.out)
    print(f"bench_dashboard: {len(runs)} run(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
