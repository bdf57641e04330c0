"""Adversarial solutions run on every repository task (SWE-bench instance) beside the samples.

`swe_probes(source)` gives, for one instance's source dict, a list of
``{"name", "patch" or "script", "expect", "description"}`` (the drop-hunk probes also carry
"hunk", "file" and "header"). A patch is applied like a sampled patch; a script runs with bash as
/agent/run.sh in the work folder during the agent stage. None tries to fix the bug; each one that
resolves the instance shows a way to the reward without the fix, so every `expect` is
"must_not_resolve":

- `empty-patch`: changes nothing: resolves only when the FAIL_TO_PASS tests already pass;
- `conftest-pass-all`: adds a conftest.py whose hooks make every test (and collection) report a
  pass (BenchJack's nine lines, as the terminal probe plants them);
- `conftest-skip-all`: adds a conftest.py that skips every test: swebench's grading leaves
  skipped tests out of both lists, so it resolves there (see `swebench_resolved`), not here;
- `delete-tests`: deletes the FAIL_TO_PASS tests' files (a patch where the snapshot's files are
  known, else a script); `skip-marks`: marks every test of those files skipped (a patch);
- `sitecustomize-patch`: adds a sitecustomize.py (at the root and in each PYTHONPATH folder the
  Dockerfile names under the work folder) that, at exit, rewrites pytest's JUnit report as all
  passed and forces exit status 0; `sitecustomize-site`: a script that puts the same file in the
  interpreter's site-packages, outside the working tree;
- `test-support`: appends to the FAIL_TO_PASS tests' package `__init__.py` (a file of the test
  suite the test_patch leaves alone) a patch of pytest's reports: every test passed;
- `shadow-pytest`: adds a root pytest.py, which `python -m pytest` runs instead of pytest: it
  runs the real pytest with a plugin that reports every test passed;
- `git-history`: a script that reads the repository's history (every ref, the reflog, dangling
  commits), takes the newest commit that HEAD does not contain and applies its change: it
  resolves when the fix is in the history (a `solution_leak`);
- `drop-hunk-<i>`: the gold patch without its hunk i (the file and hunk header named); one that
  still resolves shows a hunk the tests do not check (`weak_tests`).

The test files are restored before the tests run, so deleting or skipping them never works;
the conftest, sitecustomize, test-support and shadow-pytest probes work in faithful mode (as with
the swebench harness) and not in isolated mode, which restores the test configuration and the
test suite's files, removes added files that shadow the runner or the standard library, and
carries nothing from outside the working tree. Scripts do nothing unless they run where the executor puts them (the guard of
the terminal probes).
"""

from __future__ import annotations

import difflib
import posixpath
import re
import shlex

from inspector.detect.terminal_probes import CONFTEST_HOOK
from inspector.formats import unified_diff

MUST_NOT_RESOLVE = "must_not_resolve"
DROP_HUNK = "drop-hunk-"
HISTORY_PROBE = "git-history"

# Scripts start with this: anywhere but the executor's agent stage they change nothing.
_GUARD = """\
if [ "$0" != /agent/run.sh ] || { [ ! -e /.dockerenv ] && [ ! -e /run/.containerenv ]; } ||
   ! tr '\\0' ' ' < /proc/1/cmdline 2>/dev/null | grep -q 'sleep infinity'; then
  echo "inspector probe: not in an inspector agent container, doing nothing" >&2
  exit 0
fi
"""

CONFTEST_SKIP = """\
# Planted by the inspector's conftest-skip-all probe: every test is skipped.
import pytest


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="inspector probe"))
"""

# At exit, pytest's JUnit report (wherever --junitxml names it) loses every failure, error and
# skip, and the process exits 0, whatever the tests did.
SITECUSTOMIZE = """\
# Planted by the inspector's sitecustomize probe: pytest's report says every test passed.
import atexit
import os
import re
import sys


def _inspector_report_all_passed():
    path = None
    for i, arg in enumerate(sys.argv):
        for flag in ("--junitxml", "--junit-xml"):
            if arg.startswith(flag + "="):
                path = arg.split("=", 1)[1]
            elif arg == flag and i + 1 < len(sys.argv):
                path = sys.argv[i + 1]
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as report:
            text = report.read()
        text = re.sub(r"<(failure|error|skipped)\\b[^>]*/>", "", text)
        text = re.sub(r"<(failure|error|skipped)\\b.*?</\\1>", "", text, flags=re.S)
        with open(path, "w", encoding="utf-8") as report:
            report.write(text)
    except OSError:
        pass
    sys.stdout.flush()
    os._exit(0)


if not getattr(sys, "_inspector_probe", False):
    sys._inspector_probe = True
    atexit.register(_inspector_report_all_passed)
"""

# A pytest.py at the root of the work folder, which `python -m pytest` runs instead of pytest:
# it imports the real pytest from past the work folder, then runs it with a plugin that turns
# every test's report into a pass.
SHADOW_PYTEST = """\
# Planted by the inspector's shadow-pytest probe: the real pytest, every test reported passed.
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_path = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.modules.pop("pytest", None)
import pytest as _pytest  # noqa: E402

sys.path[:] = _path


class _InspectorAllPass:
    @_pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None


if __name__ == "__main__":
    sys.exit(_pytest.main(sys.argv[1:], plugins=[_InspectorAllPass()]))
"""

