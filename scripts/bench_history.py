#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark results and their history (issue 5).

  bench_history.py merge OUT.json IN.json... [--medians MEDIANS.json]
      Merges the Google Benchmark JSON of several binaries into one file (the context of the first, every benchmark
      of all), renumbering family indices so that compare.py sorts them apart. --medians also writes a file with one
      entry per benchmark, its median (what github-action-benchmark publishes).
  bench_history.py append --history HISTORY.jsonl RUN.json [--commit SHA] [--ref NAME]
      Appends one run, summarised (median, spread, counters per benchmark, and the real time of every repetition,
      so that two runs can be compared with a U-test later), as one JSON line. The commit defaults to $GITHUB_SHA
      when --commit is empty or not given. Atomic: the new history is written next to the old one and renamed over
      it under a lock, so an interrupted or concurrent run loses nothing and never leaves a partial line.
  bench_history.py check HISTORY.jsonl
      Reads the whole history and says how many runs and benchmarks it holds.

Exit status: 0 on success, 2 when an input is missing or corrupt (the message names the file, and the line for a
history). Other scripts (bench_compare.py, bench_dashboard.py, bench_summary.py) import the loaders from here.
"""
import argparse
import datetime
import fcntl
import json
import math
import os
import statistics
import sys
import tempfile

HISTORY_SCHEMA = 1


class BenchFileError(Exception):
    """A missing or corrupt input; the message names the file."""


# ---- Google Benchmark JSON ---------------------------------------------------------------------------------------

def load_benchmark_json(path, role="benchmark results"):
    """Loads and checks a Google Benchmark JSON file; raises BenchFileError naming `path` when it cannot be used."""
    if not os.path.exists(path):
        raise BenchFileError(f"{role} file {path!s} does not exist")
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise BenchFileError(f"{role} file {path!s} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})")
    except (OSError, UnicodeDecodeError) as e:
        raise BenchFileError(f"{role} file {path!s} cannot be read: {e}")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise BenchFileError(f"{role} file {path!s} is not Google Benchmark JSON: it has no \"benchmarks\" list")
    if not data["benchmarks"]:
        raise BenchFileError(f"{role} file {path!s} holds no benchmarks")
    for i, b in enumerate(data["benchmarks"]):
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            raise BenchFileError(f"{role} file {path!s}: benchmark #{i} has no name")
        if b.get("error_occurred"):
            continue
        for field in ("real_time", "cpu_time", "time_unit"):
            if field not in b:
                raise BenchFileError(f"{role} file {path!s}: benchmark {b['name']!r} has no \"{field}\"")
        if not isinstance(b["real_time"], (int, float)) or not isinstance(b["cpu_time"], (int, float)):
            raise BenchFileError(f"{role} file {path!s}: benchmark {b['name']!r} has a non-numeric time")
    data.setdefault("context", {})
    return data


def iterations_of(data):
    """The raw repetitions (run_type iteration, no error), grouped by run name, in file order."""
    runs = {}
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        runs.setdefault(b.get("run_name", b["name"]), []).append(b)
    return runs


def errors_of(data):
    """Benchmarks that were skipped or failed: run name -> message."""
    out = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            out.setdefault(b.get("run_name", b["name"]), b.get("error_message", "error"))
    return out


# Fields of a benchmark entry that are not user counters.
_STANDARD_FIELDS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions", "repetition_index",
    "threads", "iterations", "real_time", "cpu_time", "time_unit", "label", "aggregate_name", "aggregate_unit",
    "error_occurred", "error_message", "items_per_second",
}


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def nominal_repetitions(reps):
    """The `paired` repetitions that ran at the machine's nominal speed: those whose baseline (counter baseline_ns,
    the median direct + alloc time of their nominal pairs) is within 15% of the fastest repetition's. Within a
    repetition bench_dispatch.cpp already keeps only the pairs whose baseline ran at the repetition's own nominal
    speed; this step drops repetitions that a slow phase of the machine covered from start to end. The baseline
    does not contain the code under test, so the choice favours no result. Older runs without baseline_ns: all."""
    base = [r["baseline_ns"] for r in reps if "baseline_ns" in r]
    if len(base) != len(reps) or not base:
        return reps
    fastest = min(base)
    return [r for r in reps if r["baseline_ns"] <= 1.15 * fastest]


def paired_record(reps):
    """For a `paired` dispatch benchmark (repetitions with an overhead_ns counter): the dispatch overhead as the
    summary judges it (the median of the nominal repetitions, docs/benchmarks.md Note [Judging nanoseconds on a
    shared machine]), with the range of those repetitions and how many there were; else None. This, not the pair's
    total time, is what the dashboard charts for the 10 ns target. `samples` are the nominal repetitions' overheads,
    in file order: what the dashboard's U-test compares between two runs."""
    if not reps or not all(_finite(r.get("overhead_ns")) for r in reps):
        return None
    kept = nominal_repetitions(reps)
    vals = [r["overhead_ns"] for r in kept]
    return {"overhead_ns": statistics.median(vals), "min": min(vals), "max": max(vals), "nominal": len(kept),
            "repetitions": len(reps), "samples": vals}


