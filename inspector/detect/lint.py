"""Static lint of one terminal task: a source dict (`inspector.formats.terminal`) in, findings out.

Nothing is built or run: the checks read the Dockerfile, the instruction, the reference solution
and the tests as text, so they are quick, and they are heuristics: each finding says what was
seen, where, and why it matters, for a reviewer to judge. A finding is
``{"code", "file", "line", "message"}``: `file` is a path inside the task folder, `line` is
1-based (None when the finding is about the file as a whole).

Codes:

- ``tests-in-image``: a COPY/ADD in the Dockerfile puts test files (anything under a ``tests/``
  or ``checks/`` folder, ``test_*.py``, ``*_test.py``, ``test_*.sh``, ``test.sh``,
  ``run-tests.sh``, ``conftest.py``) or the reference solution (``solution/``, ``solve.sh``,
  ``solution.sh``) into the image the agent works in.
- ``unpinned-package``: ``pip install`` (also ``pip3``, ``python -m pip``, ``uv pip``) of a
  package without an exact ``==`` version, in the Dockerfile or the test script.
  Requirements files (``-r``), local paths, URLs and pip/setuptools/wheel/uv themselves are not
  flagged; neither is ``apt-get install``.
- ``test-deps-in-image``: the Dockerfile installs test-only tools (pytest and its plugins,
  hypothesis, coverage, nose, tox, mock) into the image.
- ``unnamed-test-input``: the tests use an absolute path (``/app/data.csv``) that the instruction
  names neither in full nor by its file name, and that the Dockerfile does not mention or copy
  to. System locations (``/tests``, ``/logs``, ``/dev``, ``/proc``, ``/tmp``, ``/usr``, ``/bin``,
  ``/etc`` and the like) and bare top-level folders (``/app``) are left out, and so is the whole
  check when the instruction is empty (that is one ``missing-field`` finding instead).
- ``answer-in-instruction``: the instruction contains a line of the reference solution verbatim
  (a line of at least 20 characters that is not a comment, a shebang or shell boilerplate such
  as ``set -e`` or ``cd``).
- ``missing-file``: a file the task's configuration points at (Dockerfile, solution and test
  entry points) is not in the task, or the Dockerfile copies something that is not in the build
  context.
- ``missing-field``: the instruction is empty, or the reference solution has no command.
- ``no-reward-written`` (Harbor): no test file mentions the reward file
  (``/logs/verifier/reward.txt`` or ``reward.json``).
- ``reward-not-always-written`` (Harbor): the test script writes the reward file only with a
  constant passing value (``echo 1 > /logs/verifier/reward.txt``) and never a failing one, so a
  failing check leaves whatever reward file the agent wrote.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from inspector.formats.terminal.source import file_text

__all__ = ["LINT_CODES", "lint_terminal_task"]

LINT_CODES = (
    "tests-in-image",
    "unpinned-package",
    "test-deps-in-image",
    "unnamed-test-input",
    "answer-in-instruction",
    "missing-file",
    "missing-field",
    "no-reward-written",
    "reward-not-always-written",
)

TEST_FOLDERS = frozenset({"tests", "checks"})
TEST_FILE_PATTERNS = (
    "test_*.py",
    "*_test.py",
    "test_*.sh",
    "*_test.sh",
    "test.sh",
    "run-tests.sh",
    "conftest.py",
)
SOLUTION_FOLDERS = frozenset({"solution"})
SOLUTION_FILES = frozenset({"solve.sh", "solution.sh", "solution.yaml"})
TEST_ONLY_PACKAGES = frozenset(
    {"pytest", "hypothesis", "coverage", "nose", "nose2", "tox", "mock", "pytest-cov"}
)
NEVER_PINNED = frozenset({"pip", "setuptools", "wheel", "uv"})
SYSTEM_PREFIXES = (
    "/tests",
    "/logs",
    "/dev",
    "/proc",
    "/sys",
    "/tmp",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/etc",
    "/run",
    "/var/run",
    "/var/lib",
)
MIN_ANSWER_LINE = 20
REWARD_FILE = re.compile(r"reward\.(txt|json)")

_INSTRUCTION = re.compile(r"^([A-Za-z]+)(\s+|$)(.*)$", re.DOTALL)
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.$/~-])(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*/?)")
_PIP_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--python",
        "-p",
        "--platform",
        "--python-version",
        "--python-platform",
        "--implementation",
        "--abi",
        "--only-binary",
        "--no-binary",
        "--progress-bar",
        "--cache-dir",
        "--src",
        "--upgrade-strategy",
        "--trusted-host",
        "--log",
        "--timeout",
        "--retries",
        "--index-strategy",
        "--extra",
        "--group",
        "--config-settings",
        "-C",
        "--global-option",
        "--exists-action",
        "--proxy",
        "--cert",
        "--client-cert",
        "--keyring-provider",
        "--report",
        "--index",
        "--default-index",
        "--resolution",
        "--prerelease",
        "--exclude-newer",
        "--overrides",
        "--build-constraint",
    }
)
_SEGMENT_SPLIT = re.compile(r"&&|\|\||[;|\n]|\$\(|`|\)")
_BOILERPLATE = re.compile(
    r"^(set\s|cd\s|cd$|export\s|exit\b|source\s|\.\s|fi$|done$|esac$|else$|then$|do$|\{$|\}$)"
)


def lint_terminal_task(source: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding for one task, sorted by file and line. Never raises on odd input."""
    task = _Task(source)
    findings: list[dict[str, Any]] = []
    for check in (
        _check_missing,
        _check_dockerfile_copies,
        _check_pip_installs,
        _check_unnamed_test_inputs,
        _check_answer_in_instruction,
        _check_reward_written,
    ):
        findings.extend(check(task))
    findings.sort(key=lambda f: (f["file"], f["line"] or 0, f["code"], f["message"]))
    return findings


