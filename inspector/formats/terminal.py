"""Terminal task sets: folders of Harbor or Terminal-Bench tasks, as plain data.

A set is a tree of files (``{path: FileEntry}`` from `inspector.formats.archive.read_tree`) with
one folder per task; the folder's name is the task id. Each task folder is one of:

- **Harbor**: ``task.toml``, ``instruction.md``, ``environment/Dockerfile`` (the build context is
  ``environment/``), ``solution/solve.sh``, ``tests/test.sh`` and any other files under
  ``tests/``. The verifier writes its reward to ``/logs/verifier/reward.txt`` or ``reward.json``.
- **Terminal-Bench**: ``task.yaml``, ``Dockerfile`` at the task's root (the build context is the
  task folder), ``solution.sh``, ``run-tests.sh`` and ``tests/``. The tests' exit code is the
  verdict.

A folder holding both ``task.toml`` and ``task.yaml`` is read as Harbor. Sampled solutions may
come with the tasks, as ``samples/NAME.sh`` in a task folder (sample id NAME), or in a JSONL file
(`read_terminal_samples_jsonl`).

Where the tasks are in the tree: each top-level folder is a task; or, when the tree has a single
top-level folder that is not itself a task, its subfolders are (a ``tasks.tar.gz`` holding
``tasks/hello/task.toml``); or, when ``task.toml`` or ``task.yaml`` is at the top, the tree is
one task whose id is the upload's name without its extension (``hello.zip`` -> ``hello``).
Loose files beside the task folders (a README) and folders whose name starts with a dot are
ignored. Problems are reported with the paths as they are in the upload.

Reading is all-or-nothing, like the HumanEval reader: `read_terminal_taskset` returns every task
and sample, or raises `TaskSetFormatError` listing every problem found.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import re
import tomllib
import zlib
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

import yaml

from inspector.formats.archive import FileEntry, archive_kind
from inspector.formats.humaneval import (
    FormatIssue,
    TaskSetFormatError,
    json_type,
    reject_constant,
    short_text,
)

__all__ = [
    "DEFAULT_BUILD_TIMEOUT_SEC",
    "HARBOR_DEFAULT_TIMEOUT_SEC",
    "TB_DEFAULT_AGENT_TIMEOUT_SEC",
    "TB_DEFAULT_TEST_TIMEOUT_SEC",
    "TerminalTaskSet",
    "content_hash",
    "file_bytes",
    "file_text",
    "looks_like_terminal_upload",
    "read_terminal_samples_jsonl",
    "read_terminal_taskset",
]

HARBOR_DEFAULT_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0
TB_DEFAULT_AGENT_TIMEOUT_SEC = 360.0
TB_DEFAULT_TEST_TIMEOUT_SEC = 60.0
SAMPLES_MAX_BYTES = 50_000_000

HARBOR_REQUIRED = (
    "task.toml",
    "instruction.md",
    "environment/Dockerfile",
    "solution/solve.sh",
    "tests/test.sh",
)
TB_REQUIRED = ("task.yaml", "Dockerfile", "solution.sh", "run-tests.sh")
# task.yaml keys that become source fields rather than metadata.
_TB_OWN_KEYS = ("instruction", "max_agent_timeout_sec", "max_test_timeout_sec")
_ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip")
_NETWORK_MODES = {"no-network": False, "public": True, "allowlist": True}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:I?B)?\s*$", re.IGNORECASE)
_MEMORY_FACTORS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_UTF8_BOM = b"\xef\xbb\xbf"
_UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")
# Fields of the source dict that content_hash covers besides the files.
_HASHED_FIELDS = (
    "kind",
    "format",
    "task_id",
    "instruction",
    "metadata",
    "agent_timeout_sec",
    "verifier_timeout_sec",
    "build_timeout_sec",
    "cpus",
    "memory_mb",
    "docker_image",
    "allow_internet",
    "build_context",
    "dockerfile",
    "solution_entry",
    "test_entry",
    "reward",
)


@dataclass(frozen=True)
class TerminalTaskSet:
    tasks: list[dict[str, Any]]  # source dicts, sorted by task_id
    samples: list[dict[str, str]]  # {"task_id", "sample_id", "script"}, by task then sample id


# --- Public API --------------------------------------------------------------------------------


def read_terminal_taskset(tree: dict[str, FileEntry], *, name: str) -> TerminalTaskSet:
    """Every task and sample of the set, or `TaskSetFormatError` listing every problem.

    `tree` maps POSIX paths relative to the upload's root to file entries (`read_tree`).
    `name` is the upload's file name: it names a single-task upload's task and the set in
    messages.
    """
    issues: list[FormatIssue] = []
    folders = _task_folders(tree, name, issues)
    tasks: list[dict[str, Any]] = []
    samples: list[dict[str, str]] = []
    seen: dict[str, str] = {}  # casefolded task id -> its folder
    for task_id, prefix in folders:
        folded = task_id.casefold()
        if folded in seen:
            issues.append(
                FormatIssue(
                    prefix or name,
                    None,
                    None,
                    f"duplicate task id {short_text(task_id)}: the folder {seen[folded]} has the same "
                    "name (task ids are compared ignoring case)",
                )
            )
            continue
        seen[folded] = prefix or name
        files = {
            path[len(prefix) :]: entry for path, entry in tree.items() if path.startswith(prefix)
        }
        source = _read_task(task_id, files, prefix, name, issues)
        samples.extend(_read_folder_samples(task_id, files, prefix, issues))
        if source is not None:
            tasks.append(source)
    if not folders and not issues:
        issues.append(
            FormatIssue(
                name,
                None,
                None,
                "contains no tasks: expected one folder per task, holding task.toml (Harbor) "
                "or task.yaml (Terminal-Bench)",
            )
        )
    if issues:
        raise TaskSetFormatError(issues)
    tasks.sort(key=lambda source: source["task_id"])
    samples.sort(key=lambda sample: (sample["task_id"], sample["sample_id"]))
    return TerminalTaskSet(tasks=tasks, samples=samples)


def read_terminal_samples_jsonl(
    data: bytes, *, name: str, task_ids: set[str] | None
) -> list[dict[str, str]]:
    """Sampled solutions from JSONL (plain or gzip): one ``{"task_id", "script", "sample_id"?}``
    object a line. Returns ``{"task_id", "sample_id", "script"}`` dicts in file order.

    A missing sample_id is ``s<n>``, n counting that task's samples in the file so far (those
    with an id too). With `task_ids`, a sample for any other task is a problem. Duplicate sample
    ids of one task are a problem; clashes with a task's ``samples/`` folder are the caller's to
    check. Raises `TaskSetFormatError` listing every problem.
    """
    issues: list[FormatIssue] = []
    data = _maybe_gunzip(data, name, issues)
    samples: list[dict[str, str]] = []
    per_task: dict[str, int] = {}
    first_line: dict[tuple[str, str], int] = {}
    nonblank = 0
    for line, obj in _json_lines(data, name, issues):
        nonblank += 1
        if obj is None:
            continue
        before = len(issues)

        def report(field: str | None, reason: str, line: int = line) -> None:
            issues.append(FormatIssue(name, line, field, reason))

        task_id = obj.get("task_id")
        if "task_id" not in obj:
            report("task_id", "missing")
        elif not isinstance(task_id, str) or not task_id.strip():
            report("task_id", f"must be a non-empty string, got {json_type(task_id)}")
            task_id = None
        elif task_ids is not None and task_id not in task_ids:
            report("task_id", f"no task {short_text(task_id)} in the task set")
        script = obj.get("script")
        if "script" not in obj:
            report("script", "missing")
        elif not isinstance(script, str):
            report("script", f"must be a string, got {json_type(script)}")
        elif _UNSTORABLE_TEXT.search(script):
            report("script", "contains a NUL character or an unpaired surrogate")
        given = obj.get("sample_id")
        sample_id: str | None = None
        if "sample_id" in obj:
            if isinstance(given, int) and not isinstance(given, bool):
                sample_id = str(given)
            elif isinstance(given, str) and given.strip() and not _UNSTORABLE_TEXT.search(given):
                sample_id = given
            else:
                report(
                    "sample_id",
                    f"must be a non-empty string or an integer, got {_short_json(given)}",
                )
        if isinstance(task_id, str) and task_id.strip():
            position = per_task.get(task_id, 0) + 1
            per_task[task_id] = position
            if "sample_id" not in obj:
                sample_id = f"s{position}"
            if sample_id is not None:
                key = (task_id, sample_id)
                if key in first_line:
                    how = "numbered" if "sample_id" not in obj else "given"
                    report(
                        "sample_id",
                        f"duplicate sample id {short_text(sample_id)} ({how}) for task "
                        f"{short_text(task_id)}, first on line {first_line[key]}",
                    )
                else:
                    first_line[key] = line
        if len(issues) == before and sample_id is not None:
            samples.append({"task_id": task_id, "sample_id": sample_id, "script": script})
    if nonblank == 0 and not issues:
        issues.append(FormatIssue(name, None, None, "contains no samples"))
    if issues:
        raise TaskSetFormatError(issues)
    return samples


def content_hash(source: dict[str, Any]) -> str:
    """SHA-256 (hex) of a task: its parsed configuration and its files (path, mode, bytes).

    The same task folder gives the same hash whether it came as a folder, a zip or a tar:
    modes count only by their owner-executable bit (0o755 or 0o644, as git records them), and
    numbers are compared by value (30 and 30.0 are the same), so the hash survives a round trip
    through a JSON database column. Samples are not part of the task and not hashed.
    """
    digest = hashlib.sha256(b"inspector terminal task v1\n")
    config = {field: _canonical_numbers(source.get(field)) for field in _HASHED_FIELDS}
    digest.update(
        json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    for path in sorted(source.get("files", {})):
        data = file_bytes(source, path)
        mode = 0o755 if source["files"][path].get("mode", 0o644) & 0o100 else 0o644
        encoded = path.encode("utf-8")
        digest.update(b"\nfile %d:" % len(encoded) + encoded)
        digest.update(b" mode %o size %d\n" % (mode, len(data)))
        digest.update(data)
    return digest.hexdigest()


def file_bytes(source: dict[str, Any], path: str) -> bytes:
    """The bytes of the task file at `path` (relative to the task folder); KeyError if none."""
    entry = source["files"][path]
    if "text" in entry:
        return entry["text"].encode("utf-8")
    return base64.b64decode(entry["base64"])


def file_text(source: dict[str, Any], path: str) -> str:
    """The text of the task file at `path`; bytes that are not UTF-8 become U+FFFD."""
    entry = source["files"][path]
    if "text" in entry:
        return entry["text"]
    return base64.b64decode(entry["base64"]).decode("utf-8", errors="replace")


def looks_like_terminal_upload(name: str, head_bytes: bytes) -> bool:
    """Whether an upload is an archive of task folders rather than (possibly gzipped) JSONL.

    `head_bytes` are the upload's first bytes: give at least 4 KiB. A zip, a bzip2 or xz file
    and a tar are archives. A gzip file is one when what it decompresses to starts like a tar,
    or, when too little of it could be decompressed to tell, when its name ends in .tar.gz or
    .tgz.
    """
    lowered = name.lower()
    if head_bytes.startswith(b"\x1f\x8b"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            inner = inflater.decompress(head_bytes, 1024)
        except zlib.error:
            inner = b""
        if len(inner) >= 262:
            return inner[257:262] == b"ustar"
        if inner.lstrip()[:1] in (b"{", b"["):
            return False
        return lowered.endswith((".tar.gz", ".tgz"))
    return archive_kind(head_bytes, name) is not None


# --- Finding the task folders ------------------------------------------------------------------


def _task_folders(
    tree: dict[str, FileEntry], name: str, issues: list[FormatIssue]
) -> list[tuple[str, str]]:
    """(task id, path prefix ending in "/" or "") of every task folder, by task id."""
    if _is_task(tree, ""):
        return [(_name_stem(name), "")]
    prefix = ""
    tops = _subfolders(tree, "")
    if len(tops) == 1 and not _is_task(tree, tops[0] + "/"):
        inner = _subfolders(tree, tops[0] + "/")
        if any(_is_task(tree, f"{tops[0]}/{folder}/") for folder in inner):
            prefix = tops[0] + "/"
            tops = inner
    folders: list[tuple[str, str]] = []
    for folder in tops:
        where = f"{prefix}{folder}/"
        if _is_task(tree, where):
            folders.append((folder, where))
            continue
        deeper = [sub for sub in _subfolders(tree, where) if _is_task(tree, f"{where}{sub}/")]
        hint = ""
        if deeper:
            hint = f"; it holds task folders ({', '.join(deeper[:3])}): upload those instead"
        issues.append(
            FormatIssue(
                where,
                None,
                None,
                "neither a Harbor task (no task.toml) nor a Terminal-Bench task (no task.yaml)"
                + hint,
            )
        )
    return sorted(folders)


def _is_task(tree: dict[str, FileEntry], prefix: str) -> bool:
    return f"{prefix}task.toml" in tree or f"{prefix}task.yaml" in tree


def _subfolders(tree: dict[str, FileEntry], prefix: str) -> list[str]:
    found = set()
    for path in tree:
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            if "/" in rest:
                folder = rest.split("/", 1)[0]
                if not folder.startswith("."):
                    found.add(folder)
    return sorted(found)


def _name_stem(name: str) -> str:
    base = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    lowered = base.lower()
    for suffix in _ARCHIVE_SUFFIXES:
        if lowered.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base or "task"


# --- One task ---------------------------------------------------------------------------------


def _read_task(
    task_id: str, files: dict[str, FileEntry], prefix: str, name: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    before = len(issues)
    if any(ch.isspace() and ch != " " or ord(ch) < 32 for ch in task_id) or not task_id.strip():
        issues.append(
            FormatIssue(
                prefix or name,
                None,
                None,
                f"the task id {short_text(task_id)} has control characters",
            )
        )
    if "task.toml" in files:
        source = _read_harbor(task_id, files, prefix, issues)
    else:
        source = _read_terminal_bench(task_id, files, prefix, issues)
    if source is None or len(issues) != before:
        return None
    source["files"] = {
        path: _file_record(entry)
        for path, entry in sorted(files.items())
        if not path.startswith("samples/")
    }
    return source


def _read_harbor(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    _require(files, HARBOR_REQUIRED, prefix, "a Harbor task", issues)
    if "task.toml" not in files:
        return None
    config_file = f"{prefix}task.toml"
    text = _utf8(files["task.toml"].data, config_file, issues)
    if text is None:
        return None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_LINE.search(message)
        line = int(match.group(1)) if match else None
        reason = _TOML_LINE.sub("", message).strip() if match else message
        issues.append(FormatIssue(config_file, line, None, f"not valid TOML: {reason}"))
        return None
    field = _TomlFields(config, text, config_file, issues)
    metadata = field.table("metadata")
    verifier = field.table("verifier")
    agent = field.table("agent")
    environment = field.table("environment")
    verifier_timeout = field.timeout(
        verifier, "verifier", "timeout_sec", HARBOR_DEFAULT_TIMEOUT_SEC
    )
    agent_timeout = field.timeout(agent, "agent", "timeout_sec", HARBOR_DEFAULT_TIMEOUT_SEC)
    build_timeout = field.timeout(
        environment, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC
    )
    cpus = field.positive_number(environment, "environment", "cpus")
    memory_mb = _harbor_memory(field, environment)
    docker_image = field.optional_string(environment, "environment", "docker_image")
    allow_internet = _harbor_network(field, environment)
    instruction = _instruction(files, "instruction.md", prefix, issues)
    solution_files = sorted(path for path in files if path.startswith("solution/"))
    test_files = sorted(path for path in files if path.startswith("tests/"))
    return {
        "kind": "terminal",
        "format": "harbor",
        "task_id": task_id,
        "instruction": instruction or "",
        "metadata": _jsonable(metadata),
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": verifier_timeout,
        "build_timeout_sec": build_timeout,
        "cpus": cpus,
        "memory_mb": memory_mb,
        "docker_image": docker_image or None,
        "allow_internet": allow_internet,
        "files": {},
        "build_context": "environment",
        "dockerfile": "environment/Dockerfile",
        "solution_files": solution_files,
        "solution_entry": "solution/solve.sh",
        "test_files": test_files,
        "test_entry": "tests/test.sh",
        "reward": "file",
    }


def _harbor_memory(field: _TomlFields, environment: dict[str, Any]) -> int | None:
    memory_mb: int | None = None
    if "memory_mb" in environment:
        value = environment["memory_mb"]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            field.report(
                "environment", "memory_mb", f"must be a whole number, got {_toml_type(value)}"
            )
        elif value <= 0:
            field.report("environment", "memory_mb", f"must be positive, got {value}")
        else:
            memory_mb = value
    if "memory" in environment:
        value = environment["memory"]
        match = _MEMORY.match(value) if isinstance(value, str) else None
        if match is None:
            field.report(
                "environment",
                "memory",
                f'must be a size with a unit such as "2G" or "512M", got {_toml_type(value)}',
            )
        else:
            parsed = int(float(match.group(1)) * _MEMORY_FACTORS[match.group(2).upper()])
            if parsed <= 0:
                field.report("environment", "memory", f"must be at least 1M, got {value!r}")
            elif memory_mb is not None and memory_mb != parsed:
                field.report(
                    "environment",
                    "memory",
                    f"{value!r} is {parsed} MB, but memory_mb says {memory_mb}",
                )
            else:
                memory_mb = parsed
    return memory_mb


def _harbor_network(field: _TomlFields, environment: dict[str, Any]) -> bool:
    """Harbor's default is public; an explicit network_mode wins over allow_internet."""
    allow = True
    if "allow_internet" in environment:
        value = environment["allow_internet"]
        if isinstance(value, bool):
            allow = value
        else:
            field.report(
                "environment", "allow_internet", f"must be true or false, got {_toml_type(value)}"
            )
    if "network_mode" in environment:
        value = environment["network_mode"]
        if isinstance(value, str) and value in _NETWORK_MODES:
            allow = _NETWORK_MODES[value]
        else:
            field.report(
                "environment",
                "network_mode",
                'must be "no-network", "public" or "allowlist", got ' + _toml_type(value),
            )
    return allow


