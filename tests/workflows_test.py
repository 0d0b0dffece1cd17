#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The GitHub workflows only call the project's own scripts, and call them in ways the scripts understand (issue 5:
"what runs on GitHub is what runs locally"). actionlint (scripts/lint-workflows.sh) checks the workflow syntax and
expressions; this checks what actionlint cannot know about this repository:

- every job that runs commands runs at least one script from scripts/ (a job of actions only, e.g. ClusterFuzzLite's
  or one that publishes results, runs none), and every script a `run:` step names exists and is executable;
- every long option passed to a project script (`--threshold`, `--no-history`) is one that script handles, or, for
  a script that passes its options on to the `crossfire` command (main.sh, merge.sh), one that command has;
- every environment variable a workflow sets is read by a project script, or is a documented tool variable;
- every job has a timeout;
- the campaign and ClusterFuzzLite workflows do what docs/ci.md says (shards that add up, reports uploaded and
  published, each ClusterFuzzLite mode), and ctest's JUnit output is uploaded.

Each check is also run against a planted mistake, so that a check which can no longer fail is itself a failure.
Run by ctest (label workflows) with /usr/bin/python3; needs PyYAML (python3-yaml, from scripts/install-deps.sh)."""
import copy
import glob
import json
import os
import re
import shlex
import subprocess
import unittest

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, ".github", "workflows", "*.yml")))

# Variables a workflow may set that no project script reads, because a tool reads them.
TOOL_VARIABLES = {
    "CC": "CMake's C compiler",
    "CXX": "CMake's C++ compiler",
    "CCACHE_DIR": "ccache's cache directory (kept between runs by actions/cache)",
}

# Scripts that hand their options on to the `crossfire` command: an option is theirs if the command has it.
FORWARDS_TO_COMMAND = {"main.sh", "merge.sh"}
COMMAND_SOURCE = os.path.join(ROOT, "harness", "tools", "crossfire_main.cpp")

# `scripts/NAME`, possibly under a checkout path (`pr/scripts/bench.sh`, `"$PWD"/base/scripts/...`).
SCRIPT_RE = re.compile(r"(?:^|[\s/\"'])scripts/([A-Za-z0-9_.-]+)")


def load_workflow(path):
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        raise ValueError(f"{path}: not a workflow (no `jobs` mapping)")
    return doc


def script_text(name):
    with open(os.path.join(ROOT, "scripts", name), encoding="utf-8") as f:
        return f.read()


def all_scripts_text():
    texts = []
    for path in sorted(glob.glob(os.path.join(ROOT, "scripts", "*"))):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                texts.append(f.read())
    return "\n".join(texts)


def logical_lines(run):
    """The lines of a `run:` block, with backslash continuations joined."""
    return run.replace("\\\n", " ").splitlines()


def script_calls(run):
    """(script name, the options after it on its line) for every project script a `run:` block calls."""
    calls = []
    for line in logical_lines(run):
        for m in SCRIPT_RE.finditer(line):
            rest = line[m.end():]
            # The options of this call end at the next command separator.
            rest = re.split(r"&&|\|\||;|\|", rest)[0]
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:
                words = rest.split()
            options = [w.split("=", 1)[0] for w in words if w.startswith("--")]
            calls.append((m.group(1), options))
    return calls


def command_options():
    with open(COMMAND_SOURCE, encoding="utf-8") as f:
        return set(re.findall(r'"(--[a-z][a-z0-9-]*)', f.read()))


def problems(doc, where, scripts_text):
    """Every way `doc` (a parsed workflow) breaks the rules above, as messages naming the job and step."""
    found = []
    env_keys = [(k, f"{where}: workflow env") for k in (doc.get("env") or {})]
    for job_name, job in doc["jobs"].items():
        job_where = f"{where}: job `{job_name}`"
        env_keys += [(k, f"{job_where} env") for k in (job.get("env") or {})]
        ran_a_script = False
        runs_commands = any(isinstance(step.get("run"), str) for step in job.get("steps") or [])
        if "timeout-minutes" not in job:
            found.append(f"{job_where}: has no timeout-minutes")
        for i, step in enumerate(job.get("steps") or []):
            step_where = f"{job_where} step {i + 1} ({step.get('name') or step.get('uses') or 'run'})"
            env_keys += [(k, f"{step_where} env") for k in (step.get("env") or {})]
            run = step.get("run")
            if not isinstance(run, str):
                continue
            for name, options in script_calls(run):
                ran_a_script = True
                path = os.path.join(ROOT, "scripts", name)
                if not os.path.isfile(path):
                    found.append(f"{step_where}: calls scripts/{name}, which does not exist")
                    continue
                if not os.access(path, os.X_OK):
                    found.append(f"{step_where}: calls scripts/{name}, which is not executable")
                text = script_text(name)
                forwarded = command_options() if name in FORWARDS_TO_COMMAND else set()
                for opt in options:
                    if opt not in text and opt not in forwarded:
                        found.append(f"{step_where}: passes {opt} to scripts/{name}, which does not handle it")
        if runs_commands and not ran_a_script:
            found.append(f"{job_where}: runs no project script (scripts/...)")
    for key, key_where in env_keys:
        if key in TOOL_VARIABLES:
            continue
        if not re.search(r"\$\{?" + re.escape(key) + r"\b|[\"']" + re.escape(key) + r"[\"']", scripts_text):
            found.append(f"{key_where}: sets {key}, which no script in scripts/ reads")
    return found


class WorkflowsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scripts_text = all_scripts_text()
        cls.docs = {os.path.relpath(p, ROOT): load_workflow(p) for p in WORKFLOWS}

    def test_there_are_workflows(self):
        for name in ("ci", "bench", "campaign", "cflite"):
            self.assertIn(f".github/workflows/{name}.yml", self.docs)

    def test_the_nightly_shards_add_up(self):
        # The matrix's shards are 0..N-1 of one N, every shard passes --shard I/N with the same seed, uploads its
        # --out directory, and the merge job merges what they uploaded.
        jobs = self.docs[".github/workflows/campaign.yml"]["jobs"]
        shards = jobs["nightly"]["strategy"]["matrix"]["shard"]
        self.assertEqual(shards, list(range(len(shards))))
        run = " ".join(step.get("run", "") for step in jobs["nightly"]["steps"])
        self.assertIn(f'--shard "${{{{ matrix.shard }}}}/{len(shards)}"', run)
        out = re.search(r'--out "([^"]+)"', run).group(1)
        uploads = [s["with"] for s in jobs["nightly"]["steps"] if str(s.get("uses", "")).startswith("actions/upload")]
        self.assertEqual([u["path"] for u in uploads], [out])
        self.assertIn("nightly", jobs["merge"]["needs"])
        merge_run = " ".join(step.get("run", "") for step in jobs["merge"]["steps"])
        self.assertIn("scripts/merge.sh", merge_run)
        for job in ("pull-request", "nightly", "merge"):
            for step in jobs[job]["steps"]:
                if str(step.get("uses", "")).startswith("actions/upload"):
                    self.assertEqual(step.get("if"), "always()", f"{job}: reports are uploaded even on failure")
        published = jobs["publish"]["steps"][-1]
        self.assertTrue(published["uses"].startswith("EnricoMi/publish-unit-test-result-action"))
        self.assertIn("junit.xml", published["with"]["files"])

    def test_clusterfuzzlite_runs_every_mode(self):
        jobs = self.docs[".github/workflows/cflite.yml"]["jobs"]
        modes = set()
        for job in jobs.values():
            uses = [s["uses"] for s in job["steps"]]
            self.assertTrue(uses[0].startswith("google/clusterfuzzlite/actions/build_fuzzers"))
            modes.add(job["steps"][-1]["with"]["mode"])
        self.assertEqual(modes, {"code-change", "batch", "prune", "coverage"})
        for f in ("Dockerfile", "build.sh", "project.yaml"):
            self.assertTrue(os.path.isfile(os.path.join(ROOT, ".clusterfuzzlite", f)), f)

    def test_ctest_junit_is_written_and_uploaded(self):
        self.assertIn("--output-junit", script_text("test.sh"))
        ci = self.docs[".github/workflows/ci.yml"]["jobs"]
        for name in ("test", "sanitize", "tsan", "vulkan-lavapipe", "cuda-compile"):
            paths = [s["with"]["path"] for s in ci[name]["steps"] if str(s.get("uses", "")).startswith("actions/upload")]
            self.assertTrue(any(p.endswith("ctest-junit.xml") for p in paths), name)

    def test_every_workflow_calls_only_project_scripts_correctly(self):
        for where, doc in self.docs.items():
            with self.subTest(workflow=where):
                self.assertEqual(problems(doc, where, self.scripts_text), [])

    def test_the_test_jobs_cover_what_the_issue_asks(self):
        # gcc and clang, ASan+UBSan, TSan, Vulkan on lavapipe with the validation layer, CUDA compile-only: each a job
        # whose environment asks scripts/test.sh for it.
        ci = self.docs[".github/workflows/ci.yml"]["jobs"]
        compilers = {entry["cxx"] for entry in ci["test"]["strategy"]["matrix"]["include"]}
        self.assertEqual(compilers, {"g++", "clang++-14"})
        self.assertEqual(ci["sanitize"]["env"]["CROSSFIRE_SANITIZE"], "1")
        self.assertEqual(ci["tsan"]["env"]["CROSSFIRE_SANITIZE"], "thread")
        self.assertEqual(ci["vulkan-lavapipe"]["env"]["CROSSFIRE_VULKAN_VALIDATION"], "1")
        self.assertIn("-DCROSSFIRE_VULKAN=ON", ci["vulkan-lavapipe"]["env"]["CMAKE_ARGS"])
        self.assertIn("-DCROSSFIRE_CUDA=ON", ci["cuda-compile"]["env"]["CMAKE_ARGS"])

    # The planted mistakes: each must be reported, or the checks above prove nothing.
    @staticmethod
    def run_step(job):
        """The job's last step that runs a command."""
        return [step for step in job["steps"] if "run" in step][-1]

    def planted(self, mutate):
        doc = copy.deepcopy(self.docs[".github/workflows/ci.yml"])
        mutate(doc["jobs"])
        return problems(doc, "planted", self.scripts_text)

    def test_a_missing_script_is_reported(self):
        def mutate(jobs):
            self.run_step(jobs["test"])["run"] = "scripts/tset.sh"
        self.assertTrue(any("scripts/tset.sh, which does not exist" in p for p in self.planted(mutate)))

    def test_an_unknown_option_is_reported(self):
        def mutate(jobs):
            self.run_step(jobs["workflows"])["run"] = "scripts/main.sh --secs 30 && true"
        found = self.planted(mutate)
        self.assertTrue(any("passes --secs to scripts/main.sh" in p for p in found), found)

    def test_an_unread_variable_is_reported(self):
        def mutate(jobs):
            jobs["vulkan-lavapipe"]["env"]["CTEST_ARG"] = "-L vulkan"
        self.assertTrue(any("sets CTEST_ARG," in p for p in self.planted(mutate)))

    def test_a_job_without_a_timeout_is_reported(self):
        def mutate(jobs):
            del jobs["tsan"]["timeout-minutes"]
        self.assertTrue(any("job `tsan`: has no timeout-minutes" in p for p in self.planted(mutate)))

    def test_an_option_the_command_lacks_is_reported(self):
        def mutate(jobs):
            self.run_step(jobs["workflows"])["run"] = "scripts/main.sh --shard 0/2 --shards 2"
        found = self.planted(mutate)
        self.assertTrue(any("passes --shards to scripts/main.sh" in p for p in found), found)
        self.assertFalse(any("passes --shard to" in p for p in found), found)

    def test_a_job_without_a_project_script_is_reported(self):
        def mutate(jobs):
            self.run_step(jobs["sanitize"])["run"] = "cmake -B build && ctest --test-dir build"
        self.assertTrue(any("job `sanitize`: runs no project script" in p for p in self.planted(mutate)))

    def test_continued_lines_and_separators(self):
        calls = script_calls('BUILD_DIR="$PWD/b" base/scripts/bench.sh --no-history \\\n  --min-time 0.2 && echo --x')
        self.assertEqual(calls, [("bench.sh", ["--no-history", "--min-time"])])


