"""SWE-bench fixture instances from two real projects, one per defect the inspection must find.

`build(folder)` makes, from the source distributions in tests/data/swe/ (inflection 0.5.1 and
cachetools 5.3.3, each with its own tests), deterministically (fixed commit dates and names; the
same bytes on every run with the same git):

- local git repositories at a base commit, each with a bug planted SWE-smith style (an operator
  or constant changed in the real code: the gold patch puts the release's line back, and some of
  the project's own tests fail with the bug). The tests that catch the bug are taken out of the
  base commit and come back in the instance's test_patch, as a pull request adds them;
- `instances.jsonl`: the published SWE-bench schema (FAIL_TO_PASS / PASS_TO_PASS as JSON strings
  of lists on some lines, lists on the others), plus the optional `environment` field naming the
  instance's folder in the archive when it is not named like the instance;
- `environments.tar.gz`: one folder per environment, the repository snapshot at its base commit
  (with its .git) and a Dockerfile beside it: FROM the SWE image (git, patch, pytest), COPY . to
  /testbed, WORKDIR /testbed. The Dockerfile is in git's info/exclude, so the tree is clean;
- `predictions.jsonl`: sampled patches in the SWE-bench predictions format (right ones, wrong
  ones, partial ones, one that does not apply), made with `git diff` like a harness's;
- `truth.json`: instance -> the defects planted in it and their evidence (test ids, the leaking
  commit, the hunk the tests ignore), and each sample's kind and expected resolution.

The planted instances (repo inflection: `ordinal()` gives 11st, 12nd, 13rd; repo cachetools:
`TTLCache.expire()` and `TLRUCache.expire()` keep an item whose time is up at exactly now):

| instance | planted |
|---|---|
| jpvanhal__inflection-clean, tkem__cachetools-clean | nothing |
| jpvanhal__inflection-broken-build | broken_environment: its Dockerfile runs pip, which the image lacks |
| tkem__cachetools-broken-collection | broken_environment: no PYTHONPATH to src/, the tests cannot import cachetools |
| jpvanhal__inflection-unsolvable | unsolvable: the test patch also wants ordinal(1.5) to raise, the gold does not |
| jpvanhal__inflection-mislabeled-passes | mislabeled: a FAIL_TO_PASS test (14th) passes without the fix |
| jpvanhal__inflection-mislabeled-missing | mislabeled: a PASS_TO_PASS id (an older pytest's parameter id) never runs |
| jpvanhal__inflection-flaky | flaky: a PASS_TO_PASS test depends on a set's order (PYTHONHASHSEED) |
| tkem__cachetools-leak-branch | solution_leak: the fix on another branch (its ref in packed-refs) |
| tkem__cachetools-leak-reflog | solution_leak: the fix committed, then reset away (in the reflog) |
| tkem__cachetools-leak-dangling | solution_leak: the fix in a dangling commit |
| tkem__cachetools-weak-tests | weak_tests: the test patch checks TTLCache only, the gold's TLRUCache hunk is untested |
| jpvanhal__inflection-no-signal | no_signal: every sample resolves it |
| jpvanhal__inflection-vague-statement | statement_names_nothing_tested: the statement names no function, file or message |

`sources(fixture)` gives each instance as the source dict of the shared design (what
inspector/formats/swe.py makes of an instance and its environment folder), for code that runs
instances without importing them. Git runs on the host only on our own data (it builds the
repositories and the diffs); the projects' code and tests run only in containers.
"""

from __future__ import annotations

import ast
import base64
import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from inspector.formats import unified_diff
from workers.sandbox.terminal.archives import add_entries

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "swe"
SWE_IMAGE = "inspector-sandbox:bookworm-swe"
TEST_COMMAND = "python3 -m pytest -p no:cacheprovider"
ARCHIVE_MTIME = 1577836800  # 2020-01-01, every entry of the environments archive
AUTHOR = ("Fixture Builder", "fixtures@example.invalid")
MODELS = ("swe-agent-a", "swe-agent-b", "swe-agent-c", "swe-agent-d")

# The files of a source distribution that a repository does not hold.
_SDIST_ONLY = ("PKG-INFO",)


@dataclass(frozen=True)
class Fixture:
    """What `build` wrote: the paths and the same data in memory. `environments`: folder name ->
    {relative path: (mode, bytes)}, the archive's content."""

    folder: Path
    instances: list[dict]
    predictions: list[dict]
    truth: dict
    environments: dict[str, dict[str, tuple[int, bytes]]]

    @property
    def instances_path(self) -> Path:
        return self.folder / "instances.jsonl"

    @property
    def environments_path(self) -> Path:
        return self.folder / "environments.tar.gz"

    @property
    def predictions_path(self) -> Path:
        return self.folder / "predictions.jsonl"

    @property
    def truth_path(self) -> Path:
        return self.folder / "truth.json"