def _finding(code: str, file: str, line: int | None, message: str) -> dict[str, Any]:
    return {"code": code, "file": file, "line": line, "message": message}


# --- The task, as the checks see it ----------------------------------------------------------


class _Task:
    def __init__(self, source: dict[str, Any]) -> None:
        self.source = source
        self.files: dict[str, Any] = dict(source.get("files") or {})
        self.format = source.get("format", "")
        self.instruction = source.get("instruction") or ""
        self.dockerfile = source.get("dockerfile") or "Dockerfile"
        self.context = (source.get("build_context") or "").strip("/")
        self.solution_entry = source.get("solution_entry") or ""
        self.test_entry = source.get("test_entry") or ""
        self.solution_files = [p for p in source.get("solution_files") or [] if p in self.files]
        self.test_files = [p for p in source.get("test_files") or [] if p in self.files]

    def text(self, path: str) -> str | None:
        if path not in self.files:
            return None
        try:
            return file_text(self.source, path)
        except (KeyError, ValueError, TypeError):
            return None

    def context_files(self) -> list[str]:
        """Paths of the build context's files, relative to the context, less what the
        context's .dockerignore leaves out."""
        prefix = self.context + "/" if self.context else ""
        paths = sorted(p[len(prefix) :] for p in self.files if p.startswith(prefix))
        ignore = self.text(prefix + ".dockerignore")
        if ignore is None:
            return paths
        rules = []
        for raw in ignore.splitlines():
            rule = raw.strip()
            if not rule or rule.startswith("#"):
                continue
            negated = rule.startswith("!")
            pattern = posixpath.normpath(rule.lstrip("!").strip().lstrip("/")).replace("**/", "*")
            rules.append((negated, pattern))
        kept = []
        for path in paths:
            ignored = False
            for negated, pattern in rules:
                if _path_matches(path, pattern):
                    ignored = not negated
            if not ignored:
                kept.append(path)
        return kept

    def instructions(self) -> list[_DockerInstruction]:
        text = self.text(self.dockerfile)
        return _parse_dockerfile(text) if text is not None else []