def preset_gaps(presets):
    """Configure presets without a build, test or workflow preset of the same name (each can be run as
    `cmake --workflow --preset NAME`)."""
    configure = [p["name"] for p in presets.get("configurePresets", [])]
    gaps = []
    for kind in ("buildPresets", "testPresets", "workflowPresets"):
        have = {p["name"] for p in presets.get(kind, [])}
        gaps += [f"{kind}: no `{name}`" for name in configure if name not in have]
    return gaps


class PresetsTest(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(ROOT, "CMakePresets.json"), encoding="utf-8") as f:
            self.presets = json.load(f)

    def test_every_configure_preset_has_build_test_and_workflow_presets(self):
        self.assertEqual(preset_gaps(self.presets), [])

    def test_a_missing_test_preset_is_reported(self):
        planted = copy.deepcopy(self.presets)
        planted["testPresets"] = [p for p in planted["testPresets"] if p["name"] != "clang"]
        self.assertEqual(preset_gaps(planted), ["testPresets: no `clang`"])


# Source files carry an SPDX license line in their first three lines (LICENSE: Apache-2.0): C, C++, CUDA and GLSL
# sources, CMake files, Python and shell scripts, workflows and the ClusterFuzzLite files.
SPDX = "SPDX-License-Identifier: Apache-2.0"
SOURCE_RE = re.compile(r"(\.(cpp|hpp|h|cu|cuh|comp|glsl|cmake|py|sh|yml|yaml)|\.hpp\.in|/CMakeLists\.txt|^CMakeLists\.txt"
                       r"|^\.ci/run|^\.clusterfuzzlite/Dockerfile)$")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
        return out.split()
    except (OSError, subprocess.CalledProcessError):  # a source tree without git: every file outside build dirs
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not x.startswith("build") and x != ".git"]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return files


def missing_license(files, read):
    return [f for f in files if SOURCE_RE.search(f) and SPDX not in "\n".join(read(f).splitlines()[:3])]


class LicenseTest(unittest.TestCase):
    def test_every_source_file_says_its_license(self):
        def read(f):
            with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
                return fh.read(4096)
        files = tracked_files()
        self.assertGreater(len([f for f in files if SOURCE_RE.search(f)]), 100)
        self.assertEqual(missing_license(files, read), [])

    def test_a_file_without_one_is_reported(self):
        texts = {"a/x.cpp": "// SPDX-License-Identifier: Apache-2.0\n", "b/CMakeLists.txt": "project(x)\n",
                 "s.sh": "#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\n", "docs/a.md": "text\n"}
        self.assertEqual(missing_license(list(texts), texts.get), ["b/CMakeLists.txt"])


if __name__ == "__main__":
    unittest.main()