# --- git on our own data ---------------------------------------------------------------------


class _Git:
    """A repository of ours, git with no user or system configuration and fixed identities."""

    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self._env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": AUTHOR[0],
            "GIT_AUTHOR_EMAIL": AUTHOR[1],
            "GIT_COMMITTER_NAME": AUTHOR[0],
            "GIT_COMMITTER_EMAIL": AUTHOR[1],
            "LC_ALL": "C",
            "TZ": "UTC",
        }

    def __call__(
        self,
        *args: str,
        date: str = "2020-01-01T00:00:00Z",
        stdin: str = "",
        env: dict[str, str] | None = None,
    ) -> str:
        run_env = dict(self._env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date, **(env or {}))
        done = subprocess.run(
            ["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args],
            cwd=self.path,
            env=run_env,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.path}: {done.stderr.strip()}")
        return done.stdout

    @classmethod
    def init(cls, path: Path, home: Path) -> _Git:
        path.mkdir(parents=True)
        template = home / "empty-template"
        template.mkdir(exist_ok=True)
        git = cls(path, home)
        git("init", "--quiet", f"--template={template}", "--initial-branch=main")
        return git

    def write_tree(self, files: dict[str, str]) -> None:
        """The working tree becomes exactly `files` (the .git folder kept)."""
        for entry in self.path.iterdir():
            if entry.name == ".git":
                continue
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for rel, text in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))

    def commit(self, files: dict[str, str], message: str, date: str) -> str:
        self.write_tree(files)
        self("add", "--all")
        self("commit", "--quiet", "--message", message, date=date)
        return self("rev-parse", "HEAD").strip()


def _diff(home: Path, old: dict[str, str], new: dict[str, str | None]) -> str:
    """`git diff` of `old` (the touched files before) to `new` (after; None: deleted), as a
    harness writes a patch: `diff --git`, index lines, hunks with their function context."""
    with tempfile.TemporaryDirectory(dir=home) as scratch:
        git = _Git.init(Path(scratch) / "repo", home)
        git.commit(old, "before", "2020-01-01T00:00:00Z")
        after = dict(old)
        for path, text in new.items():
            if text is None:
                after.pop(path, None)
            else:
                after[path] = text
        git.write_tree(after)
        git("add", "--all")
        return git(
            "diff", "--cached", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/"
        )


def _snapshot(path: Path) -> dict[str, tuple[int, bytes]]:
    """A repository's files, .git included (not its index: that holds file times; the
    Dockerfile's `git reset` writes it in the image)."""
    files: dict[str, tuple[int, bytes]] = {}
    for entry in sorted(path.rglob("*")):
        if entry.is_dir():
            continue
        rel = entry.relative_to(path).as_posix()
        if rel == ".git/index":
            continue
        mode = 0o755 if os.access(entry, os.X_OK) else 0o644
        files[rel] = (mode, entry.read_bytes())
    return files


# --- the projects ------------------------------------------------------------------------------


def _sdist(name: str) -> dict[str, str]:
    """The text files of a vendored source distribution (top folder stripped), without what only
    an sdist holds (PKG-INFO, *.egg-info, __pycache__)."""
    files: dict[str, str] = {}
    with tarfile.open(DATA / name) as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            rel = member.name.split("/", 1)[1]
            parts = rel.split("/")
            if rel in _SDIST_ONLY or any(
                p.endswith(".egg-info") or p == "__pycache__" for p in parts
            ):
                continue
            data = archive.extractfile(member).read()
            files[rel] = data.decode("utf-8")
    return files


def _replace(text: str, old: str, new: str, where: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"{where}: expected {old!r} once, found it {text.count(old)} times")
    return text.replace(old, new)


def _remove_methods(text: str, names: list[str], where: str) -> str:
    """`text` without the methods (or functions) `names`, each with the blank line after it."""
    tree = ast.parse(text)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((start, node.end_lineno))
    if len(spans) != len(names):
        raise RuntimeError(f"{where}: found {len(spans)} of the methods {names}")
    lines = text.splitlines(keepends=True)
    for start, end in sorted(spans, reverse=True):
        stop = end
        while stop < len(lines) and not lines[stop].strip():
            stop += 1
        del lines[start - 1 : stop]
    return "".join(lines)