# --- Dockerfile parsing ---------------------------------------------------------------------


@dataclass(frozen=True)
class _DockerInstruction:
    line: int
    keyword: str  # upper case
    args: str  # continuation lines joined; heredoc bodies appended after a newline


def _parse_dockerfile(text: str) -> list[_DockerInstruction]:
    lines = text.splitlines()
    result: list[_DockerInstruction] = []
    index = 0
    while index < len(lines):
        start = index
        raw = lines[index]
        index += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = [stripped]
        while parts[-1].endswith("\\") and index < len(lines):
            parts[-1] = parts[-1][:-1]
            nxt = lines[index].strip()
            index += 1
            if nxt.startswith("#"):
                parts.append("\\")  # a comment inside a continuation is dropped
                continue
            parts.append(nxt)
        if parts[-1].endswith("\\"):
            parts[-1] = parts[-1][:-1]
        joined = " ".join(part for part in parts if part != "\\")
        match = _INSTRUCTION.match(joined)
        if not match:
            continue
        keyword, args = match.group(1).upper(), match.group(3)
        for heredoc in _HEREDOC.finditer(args):
            strip_tabs, delimiter = heredoc.group(1) == "-", heredoc.group(3)
            body = []
            while index < len(lines):
                line = lines[index]
                index += 1
                if (line.lstrip("\t") if strip_tabs else line).strip() == delimiter:
                    break
                body.append(line)
            args += "\n" + "\n".join(body)
        result.append(_DockerInstruction(line=start + 1, keyword=keyword, args=args))
    return result


def _copy_operands(args: str) -> tuple[list[str], str, bool] | None:
    """(sources, destination, from another stage or image) of a COPY/ADD; None if unreadable."""
    first_line = args.split("\n", 1)[0].strip()
    words: list[str]
    if first_line.startswith("["):
        try:
            words = [str(word) for word in json.loads(first_line)]
        except (ValueError, TypeError):
            return None
    else:
        try:
            words = shlex.split(first_line)
        except ValueError:
            words = first_line.split()
    flags = [word for word in words if word.startswith("--")]
    operands = [word for word in words if not word.startswith("--")]
    if len(operands) < 2:
        return None
    from_elsewhere = any(flag.startswith("--from") for flag in flags)
    return operands[:-1], operands[-1], from_elsewhere


def _matching_context_files(pattern: str, context_files: list[str]) -> list[str] | None:
    """The context files a COPY source selects; None when it lies outside the context."""
    cleaned = posixpath.normpath("/" + pattern.strip()).lstrip("/")
    if pattern.strip().startswith("..") or posixpath.normpath(pattern.strip()).startswith(".."):
        return None
    if cleaned in ("", "."):
        return list(context_files)
    has_glob = any(ch in cleaned for ch in "*?[")
    matched = []
    for path in context_files:
        if has_glob:
            if _path_matches(path, cleaned):
                matched.append(path)
        elif path == cleaned or path.startswith(cleaned + "/"):
            matched.append(path)
    return matched


def _path_matches(path: str, pattern: str) -> bool:
    """Whether `pattern` (a .dockerignore rule) matches `path` or a folder holding it."""
    parts = path.split("/")
    return any(
        fnmatch.fnmatchcase("/".join(parts[:depth]), pattern) for depth in range(1, len(parts) + 1)
    )


def _is_test_file(path: str) -> bool:
    parts = path.split("/")
    if any(part in TEST_FOLDERS for part in parts[:-1]):
        return True
    return any(fnmatch.fnmatchcase(parts[-1], pattern) for pattern in TEST_FILE_PATTERNS)


