"""What the runs need to know of a git diff without parsing it in full (that is
`inspector.formats.unified_diff`, out of this package's reach): the paths it touches, which of
them it leaves in place (its post-image paths), and which paths are test configuration, restored
to the base version in isolated mode."""

from __future__ import annotations

import fnmatch
import posixpath
import re
import sys

DEV_NULL = "/dev/null"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

# Files that decide how pytest (or Python itself) runs, wherever they are in the tree: a solution
# that adds or changes one could make every test pass without fixing anything (a conftest.py
# hook, an ini file's addopts or plugins, a sitecustomize on the path, a .pth in a site folder).
CONFIG_NAMES = (
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
)
# The test suite beyond the files the test_patch touches: a test package's __init__.py, helpers
# and fixtures the listed tests import. A solution that patches one (e.g. a TestCase.run that
# records every test passed, in tests/__init__.py) would pass without fixing anything.
TEST_FOLDERS = frozenset({"tests", "test", "testing"})
TEST_FILE_NAMES = ("test_*.py", "*_test.py")
# What a solution must not ADD: a module or package named like the test runner's own (a
# pytest.py that runs the real pytest with a hook marking every test passed) anywhere, one named
# like the standard library's at the root of the work folder (which `python -m pytest` puts
# first on sys.path), and package metadata anywhere, whose entry points pytest loads as plugins.
RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging"})
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")


def _path(text: str) -> str:
    text = text.split("\t", 1)[0].strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1]  # git quotes unusual names; the common case is unquoted
    if text == DEV_NULL:
        return ""
    return text[2:] if text.startswith(("a/", "b/")) else text


def file_changes(diff: str) -> list[tuple[str, str]]:
    """(old path, new path) per file of the diff, "" for /dev/null (a new or deleted file).
    Hunk bodies are skipped by their line counts, so a removed line that starts with "-- " is
    not taken for a file header."""
    changes: list[tuple[str, str]] = []
    lines = diff.splitlines()
    rename: list[str] = ["", ""]
    pending = False  # a `diff --git` header whose ---/+++ lines have not come (yet)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if pending and (rename[0] or rename[1]):
                changes.append((rename[0], rename[1]))  # a pure rename has no ---/+++
            pending, rename = True, ["", ""]
        elif line.startswith("rename from "):
            rename[0] = line[len("rename from ") :]
        elif line.startswith("rename to "):
            rename[1] = line[len("rename to ") :]
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            changes.append((_path(line[4:]), _path(lines[i + 1][4:])))
            pending, rename = False, ["", ""]
            i += 1
        elif line.startswith("@@"):
            match = _HUNK.match(line)
            if match:
                old_left = 1 if match.group(2) is None else int(match.group(2))
                new_left = 1 if match.group(4) is None else int(match.group(4))
                while (old_left > 0 or new_left > 0) and i + 1 < len(lines):
                    i += 1
                    kind = lines[i][:1]
                    if kind == "-":
                        old_left -= 1
                    elif kind == "+":
                        new_left -= 1
                    elif kind == " " or lines[i] == "":
                        old_left -= 1
                        new_left -= 1
        i += 1
    if pending and (rename[0] or rename[1]):
        changes.append((rename[0], rename[1]))
    return changes


def touched(diff: str) -> list[str]:
    """Every path the diff reads or writes, in order, once."""
    seen: dict[str, None] = {}
    for old, new in file_changes(diff):
        for path in (old, new):
            if path:
                seen.setdefault(path, None)
    return list(seen)


def post_image_paths(diff: str) -> list[str]:
    """The paths that hold a file once the diff is applied (not the ones it deletes)."""
    seen: dict[str, None] = {}
    for _, new in file_changes(diff):
        if new:
            seen.setdefault(new, None)
    return list(seen)


def is_config(path: str) -> bool:
    name = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in CONFIG_NAMES)


def is_test_support(path: str) -> bool:
    """A file of the test suite: under a folder named tests, test or testing, or named like a
    test module."""
    parts = path.split("/")
    return bool(TEST_FOLDERS.intersection(parts[:-1])) or any(
        fnmatch.fnmatchcase(parts[-1], pattern) for pattern in TEST_FILE_NAMES
    )


def shadows(path: str) -> bool:
    """Whether an added `path` would change what the test run imports: a top-level module or
    package named like the runner's or the standard library's, or package metadata."""
    parts = path.split("/")
    if any(part.endswith(METADATA_SUFFIXES) for part in parts):
        return True
    if any(part.removesuffix(".py") in RUNNER_MODULES for part in parts):
        return True  # anywhere: a src/ layout's folder is on sys.path too
    top = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0]
    if len(parts) == 1 and not parts[0].endswith(".py"):
        top = parts[0].split(".", 1)[0]  # an extension module (.so) or a bare name
    return top in RUNNER_MODULES or top in sys.stdlib_module_names


def restored_in_isolation(path: str, *, added: bool) -> bool:
    """What isolated mode puts back to the base commit's version (deletes, if the base has
    none) after carrying a solution's changes: the test configuration, the test suite, and an
    added file that shadows what the test run imports."""
    return is_config(path) or is_test_support(path) or (added and shadows(path))


__all__ = [
    "CONFIG_NAMES",
    "file_changes",
    "is_config",
    "is_test_support",
    "post_image_paths",
    "restored_in_isolation",
    "shadows",
    "touched",
]