def _read_terminal_bench(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> dict[str, Any] | None:
    required = TB_REQUIRED
    if "solution.sh" not in files and "solution.yaml" in files:
        issues.append(
            FormatIssue(
                f"{prefix}solution.yaml",
                None,
                None,
                "solution.yaml is not supported: give the reference solution as solution.sh",
            )
        )
        required = tuple(path for path in TB_REQUIRED if path != "solution.sh")
    _require(files, required, prefix, "a Terminal-Bench task", issues)
    if "task.yaml" not in files:
        return None
    config_file = f"{prefix}task.yaml"
    text = _utf8(files["task.yaml"].data, config_file, issues)
    if text is None:
        return None
    try:
        config = yaml.safe_load(text)
        lines = _yaml_key_lines(text)
    except RecursionError:
        issues.append(FormatIssue(config_file, None, None, "not valid YAML: nested too deeply"))
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        issues.append(FormatIssue(config_file, line, None, f"not valid YAML: {problem}"))
        return None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        issues.append(
            FormatIssue(
                config_file, 1, None, f"must be a mapping of keys, got {_yaml_type(config)}"
            )
        )
        return None
    config = {str(key): value for key, value in config.items()}

    def report(key: str, reason: str) -> None:
        issues.append(FormatIssue(config_file, lines.get(key), key, reason))

    instruction = config.get("instruction")
    own_keys = set(_TB_OWN_KEYS)
    if "instruction" not in config:
        instruction = _tb_legacy_instruction(config)
        if instruction is not None:
            own_keys.add("descriptions")
        else:
            report("instruction", "missing: the task's instruction to the agent")
    elif not isinstance(instruction, str):
        report("instruction", f"must be a string, got {_yaml_type(instruction)}")
        instruction = None
    elif _UNSTORABLE_TEXT.search(instruction):
        report("instruction", "contains a NUL character, which cannot be stored")
        instruction = None
    agent_timeout = _timeout_value(
        config, "max_agent_timeout_sec", TB_DEFAULT_AGENT_TIMEOUT_SEC, report
    )
    test_timeout = _timeout_value(
        config, "max_test_timeout_sec", TB_DEFAULT_TEST_TIMEOUT_SEC, report
    )
    for key in ("difficulty", "category", "author_name", "author_email"):
        if key in config and config[key] is not None and not isinstance(config[key], str):
            report(key, f"must be a string, got {_yaml_type(config[key])}")
    tags = config.get("tags")
    if tags is not None and not (
        isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    ):
        report("tags", "must be a list of strings")
    metadata = {key: value for key, value in config.items() if key not in own_keys}
    test_files = ["run-tests.sh"] * ("run-tests.sh" in files) + sorted(
        path for path in files if path.startswith("tests/")
    )
    return {
        "kind": "terminal",
        "format": "terminal-bench",
        "task_id": task_id,
        "instruction": instruction or "",
        "metadata": _jsonable(metadata),
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": test_timeout,
        "build_timeout_sec": DEFAULT_BUILD_TIMEOUT_SEC,
        "cpus": None,
        "memory_mb": None,
        "docker_image": None,
        "allow_internet": True,
        "files": {},
        "build_context": "",
        "dockerfile": "Dockerfile",
        "solution_files": ["solution.sh"],
        "solution_entry": "solution.sh",
        "test_files": test_files,
        "test_entry": "run-tests.sh",
        "reward": "exit_code",
    }


def _tb_legacy_instruction(config: dict[str, Any]) -> str | None:
    """Older task.yaml files hold the instruction as descriptions: [{key: base, description}]."""
    descriptions = config.get("descriptions")
    if isinstance(descriptions, list):
        for item in descriptions:
            if (
                isinstance(item, dict)
                and item.get("key", "base") == "base"
                and isinstance(item.get("description"), str)
            ):
                return item["description"]
    return None


def _read_folder_samples(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> list[dict[str, str]]:
    samples = []
    for path, entry in sorted(files.items()):
        if not path.startswith("samples/") or not path.endswith(".sh") or path.count("/") != 1:
            continue
        sample_id = path[len("samples/") : -len(".sh")]
        if not sample_id:
            continue
        script = _utf8(entry.data, f"{prefix}{path}", issues)
        if script is None:
            continue
        if "\x00" in script:
            issues.append(
                FormatIssue(
                    f"{prefix}{path}", None, None, "contains a NUL byte, so it is not a script"
                )
            )
            continue
        samples.append({"task_id": task_id, "sample_id": sample_id, "script": script})
    return samples


# --- Field checks ---------------------------------------------------------------------------


class _TomlFields:
    """Type checks on a parsed task.toml, reporting each problem with its line."""

    def __init__(
        self, config: dict[str, Any], text: str, file: str, issues: list[FormatIssue]
    ) -> None:
        self.config = config
        self.text = text
        self.file = file
        self.issues = issues

    def report(self, table: str | None, key: str, reason: str) -> None:
        field = f"{table}.{key}" if table else key
        self.issues.append(
            FormatIssue(self.file, _toml_key_line(self.text, table, key), field, reason)
        )

    def table(self, key: str) -> dict[str, Any]:
        value = self.config.get(key, {})
        if not isinstance(value, dict):
            self.report(None, key, f"must be a table ([{key}]), got {_toml_type(value)}")
            return {}
        return value

    def timeout(self, table: dict[str, Any], table_name: str, key: str, default: float) -> float:
        def report(_key: str, reason: str) -> None:
            self.report(table_name, key, reason)

        return _timeout_value(table, key, default, report)

    def positive_number(self, table: dict[str, Any], table_name: str, key: str) -> float | None:
        if key not in table:
            return None
        value = table[key]
        if not _is_number(value):
            self.report(table_name, key, f"must be a number, got {_toml_type(value)}")
        elif not math.isfinite(value) or value <= 0:
            self.report(table_name, key, f"must be a positive number, got {value}")
        else:
            return float(value)
        return None

    def optional_string(self, table: dict[str, Any], table_name: str, key: str) -> str | None:
        value = table.get(key)
        if value is not None and not isinstance(value, str):
            self.report(table_name, key, f"must be a string, got {_toml_type(value)}")
            return None
        return value


def _timeout_value(config: dict[str, Any], key: str, default: float, report: Any) -> float:
    if key not in config or config[key] is None:
        return float(default)
    value = config[key]
    if not _is_number(value):
        report(key, f"must be a number of seconds, got {_toml_type(value)}")
    elif not math.isfinite(value) or value <= 0:
        report(key, f"must be a positive number of seconds, got {value}")
    else:
        return float(value)
    return float(default)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _require(
    files: dict[str, FileEntry],
    required: tuple[str, ...],
    prefix: str,
    what: str,
    issues: list[FormatIssue],
) -> None:
    for path in required:
        if path not in files:
            issues.append(
                FormatIssue(f"{prefix}{path}", None, None, f"missing: {what} needs this file")
            )


def _instruction(
    files: dict[str, FileEntry], path: str, prefix: str, issues: list[FormatIssue]
) -> str | None:
    if path not in files:
        return None
    text = _utf8(files[path].data, f"{prefix}{path}", issues)
    if text is not None and "\x00" in text:
        issues.append(
            FormatIssue(
                f"{prefix}{path}", None, None, "contains a NUL byte, which cannot be stored"
            )
        )
        return None
    return text


def _utf8(data: bytes, file: str, issues: list[FormatIssue]) -> str | None:
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        issues.append(
            FormatIssue(
                file,
                line,
                None,
                f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column} is invalid",
            )
        )
        return None


def _toml_key_line(text: str, table: str | None, key: str) -> int | None:
    """The line of `key` in `[table]` (or at the top), found by a plain scan of the text."""
    current: str | None = None
    header = re.compile(r"^\s*\[\s*([^\]\[]+?)\s*\]")
    key_line = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
    table_line: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = header.match(line)
        if match:
            current = match.group(1).strip().strip("\"'")
            if table is not None and current == table:
                table_line = number
            elif table is None and current == key:
                return number
            continue
        if current == table and key_line.match(line):
            return number
        if (
            table is not None
            and current is None
            and re.match(r"^\s*" + re.escape(table) + r"\s*\.\s*" + re.escape(key) + r"\s*=", line)
        ):
            return number
    return table_line


def _yaml_key_lines(text: str) -> dict[str, int]:
    """Line of each top-level key of a YAML mapping document."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                lines.setdefault(str(key_node.value), key_node.start_mark.line + 1)
    return lines


# --- Values -----------------------------------------------------------------------------------


def _file_record(entry: FileEntry) -> dict[str, Any]:
    try:
        text = entry.data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return {"mode": entry.mode, "base64": base64.b64encode(entry.data).decode("ascii")}
    return {"mode": entry.mode, "text": text}


def _jsonable(value: Any) -> Any:
    """TOML and YAML values as JSON values: dates become ISO strings, NaN and infinities
    strings, other odd values their repr; keys become strings."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return _UNSTORABLE_TEXT.sub("\ufffd", value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return repr(value)


def _canonical_numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _canonical_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical_numbers(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _maybe_gunzip(data: bytes, name: str, issues: list[FormatIssue]) -> bytes:
    if not data.startswith(b"\x1f\x8b"):
        return data
    try:
        with gzip.GzipFile(fileobj=_BytesReader(data)) as unzipped:
            out = unzipped.read(SAMPLES_MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        issues.append(FormatIssue(name, None, None, f"not a valid gzip file: {exc}"))
        return b""
    if len(out) > SAMPLES_MAX_BYTES:
        issues.append(FormatIssue(name, None, None, f"larger than {SAMPLES_MAX_BYTES} bytes"))
        return b""
    return out


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._pos + size
        chunk = bytes(self._data[self._pos : end])
        self._pos += len(chunk)
        return chunk


def _json_lines(data: bytes, file: str, issues: list[FormatIssue]):
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    for index, raw in enumerate(data.split(b"\n")):
        line = index + 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.append(
                FormatIssue(file, line, None, f"not UTF-8: byte 0x{raw[exc.start]:02x} is invalid")
            )
            yield line, None
            continue
        if not text.strip():
            continue
        try:
            value = json.loads(text, parse_constant=reject_constant)
        except json.JSONDecodeError as exc:
            issues.append(
                FormatIssue(file, line, None, f"not JSON: {exc.msg} at column {exc.colno}")
            )
            yield line, None
            continue
        except (ValueError, RecursionError) as exc:
            issues.append(FormatIssue(file, line, None, f"not JSON: {exc}"))
            yield line, None
            continue
        if not isinstance(value, dict):
            issues.append(
                FormatIssue(file, line, None, f"not a JSON object: got {json_type(value)}")
            )
            yield line, None
            continue
        yield line, value


def _short_json(value: Any) -> str:
    if isinstance(value, str):
        return short_text(value)
    return json_type(value)


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({short_text(value)})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime | date | time):
        return f"a date ({value.isoformat()})"
    return type(value).__name__


def _yaml_type(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