def _is_solution_file(path: str) -> bool:
    parts = path.split("/")
    return any(part in SOLUTION_FOLDERS for part in parts[:-1]) or parts[-1] in SOLUTION_FILES


# --- Checks ----------------------------------------------------------------------------------


def _check_missing(task: _Task) -> list[dict[str, Any]]:
    findings = []
    for path, what in (
        (task.dockerfile, "the Dockerfile"),
        (task.solution_entry, "the reference solution"),
        (task.test_entry, "the test script"),
    ):
        if path and path not in task.files:
            findings.append(
                _finding(
                    "missing-file", path, None, f"{path} is missing: it is {what} of the task."
                )
            )
    if not task.instruction.strip():
        where = "task.yaml" if task.format == "terminal-bench" else "instruction.md"
        findings.append(
            _finding(
                "missing-field",
                where,
                None,
                "The instruction is empty: the agent is not told what to do.",
            )
        )
    solution = task.text(task.solution_entry) if task.solution_entry else None
    if solution is not None and not any(
        line.strip() and not line.strip().startswith("#") for line in solution.splitlines()
    ):
        findings.append(
            _finding(
                "missing-field",
                task.solution_entry,
                None,
                f"{task.solution_entry} has no command: the reference solution does nothing, so "
                "it cannot show that the task is solvable.",
            )
        )
    return findings


def _check_dockerfile_copies(task: _Task) -> list[dict[str, Any]]:
    findings = []
    context_files = task.context_files()
    context_name = f"{task.context}/" if task.context else "the task folder"
    for instruction in task.instructions():
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        operands = _copy_operands(instruction.args)
        if operands is None:
            continue
        sources, destination, from_elsewhere = operands
        if from_elsewhere or any(s.startswith("<<") for s in sources):
            continue
        shown = f"{instruction.keyword} {' '.join(sources)} {destination}"
        leaked: list[str] = []
        for source in sources:
            if instruction.keyword == "ADD" and re.match(r"^[a-z][a-z0-9+.-]*://|^git@", source):
                continue
            matched = _matching_context_files(source, context_files)
            if matched is None:
                findings.append(
                    _finding(
                        "missing-file",
                        task.dockerfile,
                        instruction.line,
                        f"`{shown}` copies {source}, which is outside the build context "
                        f"({context_name}): the image cannot be built.",
                    )
                )
                continue
            if not matched and source.strip().rstrip("/") not in ("", "."):
                findings.append(
                    _finding(
                        "missing-file",
                        task.dockerfile,
                        instruction.line,
                        f"`{shown}` copies {source}, which is not in the build context "
                        f"({context_name}): the image cannot be built.",
                    )
                )
                continue
            leaked.extend(p for p in matched if _is_test_file(p) or _is_solution_file(p))
        if leaked:
            tests = [p for p in leaked if _is_test_file(p)]
            solutions = [p for p in leaked if p not in tests]
            what = []
            if tests:
                what.append("test files (" + _listing(tests) + ")")
            if solutions:
                what.append("the reference solution (" + _listing(solutions) + ")")
            findings.append(
                _finding(
                    "tests-in-image",
                    task.dockerfile,
                    instruction.line,
                    f"`{shown}` puts {' and '.join(what)} into the image the agent works in: "
                    "the agent can read them, or edit them so that they pass.",
                )
            )
    return findings


def _check_pip_installs(task: _Task) -> list[dict[str, Any]]:
    findings = []
    for instruction in task.instructions():
        if instruction.keyword != "RUN":
            continue
        unpinned, test_tools = _pip_problems(instruction.args)
        test_tools += _apt_test_tools(instruction.args)
        if unpinned:
            findings.append(_unpinned_finding(task.dockerfile, instruction.line, unpinned))
        if test_tools:
            findings.append(
                _finding(
                    "test-deps-in-image",
                    task.dockerfile,
                    instruction.line,
                    f"The image installs test-only tools ({', '.join(test_tools)}) where the agent "
                    "works: the agent can tamper with them, and the tests come to depend on the "
                    "agent's environment. Install them in the test script instead.",
                )
            )
    if task.test_entry:
        text = task.text(task.test_entry)
        if text is not None:
            for number, command in _shell_commands(text):
                unpinned, _tools = _pip_problems(command)
                if unpinned:
                    findings.append(_unpinned_finding(task.test_entry, number, unpinned))
    return findings