@dataclass
class _Project:
    repo: str  # owner/name, as SWE-bench writes it
    version: str
    base: dict[str, str]  # the tree at the base commit
    history: list[tuple[str, str, list[str]]]  # (message, date, paths first added then)
    code: str  # the file the bug is in
    fixed_code: str  # that file as released (the gold's post-image)
    dockerfile: str
    created_at: str


def _dockerfile(*extra: str) -> str:
    lines = [
        f"FROM {SWE_IMAGE}",
        "USER root",
        "COPY . /testbed",
        "WORKDIR /testbed",
        *extra,
        "RUN git reset --quiet",
    ]
    return "\n".join(lines) + "\n"


# inflection: ordinal() keeps 'st'/'nd'/'rd' for 11, 12 and 13 (the teens test never holds).
_INFLECTION_CODE = "inflection/__init__.py"
_INFLECTION_TESTS = "test_inflection.py"
_TEENS = ("-11", "-12", "-13", "-111", "-112", "-113", "11", "12", "13", "111", "112", "113")
_ORDINAL_RIGHT = "    if number % 100 in (11, 12, 13):\n"
_ORDINAL_BUG = "    if number % 10 in (11, 12, 13):\n"


def _inflection() -> tuple[_Project, dict]:
    original = _sdist("inflection-0.5.1.tar.gz")
    code = _replace(original[_INFLECTION_CODE], _ORDINAL_RIGHT, _ORDINAL_BUG, _INFLECTION_CODE)
    tests = original[_INFLECTION_TESTS]
    for n in _TEENS:
        tests = _replace(tests, f'    ("{n}", "{n}th"),\n', "", _INFLECTION_TESTS)
    base = dict(original, **{_INFLECTION_CODE: code, _INFLECTION_TESTS: tests})
    docs = sorted(p for p in base if p.startswith("docs/"))
    project = _Project(
        repo="jpvanhal/inflection",
        version="0.5",
        base=base,
        history=[
            (
                "Import inflection 0.5.1",
                "2020-07-20T09:00:00Z",
                sorted(p for p in base if p not in docs),
            ),
            ("Add the Sphinx documentation", "2020-07-21T09:00:00Z", docs),
        ],
        code=_INFLECTION_CODE,
        fixed_code=original[_INFLECTION_CODE],
        dockerfile=_dockerfile(),
        created_at="2020-08-03T10:12:00Z",
    )
    return project, {"original_tests": original[_INFLECTION_TESTS], "base_tests": tests}


# cachetools: TTLCache.expire() and TLRUCache.expire() keep an item whose time is up at exactly
# `time` (`time > expires` where the release has `not (time < expires)`): two hunks in one file.
_CACHETOOLS_CODE = "src/cachetools/__init__.py"
_TTL_RIGHT = "        while curr is not root and not (time < curr.expires):\n"
_TTL_BUG = "        while curr is not root and time > curr.expires:\n"
_TLRU_RIGHT = "        while order and (order[0].removed or not (time < order[0].expires)):\n"
_TLRU_BUG = "        while order and (order[0].removed or time > order[0].expires):\n"
_CACHETOOLS_TAKEN_OUT = {
    "tests/test_ttl.py": ("TTLCacheTest", ["test_ttl", "test_ttl_expire"]),
    "tests/test_tlru.py": (
        "TLRUCacheTest",
        ["test_ttu", "test_ttu_expire", "test_ttu_reverse_insert"],
    ),
}


def _cachetools() -> tuple[_Project, dict]:
    original = _sdist("cachetools-5.3.3.tar.gz")
    code = original[_CACHETOOLS_CODE]
    code = _replace(code, _TTL_RIGHT, _TTL_BUG, _CACHETOOLS_CODE)
    code = _replace(code, _TLRU_RIGHT, _TLRU_BUG, _CACHETOOLS_CODE)
    base = dict(original, **{_CACHETOOLS_CODE: code})
    for path, (_, names) in _CACHETOOLS_TAKEN_OUT.items():
        base[path] = _remove_methods(original[path], names, path)
    later = ["CHANGELOG.rst"]
    project = _Project(
        repo="tkem/cachetools",
        version="5.3",
        base=base,
        history=[
            (
                "Import cachetools 5.3.3",
                "2024-02-26T20:00:00Z",
                sorted(p for p in base if p not in later),
            ),
            ("Update the changelog", "2024-02-27T08:30:00Z", later),
        ],
        code=_CACHETOOLS_CODE,
        fixed_code=original[_CACHETOOLS_CODE],
        dockerfile=_dockerfile("ENV PYTHONPATH=/testbed/src"),
        created_at="2024-03-04T17:45:00Z",
    )
    return project, {"original": original}


