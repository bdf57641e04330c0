"""Reading an upload of terminal task folders (Harbor or Terminal-Bench: a folder, a .zip or a
.tar.gz, with an optional JSONL of sampled scripts) whole, into the rows to store, and telling such
an upload by its first bytes. `tasksets` stores the rows as a new version of the set; the reading
of the folders themselves is in inspector/formats/terminal/."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from inspector.models import Task


@dataclass
class ParsedTerminalSet:
    tasks: list[dict] = field(default_factory=list)  # Task fields
    samples: list[dict] = field(default_factory=list)  # task_id, sample_id, completion, model


def is_terminal_upload(head: bytes) -> bool:
    """Is this upload an archive of task folders (a .zip, a .tar, or a .tar.gz), going by its
    first bytes? A gzipped JSONL of function tasks is gzip too: only a tar inside counts."""
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return True
    if head.startswith(b"\x1f\x8b"):
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1024)
        except zlib.error:
            return False
    return head[257:262] == b"ustar"


def terminal_parse(
    *,
    tasks: Path | BinaryIO,
    tasks_name: str,
    samples_file: BinaryIO | None = None,
    samples_name: str = "",
) -> ParsedTerminalSet:
    """Read a folder, .zip or .tar.gz of task folders (and an optional JSONL of sampled
    scripts) whole, into the rows to store. Raises TaskSetFormatError (every problem with file,
    line and field) or ArchiveError (a hostile or corrupt archive); nothing is stored either way."""
    from inspector.detect.lint import lint_terminal_task
    from inspector.formats.archive import ArchiveLimits, read_tree
    from inspector.formats.terminal.samples import read_terminal_samples_jsonl
    from inspector.formats.terminal.source import content_hash
    from inspector.formats.terminal.taskset import read_terminal_taskset

    limits = ArchiveLimits(
        max_files=settings.ARCHIVE_MAX_FILES,
        max_bytes=settings.ARCHIVE_MAX_BYTES,
        max_ratio=settings.ARCHIVE_MAX_RATIO,
    )
    tree = read_tree(tasks, name=tasks_name, limits=limits)
    taskset = read_terminal_taskset(tree, name=tasks_name)
    parsed = ParsedTerminalSet()
    for source in taskset.tasks:
        files = source["files"]

        def text(path: str, files=files) -> str:
            entry = files.get(path) or {}
            return entry.get("text", "")

        parsed.tasks.append(
            {
                "task_id": source["task_id"],
                "kind": Task.TERMINAL,
                "prompt": source["instruction"],
                "canonical_solution": text(source["solution_entry"]),
                "test": text(source["test_entry"]),
                "entry_point": "",
                "domain": str((source.get("metadata") or {}).get("category") or "")[:200],
                "metadata": source.get("metadata") or {},
                "source": source,
                "content_hash": content_hash(source),
                "lint": lint_terminal_task(source),
            }
        )
    samples = [
        {"task_id": s["task_id"], "sample_id": s["sample_id"], "completion": s["script"]}
        for s in taskset.samples
    ]
    if samples_file is not None:
        data = samples_file.read(settings.UPLOAD_MAX_BYTES + 1)
        if len(data) > settings.UPLOAD_MAX_BYTES:
            from inspector.services.errors import ServiceError

            raise ServiceError(
                f"{samples_name}: larger than the upload limit of {settings.UPLOAD_MAX_BYTES} bytes"
            )
        task_ids = {t["task_id"] for t in parsed.tasks}
        for s in read_terminal_samples_jsonl(data, name=samples_name, task_ids=task_ids):
            samples.append(
                {
                    "task_id": s["task_id"],
                    "sample_id": s["sample_id"],
                    "completion": s["script"],
                    "model": str(s.get("model") or ""),
                }
            )
    seen: set[tuple[str, str]] = set()
    for s in samples:
        key = (s["task_id"], s["sample_id"])
        if key in seen:
            from inspector.formats.humaneval import FormatIssue, TaskSetFormatError

            raise TaskSetFormatError(
                [
                    FormatIssue(
                        file=samples_name or tasks_name,
                        line=None,
                        field="sample_id",
                        reason=(
                            f"sample {s['sample_id']!r} of task {s['task_id']!r} is given twice "
                            "(in the task's samples/ folder and in the samples file)"
                        ),
                    )
                ]
            )
        seen.add(key)
    parsed.samples = samples
    return parsed