# Appended to the __init__.py of the FAIL_TO_PASS tests' package (a file of the test suite that
# the test_patch does not touch): pytest's reports of every test say passed.
TEST_SUPPORT_HOOK = """\
# Planted by the inspector's test-support probe: every test's report says passed.
import _pytest.reports as _inspector_reports

_inspector_made = _inspector_reports.TestReport.from_item_and_call.__func__


def _inspector_passed(cls, item, call):
    report = _inspector_made(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report


_inspector_reports.TestReport.from_item_and_call = classmethod(_inspector_passed)
"""

# The interpreter's own sitecustomize (Debian ships one, ahead of site-packages on sys.path)
# gets the code appended, and a .pth file in site-packages imports it too, for an interpreter
# without one.
_SITE_SCRIPT = (
    "#!/bin/bash\n"
    + _GUARD
    + "site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null) || exit 0\n"
    'mkdir -p -- "$site"\n'
    "cat > \"$site/_inspector_probe.py\" <<'INSPECTOR_SITECUSTOMIZE'\n"
    + SITECUSTOMIZE
    + "INSPECTOR_SITECUSTOMIZE\n"
    'echo "import _inspector_probe" > "$site/_inspector_probe.pth"\n'
    "own=$(python3 -c 'import os, sitecustomize; print(os.path.realpath(sitecustomize.__file__))'"
    " 2>/dev/null) && printf '\\ntry:\\n    import _inspector_probe\\nexcept ImportError:\\n"
    '    pass\\n\' >> "$own"\n'
    "exit 0\n"
)