def _make_repository(project: _Project, path: Path, home: Path) -> tuple[_Git, str]:
    git = _Git.init(path, home)
    tree: dict[str, str] = {}
    head = ""
    for message, date, paths in project.history:
        tree.update({p: project.base[p] for p in paths})
        head = git.commit(dict(tree), message, date)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "exclude").write_text("Dockerfile\n")
    return git, head


# --- test ids, statically (the projects' tests never run on the host) -------------------------


def _inflection_ids(tests_text: str) -> dict[str, list[str]]:
    """Node ids of test_inflection.py: the ordinal tests per parameter, the plain functions."""
    tree = ast.parse(tests_text)
    ordinals: list[tuple[str, str]] = []
    plain: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ORDINAL_NUMBERS" for t in node.targets
        ):
            ordinals = [tuple(ast.literal_eval(e)) for e in node.value.elts]
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            if not node.decorator_list and not node.args.args:
                plain.append(f"{_INFLECTION_TESTS}::{node.name}")
    ordinal = [
        f"{_INFLECTION_TESTS}::{test}[{n}-{o}]"
        for test in ("test_ordinal", "test_ordinalize")
        for n, o in ordinals
    ]
    return {"ordinal": ordinal, "plain": plain}


def _cachetools_ids(files: dict[str, str], path: str, cls: str) -> list[str]:
    """The unittest methods pytest runs for `cls` in `path`: its own and CacheTestMixin's."""
    names: list[str] = []
    for source in (files[path], files["tests/__init__.py"]):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.name in (cls, "CacheTestMixin"):
                names += [
                    f.name
                    for f in node.body
                    if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
                ]
    return [f"{path}::{cls}::{name}" for name in names]


# --- the statements ------------------------------------------------------------------------------

_ORDINAL_STATEMENT = """\
ordinal() gives 'st', 'nd' and 'rd' for 11, 12 and 13

`inflection.ordinalize(11)` returns `'11st'`; it should be `'11th'`. The same goes for 12
(`'12nd'`) and 13 (`'13rd'`), and for 111-113 and the negative numbers: in English a number
ending in 11, 12 or 13 takes "th".

```python
>>> import inflection
>>> inflection.ordinalize(112)
'112nd'
>>> inflection.ordinal(-13)
'rd'
```
"""

_UNSOLVABLE_STATEMENT = (
    _ORDINAL_STATEMENT
    + """
While at it: `ordinal()` accepts fractions (`ordinal(1.5)` gives `'st'`), which have no ordinal.
"""
)

_VAGUE_STATEMENT = """\
Wrong suffix for some numbers

Some of the positions in our reports come out with the wrong English suffix after the number.
It looks like a few specific numbers are affected. Could someone look into it?
"""

_EXPIRE_STATEMENT = """\
TTLCache keeps an item whose time-to-live is up

An item whose expiry time equals the current time should be gone, as the documentation says
("items that expire because they have exceeded their time-to-live"); `TTLCache.expire()` and
`TLRUCache.expire()` keep it until the timer moves on:

```python
>>> cache = TTLCache(maxsize=2, ttl=1, timer=timer)   # timer() returns 0, then 1
>>> cache[1] = 1
>>> timer.tick()
>>> 1 in cache
True
```
"""

_EXPIRE_TTL_ONLY_STATEMENT = _EXPIRE_STATEMENT


# --- the build -----------------------------------------------------------------------------------