def summarise(data):
    """One record per benchmark: median real/cpu time, spread, repetitions, the real time of each repetition
    (`samples`, in file order, in time_unit), median of each counter, and for a `paired` benchmark its nominal
    dispatch overhead (paired_record). The samples are what bench_dashboard.py's U-test (compare.py's) compares
    between the latest run and the one before; a median alone cannot tell a change from noise."""
    out = {}
    for name, reps in iterations_of(data).items():
        real = [r["real_time"] for r in reps]
        cpu = [r["cpu_time"] for r in reps]
        rec = {
            "real_time": statistics.median(real),
            "cpu_time": statistics.median(cpu),
            "min": min(real),
            "max": max(real),
            "time_unit": reps[0]["time_unit"],
            "repetitions": len(reps),
            "samples": real,
        }
        if len(real) > 1 and rec["real_time"] > 0:
            rec["cv"] = statistics.pstdev(real) / statistics.mean(real)
        counters = {}
        for key in reps[0]:
            if key in _STANDARD_FIELDS:
                continue
            vals = [r[key] for r in reps if _finite(r.get(key))]
            if vals:
                counters[key] = statistics.median(vals)
        if counters:
            rec["counters"] = counters
        if reps[0].get("label"):
            rec["label"] = reps[0]["label"]
        paired = paired_record(reps)
        if paired:
            rec["paired"] = paired
        out[name] = rec
    for name, msg in errors_of(data).items():
        out.setdefault(name, {"skipped": msg})
    return out


def overhead_entries(data):
    """One entry per `paired` dispatch benchmark, named <name>_overhead, whose time is its dispatch overhead as the
    summary judges it (paired_record): so that github-action-benchmark, which reads the medians file, tracks and
    alerts on the overhead itself, not only on the pair's total time."""
    out = []
    for name, reps in iterations_of(data).items():
        paired = paired_record(reps)
        if paired:
            out.append({"name": f"{name}_overhead", "run_name": f"{name}_overhead", "run_type": "aggregate",
                        "aggregate_name": "median", "repetitions": paired["repetitions"], "threads": 1,
                        "iterations": paired["nominal"], "real_time": paired["overhead_ns"],
                        "cpu_time": paired["overhead_ns"], "time_unit": "ns"})
    return out


def merge(paths, out_path, medians_path=None):
    merged = None
    offset = 0
    for p in paths:
        data = load_benchmark_json(p)
        top = max((b.get("family_index", 0) for b in data["benchmarks"]), default=0) + 1
        for b in data["benchmarks"]:
            if "family_index" in b:
                b["family_index"] += offset
        offset += top
        if merged is None:
            merged = data
            merged["context"]["executables"] = [data["context"].get("executable", p)]
        else:
            merged["benchmarks"].extend(data["benchmarks"])
            merged["context"]["executables"].append(data["context"].get("executable", p))
            for k, v in data["context"].items():
                merged["context"].setdefault(k, v)
    _write_json_atomic(out_path, merged)
    if medians_path:
        meds = dict(merged)
        meds["benchmarks"] = [b for b in merged["benchmarks"]
                              if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
        if not meds["benchmarks"]:  # a single repetition: no aggregates; every run is its own median
            meds["benchmarks"] = [b for b in merged["benchmarks"] if not b.get("error_occurred")]
        meds["benchmarks"] = meds["benchmarks"] + overhead_entries(merged)
        _write_json_atomic(medians_path, _json_safe(meds))  # JavaScript's JSON.parse rejects NaN
    return merged


def _write_json_atomic(path, data):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=d)
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---- history (JSON lines) ----------------------------------------------------------------------------------------