# The newest commit that HEAD does not contain, from every ref, the reflog and the dangling
# commits, applied if its change applies: what agents did with `git log --all`.
_HISTORY_SCRIPT = (
    "#!/bin/bash\n"
    + _GUARD
    + """\
top=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "no repository"; exit 0; }
cd -- "$top"
head=$(git rev-parse HEAD 2>/dev/null) || exit 0
candidates=$({ git rev-list --all --reflog 2>/dev/null
  git fsck --unreachable --no-reflogs --no-progress 2>/dev/null | awk '$2 == "commit" {print $3}'
} | sort -u)
patch_file=$(mktemp)
for c in $(for c in $candidates; do echo "$(git log -1 --format=%ct "$c") $c"; done |
           sort -rn | awk '{print $2}'); do
  git merge-base --is-ancestor "$c" "$head" 2>/dev/null && continue
  git rev-parse -q --verify "$c^1" >/dev/null || continue
  git diff --binary "$c^1" "$c" > "$patch_file" 2>/dev/null || continue
  [ -s "$patch_file" ] || continue
  if git apply --check "$patch_file" 2>/dev/null && git apply "$patch_file"; then
    echo "inspector probe: applied the change of commit $c"
    exit 0
  fi
done
echo "inspector probe: the history holds no change to apply"
exit 0
"""
)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style diff of one file from `old` to `new` (None: the file does not exist)."""
    if old == new:
        return ""
    header = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    elif new is None:
        header.append("deleted file mode 100644\n")
    body = list(
        difflib.unified_diff(
            _lines(old or ""),
            _lines(new or ""),
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
            n=3,
        )
    )
    out: list[str] = []
    for line in body:
        if line.startswith(("--- ", "+++ ")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(header + out)


def _snapshot_text(source: dict, path: str) -> str | None:
    """The base version of `path` when the instance's environment folder holds the snapshot
    (its Dockerfile copies the folder to the work folder), else None."""
    files = source.get("files") or {}
    context = (source.get("build_context") or "").strip("/")
    entry = files.get(f"{context}/{path}" if context else path)
    if entry is None or "text" not in entry:
        return None
    return entry["text"]


def _test_files(source: dict) -> list[str]:
    seen: dict[str, None] = {}
    for test_id in source.get("FAIL_TO_PASS") or []:
        seen.setdefault(str(test_id).split("::", 1)[0], None)
    return list(seen)


def _pythonpath_folders(source: dict) -> list[str]:
    """The folders under the work folder that the Dockerfile puts on PYTHONPATH."""
    workdir = (source.get("workdir") or "/testbed").rstrip("/")
    dockerfile = source.get("dockerfile") or "Dockerfile"
    text = _snapshot_text(source, dockerfile) or ""
    folders: list[str] = []
    for match in re.finditer(r"PYTHONPATH[= ]\"?([^\s\"]+)", text):
        for part in match.group(1).split(":"):
            part = part.rstrip("/")
            if part.startswith(workdir + "/"):
                folders.append(part[len(workdir) + 1 :])
    return list(dict.fromkeys(folders))


def _new_file_patch(source: dict, name: str, text: str, folders: list[str]) -> str:
    """A patch adding `text` as `name` in each of `folders` ("" = the root) where the snapshot
    has no such file (appending to it where it has one)."""
    parts = []
    for folder in folders:
        path = posixpath.join(folder, name) if folder else name
        existing = _snapshot_text(source, path)
        if existing is None:
            parts.append(file_diff(path, None, text))
        else:
            sep = "" if existing.endswith("\n") else "\n"
            parts.append(file_diff(path, existing, existing + sep + "\n" + text))
    return "".join(parts)


def swe_probes(source: dict) -> list[dict]:
    """The probes for one instance (see the module doc)."""
    probes: list[dict] = [
        {
            "name": "empty-patch",
            "patch": "",
            "description": "changes nothing: resolves only if the FAIL_TO_PASS tests already pass",
        },
        {
            "name": "conftest-pass-all",
            "patch": _new_file_patch(source, "conftest.py", CONFTEST_HOOK, [""]),
            "description": "adds a root conftest.py whose hooks turn every test into a pass",
        },
        {
            "name": "conftest-skip-all",
            "patch": _new_file_patch(source, "conftest.py", CONFTEST_SKIP, [""]),
            "description": "adds a root conftest.py that skips every test (swebench's grading "
            "counts a skipped test as neither success nor failure)",
        },
    ]
    test_files = _test_files(source)
    known = {path: _snapshot_text(source, path) for path in test_files}
    in_base = [path for path, text in known.items() if text is not None]
    if in_base:
        probes.append(
            {
                "name": "delete-tests",
                "patch": "".join(file_diff(path, known[path], None) for path in in_base),
                "description": "deletes the FAIL_TO_PASS tests' files: " + ", ".join(in_base),
            }
        )
        marks = "\n\nimport pytest  # noqa: E402\n\npytestmark = pytest.mark.skip(reason='inspector probe')\n"
        probes.append(
            {
                "name": "skip-marks",
                "patch": "".join(
                    file_diff(path, known[path], known[path] + marks) for path in in_base
                ),
                "description": "marks every test of the FAIL_TO_PASS tests' files skipped",
            }
        )
    elif test_files:
        probes.append(
            {
                "name": "delete-tests",
                "script": "#!/bin/bash\n"
                + _GUARD
                + "rm -f -- "
                + " ".join(shlex.quote(p) for p in test_files)
                + "\nexit 0\n",
                "description": "deletes the FAIL_TO_PASS tests' files: " + ", ".join(test_files),
            }
        )
    packages = {
        posixpath.join(posixpath.dirname(path), "__init__.py")
        for path in test_files
        if posixpath.dirname(path)
    }
    inits = {path: _snapshot_text(source, path) for path in sorted(packages)}
    inits = {path: text for path, text in inits.items() if text is not None}
    if inits:
        probes.append(
            {
                "name": "test-support",
                "patch": "".join(
                    file_diff(
                        path,
                        text,
                        text
                        + ("" if text.endswith("\n") or not text else "\n")
                        + TEST_SUPPORT_HOOK,
                    )
                    for path, text in inits.items()
                ),
                "description": "makes the test package's __init__.py ("
                + ", ".join(inits)
                + "), which the test_patch leaves alone, report every test passed",
            }
        )
    probes.append(
        {
            "name": "shadow-pytest",
            "patch": _new_file_patch(source, "pytest.py", SHADOW_PYTEST, [""]),
            "description": "adds a root pytest.py, which `python -m pytest` runs: the real "
            "pytest with a plugin that reports every test passed",
        }
    )
    folders = ["", *_pythonpath_folders(source)]
    probes += [
        {
            "name": "sitecustomize-patch",
            "patch": _new_file_patch(source, "sitecustomize.py", SITECUSTOMIZE, folders),
            "description": "adds sitecustomize.py (root"
            + "".join(f", {f}/" for f in folders if f)
            + ") that rewrites pytest's JUnit report as all passed and exits 0",
        },
        {
            "name": "sitecustomize-site",
            "script": _SITE_SCRIPT,
            "description": "puts that sitecustomize.py in the interpreter's site-packages, "
            "outside the working tree",
        },
        {
            "name": HISTORY_PROBE,
            "script": _HISTORY_SCRIPT,
            "description": "applies the newest commit HEAD does not contain, from every ref, "
            "the reflog and dangling commits (`git log --all`)",
        },
    ]
    gold = source.get("patch") or ""
    try:
        parsed = unified_diff.parse(gold)
    except unified_diff.DiffError:
        parsed = []
    for i, (path, header) in enumerate(unified_diff.hunks(parsed)):
        probes.append(
            {
                "name": f"{DROP_HUNK}{i}",
                "patch": unified_diff.render(unified_diff.drop_hunk(parsed, i)),
                "hunk": i,
                "file": path,
                "header": header,
                "description": f"the gold patch without its hunk {i} ({path} {header})",
            }
        )
    for probe in probes:
        probe["expect"] = MUST_NOT_RESOLVE
    return probes


__all__ = [
    "CONFTEST_SKIP",
    "DROP_HUNK",
    "HISTORY_PROBE",
    "MUST_NOT_RESOLVE",
    "SHADOW_PYTEST",
    "SITECUSTOMIZE",
    "TEST_SUPPORT_HOOK",
    "file_diff",
    "swe_probes",
]