def build(folder: Path) -> Fixture:
    """Writes the fixture set into `folder` (created; must not hold one already) and returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swe-fixtures-") as work_text:
        work = Path(work_text)
        home = work / "home"
        home.mkdir()
        instances, predictions, truth, environments = _build(work, home)
    _write_jsonl(folder / "instances.jsonl", instances)
    _write_jsonl(folder / "predictions.jsonl", predictions)
    (folder / "truth.json").write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n")
    (folder / "environments.tar.gz").write_bytes(_archive(environments))
    return Fixture(folder, instances, predictions, truth, environments)


def _build(work: Path, home: Path):
    instances: list[dict] = []
    predictions: list[dict] = []
    truth: dict[str, dict] = {}
    environments: dict[str, dict[str, tuple[int, bytes]]] = {}

    def environment(name: str, git: _Git, dockerfile: str) -> None:
        files = _snapshot(git.path)
        files["Dockerfile"] = (0o644, dockerfile.encode())
        environments[name] = files

    def instance(
        project,
        instance_id,
        base_commit,
        patch,
        test_patch,
        f2p,
        p2p,
        statement,
        defects,
        env=None,
        samples=(),
        **detail,
    ) -> None:
        line = {
            "repo": project.repo,
            "instance_id": instance_id,
            "base_commit": base_commit,
            "patch": patch,
            "test_patch": test_patch,
            "problem_statement": statement,
            "hints_text": "",
            "created_at": project.created_at,
            "version": project.version,
            "FAIL_TO_PASS": list(f2p),
            "PASS_TO_PASS": list(p2p),
            "environment_setup_commit": base_commit,
        }
        if len(instances) % 2 == 0:  # as the published datasets write them: JSON in a string
            line["FAIL_TO_PASS"] = json.dumps(line["FAIL_TO_PASS"])
            line["PASS_TO_PASS"] = json.dumps(line["PASS_TO_PASS"])
        if env is not None:
            line["environment"] = env
        instances.append(line)
        entry = {"defects": list(defects), **detail, "samples": {}}
        for model, (kind, model_patch, expect) in zip(MODELS, samples, strict=False):
            predictions.append(
                {
                    "instance_id": instance_id,
                    "model_patch": model_patch,
                    "model_name_or_path": model,
                }
            )
            entry["samples"][model] = {"kind": kind, "resolved": expect}
        truth[instance_id] = entry

    # --- inflection ------------------------------------------------------------------------
    project, extra = _inflection()
    git, base_commit = _make_repository(project, work / "inflection", home)
    environment("inflection-ordinal", git, project.dockerfile)
    environment(
        "jpvanhal__inflection-broken-build",
        git,
        _dockerfile("RUN python3 -m pip install --no-deps --editable ."),
    )

    code, tests = project.base[project.code], project.base[_INFLECTION_TESTS]

    def code_patch(new_line: str, pre: str | None = None) -> str:
        before = pre if pre is not None else code
        return _diff(
            home, {project.code: before}, {project.code: before.replace(_ORDINAL_BUG, new_line)}
        )

    gold = code_patch(_ORDINAL_RIGHT)
    original_tests = extra["original_tests"]
    test_patch = _diff(home, {_INFLECTION_TESTS: tests}, {_INFLECTION_TESTS: original_tests})
    ids = _inflection_ids(original_tests)
    teen_ids = {f"[{n}-{n}th]" for n in _TEENS}
    f2p = [i for i in ids["ordinal"] if i[i.index("[") :] in teen_ids]
    p2p = [i for i in ids["ordinal"] if i not in f2p] + ids["plain"]

    right = code_patch("    if 11 <= number % 100 <= 13:\n")
    right_range = code_patch("    if number % 100 in range(11, 14):\n")
    right_tens = code_patch("    if number % 100 // 10 == 1:\n")
    right_set = code_patch("    if number % 100 in {11, 12, 13}:\n")
    wrong = code_patch("    if number % 100 > 10:\n")  # 21st becomes 21th
    partial = code_patch("    if number % 100 in (11, 12):\n")  # 13th still 13rd
    # Made against code the model imagined: the line it removes is not in the file.
    imagined = code.replace(_ORDINAL_BUG, "    if number in (11, 12, 13):\n")
    no_apply = _diff(
        home,
        {project.code: imagined},
        {project.code: imagined.replace("    if number in (11, 12, 13):\n", _ORDINAL_RIGHT)},
    )
    mixed = (
        ("right", right, "full"),
        ("wrong", wrong, "no"),
        ("partial", partial, "partial"),
        ("does_not_apply", no_apply, "apply_failed"),
    )
    two = (("right", right, "full"), ("wrong", wrong, "no"))
    common = {"env": "inflection-ordinal"}

    instance(
        project,
        "jpvanhal__inflection-clean",
        base_commit,
        gold,
        test_patch,
        f2p,
        p2p,
        _ORDINAL_STATEMENT,
        [],
        samples=mixed,
        **common,
    )
    instance(
        project,
        "jpvanhal__inflection-broken-build",
        base_commit,
        gold,
        test_patch,
        f2p,
        p2p,
        _ORDINAL_STATEMENT,
        ["broken_environment"],
        samples=(("right", right, "full"),),
        why="its Dockerfile runs `python3 -m pip install`; the image has no pip (and no "
        "network): the build fails",
    )

    unsolvable_tests = original_tests + (
        "\n\ndef test_ordinal_rejects_fractions():\n"
        "    with pytest.raises(ValueError):\n"
        "        inflection.ordinal(1.5)\n"
    )
    unsolvable_id = f"{_INFLECTION_TESTS}::test_ordinal_rejects_fractions"
    instance(
        project,
        "jpvanhal__inflection-unsolvable",
        base_commit,
        gold,
        _diff(home, {_INFLECTION_TESTS: tests}, {_INFLECTION_TESTS: unsolvable_tests}),
        [*f2p, unsolvable_id],
        p2p,
        _UNSOLVABLE_STATEMENT,
        ["unsolvable"],
        samples=(("right", right, "partial"), ("partial", partial, "partial")),
        tests=[unsolvable_id],
        **common,
        why="the test patch wants ordinal(1.5) to raise ValueError; the gold does not",
    )

    passing = f"{_INFLECTION_TESTS}::test_ordinalize[14-14th]"
    instance(
        project,
        "jpvanhal__inflection-mislabeled-passes",
        base_commit,
        gold,
        test_patch,
        [*f2p, passing],
        [i for i in p2p if i != passing],
        _ORDINAL_STATEMENT,
        ["mislabeled"],
        samples=two,
        tests=[passing],
        **common,
        why="a FAIL_TO_PASS test that passes without the fix",
    )

    never = f"{_INFLECTION_TESTS}::test_ordinal[number30-ordinalized30]"
    instance(
        project,
        "jpvanhal__inflection-mislabeled-missing",
        base_commit,
        gold,
        test_patch,
        f2p,
        [*p2p, never],
        _ORDINAL_STATEMENT,
        ["mislabeled"],
        samples=(("right", right, "no"), ("wrong", wrong, "no")),
        tests=[never],
        also=["unsolvable"],
        **common,
        why="a PASS_TO_PASS id in an older pytest's parameter naming: no test has it, so it "
        "never runs (and no patch can resolve the instance while it is listed)",
    )

    flaky_tests = original_tests + (
        "\n\ndef test_uncountable_words_keep_their_form():\n"
        '    words = {"fish", "sheep"}\n'
        '    assert [inflection.pluralize(word) for word in words] == ["fish", "sheep"]\n'
    )
    flaky_id = f"{_INFLECTION_TESTS}::test_uncountable_words_keep_their_form"
    instance(
        project,
        "jpvanhal__inflection-flaky",
        base_commit,
        gold,
        _diff(home, {_INFLECTION_TESTS: tests}, {_INFLECTION_TESTS: flaky_tests}),
        f2p,
        [*p2p, flaky_id],
        _ORDINAL_STATEMENT,
        ["flaky"],
        samples=(("right", right, None), ("wrong", wrong, "no")),
        tests=[flaky_id],
        **common,
        why="the test compares a set's order, which PYTHONHASHSEED (random per process) "
        "decides: it passes in about half the runs",
    )

    instance(
        project,
        "jpvanhal__inflection-no-signal",
        base_commit,
        gold,
        test_patch,
        f2p,
        p2p,
        _ORDINAL_STATEMENT,
        ["no_signal"],
        samples=(
            ("right", right, "full"),
            ("right", right_range, "full"),
            ("right", right_tens, "full"),
            ("right", right_set, "full"),
        ),
        **common,
        why="every sample resolves it",
    )

    instance(
        project,
        "jpvanhal__inflection-vague-statement",
        base_commit,
        gold,
        test_patch,
        f2p,
        p2p,
        _VAGUE_STATEMENT,
        ["statement_names_nothing_tested"],
        samples=two,
        **common,
        why="the statement names no function, file or message the tests exercise",
    )

    # --- cachetools ------------------------------------------------------------------------
    project, extra = _cachetools()
    original = extra["original"]
    git, base_commit = _make_repository(project, work / "cachetools", home)
    environment("cachetools-expire", git, project.dockerfile)
    environment("tkem__cachetools-broken-collection", git, _dockerfile())
    code = project.base[project.code]

    def expire_patch(ttl: str, tlru: str, pre: str | None = None) -> str:
        before = pre if pre is not None else code
        after = before.replace(_TTL_BUG, ttl).replace(_TLRU_BUG, tlru)
        return _diff(home, {project.code: before}, {project.code: after})

    gold = expire_patch(_TTL_RIGHT, _TLRU_RIGHT)
    test_files = list(_CACHETOOLS_TAKEN_OUT)
    full_tests = _diff(
        home, {p: project.base[p] for p in test_files}, {p: original[p] for p in test_files}
    )
    ttl_path = "tests/test_ttl.py"
    ttl_tests = _diff(home, {ttl_path: project.base[ttl_path]}, {ttl_path: original[ttl_path]})
    f2p, p2p = [], []
    for path, (cls, names) in _CACHETOOLS_TAKEN_OUT.items():
        every = _cachetools_ids(original, path, cls)
        f2p += [i for i in every if i.rsplit("::", 1)[1] in names]
        p2p += [i for i in every if i.rsplit("::", 1)[1] not in names]

    c_right = expire_patch(
        "        while curr is not root and time >= curr.expires:\n",
        "        while order and (order[0].removed or time >= order[0].expires):\n",
    )
    c_partial = expire_patch(_TTL_RIGHT, _TLRU_BUG)  # TTLCache only
    c_wrong = expire_patch(  # one tick early: items go before their time
        "        while curr is not root and time >= curr.expires - 1:\n",
        "        while order and (order[0].removed or time >= order[0].expires - 1):\n",
    )
    imagined = code.replace(_TTL_BUG, "        while curr is not root and curr.expires < time:\n")
    c_no_apply = _diff(
        home,
        {project.code: imagined},
        {
            project.code: imagined.replace(
                "        while curr is not root and curr.expires < time:\n", _TTL_RIGHT
            )
        },
    )
    gold_hunks = [
        {"index": i, "file": path, "header": header}
        for i, (path, header) in enumerate(unified_diff.hunks(unified_diff.parse(gold)))
    ]
    common = {"env": "cachetools-expire"}
    instance(
        project,
        "tkem__cachetools-clean",
        base_commit,
        gold,
        full_tests,
        f2p,
        p2p,
        _EXPIRE_STATEMENT,
        [],
        samples=(
            ("right", c_right, "full"),
            ("partial", c_partial, "partial"),
            ("wrong", c_wrong, "no"),
            ("does_not_apply", c_no_apply, "apply_failed"),
        ),
        hunks=gold_hunks,
        **common,
    )
    ttl_f2p = [i for i in f2p if i.startswith(ttl_path)]
    ttl_p2p = [i for i in p2p if i.startswith(ttl_path)]
    instance(
        project,
        "tkem__cachetools-weak-tests",
        base_commit,
        gold,
        ttl_tests,
        ttl_f2p,
        ttl_p2p,
        _EXPIRE_TTL_ONLY_STATEMENT,
        ["weak_tests"],
        samples=(("right", c_right, "full"), ("partial", c_partial, "full")),
        hunks=gold_hunks,
        weak_hunk=gold_hunks[1],
        **common,
        why="the test patch checks TTLCache only: the gold without its TLRUCache.expire "
        "hunk (hunk 1) still resolves",
    )
    instance(
        project,
        "tkem__cachetools-broken-collection",
        base_commit,
        gold,
        full_tests,
        f2p,
        p2p,
        _EXPIRE_STATEMENT,
        ["broken_environment"],
        samples=(("right", c_right, "no"),),
        why="the Dockerfile does not put src/ on PYTHONPATH: collecting the tests fails "
        "with ModuleNotFoundError: No module named 'cachetools'",
    )

    fixed = dict(project.base, **{project.code: project.fixed_code})
    fix_message = "Expire an item whose time-to-live ends now (fixes #289)"
    fix_date = "2024-03-05T09:00:00Z"

    # On another branch, its ref packed (as a fetch of a remote's branches leaves them).
    git, base_commit = _make_repository(project, work / "leak-branch", home)
    git("checkout", "--quiet", "-b", "fix/expire-boundary")
    leak_commit = git.commit(fixed, fix_message, fix_date)
    git("checkout", "--quiet", "main")
    git("pack-refs", "--all")
    # A loose ref again: with every ref packed, .git/refs holds only empty folders, which a
    # snapshot of files loses, and git does not take a .git without refs/ for a repository.
    git("tag", "v5.3.3", base_commit)
    environment("tkem__cachetools-leak-branch", git, project.dockerfile)
    instance(
        project,
        "tkem__cachetools-leak-branch",
        base_commit,
        gold,
        full_tests,
        f2p,
        p2p,
        _EXPIRE_STATEMENT,
        ["solution_leak"],
        samples=(("right", c_right, "full"), ("wrong", c_wrong, "no")),
        commit=leak_commit,
        where=["reachable from refs/heads/fix/expire-boundary", "packed-refs"],
        why="the fix is the tip of the branch fix/expire-boundary",
    )

    # Committed on main, then reset away: only the reflog has it.
    git, base_commit = _make_repository(project, work / "leak-reflog", home)
    leak_commit = git.commit(fixed, fix_message, fix_date)
    git("reset", "--quiet", "--hard", "HEAD~1", date=fix_date)
    environment("tkem__cachetools-leak-reflog", git, project.dockerfile)
    instance(
        project,
        "tkem__cachetools-leak-reflog",
        base_commit,
        gold,
        full_tests,
        f2p,
        p2p,
        _EXPIRE_STATEMENT,
        ["solution_leak"],
        samples=(("right", c_right, "full"), ("wrong", c_wrong, "no")),
        commit=leak_commit,
        where=["reflog"],
        why="the fix was committed on main and reset away; the reflog still has it",
    )

    # A commit no ref or reflog names (what a rebase or an amended commit leaves behind).
    git, base_commit = _make_repository(project, work / "leak-dangling", home)
    index = {"GIT_INDEX_FILE": str(work / "dangling-index")}
    git("read-tree", base_commit, env=index)
    blob = git("hash-object", "-w", "--stdin", stdin=project.fixed_code).strip()
    git("update-index", "--cacheinfo", f"100644,{blob},{project.code}", env=index)
    tree = git("write-tree", env=index).strip()
    leak_commit = git(
        "commit-tree", tree, "-p", base_commit, "-m", fix_message, date=fix_date
    ).strip()
    environment("tkem__cachetools-leak-dangling", git, project.dockerfile)
    instance(
        project,
        "tkem__cachetools-leak-dangling",
        base_commit,
        gold,
        full_tests,
        f2p,
        p2p,
        _EXPIRE_STATEMENT,
        ["solution_leak"],
        samples=(("right", c_right, "full"), ("wrong", c_wrong, "no")),
        commit=leak_commit,
        where=["dangling"],
        why="the fix is in a commit that no ref or reflog names",
    )

    return instances, predictions, truth, environments


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def _archive(environments: dict[str, dict[str, tuple[int, bytes]]]) -> bytes:
    """The environments as a tar.gz: sorted, root-owned, fixed times (the same bytes each run)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(environments):
            folders = {name}
            for rel in environments[name]:
                parts = rel.split("/")[:-1]
                folders.update(name + "/" + "/".join(parts[: i + 1]) for i in range(len(parts)))
            entries = [(f, None, 0o755) for f in folders]
            entries += [
                (f"{name}/{rel}", data, mode) for rel, (mode, data) in environments[name].items()
            ]
            add_entries(archive, sorted(entries, key=lambda e: e[0]), mtime=ARCHIVE_MTIME)
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as zipped:
        zipped.write(raw.getvalue())
    return packed.getvalue()