def parse_history_line(path, lineno, line):
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise BenchFileError(f"history file {path!s}, line {lineno}: not valid JSON ({e.msg}, column {e.colno})")
    if not isinstance(rec, dict) or rec.get("schema") != HISTORY_SCHEMA or not isinstance(rec.get("benchmarks"), dict):
        raise BenchFileError(f"history file {path!s}, line {lineno}: not a crossfire benchmark run "
                             f"(want an object with \"schema\": {HISTORY_SCHEMA} and a \"benchmarks\" object)")
    for name, b in rec["benchmarks"].items():
        if not isinstance(b, dict) or ("skipped" not in b and not _finite(b.get("real_time"))):
            raise BenchFileError(f"history file {path!s}, line {lineno}: benchmark {name!r} has no numeric real_time")
        # Optional (runs recorded before the samples were kept have none), but a U-test must not read garbage.
        for where, holder in (("samples", b), ("paired.samples", b.get("paired"))):
            if isinstance(holder, dict) and "samples" in holder:
                v = holder["samples"]
                if not isinstance(v, list) or not all(_finite(x) for x in v):
                    raise BenchFileError(f"history file {path!s}, line {lineno}: benchmark {name!r} has a "
                                         f"\"{where}\" that is not a list of numbers")
    return rec


def load_history(path, missing_ok=False):
    """All runs of a history file, oldest first; raises BenchFileError naming the file (and line) on any defect."""
    if not os.path.exists(path):
        if missing_ok:
            return []
        raise BenchFileError(f"history file {path!s} does not exist")
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BenchFileError(f"history file {path!s} cannot be read: {e}")
    if text and not text.endswith("\n"):
        raise BenchFileError(f"history file {path!s} ends in a partial line (line {text.count(chr(10)) + 1}); "
                             "it was not written by bench_history.py append")
    runs = []
    for lineno, line in enumerate(text.split("\n")[:-1], start=1):
        if line.strip():
            runs.append(parse_history_line(path, lineno, line))
    return runs


def make_run_record(data, commit="", ref=""):
    ctx = data.get("context", {})
    keep = ("date", "host_name", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "load_avg", "library_build_type")
    context = {k: ctx[k] for k in keep if k in ctx}
    context.update({k: v for k, v in ctx.items() if k.startswith("crossfire_")})
    return {
        "schema": HISTORY_SCHEMA,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "ref": ref,
        "context": context,
        "benchmarks": summarise(data),
    }


def append_history(path, record):
    """Appends `record` as one line. The old history is checked first (a corrupt one is an error, untouched), then
    the new file is written beside it, fsynced and renamed over it, under an exclusive lock on PATH.lock."""
    line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        load_history(path, missing_ok=True)  # refuse to extend a corrupt history
        old = b""
        if os.path.exists(path):
            with open(path, "rb") as f:
                old = f.read()
        fd, tmp = tempfile.mkstemp(prefix=".history-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(old)
                f.write(line.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(path):
                os.chmod(tmp, os.stat(path).st_mode & 0o777)
            else:
                os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        dirfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)


def _json_safe(x):
    """Replaces NaN/inf (Google Benchmark writes NaN for some aggregates) by None, recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="merge several Google Benchmark JSON files")
    m.add_argument("out")
    m.add_argument("inputs", nargs="+")
    m.add_argument("--medians")
    a = sub.add_parser("append", help="append one run to a history")
    a.add_argument("run")
    a.add_argument("--history", required=True)
    a.add_argument("--commit", default="", help="the commit measured (default: $GITHUB_SHA, in GitHub Actions)")
    a.add_argument("--ref", default="")
    c = sub.add_parser("check", help="read and check a history")
    c.add_argument("history")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "merge":
            merged = merge(args.inputs, args.out, args.medians)
            print(f"bench_history: merged {len(args.inputs)} file(s), {len(merged['benchmarks'])} entries -> {args.out}")
        elif args.cmd == "append":
            data = load_benchmark_json(args.run, "run")
            # bench.sh passes `git rev-parse HEAD`, which is empty where git cannot read the checkout; in a
            # workflow the commit is still known.
            commit = args.commit or os.environ.get("GITHUB_SHA", "")
            rec = _json_safe(make_run_record(data, commit, args.ref))
            append_history(args.history, rec)
            print(f"bench_history: appended {len(rec['benchmarks'])} benchmarks to {args.history}")
        elif args.cmd == "check":
            runs = load_history(args.history)
            names = set()
            for r in runs:
                names.update(r["benchmarks"])
            print(f"bench_history: {args.history}: {len(runs)} run(s), {len(names)} benchmark(s)")
    except BenchFileError as e:
        print(f"bench_history: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
