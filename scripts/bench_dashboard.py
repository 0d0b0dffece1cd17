#!/usr/bin/python3
"""Renders the benchmark history as one self-contained HTML page (issue 5).

  bench_dashboard.py --history HISTORY.jsonl --out dashboard.html [--threshold 0.10] [--title TEXT]

The page has one chart per benchmark (median real time over the runs in the history, drawn as inline SVG by the
page's own script: no CDN, no network), one more per `paired` dispatch benchmark with its overhead against the
10 ns target (the summary's judgement: the median of the repetitions at nominal speed), and a table comparing the
latest run with the one before. When the script
has drawn every chart it writes `data-charts-drawn="N"` on <body> and "charts drawn: N" into #status; any script
error is caught by window.onerror and written into the page as <pre class="script-error">, so a headless browser's
--dump-dom shows both (tests/bench_dashboard_test.py checks them).

Exit status: 0, or 2 when the history is missing or corrupt (the message names the file and line).
"""
import argparse
import html
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
<h2>Every benchmark over time (median real time; band: min..max of the repetitions)</h2>
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
    var W = 340, H = 150, L = 48, R = 8, T = 8, B = 22;
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
    el('text', {x: L, y: H - 6}, svg).textContent = 'run ' + (pts[0].i + 1);
    el('text', {x: W - R, y: H - 6, 'text-anchor': 'end'}, svg).textContent =
        'run ' + (pts[pts.length - 1].i + 1) + ' (' + pts[0].unit + ')';
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


def comparison_table(runs, threshold):
    if len(runs) < 2:
        return "<p id=\"comparison\">Only one run in the history: nothing to compare yet.</p>"
    prev, last = runs[-2], runs[-1]
    rows = []
    for name in sorted(last["benchmarks"]):
        nb, ob = last["benchmarks"][name], prev["benchmarks"].get(name)
        if "real_time" not in nb:
            rows.append((2, name, f"<td>{html.escape(str(ob.get('real_time', '')) if ob else '')}</td>"
                         f"<td colspan=\"3\">skipped: {html.escape(nb.get('skipped', ''))}</td>", ""))
            continue
        if not ob or "real_time" not in ob:
            rows.append((1, name, f"<td>-</td><td>{nb['real_time']:.4g} {html.escape(nb['time_unit'])}</td>"
                         "<td>new</td><td></td>", ""))
            continue
        # A paired dispatch benchmark is compared on its overhead (what its chart shows), not on the pair's time.
        if "paired" in nb and "paired" in ob:
            old_v, new_v, old_u, new_u = (ob["paired"]["overhead_ns"], nb["paired"]["overhead_ns"],
                                          "ns overhead", "ns overhead")
        else:
            old_v, new_v, old_u, new_u = ob["real_time"], nb["real_time"], ob["time_unit"], nb["time_unit"]
        change = (new_v - old_v) / old_v if old_v > 0 else 0.0
        cls = "regression" if change > threshold else "faster" if change < -threshold else ""
        allocs = (nb.get("counters") or {}).get("allocs/op")
        rows.append((0 if cls else 1, name,
                     f"<td>{old_v:.4g} {html.escape(old_u)}</td>"
                     f"<td>{new_v:.4g} {html.escape(new_u)}</td>"
                     f"<td>{change:+.1%}</td><td>{'' if allocs is None else f'{allocs:.3g}'}</td>", cls))
    body = "\n".join(f"<tr class=\"{cls}\"><td>{html.escape(name)}</td>{cells}</tr>"
                     for _, name, cells, cls in sorted(rows, key=lambda r: (r[0], r[1])))
    return ("<table id=\"comparison\"><thead><tr><th>Benchmark</th><th>Previous (median)</th><th>Latest (median)</th>"
            f"<th>Change</th><th>allocs/op</th></tr></thead><tbody>\n{body}\n</tbody></table>"
            f"<p>Rows past &plusmn;{threshold:.0%} are coloured. Previous: {html.escape(prev.get('timestamp', ''))} "
            f"{html.escape(prev.get('commit', '')[:12])}; latest: {html.escape(last.get('timestamp', ''))} "
            f"{html.escape(last.get('commit', '')[:12])}.</p>")


# The CPU dispatch target (issue 5): dispatch plus validation adds at most this over the direct kernel call.
DISPATCH_TARGET_NS = 10.0


def render(runs, threshold=0.10, title="crossfire benchmarks"):
    if runs:
        ctx = runs[-1].get("context", {})
        meta = (f"{len(runs)} run(s); latest on {html.escape(str(ctx.get('host_name', '?')))}, "
                f"{html.escape(str(ctx.get('num_cpus', '?')))} CPUs, backends: "
                f"{html.escape(str(ctx.get('crossfire_backends', '?')))}")
    else:
        meta = "The history is empty."
    # The data goes into a <script type="application/json">: only "</" could end it early.
    data = json.dumps({"runs": runs, "target_ns": DISPATCH_TARGET_NS}, separators=(",", ":"),
                      allow_nan=False).replace("</", "<\\/")
    return (PAGE.replace("__TITLE__", html.escape(title)).replace("__META__", meta)
            .replace("__TARGET__", f"{DISPATCH_TARGET_NS:g}")
            .replace("__TABLE__", comparison_table(runs, threshold)).replace("__DATA__", data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--title", default="crossfire benchmarks")
    ap.add_argument("--last", type=int, default=0, help="only the last N runs (0: all)")
    args = ap.parse_args(argv)
    try:
        runs = load_history(args.history)
    except BenchFileError as e:
        print(f"bench_dashboard: error: {e}", file=sys.stderr)
        return 2
    if args.last > 0:
        runs = runs[-args.last:]
    page = render(runs, args.threshold, args.title)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, args.out)
    print(f"bench_dashboard: {len(runs)} run(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