# --- as the import makes them --------------------------------------------------------------------


def _entry(mode: int, data: bytes) -> dict:
    if b"\0" not in data:
        try:
            return {"mode": mode, "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"mode": mode, "base64": base64.b64encode(data).decode("ascii")}


def _listed(value) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def sources(fixture: Fixture) -> dict[str, dict]:
    """instance_id -> the source dict of the shared design (section 1), environment included."""
    files_of: dict[str, dict] = {}
    out: dict[str, dict] = {}
    for line in fixture.instances:
        folder = line.get("environment") or line["instance_id"]
        if folder not in files_of:
            files_of[folder] = {
                rel: _entry(mode, data)
                for rel, (mode, data) in fixture.environments[folder].items()
            }
        out[line["instance_id"]] = {
            "kind": "swe",
            "format": "swe-bench",
            "instance_id": line["instance_id"],
            "repo": line["repo"],
            "base_commit": line["base_commit"],
            "problem_statement": line["problem_statement"],
            "patch": line["patch"],
            "test_patch": line["test_patch"],
            "FAIL_TO_PASS": _listed(line["FAIL_TO_PASS"]),
            "PASS_TO_PASS": _listed(line["PASS_TO_PASS"]),
            "version": line.get("version", ""),
            "environment_setup_commit": line.get("environment_setup_commit", ""),
            "hints_text": line.get("hints_text", ""),
            "created_at": line.get("created_at", ""),
            "line": line,
            "files": files_of[folder],
            "build_context": "",
            "dockerfile": "Dockerfile",
            "docker_image": "",
            "build_timeout_sec": 600,
            "workdir": "/testbed",
            "test_command": TEST_COMMAND,
            "timeout_sec": 900,
            "memory_mb": 2048,
            "cpus": 1,
        }
    return out


def predictions_by_instance(fixture: Fixture) -> dict[str, dict[str, str]]:
    """instance_id -> {model: model_patch}."""
    out: dict[str, dict[str, str]] = {}
    for row in fixture.predictions:
        out.setdefault(row["instance_id"], {})[row["model_name_or_path"]] = row["model_patch"]
    return out


__all__ = [
    "DATA",
    "MODELS",
    "SWE_IMAGE",
    "TEST_COMMAND",
    "Fixture",
    "build",
    "predictions_by_instance",
    "sources",
]