def _unpinned_finding(file: str, line: int, packages: list[str]) -> dict[str, Any]:
    return _finding(
        "unpinned-package",
        file,
        line,
        f"pip installs {', '.join(packages)} without an exact version (==): a later build can get "
        "another version, and a task that passed can start failing. Pin each package.",
    )


def _shell_commands(text: str) -> list[tuple[int, str]]:
    """(first line, command) of a shell script, with backslash continuations joined."""
    commands: list[tuple[int, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        start = index
        parts = [lines[index]]
        index += 1
        while parts[-1].rstrip().endswith("\\") and index < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            parts.append(lines[index])
            index += 1
        commands.append((start + 1, " ".join(parts)))
    return commands


def _pip_problems(command: str) -> tuple[list[str], list[str]]:
    """(unpinned requirement specs, test-only packages) of every pip install in a command."""
    unpinned: list[str] = []
    test_tools: list[str] = []
    for segment in _SEGMENT_SPLIT.split(command.replace("\\\n", " ")):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        for start in _pip_install_starts(words):
            skip_value = False
            for word in words[start:]:
                if skip_value:
                    skip_value = False
                    continue
                if word.startswith("-"):
                    skip_value = "=" not in word and word in _PIP_VALUE_OPTIONS
                    continue
                if _is_local_or_url(word):
                    continue
                package = re.split(r"[<>=!~;\[\s@(]", word, maxsplit=1)[0].strip()
                if not package:
                    continue
                normalised = package.lower().replace("_", "-")
                if normalised in TEST_ONLY_PACKAGES or normalised.startswith("pytest-"):
                    test_tools.append(package)
                if normalised in NEVER_PINNED:
                    continue
                if "==" not in word:
                    unpinned.append(word)
    return unpinned, test_tools


def _pip_install_starts(words: list[str]) -> list[int]:
    """Indexes just after each `pip install` (or pip3, python -m pip, uv pip) in `words`."""
    starts = []
    for index, word in enumerate(words):
        base = word.rsplit("/", 1)[-1]
        # `uv pip install` and `python -m pip install` are found by their `pip install`.
        if re.fullmatch(r"pip(3(\.\d+)?)?", base) and words[index + 1 : index + 2] == ["install"]:
            starts.append(index + 2)
    return starts


def _is_local_or_url(word: str) -> bool:
    return (
        word.startswith(("$", ".", "/", "~", "git+", "http:", "https:", "file:"))
        or "://" in word
        or word.endswith((".whl", ".tar.gz", ".zip", ".tgz"))
        or " @ " in word
    )


def _apt_test_tools(command: str) -> list[str]:
    tools = []
    for match in re.finditer(
        r"\bpython3?-(pytest[\w-]*|hypothesis|coverage|nose2?|mock|tox)\b", command
    ):
        if re.search(r"\b(apt-get|apt|apk|yum|dnf)\b[^\n;&|]*\binstall\b", command):
            tools.append(match.group(0))
    return tools


def _check_unnamed_test_inputs(task: _Task) -> list[dict[str, Any]]:
    instruction = task.instruction
    if not instruction.strip():
        return []  # reported once, as missing-field, rather than once per path
    dockerfile_text = task.text(task.dockerfile) or ""
    copy_destinations = []
    for instruction_ in task.instructions():
        if instruction_.keyword in ("COPY", "ADD"):
            operands = _copy_operands(instruction_.args)
            if operands is not None:
                copy_destinations.append(operands[1].rstrip("/") + "/")
    findings = []
    reported: set[str] = set()
    for path in task.test_files:
        text = task.text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for match in _ABSOLUTE_PATH.finditer(line):
                used = match.group(1).rstrip("/")
                if used in reported or used.count("/") < 2:
                    continue
                if any(used == p or used.startswith(p + "/") for p in SYSTEM_PREFIXES):
                    continue
                if _named(used, instruction):
                    continue
                if used in dockerfile_text or any(used.startswith(d) for d in copy_destinations):
                    continue
                reported.add(used)
                base = posixpath.basename(used)
                findings.append(
                    _finding(
                        "unnamed-test-input",
                        path,
                        number,
                        f"The tests use {used}, which the instruction never names (neither the "
                        f"path nor {base}) and the Dockerfile does not provide: the agent cannot "
                        "know that it matters.",
                    )
                )
    return findings


def _named(path: str, instruction: str) -> bool:
    if path in instruction:
        return True
    base = posixpath.basename(path)
    return (
        bool(base)
        and re.search(r"(?<![\w.-])" + re.escape(base) + r"(?![\w-])", instruction) is not None
    )


def _check_answer_in_instruction(task: _Task) -> list[dict[str, Any]]:
    instruction = " ".join(task.instruction.split())
    if not instruction:
        return []
    findings = []
    for path in task.solution_files:
        text = task.text(path)
        if text is None:
            continue
        for number, raw in enumerate(text.splitlines(), start=1):
            line = " ".join(raw.split())
            if len(line) < MIN_ANSWER_LINE or line.startswith("#") or _BOILERPLATE.match(line):
                continue
            if line in instruction:
                findings.append(
                    _finding(
                        "answer-in-instruction",
                        path,
                        number,
                        f"The instruction contains line {number} of the reference solution "
                        f"word for word ({_clip(line)}): the task gives its answer away.",
                    )
                )
    return findings


def _check_reward_written(task: _Task) -> list[dict[str, Any]]:
    if task.format != "harbor" or task.test_entry not in task.files:
        return []  # a missing test script is reported as missing-file
    texts = {path: task.text(path) or "" for path in task.test_files}
    if not any(REWARD_FILE.search(text) or "/logs/verifier" in text for text in texts.values()):
        return [
            _finding(
                "no-reward-written",
                task.test_entry,
                None,
                "No test file writes /logs/verifier/reward.txt or reward.json: Harbor reads the "
                "verdict from that file, so every run would get no reward.",
            )
        ]
    script = texts.get(task.test_entry, "")
    writes = [
        (number, line)
        for number, line in enumerate(script.splitlines(), start=1)
        if REWARD_FILE.search(line) and ">" in line and not line.lstrip().startswith("#")
    ]
    if not writes or re.search(r"\brm\b[^\n]*reward\.", script):
        return []
    if all(_writes_only_a_pass(line) for _, line in writes):
        number = writes[0][0]
        return [
            _finding(
                "reward-not-always-written",
                task.test_entry,
                number,
                f"{task.test_entry} writes the reward file only when the check passes (line "
                f"{number}); a failing check writes nothing, so a reward file the agent left "
                "behind stands. Write 0 on failure too.",
            )
        ]
    return []


def _writes_only_a_pass(line: str) -> bool:
    """A line that writes a constant 1 to the reward file, and no 0 and no variable."""
    passes = re.search(r"\b(echo|printf)\s+['\"]?1(\.0+)?['\"]?\s*>", line)
    fails = re.search(r"\b(echo|printf)\s+['\"]?0(\.0+)?['\"]?(\s|;|>|$)", line)
    return bool(passes) and not fails and "$" not in line


def _listing(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    if len(paths) > limit:
        shown += f" and {len(paths) - limit} more"
    return shown


def _clip(text: str, limit: int = 80) -> str:
    return "`" + (text if len(text) <= limit else text[: limit - 3] + "...") + "`"
