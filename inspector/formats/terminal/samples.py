"""Sampled solutions for terminal tasks: scripts run in place of a task's reference solution,
each with a task id and a sample id.

They come with the tasks, as ``samples/NAME.sh`` in a task folder (sample id NAME:
`read_folder_samples`), or in a JSONL file, plain or gzip (`read_terminal_samples_jsonl`).
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

from inspector.formats.archive import FileEntry
from inspector.formats.humaneval import (
    FormatIssue,
    TaskSetFormatError,
    json_type,
    reject_constant,
    short_text,
)
from inspector.formats.terminal.fields import UTF8_BOM, utf8
from inspector.formats.terminal.source import UNSTORABLE_TEXT

__all__ = ["SAMPLES_MAX_BYTES", "read_folder_samples", "read_terminal_samples_jsonl"]

SAMPLES_MAX_BYTES = 50_000_000


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
        elif UNSTORABLE_TEXT.search(script):
            report("script", "contains a NUL character or an unpaired surrogate")
        given = obj.get("sample_id")
        sample_id: str | None = None
        if "sample_id" in obj:
            if isinstance(given, int) and not isinstance(given, bool):
                sample_id = str(given)
            elif isinstance(given, str) and given.strip() and not UNSTORABLE_TEXT.search(given):
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


def read_folder_samples(
    task_id: str, files: dict[str, FileEntry], prefix: str, issues: list[FormatIssue]
) -> list[dict[str, str]]:
    samples = []
    for path, entry in sorted(files.items()):
        if not path.startswith("samples/") or not path.endswith(".sh") or path.count("/") != 1:
            continue
        sample_id = path[len("samples/") : -len(".sh")]
        if not sample_id:
            continue
        script = utf8(entry.data, f"{prefix}{path}", issues)
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
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
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
