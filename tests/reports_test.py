#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""crossfire's reports as the tools that consume them read them (issue 18, items 3-6).

    reports_test.py CROSSFIRE            junit.xml and report.json of real campaigns: a clean one, one with failures
                                         and a crash, one with oracles turned off, an interrupted one, two shards and
                                         their merge, a merge with a shard missing
    reports_test.py CROSSFIRE --html     report.html of the failing campaign and of the merge, in headless Chromium

junit.xml is validated against tests/data/junit.xsd (the rules of Jenkins' junit-10.xsd, stricter on timestamp and
hostname) with xmlschema and read with junitparser, the library CI actions use to publish results; report.json is
validated against docs/report.schema.json with jsonschema, and every key it has must be documented in
docs/report-format.md. Each failure's replay command is run and must reproduce the failure. Exits 77 (ctest's
SKIP_RETURN_CODE) with the reason when a Python module or Chromium is missing."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
SKIP = 77

try:
    import jsonschema
    import junitparser
    import xmlschema
except ImportError as e:  # scripts/install-deps.sh installs them
    print(f"SKIP: {e.name} is not installed (scripts/install-deps.sh installs python3-xmlschema, "
          "python3-junitparser and python3-jsonschema)")
    sys.exit(SKIP)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(cli, *args, expect=None, cwd=None):
    r = subprocess.run([cli, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    if expect is not None and r.returncode not in (expect if isinstance(expect, tuple) else (expect,)):
        raise SystemExit(f"FAIL: crossfire {' '.join(args)} exited {r.returncode}, expected {expect}\n"
                         f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


JUNIT_XSD = xmlschema.XMLSchema(os.path.join(HERE, "data", "junit.xsd"))
with open(os.path.join(ROOT, "docs", "report.schema.json")) as f:
    REPORT_SCHEMA = json.load(f)
with open(os.path.join(ROOT, "docs", "report-format.md")) as f:
    FORMAT_DOC = f.read()


def documented_keys(j, prefix=""):
    """Every key path of a report.json (list items and the free-form maps - coverage, oracles, generator - by
    their fixed inner keys)."""
    keys = set()
    if isinstance(j, dict):
        for k, v in j.items():
            if prefix in ("coverage", "coverage.*", "config.oracles"):
                k = "*"
            if prefix == "oracles":
                k = "*"
            path = f"{prefix}.{k}" if prefix else k
            keys.add(path)
            keys |= documented_keys(v, path)
    elif isinstance(j, list):
        for x in j:
            keys |= documented_keys(x, prefix + "[]")
    return keys


def check_report_json(d, name):
    with open(os.path.join(d, "report.json")) as f:
        j = json.load(f)
    try:
        jsonschema.validate(j, REPORT_SCHEMA)
    except jsonschema.ValidationError as e:
        check(False, f"{name}: report.json does not match docs/report.schema.json: {e.message} at "
                     f"{'/'.join(map(str, e.absolute_path))}")
    for key in sorted(documented_keys(j)):
        leaf = key.split(".")[-1].rstrip("[]")
        if leaf != "*" and not re.search(r"`[^`]*\b" + re.escape(leaf) + r"\b[^`]*`", FORMAT_DOC):
            check(False, f"{name}: report.json key `{key}` is not documented in docs/report-format.md")
    # The totals are the sums of their parts: one meaning of "failures".
    check(j["failures"] == sum(f["occurrences"] for f in j["failure_list"]), f"{name}: failures != occurrences")
    check(j["distinct_failures"] == len(j["failure_list"]), f"{name}: distinct_failures != list length")
    for o, v in j["oracles"].items():
        check(v["failures"] == sum(f["occurrences"] for f in j["failure_list"] if f["oracle"] == o),
              f"{name}: oracles.{o}.failures != its failures' occurrences")
    return j


def check_junit(d, name, report):
    path = os.path.join(d, "junit.xml")
    try:
        JUNIT_XSD.validate(path)
    except xmlschema.XMLSchemaValidationError as e:
        check(False, f"{name}: junit.xml is not valid against tests/data/junit.xsd: {e.reason} ({e.path})")
        return None
    xml = junitparser.JUnitXml.fromfile(path)
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    check(len(suites) == 1, f"{name}: one testsuite")
    suite = suites[0]
    cases = list(suite)
    check(suite.tests == len(cases), f"{name}: tests={suite.tests} but {len(cases)} test cases")
    n_fail = sum(1 for c in cases for r in c.result if isinstance(r, junitparser.Failure))
    n_err = sum(1 for c in cases for r in c.result if isinstance(r, junitparser.Error))
    n_skip = sum(1 for c in cases for r in c.result if isinstance(r, junitparser.Skipped))
    check(suite.failures == n_fail and suite.errors == n_err and suite.skipped == n_skip,
          f"{name}: the suite's counts ({suite.failures}, {suite.errors}, {suite.skipped}) are not its cases' "
          f"({n_fail}, {n_err}, {n_skip})")
    names = [c.classname + "::" + c.name for c in cases]
    check(len(set(names)) == len(names), f"{name}: test case names repeat: {names}")
    # One test case per distinct failure signature (a harness error is an <error>), each with one result that
    # tells how to reproduce it.
    # An expected failure (--expect) is a <skipped> case of its own, with the reason.
    by_sig = {c.name: c for c in cases if c.result and "|" in c.name}
    check(set(by_sig) == {f["signature"] for f in report["failure_list"]},
          f"{name}: failure test cases {sorted(by_sig)} are not the report's signatures")
    for f in report["failure_list"]:
        c = by_sig.get(f["signature"])
        if c is None:
            continue
        check(len(c.result) == 1, f"{name}: {f['signature']} has {len(c.result)} results")
        want = junitparser.Skipped if "expected" in f else (junitparser.Error if f["oracle"] == "harness"
                                                             else junitparser.Failure)
        check(isinstance(c.result[0], want), f"{name}: {f['signature']} is not a {want.__name__}")
        text = c.result[0].text or ""
        check(f["replay"] in text, f"{name}: {f['signature']}: the replay command is not in the failure's text")
        check("saved: " + os.path.join(d, f["file"]) in text, f"{name}: {f['signature']}: the saved file's path")
        check(f.get("reduced", f["program"]).strip() in text, f"{name}: {f['signature']}: the reduced program")
        check(abs(c.time - f["seconds"]) < 0.0015, f"{name}: {f['signature']}: time {c.time} is not its own "
                                                    f"({f['seconds']})")
    return suite, cases


def case(cases, classname, name):
    for c in cases:
        if c.classname == classname and c.name == name:
            return c
    return None


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    cli = os.path.abspath(sys.argv[1])
    html = "--html" in sys.argv[2:]
    chromium = None
    if html:
        sys.path.insert(0, HERE)
        from bench_dashboard_test import dump_dom, find_chromium
        chromium = find_chromium()
        if chromium is None:
            print("SKIP: no chromium found (install Debian's chromium: scripts/install-deps.sh --with-browser)")
            return SKIP
    tmp = tempfile.mkdtemp(prefix="crossfire-reports-test-")
    try:
        base = ["--backends", "cpu", "--seed", "5"]
        # A campaign with failures of two kinds: a planted agreement fault (found in many programs) and a crash.
        bad = os.path.join(tmp, "bad")
        run(cli, "run", "--programs", "24", *base, "--plant-fault", "perturb_float_output", "--crash-at", "3",
            "--out", bad, expect=1)
        report = check_report_json(bad, "failing campaign")
        suite, cases = check_junit(bad, "failing campaign", report)
        check(report["crashes"] == 1 and any(f["oracle"] == "supervisor" for f in report["failure_list"]),
              "the crash is a failure of its own")
        check(len({c.time for c in cases}) > 2, "test cases have their own times, not the campaign's")
        avail = json.loads(run(cli, "backends", "--json", expect=0).stdout)
        for b in avail:
            if not b["available"]:
                c = case(cases, "crossfire.backend", b["name"])
                check(c is not None and isinstance(c.result[0], junitparser.Skipped) and
                      b["reason"] in c.result[0].message, f"unavailable backend {b['name']} is <skipped> with why")
        if html:
            check_html(chromium, dump_dom, bad, report)
        else:
            # Every replay command reproduces what it was saved for (but the crash: --crash-at makes the worker,
            # not the program, crash).
            for f in (f for f in report["failure_list"] if f["oracle"] != "supervisor"):
                r = subprocess.run(shlex.split(f["replay"].replace("crossfire", shlex.quote(cli), 1)),
                                   capture_output=True, text=True, timeout=300)
                check(r.returncode == 1 and ("reproduces" in r.stdout and "does not reproduce" not in r.stdout),
                      f"replay of {f['signature']} exited {r.returncode}: {r.stdout[-500:]}")

        # Known differences (--expect): expected failures are <skipped> cases with their reason; the run passes.
        known = os.path.join(tmp, "known.expect")
        with open(known, "w") as f:
            f.write("cpu * agreement * the planted fault\nvulkan add agreement * never seen on cpu\n")
        exp = os.path.join(tmp, "expected")
        run(cli, "run", "--programs", "24", *base, "--plant-fault", "perturb_float_output", "--expect", known,
            "--out", exp, expect=0)
        report_e = check_report_json(exp, "campaign with expected failures")
        check_junit(exp, "campaign with expected failures", report_e)
        check(report_e["failures"] > 0 and report_e["unexpected_failures"] == 0, "every failure expected")
        if html:
            check_html(chromium, dump_dom, exp, report_e)

        # Oracles turned off are <skipped> with the reason; a clean campaign is all passes.
        off = os.path.join(tmp, "off")
        run(cli, "run", "--programs", "10", *base, "--oracles", "contract,agreement", "--out", off, expect=0)
        report_off = check_report_json(off, "campaign with oracles off")
        _, cases = check_junit(off, "campaign with oracles off", report_off)
        for o in ("gradients", "bad_input"):
            c = case(cases, "crossfire.oracle", o)
            check(c is not None and isinstance(c.result[0], junitparser.Skipped), f"disabled {o} is <skipped>")
        for o in ("contract", "agreement"):
            c = case(cases, "crossfire.oracle", o)
            check(c is not None and not c.result, f"enabled {o} that found nothing passes")

        # An interrupted campaign says so: an <error> case, and report.json's `interrupted`.
        stopped = os.path.join(tmp, "stopped")
        p = subprocess.Popen([cli, "run", "--seconds", "60", *base, "--out", stopped], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(stopped, "report.json")) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        check(p.wait(timeout=60) == 3, "an interrupted campaign exits 3")
        report_stopped = check_report_json(stopped, "interrupted campaign")
        check(report_stopped["interrupted"], "report.json says interrupted")
        _, cases = check_junit(stopped, "interrupted campaign", report_stopped)
        c = case(cases, "crossfire.campaign", "ran to its end")
        check(c is not None and isinstance(c.result[0], junitparser.Error) and "interrupted" in c.result[0].message,
              "the interrupted campaign is an <error>")

        # Shards and their merge: the merged reports are valid too, and keep every failure's saved program.
        shards = []
        for i in range(2):
            d = os.path.join(tmp, f"shard{i}")
            run(cli, "run", "--programs", "24", *base, "--plant-fault", "perturb_float_output", "--shard", f"{i}/2",
                "--out", d, expect=1)
            check_report_json(d, f"shard {i}")
            shards.append(d)
        merged = os.path.join(tmp, "merged")
        run(cli, "merge", *shards, "--out", merged, expect=1)
        report_m = check_report_json(merged, "merged report")
        check_junit(merged, "merged report", report_m)
        check(report_m["programs"] == 24 and len(report_m["shards"]) == 2 and report_m["missing_shards"] == [],
              "the merge covers both shards' 24 programs")
        for f in report_m["failure_list"]:
            check(os.path.isfile(os.path.join(merged, f["file"])), f"merged failure {f['signature']} keeps its file")
        if html:
            check_html(chromium, dump_dom, merged, report_m)
        # A merge with a shard missing says so (exit 3, an <error> case naming the shard).
        partial = os.path.join(tmp, "partial")
        run(cli, "merge", shards[0], "--out", partial, expect=3)
        report_p = check_report_json(partial, "partial merge")
        check(report_p["missing_shards"] == [1], "the missing shard is listed")
        _, cases = check_junit(partial, "partial merge", report_p)
        c = case(cases, "crossfire.shard", "shard 1/2")
        check(c is not None and isinstance(c.result[0], junitparser.Error), "a missing shard is an <error>")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok: junit.xml valid and read by junitparser, report.json valid against its schema and documented"
          + (", report.html triaged in headless chromium" if html else ", every replay command reproduces"))
    return 0


def check_html(chromium, dump_dom, d, report):
    """The page a person triages from: the verdict counts what report.json counts, an index row per distinct
    failure linking to its section, each section's saved-file link resolving and its replay command shown."""
    dom = dump_dom(chromium, os.path.join(d, "report.html"))
    n, m = report["distinct_failures"], report["failures"]
    verdict = re.search(r'<span id="verdict"[^>]*>([^<]*)</span>', dom)
    check(verdict is not None, f"{d}: the page has a verdict")
    if verdict:
        e = m - report["unexpected_failures"]
        want = "no failures" if m == 0 else (f"{n} distinct failure{'' if n == 1 else 's'} "
                                             f"({m} occurrence{'' if m == 1 else 's'}"
                                             + (f", {e} expected" if e else "") + ")")
        check(verdict.group(1) == want, f"{d}: verdict `{verdict.group(1)}`, report.json says `{want}`")
    index = re.search(r'<table id="failure-index">(.*?)</table>', dom, re.S)
    rows = re.findall(r'<a href="#(failure-\d+)">', index.group(1)) if index else []
    check(len(rows) == n, f"{d}: the failure index has {len(rows)} rows for {n} distinct failures")
    for anchor in rows:
        check(f'id="{anchor}"' in dom, f"{d}: index link #{anchor} has no section")
    for f in report["failure_list"]:
        check(f'href="{f["file"]}"' in dom and os.path.isfile(os.path.join(d, f["file"])),
              f"{d}: {f['signature']}: the saved file's link resolves")
        check(html_escape(f["replay"]) in dom, f"{d}: {f['signature']}: its replay command is on the page")
    prov = re.search(r'<table id="provenance">(.*?)</table>', dom, re.S)
    check(prov is not None and report["crossfire"]["version"] in prov.group(1) and report["started"] in prov.group(1),
          f"{d}: provenance (version, time) on the page")
    # Per-op scores: one red cell per (op, device) that report.json's coverage says failed, with its count.
    scores = re.search(r'<table id="scores">(.*?)</table>', dom, re.S)
    check(scores is not None, f"{d}: the page has per-op scores")
    if scores:
        red = sorted(int(x) for x in re.findall(r'<span class="bad">(\d+)</span>', scores.group(1)))
        want = sorted(c["failed"] - c["expected"] for per in report["coverage"].values() for c in per.values()
                      if c["failed"] - c["expected"])
        check(red == want, f"{d}: per-op scores show failures {red}, report.json's coverage {want}")
    oracles = re.search(r'<table id="oracles">(.*?)</table>', dom, re.S)
    if oracles:  # the oracle table's failures are the same count as the verdict's
        total = sum(int(x) for x in re.findall(r'<td class="(?:bad)?">(\d+)</td>', oracles.group(1)))
        check(total == m, f"{d}: the oracle table's failures add up to {total}, the verdict says {m}")


def html_escape(s):
    """As a serialised DOM writes text: only &, < and > escaped."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if __name__ == "__main__":
    sys.exit(main())
